package jobsubmit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/pools"
)

const twoPools = `
default_cpu_pool: cpu
default_gpu_pool: a100
pools:
  - name: cpu
    node: {cpus: 8, memory_mb: 32000}
  - name: a100
    gpu_type: a100
    price_per_gpu_hour: 3
    node: {gpus: 4, cpus: 8, memory_mb: 32000}
`

const threePools = twoPools + `
  - name: v100
    gpu_type: v100
    price_per_gpu_hour: 1
    node: {gpus: 4, cpus: 8, memory_mb: 32000}
`

// unset is a job_desc with nothing requested, as slurmctld passes it (NO_VAL everywhere).
func unset() pools.Request {
	return pools.Request{
		MinCPUs: 1, CPUsPerTask: pools.NoVal16, PnMinCPUs: pools.NoVal16, PnMinMemory: pools.NoVal64,
		MinNodes: pools.NoVal, MaxNodes: pools.NoVal, NumTasks: pools.NoVal, NTasksPerNode: pools.NoVal16,
		SocketsPerNode: pools.NoVal16,
	}
}

func gpuJob(tresPerNode string) *pools.Request {
	r := unset()
	r.TRESPerNode = tresPerNode
	return &r
}

type recorder struct{ lines []string }

func (r *recorder) log(_ Level, msg string) { r.lines = append(r.lines, msg) }

