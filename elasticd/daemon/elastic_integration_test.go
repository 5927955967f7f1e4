//go:build integration

package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/slurmbridge/slurmbridge/bridge/auth"
	"github.com/slurmbridge/slurmbridge/bridge/pools"
	"github.com/slurmbridge/slurmbridge/bridge/quotaapi"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/bridge/testbed"
	"github.com/slurmbridge/slurmbridge/elasticd/api"
	"github.com/slurmbridge/slurmbridge/elasticd/policy"
	"github.com/slurmbridge/slurmbridge/elasticd/registry"
)

// These tests need the SPANK plugin in the testbed's plugstack.conf with
// dir=$TESTBED_DIR/elastic (see elasticd/README.md): they run elasticd in-process on that
// directory, so the testbed's own elasticd is paused meanwhile.

func TestInvalidElasticDeclarationIsRejectedAtSubmit(t *testing.T) {
	c := testbed.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for args, want := range map[string]string{
		"--elastic=4:2":                           "MAX 2 is below MIN 4",
		"--elastic=two:4":                         `MIN "two" must be a whole number`,
		"--elastic=1:2 --elastic-pools=h9x":       "unknown pool h9x",
		"--elastic-pools=a100":                    "--elastic-pools needs --elastic",
		"--elastic=1:2 --elastic-value=abc":       "invalid --elastic-value",
		"--elastic=1:2 --elastic-value=0":         "invalid --elastic-value",
		"--elastic=1:2 --elastic-value=-1":        "invalid --elastic-value",
		"--elastic-value=2":                       "--elastic-value needs --elastic",
		"--elastic=1:4 --elastic-max-batch=2":     "2 is below the 4 GPUs of MAX 4 workers",
		"--elastic=2:4 --elastic-max-batch=64:64": "at MIN 2 workers of 1 GPUs, 64 per GPU make a global batch of 128, above 64",
		"--elastic=1:2 --elastic-max-batch=x":     `GLOBAL "x" must be a whole number`,
		"--elastic=1:2 --elastic-max-batch=8:9":   `PER_GPU "9" must be a whole number from 1 to GLOBAL 8`,
		"--elastic-max-batch=64":                  "--elastic-max-batch needs --elastic",
	} {
		full := append(strings.Fields(args), "-p", "a100", "--gres=gpu:a100:1", "--wrap", "true")
		id, msg, err := c.SubmitWithMessage(ctx, "alice", full...)
		if err == nil {
			c.Cancel(id)
			t.Errorf("%s: accepted as job %s", args, id)
			continue
		}
		if !strings.Contains(msg, want) {
			t.Errorf("%s: sbatch said %q, want it to say %q", args, msg, want)
		}
	}
}

