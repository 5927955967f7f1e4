//go:build integration

package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/auth"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/bridge/testbed"
	"github.com/slurmbridge/slurmbridge/elasticd/api"
	"github.com/slurmbridge/slurmbridge/elasticd/policy"
	"github.com/slurmbridge/slurmbridge/elasticd/registry"
)

// cycleUntil runs elasticd cycles, one a second, until done says so or ctx ends; it logs each
// change of the job's status.
func (r *elasticRun) cycleUntil(ctx context.Context, t *testing.T, main uint32, done func(*api.JobStatus) bool) *api.JobStatus {
	t.Helper()
	start, last := time.Now(), ""
	for ctx.Err() == nil {
		if err := r.d.Cycle(ctx); err != nil {
			t.Logf("cycle: %v", err)
		}
		st := jobStatus(r.d, main)
		if st != nil {
			if line := fmt.Sprintf("size %v: %s %s", st.Size, st.Decision, st.Reason); line != last {
				last = line
				t.Logf("%5.1fs %s", time.Since(start).Seconds(), line)
			}
			if done(st) {
				return st
			}
		}
		time.Sleep(time.Second)
	}
	t.Fatalf("deadline: status %+v", jobStatus(r.d, main))
	return nil
}

// liveWorkers are the job's worker jobs pending or running (not completing, not ended).
func liveWorkers(ctx context.Context, t *testing.T, c *testbed.Cluster, main uint32) []string {
	t.Helper()
	rows, err := workerRows(ctx, c, main)
	if err != nil {
		t.Fatalf("squeue: %v", err)
	}
	var ids []string
	for _, row := range rows {
		if rowRunning(row) || rowPending(row) {
			ids = append(ids, row.PrintedID)
		}
	}
	return ids
}

const syntheticHead = "#!/bin/bash\n#SBATCH --elastic-pools=a100\n"

func synthetic(t *testing.T, elastic, args string) string {
	return syntheticHead + "#SBATCH --elastic=" + elastic + "\nexec python3 " + example(t, "synthetic_trainer.py") + " --duration 600 " + args + "\n"
}