func (r *recorder) contains(s string) bool {
	for _, l := range r.lines {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}

// fixture is a plugin over a config file in a temp dir, with a clock the test moves.
type fixture struct {
	t     *testing.T
	path  string
	clock time.Time
	log   *recorder
	p     *Plugin
}

func newFixture(t *testing.T, content string) *fixture {
	f := &fixture{t: t, path: filepath.Join(t.TempDir(), "pools.yaml"), clock: time.Unix(1_700_000_000, 0), log: &recorder{}}
	if content != "" {
		f.write(content)
	}
	f.p = New(f.path, f.log.log)
	f.p.now = func() time.Time { return f.clock }
	f.p.Init()
	return f
}

func (f *fixture) write(content string) {
	f.t.Helper()
	tmp := f.path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
	if err := os.Rename(tmp, f.path); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) advance(d time.Duration) { f.clock = f.clock.Add(d) }

func TestSubmitRoutesAndTellsTheUser(t *testing.T) {
	f := newFixture(t, twoPools)
	out := f.p.Submit(gpuJob("gres:gpu:a100:1"), 1001)
	if out.Reject != NotRejected || out.SetPartition != "a100" || !strings.Contains(out.UserMessage, "a100") {
		t.Fatalf("outcome = %+v, want a100 with a message", out)
	}
	cpu := unset()
	if out := f.p.Submit(&cpu, 1001); out.SetPartition != "cpu" {
		t.Fatalf("CPU job outcome = %+v, want cpu", out)
	}
}

func TestSubmitRejectsWithGRESErrorForImpossibleGPURequest(t *testing.T) {
	f := newFixture(t, twoPools)
	req := gpuJob("gres:gpu:a100:1")
	req.Partition = "cpu"
	out := f.p.Submit(req, 1001)
	if out.Reject != RejectGRES || out.SetPartition != "" || !strings.Contains(out.UserMessage, "a100") {
		t.Fatalf("outcome = %+v, want a GRES rejection naming a100", out)
	}
}

func TestModifyNeverSetsAMessage(t *testing.T) {
	f := newFixture(t, twoPools)
	req := gpuJob("gres:gpu:a100:1")
	req.Op = pools.Modify
	req.Partition = "cpu"
	out := f.p.Modify(req, 0)
	if out.Reject != RejectGRES || out.UserMessage != "" {
		t.Fatalf("outcome = %+v, want a rejection without user message (22.05 job_modify has no err_msg)", out)
	}
	if !f.log.contains("update by uid 0 refused") {
		t.Fatalf("refusal not logged: %q", f.log.lines)
	}
}

func TestMissingConfigPassesJobsUnchanged(t *testing.T) {
	f := newFixture(t, "")
	out := f.p.Submit(gpuJob("gres:gpu:a100:1"), 1001)
	if out != (Outcome{}) {
		t.Fatalf("outcome = %+v, want unchanged job", out)
	}
	if !f.log.contains("unreadable") {
		t.Fatalf("missing config not logged: %q", f.log.lines)
	}
}

func TestInvalidConfigAtStartPassesJobsAndSaysWhy(t *testing.T) {
	f := newFixture(t, "default_cpu_pool: cpu\npools:\n  - name: cpu\n    colour: blue\n")
	if out := f.p.Submit(gpuJob("gres:gpu:1"), 1001); out != (Outcome{}) {
		t.Fatalf("outcome = %+v, want unchanged job", out)
	}
	if !f.log.contains("colour") {
		t.Fatalf("the bad key is not named in the log: %q", f.log.lines)
	}
}

func TestReloadsChangedFileAfterRecheckInterval(t *testing.T) {
	f := newFixture(t, twoPools)
	f.write(threePools)
	// Within the interval the old config is still used: no stat on every submission.
	f.advance(RecheckInterval / 2)
	if out := f.p.Submit(gpuJob("gres:gpu:v100:1"), 1001); out.Reject == NotRejected && out.SetPartition == "v100" {
		t.Fatalf("config reloaded before the recheck interval")
	}
	f.advance(RecheckInterval)
	if out := f.p.Submit(gpuJob("gres:gpu:v100:1"), 1001); out.SetPartition != "v100" {
		t.Fatalf("outcome = %+v after reload, want v100", out)
	}
}

func TestBrokenNewFileKeepsLastGoodConfig(t *testing.T) {
	f := newFixture(t, twoPools)
	f.write("pools: [")
	f.advance(2 * RecheckInterval)
	if out := f.p.Submit(gpuJob("gres:gpu:a100:1"), 1001); out.SetPartition != "a100" {
		t.Fatalf("outcome = %+v, want the previous config still routing to a100", out)
	}
	if !f.log.contains("keeping the previous one") {
		t.Fatalf("log = %q", f.log.lines)
	}
	// Fixing the file is picked up again.
	f.write(threePools)
	f.advance(2 * RecheckInterval)
	if out := f.p.Submit(gpuJob("gres:gpu:v100:1"), 1001); out.SetPartition != "v100" {
		t.Fatalf("outcome = %+v after the fix, want v100", out)
	}
}

func TestRemovedFileStopsRouting(t *testing.T) {
	f := newFixture(t, twoPools)
	if err := os.Remove(f.path); err != nil {
		t.Fatal(err)
	}
	f.advance(2 * RecheckInterval)
	if out := f.p.Submit(gpuJob("gres:gpu:a100:1"), 1001); out != (Outcome{}) {
		t.Fatalf("outcome = %+v, want unchanged job once the admin removed pools.yaml", out)
	}
}

func TestConfigPathFromEnv(t *testing.T) {
	t.Setenv(ConfigEnv, "")
	t.Setenv("SLURM_CONF", "/tmp/tb/etc/slurm.conf")
	if got := ConfigPathFromEnv(); got != "/tmp/tb/etc/pools.yaml" {
		t.Fatalf("got %q", got)
	}
	t.Setenv(ConfigEnv, "/srv/pools.yaml")
	if got := ConfigPathFromEnv(); got != "/srv/pools.yaml" {
		t.Fatalf("got %q", got)
	}
	t.Setenv(ConfigEnv, "")
	t.Setenv("SLURM_CONF", "")
	if got := ConfigPathFromEnv(); got != "/etc/slurm/pools.yaml" {
		t.Fatalf("got %q", got)
	}
}

// BenchmarkSubmit is the Go side of one job_submit call: config check, routing, the outcome and
// its log line (the cgo layer adds the string copies).
func BenchmarkSubmit(b *testing.B) {
	path := filepath.Join(b.TempDir(), "pools.yaml")
	if err := os.WriteFile(path, []byte(threePools), 0o644); err != nil {
		b.Fatal(err)
	}
	p := New(path, func(Level, string) {})
	p.Init()
	req := gpuJob("gres:gpu:a100:1")
	b.ReportAllocs()
	for b.Loop() {
		if out := p.Submit(req, 1001); out.SetPartition == "" {
			b.Fatal("not routed")
		}
	}
}
