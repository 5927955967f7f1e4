package jobsubmit

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
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

// unset is an sbatch job_desc with nothing requested, as slurmctld passes it (NO_VAL
// everywhere), with its script: a batch job.
func unset() pools.Request {
	r := pools.UnsetRequest()
	r.Batch = true
	return r
}

func gpuJob(tresPerNode string) *pools.Request {
	r := unset()
	r.TRESPerNode = tresPerNode
	return &r
}

// recorder keeps log lines; the watcher goroutine logs too, hence the lock.
type recorder struct {
	mu    sync.Mutex
	lines []string
}

func (r *recorder) log(_ Level, msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, msg)
}

// endsWith says whether a line ends with s: a refusal's line ends with its code.
func (r *recorder) endsWith(s string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range r.lines {
		if strings.HasSuffix(l, s) {
			return true
		}
	}
	return false
}

func (r *recorder) contains(s string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range r.lines {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}

// fixture is a started plugin over a config file in a temp dir. Its watcher waits an hour
// between checks, so a test decides when the file is checked (tick).
type fixture struct {
	t    *testing.T
	path string
	log  *recorder
	p    *Plugin
}

func newFixture(t *testing.T, content string) *fixture {
	f := &fixture{t: t, path: filepath.Join(t.TempDir(), "pools.yaml"), log: &recorder{}}
	if content != "" {
		f.write(content)
	}
	f.p = New(f.path, f.log.log)
	f.p.interval = time.Hour
	f.p.Init()
	t.Cleanup(f.p.Fini)
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

// tick is one check of the file, as the watcher does every interval.
func (f *fixture) tick() { f.p.checkGuarded() }

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

func TestLinesSlurmctldDropsAreNotBuilt(t *testing.T) {
	f := newFixture(t, twoPools)
	f.p.LogEnabled = func(l Level) bool { return l <= LevelInfo } // SlurmctldDebug=info
	if out := f.p.Submit(gpuJob("gres:gpu:a100:1"), 1001); out.SetPartition != "a100" {
		t.Fatalf("outcome = %+v, want a100", out)
	}
	if f.log.contains("partition a100") {
		t.Fatalf("verbose routing line sent at info level: %q", f.log.lines)
	}
	if out := f.p.Submit(gpuJob("gres:gpu:h100:1"), 1001); out.Reject == NotRejected || out.Refusal != pools.RefusedNoGPUPool {
		t.Fatalf("impossible request outcome = %+v, want a refusal", out)
	}
	if !f.log.contains("refused") {
		t.Fatalf("refusal not logged at info level: %q", f.log.lines)
	}
	f.p.LogEnabled = func(Level) bool { return true }
	f.p.Submit(gpuJob("gres:gpu:a100:1"), 1001)
	if !f.log.contains("partition a100") {
		t.Fatalf("verbose routing line missing at verbose level: %q", f.log.lines)
	}
}

// The cgo layer answers a repeated request from its cache only when deciding it wrote nothing
// to slurmctld's log: a refusal is logged for every job, a routing line whenever verbose is on.
func TestOutcomeSaysWhetherALineWasLogged(t *testing.T) {
	f := newFixture(t, twoPools)
	f.p.LogEnabled = func(l Level) bool { return l <= LevelInfo } // SlurmctldDebug=info
	borrow := gpuJob("gres:gpu:a100:1")
	borrow.QOS, borrow.Batch = "borrow-proj-b", false // salloc into the borrow QOS
	impossible := gpuJob("gres:gpu:a100:1")
	impossible.Partition = "cpu"
	for _, tc := range []struct {
		name    string
		req     *pools.Request
		verbose bool
		logged  bool
	}{
		{"routed at info", gpuJob("gres:gpu:a100:1"), false, false},
		{"CPU job at info", func() *pools.Request { r := unset(); return &r }(), false, false},
		{"unreadable request at info", gpuJob("gres:gpu:a100:x"), false, false},
		{"refused", impossible, false, true},
		{"borrow QOS refused", borrow, false, true},
		{"routed at verbose", gpuJob("gres:gpu:a100:1"), true, true},
		{"unreadable request at verbose", gpuJob("gres:gpu:a100:x"), true, true},
	} {
		f.p.LogEnabled = func(l Level) bool { return tc.verbose || l <= LevelInfo }
		before := len(f.log.lines)
		out := f.p.Submit(tc.req, 1001)
		wrote := len(f.log.lines) > before
		if out.Logged != tc.logged || wrote != tc.logged {
			t.Errorf("%s: Logged = %v, wrote a line = %v, want %v (%+v)", tc.name, out.Logged, wrote, tc.logged, out)
		}
	}
}

// Each swap of the loaded config (a new file, a removed one, fini) is announced after the new
// config is in place, so that no decision cached under the old one outlives it; a broken file
// keeps the old config and announces nothing.
func TestEveryConfigSwapIsAnnounced(t *testing.T) {
	f := newFixture(t, twoPools)
	var swaps []string // what a v100 job gets, seen from inside each announcement
	f.p.ConfigChanged = func() {
		swaps = append(swaps, f.p.Submit(gpuJob("gres:gpu:v100:1"), 1001).SetPartition)
	}
	f.write(threePools)
	f.tick()
	f.tick() // unchanged file: no swap
	f.write("pools: [")
	f.tick()
	if err := os.Remove(f.path); err != nil {
		t.Fatal(err)
	}
	f.tick()
	f.p.Fini()
	want := []string{"v100", "", ""}
	if strings.Join(swaps, "|") != strings.Join(want, "|") {
		t.Fatalf("announced swaps saw %q, want %q", swaps, want)
	}
}

func TestSubmitRejectsWithGRESErrorForImpossibleGPURequest(t *testing.T) {
	f := newFixture(t, twoPools)
	req := gpuJob("gres:gpu:a100:1")
	req.Partition = "cpu"
	out := f.p.Submit(req, 1001)
	if out.Reject != RejectGRES || out.Refusal != pools.RefusedNamedPools || out.SetPartition != "" || !strings.HasPrefix(out.UserMessage, "slurmbridge: ") {
		t.Fatalf("outcome = %+v, want a GRES rejection of kind %s", out, pools.RefusedNamedPools)
	}
	if !f.log.endsWith(" code=" + string(pools.RefusedNamedPools)) {
		t.Fatalf("refusal not logged with its code: %q", f.log.lines)
	}
}

func TestModifyRefusalCarriesAMessageAndIsLogged(t *testing.T) {
	f := newFixture(t, twoPools)
	req := gpuJob("gres/gpu:a100=1")
	req.Op = pools.Modify
	req.Partition = "cpu"
	out := f.p.Modify(&Update{Request: *req, Set: FieldPartition | FieldTRESPerNode}, pendingJob("a100", "gres/gpu:a100=1", "normal"), 0)
	// The cgo layer hands the message to job_modify's err_msg from 23.02 on and drops it on 22.05.
	if out.Reject != RejectGRES || out.Refusal != pools.RefusedNamedPools || !strings.HasPrefix(out.UserMessage, "slurmbridge: ") {
		t.Fatalf("outcome = %+v, want a GRES rejection of kind %s", out, pools.RefusedNamedPools)
	}
	if !f.log.contains("update by uid 0 refused") || !f.log.endsWith(" code="+string(pools.RefusedNamedPools)) {
		t.Fatalf("refusal not logged: %q", f.log.lines)
	}
}

// Each release's spelling of the same jobs routes the same way; a CPU entry in tres_per_task
// (23.11 on) leaves a CPU job a CPU job.
func TestSubmitRoutesEveryReleasesSpelling(t *testing.T) {
	f := newFixture(t, twoPools)
	tests := []struct {
		release, perNode, perTask, want string
	}{
		{"22.05", "gres:gpu:a100:1", "", "a100"},
		{"23.11", "gres/gpu:a100:1", "cpu:4", "a100"},
		{"24.11", "", "cpu=4,gres/gpu:a100=1", "a100"},
		{"23.11 CPU job with -c 4", "", "cpu:4", "cpu"},
		{"24.11 CPU job with -c 4", "", "cpu=4", "cpu"},
		{"26.05 CPU job with a license per task", "", "cpu=4,license/matlab=1", "cpu"},
	}
	for _, tt := range tests {
		t.Run(tt.release, func(t *testing.T) {
			req := gpuJob(tt.perNode)
			req.TRESPerTask = tt.perTask
			if out := f.p.Submit(req, 1001); out.SetPartition != tt.want || out.Reject != NotRejected {
				t.Fatalf("outcome = %+v, want partition %s", out, tt.want)
			}
		})
	}
}

// Unrouted is what a GPU batch job gets without a usable pools.yaml: no partition, no refusal;
// only its output appends, which needs no pools (appendsOutput).
var unrouted = Outcome{AppendOutput: true}

func TestMissingConfigPassesJobsUnchanged(t *testing.T) {
	f := newFixture(t, "")
	out := f.p.Submit(gpuJob("gres:gpu:a100:1"), 1001)
	if out != unrouted {
		t.Fatalf("outcome = %+v, want unchanged job", out)
	}
	if !f.log.contains("unreadable") {
		t.Fatalf("missing config not logged: %q", f.log.lines)
	}
}

func TestInvalidConfigAtStartPassesJobsAndSaysWhy(t *testing.T) {
	f := newFixture(t, "default_cpu_pool: cpu\npools:\n  - name: cpu\n    colour: blue\n")
	if out := f.p.Submit(gpuJob("gres:gpu:1"), 1001); out != unrouted {
		t.Fatalf("outcome = %+v, want unchanged job", out)
	}
	if !f.log.contains("colour") {
		t.Fatalf("the bad key is not named in the log: %q", f.log.lines)
	}
}

func TestCheckPicksUpAChangedFile(t *testing.T) {
	f := newFixture(t, twoPools)
	f.write(threePools)
	// Until the watcher checks, submissions use the config they had: they never touch the file.
	if out := f.p.Submit(gpuJob("gres:gpu:v100:1"), 1001); out.SetPartition == "v100" {
		t.Fatalf("config changed without a check")
	}
	f.tick()
	if out := f.p.Submit(gpuJob("gres:gpu:v100:1"), 1001); out.SetPartition != "v100" {
		t.Fatalf("outcome = %+v after the check, want v100", out)
	}
	if !f.log.contains("loaded 3 pools") {
		t.Fatalf("reload not logged: %q", f.log.lines)
	}
}

func TestBrokenNewFileKeepsLastGoodConfig(t *testing.T) {
	f := newFixture(t, twoPools)
	f.write("pools: [")
	f.tick()
	if out := f.p.Submit(gpuJob("gres:gpu:a100:1"), 1001); out.SetPartition != "a100" {
		t.Fatalf("outcome = %+v, want the previous config still routing to a100", out)
	}
	if !f.log.contains("keeping the previous one") {
		t.Fatalf("log = %q", f.log.lines)
	}
	// Fixing the file is picked up again.
	f.write(threePools)
	f.tick()
	if out := f.p.Submit(gpuJob("gres:gpu:v100:1"), 1001); out.SetPartition != "v100" {
		t.Fatalf("outcome = %+v after the fix, want v100", out)
	}
}

func TestRemovedFileStopsRouting(t *testing.T) {
	f := newFixture(t, twoPools)
	if err := os.Remove(f.path); err != nil {
		t.Fatal(err)
	}
	f.tick()
	if out := f.p.Submit(gpuJob("gres:gpu:a100:1"), 1001); out != unrouted {
		t.Fatalf("outcome = %+v, want unchanged job once the admin removed pools.yaml", out)
	}
}

func TestFileCreatedAfterStartIsLoaded(t *testing.T) {
	f := newFixture(t, "")
	f.write(twoPools)
	f.tick()
	if out := f.p.Submit(gpuJob("gres:gpu:a100:1"), 1001); out.SetPartition != "a100" {
		t.Fatalf("outcome = %+v, want a100 once pools.yaml exists", out)
	}
}

// The real watcher, on a short interval: it reloads by itself, and Fini stops it.
func TestWatcherReloadsAndStopsAtFini(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pools.yaml")
	if err := os.WriteFile(path, []byte(twoPools), 0o644); err != nil {
		t.Fatal(err)
	}
	log := &recorder{}
	p := New(path, log.log)
	p.interval = 10 * time.Millisecond
	p.Init()
	if err := os.WriteFile(path+".tmp", []byte(threePools), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for p.Submit(gpuJob("gres:gpu:v100:1"), 1001).SetPartition != "v100" {
		if time.Now().After(deadline) {
			p.Fini()
			t.Fatalf("watcher did not reload within 5s; log %q", log.lines)
		}
		time.Sleep(5 * time.Millisecond)
	}
	p.Fini() // returns only once the watcher has returned
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if log.contains("unreadable") {
		t.Fatalf("watcher still checked the file after Fini: %q", log.lines)
	}
	if out := p.Submit(gpuJob("gres:gpu:a100:1"), 1001); out != unrouted {
		t.Fatalf("outcome after Fini = %+v, want unchanged job", out)
	}
}

// From 23.11 slurmctld calls job_submit concurrently; run with -race.
func TestConcurrentSubmitsDuringReloads(t *testing.T) {
	f := newFixture(t, twoPools)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				out := f.p.Submit(gpuJob(fmt.Sprintf("gres/gpu:a100=%d", 1+(i+w)%4)), 1001)
				if out.Reject != NotRejected || out.SetPartition != "a100" {
					t.Errorf("outcome = %+v, want a100", out)
					return
				}
			}
		}()
	}
	for i := range 20 {
		if i%2 == 0 {
			f.write(threePools)
		} else {
			f.write(twoPools)
		}
		f.tick()
	}
	wg.Wait()
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
	b.Cleanup(p.Fini)
	req := gpuJob("gres:gpu:a100:1")
	b.ReportAllocs()
	for b.Loop() {
		if out := p.Submit(req, 1001); out.SetPartition == "" {
			b.Fatal("not routed")
		}
	}
}