// With elasticd stopped, the workers of a main job that ends still end within seconds: the
// plugin's job epilog cancels them. (Its time limit is not what ends them.)
func TestWorkersEndWithTheirMainJobWhileElasticdIsStopped(t *testing.T) {
	r := newElasticRun(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	mainID, main := r.submitMain(ctx, t, synthetic(t, "2:2:1", "--interval 0.5 --curve 1:100,2:200"))
	r.cycleUntil(ctx, t, main, func(st *api.JobStatus) bool { return st.Size["a100"] == 2 })
	workers := liveWorkers(ctx, t, r.c, main)
	if len(workers) != 1 {
		t.Fatalf("workers %v, want 1", workers)
	}
	// From here elasticd runs no cycle: it is stopped.
	start := time.Now()
	r.c.Cancel(mainID)
	for len(liveWorkers(ctx, t, r.c, main)) > 0 {
		if time.Since(start) > 60*time.Second {
			t.Fatalf("worker %v still there 60 s after its main job ended, with elasticd stopped", workers)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("worker %s ended %.1f s after its main job was cancelled, elasticd stopped", workers[0], time.Since(start).Seconds())
}

var rendezvousLine = regexp.MustCompile(`rendezvous (\S+),`)

// rendezvousOf is the endpoint a job's output says the trainer got.
func rendezvousOf(t *testing.T, work, name string) string {
	data, _ := os.ReadFile(filepath.Join(work, name))
	if m := rendezvousLine.FindSubmatch(data); m != nil {
		return string(m[1])
	}
	return ""
}

// workerRendezvous waits for the output of worker of main job mainID and returns the
// rendezvous endpoint the worker got.
func (r *elasticRun) workerRendezvous(ctx context.Context, t *testing.T, mainID, worker string) string {
	t.Helper()
	out := fmt.Sprintf("elastic-worker-%s-%s.out", mainID, worker)
	for rendezvousOf(t, r.work, out) == "" && ctx.Err() == nil {
		time.Sleep(200 * time.Millisecond)
	}
	return rendezvousOf(t, r.work, out)
}

// A requeued main job's workers are stopped, and once it runs again its new workers get the
// rendezvous endpoint its new run recorded. On the testbed every node has the same host name,
// so the first run's declaration is made to name another host, as a run on another node would.
func TestRequeuedMainJobStopsItsWorkersAndNewOnesGetItsNewEndpoint(t *testing.T) {
	r := newElasticRun(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	mainID, main := r.submitMain(ctx, t, strings.Replace(synthetic(t, "2:2:1", "--interval 0.5 --curve 1:100,2:200"),
		"#!/bin/bash\n", "#!/bin/bash\n#SBATCH --requeue\n", 1))
	if _, err := r.c.WaitState(ctx, mainID, "RUNNING"); err != nil {
		t.Fatal(err)
	}
	dir := r.d.cfg.Dir
	var decl *registry.Declaration
	var err error
	for decl, err = dir.ReadDeclaration(main); err != nil && ctx.Err() == nil; decl, err = dir.ReadDeclaration(main) {
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	first := *decl
	first.RdzvEndpoint = "first-run-node:29999"
	data, _ := json.Marshal(first)
	tmp := filepath.Join(dir.JobDir(main), ".declaration.json.test")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir.JobDir(main), "declaration.json")); err != nil {
		t.Fatal(err)
	}

	r.cycleUntil(ctx, t, main, func(st *api.JobStatus) bool { return st.Size["a100"] == 2 })
	old := liveWorkers(ctx, t, r.c, main)
	if len(old) != 1 {
		t.Fatalf("workers %v, want 1", old)
	}
	if got := r.workerRendezvous(ctx, t, mainID, old[0]); got != first.RdzvEndpoint {
		t.Fatalf("first worker got rendezvous %q, want %q", got, first.RdzvEndpoint)
	}

	requeued := time.Now()
	if out, err := r.c.Run(ctx, "scontrol", "requeue", mainID); err != nil {
		t.Fatalf("scontrol requeue: %v: %s", err, out)
	}
	for slices.Contains(liveWorkers(ctx, t, r.c, main), old[0]) {
		if time.Since(requeued) > 60*time.Second {
			t.Fatalf("worker %s still there 60 s after its main job was requeued", old[0])
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("worker %s of the first run ended %.1f s after the requeue", old[0], time.Since(requeued).Seconds())

	st := r.cycleUntil(ctx, t, main, func(st *api.JobStatus) bool {
		return st.Size["a100"] == 2 && st.RdzvEndpoint != first.RdzvEndpoint
	})
	t.Logf("main job running again with %d workers %.1f s after the requeue; rendezvous %s", st.Size["a100"], time.Since(requeued).Seconds(), st.RdzvEndpoint)
	workers := liveWorkers(ctx, t, r.c, main)
	if len(workers) != 1 || workers[0] == old[0] {
		t.Fatalf("workers %v after the restart, want one new one", workers)
	}
	if got := r.workerRendezvous(ctx, t, mainID, workers[0]); got != st.RdzvEndpoint {
		t.Fatalf("new worker got rendezvous %q, want the new run's %q", got, st.RdzvEndpoint)
	}
}

// A job at its knee with an evaluation pass of 1.5 s every 8 s, shorter than the measurement
// window (3 measurements, one a cycle): elasticd must not shrink it through several passes.
func TestEvaluationPauseDoesNotShrinkTheJob(t *testing.T) {
	r := newElasticRun(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, main := r.submitMain(ctx, t, synthetic(t, "1:2:1", "--interval 0.25 --curve 1:100,2:190 --pause-every 8 --pause-for 1.5"))
	st := r.cycleUntil(ctx, t, main, func(st *api.JobStatus) bool {
		return st.Size["a100"] == 2 && st.Decision == "hold" && st.ReasonCode == string(policy.CodeAtMax)
	})
	atMax := time.Now()
	var dips int
	seen := map[time.Time]bool{}
	r.cycleUntil(ctx, t, main, func(st *api.JobStatus) bool {
		if st.Decision == "shrink" || st.Size["a100"] < 2 {
			t.Fatalf("shrunk by a pause shorter than the window: %s", st.Reason)
		}
		for _, p := range st.Throughput {
			if p.SamplesPerSec < 100 && !seen[p.Time] {
				seen[p.Time] = true
				dips++
			}
		}
		return time.Since(atMax) > 25*time.Second
	})
	if dips < 2 {
		t.Fatalf("only %d measurements caught a pause: the test did not test", dips)
	}
	t.Logf("held at 2 workers for %s through %d paused measurements; %s", time.Since(atMax).Round(time.Second), dips, st.Reason)
}

// --elastic-max-batch=64:32 with GPUs 1 per worker allows 2 workers of the 4 declared: a job
// whose every step pays stops at 2, says why, and its worker gets its per-GPU batch.
func TestMaxBatchStopsGrowth(t *testing.T) {
	r := newElasticRun(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	mainID, main := r.submitMain(ctx, t, strings.Replace(synthetic(t, "1:4:1", "--interval 0.5 --curve 1:100,2:200,3:300,4:400"),
		"#SBATCH --elastic=", "#SBATCH --elastic-max-batch=64:32\n#SBATCH --elastic=", 1))
	st := r.cycleUntil(ctx, t, main, func(st *api.JobStatus) bool {
		return st.Decision == "hold" && st.ReasonCode == string(policy.CodeAtMax)
	})
	// The reason's figures are checked for the batch that lowers the max: no code carries them.
	if m := batchPerGPU.FindStringSubmatch(st.Reason); st.Size["a100"] != 2 || st.MaxWorkers != 2 || m == nil || m[1] != "64" || m[2] != "32" {
		t.Fatalf("status %+v, want held at 2 by the batch", st)
	}
	workers := liveWorkers(ctx, t, r.c, main)
	if len(workers) != 1 {
		t.Fatalf("workers %v", workers)
	}
	out := filepath.Join(r.work, fmt.Sprintf("elastic-worker-%s-%s.out", mainID, workers[0]))
	var data []byte
	for ctx.Err() == nil && !perDeviceOfMax.Match(data) {
		data, _ = os.ReadFile(out)
		time.Sleep(200 * time.Millisecond)
	}
	if m := perDeviceOfMax.FindSubmatch(data); m == nil || string(m[1]) != "32" || string(m[2]) != "64" {
		t.Fatalf("worker output %q lacks its per-GPU batch", data)
	}
}

// alice pins her job at 3 workers with `elasticd pin` (MUNGE names her to elasticd); it grows
// to 3 though its curve would stop at 2, and stays; bob cannot unpin it; alice unpins it.
func TestOwnerPinsASize(t *testing.T) {
	r := newElasticRun(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin, err := os.MkdirTemp("", "elasticd-bin-") // alice runs it: not under t.TempDir's 0700 parent
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(bin) })
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/slurmbridge/slurmbridge/elasticd/cmd/elasticd").CombinedOutput(); err != nil {
		t.Fatalf("building elasticd: %v\n%s", err, out)
	}
	var socket string
	for _, kv := range r.c.Env() {
		if v, ok := strings.CutPrefix(kv, "SLURMBRIDGE_MUNGE_SOCKET="); ok {
			socket = v
		}
	}
	client := r.c.Slurm()
	srv := httptest.NewServer(r.d.Handler(Access{Callers: auth.Munge{
		API: PersonAPI,
		Decode: func(ctx context.Context, cred string) (slurm.MungeIdentity, error) {
			return client.MungeDecode(ctx, socket, cred)
		},
		LookupUser: func(uid uint32) (string, error) {
			out, err := exec.Command("id", "-nu", fmt.Sprint(uid)).Output()
			return strings.TrimSpace(string(out)), err
		},
	}}))
	defer srv.Close()
	elasticd := func(user string, args ...string) (string, error) {
		out, stderr, err := r.c.RunAsWithStderr(ctx, user, filepath.Join(bin, "elasticd"), append([]string{args[0], "--elasticd", srv.URL}, args[1:]...)...)
		return string(out) + stderr, err
	}

	mainID, main := r.submitMain(ctx, t, synthetic(t, "1:4:1", "--interval 0.5 --curve 1:100,2:190,3:200,4:205"))
	r.cycleUntil(ctx, t, main, func(st *api.JobStatus) bool { return true })
	if out, err := elasticd("bob", "pin", mainID, "3"); err == nil || !strings.Contains(out, errNotOwner.Error()) {
		t.Fatalf("bob pinned alice's job: %v: %s", err, out)
	}
	if out, err := elasticd("alice", "pin", mainID, "3"); err != nil {
		t.Fatalf("alice: elasticd pin: %v: %s", err, out)
	}
	st := r.cycleUntil(ctx, t, main, func(st *api.JobStatus) bool {
		return st.Size["a100"] == 3 && st.Decision == "hold" && st.ReasonCode == string(policy.CodePinned)
	})
	if st.PinnedBy != "alice" {
		t.Fatalf("pinned by %q", st.PinnedBy)
	}
	held := time.Now()
	r.cycleUntil(ctx, t, main, func(st *api.JobStatus) bool {
		if st.Size["a100"] != 3 && len(st.Stopping) == 0 {
			t.Fatalf("pinned job resized: %+v", st)
		}
		return time.Since(held) > 8*time.Second
	})
	if out, err := elasticd("bob", "unpin", mainID); err == nil {
		t.Fatalf("bob unpinned alice's job: %s", out)
	}
	if out, err := elasticd("alice", "unpin", mainID); err != nil {
		t.Fatalf("alice: elasticd unpin: %v: %s", err, out)
	}
	r.cycleUntil(ctx, t, main, func(st *api.JobStatus) bool { return st.Pin == 0 })
}

// batchPerGPU reads the max global batch and the batch per GPU from a reason; perDeviceOfMax
// the same two from a worker's output, per GPU first.
var (
	batchPerGPU    = regexp.MustCompile(`global batch (\d+) at (\d+) per GPU`)
	perDeviceOfMax = regexp.MustCompile(`per device (\S+) of max (\S+)`)
)