// A valid --elastic-value reaches elasticd through the declaration the plugin records.
func TestElasticValueIsRecorded(t *testing.T) {
	c := testbed.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	id, err := c.Submit(ctx, "alice", "--elastic=1:2", "--elastic-value=2.5", "-p", "a100", "--gres=gpu:a100:1", "--wrap", "sleep 30")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Cancel(id)
	if _, err := c.WaitState(ctx, id, "RUNNING"); err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseUint(id, 10, 32)
	if err != nil {
		t.Fatal(err)
	}
	dir := registry.Dir(filepath.Join(c.Dir, "elastic"))
	var decl *registry.Declaration
	// The batch step records it as it starts, which on 2 busy cores has taken over 5 s after
	// RUNNING: wait as long as the test's deadline allows.
	for {
		if decl, err = dir.ReadDeclaration(uint32(n)); err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil || decl.ValuePerMillionSamples != 2.5 || decl.MaxWorkers != 2 {
		t.Fatalf("declaration %+v, %v; want value 2.5 and max 2", decl, err)
	}
}

// The synthetic trainer's job does 100, 190, 200 and 205 samples/s on 1 to 4 workers: the step
// to 2 pays (s = 0.9), the step to 3 does not (s = 0.11). elasticd must grow to 2, probe 3,
// shrink back to 2 with a TERM the worker hears, and hold there; a plain job beside it is left
// alone.
func TestSyntheticJobGrowsToTheKneeShrinksGracefullyAndHolds(t *testing.T) {
	r := newElasticRun(t)
	c, d, work := r.c, r.d, r.work
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	mainID, main := r.submitMain(ctx, t, "#!/bin/bash\n#SBATCH --elastic=1:4:1\n#SBATCH --elastic-pools=a100\n"+
		"exec python3 "+example(t, "synthetic_trainer.py")+" --interval 0.5 --duration 600 --curve 1:100,2:190,3:200,4:205\n")
	plainID, err := c.Submit(ctx, "alice", "-p", "a100", "--gres=gpu:a100:1", "--wrap", "sleep 300")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Cancel(plainID)
	// alice reads the status API all along, as any user with a MUNGE credential may, while
	// the cycles grow, shrink and cancel: the suite runs under -race in CI.
	stopReading := readStatusAsUser(t, d, "alice")

	start := time.Now()
	var sizes []int
	var shrunk, held time.Duration
	for ctx.Err() == nil {
		if err := d.Cycle(ctx); err != nil {
			t.Logf("cycle: %v", err)
		}
		st := jobStatus(d, main)
		if st != nil {
			if n := st.Size["a100"]; len(sizes) == 0 || sizes[len(sizes)-1] != n {
				sizes = append(sizes, n)
				t.Logf("%5.1fs size %d: %s %s", time.Since(start).Seconds(), n, st.Decision, st.Reason)
			}
			if shrunk == 0 && st.Decision == "shrink" {
				shrunk = time.Since(start)
			}
			if shrunk > 0 && st.Decision == "hold" && st.Size["a100"] == 2 && len(st.Stopping) == 0 &&
				st.ReasonCode == string(policy.CodeCooldown) {
				held = time.Since(start)
				break
			}
		}
		time.Sleep(time.Second)
	}
	if held == 0 {
		t.Fatalf("no grow/shrink/hold cycle within the deadline: sizes %v, status %+v", sizes, jobStatus(d, main))
	}
	t.Logf("sizes %v; shrink after %s, holding at the knee after %s; alice read the status %d times meanwhile",
		sizes, shrunk.Round(time.Second), held.Round(time.Second), stopReading())
	if !slices.Equal(sizes[:3], []int{1, 2, 3}) || sizes[len(sizes)-1] != 2 {
		t.Fatalf("sizes %v, want 1, 2, 3 then back to 2", sizes)
	}

	// The removed worker heard the TERM and left on its own.
	outs, _ := filepath.Glob(filepath.Join(work, fmt.Sprintf("elastic-worker-%s-*.out", mainID)))
	var heard bool
	for _, out := range outs {
		data, _ := os.ReadFile(out)
		heard = heard || strings.Contains(string(data), "SIGTERM, leaving the rendezvous")
	}
	if !heard {
		t.Fatalf("no worker output (%v) shows the graceful TERM", outs)
	}
	// The plain job got no workers.
	rows, err := workerRows(ctx, c, uint32(mustAtoi(t, plainID)))
	if err != nil || len(rows) != 0 {
		t.Fatalf("workers of the plain job: %+v, %v", rows, err)
	}
}

// readStatusAsUser serves d's API over HTTP and has user GET its status every 50 ms until the
// returned function is called, which says how many reads there were; a read that fails or does
// not decode fails the test.
func readStatusAsUser(t *testing.T, d *Daemon, user string) func() int {
	t.Helper()
	srv := httptest.NewServer(d.Handler(Access{Callers: fakeAuth{auth.Caller{User: user}}}))
	done, stopped := make(chan struct{}), make(chan int)
	go func() {
		reads := 0
		defer func() { stopped <- reads }()
		for {
			select {
			case <-done:
				return
			case <-time.After(50 * time.Millisecond):
			}
			resp, err := http.Get(srv.URL + api.StatusPath)
			if err != nil {
				t.Errorf("GET %s as %s: %v", api.StatusPath, user, err)
				return
			}
			var st []api.JobStatus
			err = json.NewDecoder(resp.Body).Decode(&st)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || err != nil {
				t.Errorf("GET %s as %s: %s, %v", api.StatusPath, user, resp.Status, err)
				return
			}
			reads++
		}
	}()
	var once sync.Once
	reads := 0
	stop := func() int {
		once.Do(func() {
			close(done)
			reads = <-stopped
			srv.Close()
		})
		return reads
	}
	t.Cleanup(func() { stop() })
	return stop
}

func jobStatus(d *Daemon, id uint32) *api.JobStatus {
	for _, s := range d.Status() {
		if s.JobID == id {
			return &s
		}
	}
	return nil
}

func mustAtoi(t *testing.T, s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// testbedDaemon is an in-process elasticd on the testbed's elastic directory and pools, with
// settings fast enough for a test (the testbed's own elasticd must be paused).
func testbedDaemon(t *testing.T, c *testbed.Cluster) *Daemon {
	t.Helper()
	cfg, err := pools.Load(filepath.Join(c.Dir, "etc", "pools.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, kv := range c.Env() {
		if strings.HasPrefix(kv, "SLURM_CONF=") || strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	// The testbed's quotad, as testbed/elasticd.sh names it: borrowed workers leave the GPUs its
	// plan says lending limits keep idle.
	return New(Config{Dir: registry.Dir(filepath.Join(c.Dir, "elastic")), Pools: cfg, Grace: 5 * time.Second,
		Settings: policy.Settings{MinSamples: 3, SettleTime: 2 * time.Second, StaleAfter: 10 * time.Second, Cooldown: 10 * time.Minute},
		Quotad:   &quotaapi.Client{BaseURL: c.QuotadURL()}},
		CommandSlurm{Client: slurm.Client{Runner: c.Runner()}, Env: env}, zerolog.New(zerolog.NewTestWriter(t)), NewMetrics(prometheus.NewRegistry()))
}

// elasticRun is one elastic job on the testbed driven by an in-process elasticd (the testbed's
// own is paused meanwhile); the job's script, outputs and traces live in work, which the job's
// user can write.
type elasticRun struct {
	c    *testbed.Cluster
	d    *Daemon
	work string
}

func newElasticRun(t *testing.T) *elasticRun {
	t.Helper()
	c := testbed.Require(t)
	c.PauseDaemon(t, "elasticd")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	waitQuotas(ctx, t, c)
	work := testbed.SharedDir(t, "elastic-it-", 0o777)
	return &elasticRun{c: c, d: testbedDaemon(t, c), work: work}
}

// example is the absolute path of a file in the testbed's copy of elasticd/examples, which
// the job's user can read wherever the checkout is.
func example(t *testing.T, name string) string {
	t.Helper()
	return filepath.Join(testbed.Require(t).Examples(), name)
}

// submitMain submits body as alice's main job on one a100 GPU, or with args instead of that
// request. When the test ends the job is cancelled and cycles run until elasticd has ended its
// workers and removed its directory.
func (r *elasticRun) submitMain(ctx context.Context, t *testing.T, body string, args ...string) (string, uint32) {
	t.Helper()
	script := filepath.Join(r.work, "job.sh")
	if err := os.WriteFile(script, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if len(args) == 0 {
		args = []string{"-p", "a100", "--gres=gpu:a100:1"}
	}
	id, err := r.c.Submit(ctx, "alice", append(args, "--output="+filepath.Join(r.work, "main-%j.out"), script)...)
	if err != nil {
		t.Fatal(err)
	}
	// A failed test shows what the jobs printed (before the directory goes: cleanups run last
	// registered first).
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		outs, _ := filepath.Glob(filepath.Join(r.work, "*.out"))
		for _, out := range outs {
			data, _ := os.ReadFile(out)
			lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
			t.Logf("%s, last %d lines:\n%s", filepath.Base(out), min(len(lines), 40), strings.Join(lines[max(len(lines)-40, 0):], "\n"))
		}
	})
	return id, r.follow(t, id)
}

// follow cancels main job id when the test ends, and runs cycles until elasticd has ended its
// workers and removed its directory.
func (r *elasticRun) follow(t *testing.T, id string) uint32 {
	t.Helper()
	main := uint32(mustAtoi(t, id))
	t.Cleanup(func() {
		r.c.Cancel(id)
		for range 20 {
			_ = r.d.Cycle(context.Background())
			if _, err := os.Stat(r.d.cfg.Dir.JobDir(main)); os.IsNotExist(err) {
				return
			}
			time.Sleep(time.Second)
		}
	})
	return main
}
