//go:build integration

package daemon

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/bridge/testbed"
	"github.com/slurmbridge/slurmbridge/elasticd/api"
	"github.com/slurmbridge/slurmbridge/elasticd/reconcile"
)

// The torchrun example as shipped: alice runs `sbatch elasticd/examples/torchrun.sbatch` from
// a directory holding the examples. Its #SBATCH lines declare --elastic=2:8:4 over a100 and
// v100 and ask for --gpus-per-node=4 and 8 CPUs: every worker must be a request Slurm accepts
// (typed GPUs, not mixed with the script's untyped ones), and the job must reach MIN and grow
// past it, each world formed through torchrun's rendezvous (every worker of 3 reports).
func TestShippedTorchrunExampleGrowsPastMin(t *testing.T) {
	testbed.OneHeavyAtATime(t)
	r := newElasticRun(t)
	c, d, work := r.c, r.d, r.work
	// Two torchrun worlds of 4 CPU processes each form, train and re-form: on cores shared
	// with other suites the first settled report can take two minutes.
	ctx, cancel := context.WithTimeout(context.Background(), testbed.Patience(5*time.Minute))
	defer cancel()
	if err := os.Mkdir(filepath.Join(work, "elasticd"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(c.Examples(), filepath.Join(work, "elasticd", "examples")); err != nil {
		t.Fatal(err)
	}
	id, err := c.SubmitIn(ctx, "alice", work, "--output="+filepath.Join(work, "main-%j.out"), "elasticd/examples/torchrun.sbatch")
	if err != nil {
		t.Fatal(err)
	}
	main := r.follow(t, id)

	start := time.Now()
	var last string
	grown := false
	for ctx.Err() == nil && !grown {
		if err := d.Cycle(ctx); err != nil {
			t.Logf("cycle: %v", err)
		}
		st := jobStatus(d, main)
		if st == nil {
			time.Sleep(time.Second)
			continue
		}
		if now := st.Decision + " " + st.Reason; now != last {
			last = now
			t.Logf("%5.1fs size %v: %s", time.Since(start).Seconds(), st.Size, now)
		}
		if st.ReasonCode == string(reconcile.CodeWorkersRefused) {
			t.Fatalf("workers refused: %s", st.Reason)
		}
		for _, p := range st.Throughput {
			grown = grown || sum(p.Size) > st.MinWorkers
		}
		time.Sleep(time.Second)
	}
	if !grown {
		t.Fatalf("after %s no world past MIN reported (last decision %q)\n%s", time.Since(start).Round(time.Second), last, jobOutputs(c, work))
	}
	t.Logf("a world of more than MIN reported after %s", time.Since(start).Round(time.Second))
	// Every worker asked for 4 typed GPUs on one node, requeueable, beside the main job.
	jobs, err := c.Slurm().Queue(ctx, slurm.QueueRead{Fields: slurm.AllFields})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if j.Name != WorkerName(main) {
			continue
		}
		if !j.Requeue || !strings.Contains(j.TRESReq.String(), "gres/gpu=4") {
			t.Errorf("worker %d: requeue %v, request %s; want requeueable with 4 GPUs", j.ID, j.Requeue, j.TRESReq)
		}
	}
	if state, err := c.JobState(ctx, id); err != nil || state != "RUNNING" {
		t.Fatalf("main job %s: %q, %v; want RUNNING", id, state, err)
	}
}

// waitQuotas waits until the testbed's quotad has applied the quota table: the projects'
// accounts default to their guaranteed QOS and may use their borrow QOS. Right after the
// testbed comes up, a main job may still land in the QOS it had before (normal), which its
// workers, asking for the main job's QOS, may no longer use once quotad has synced.
func waitQuotas(ctx context.Context, t *testing.T, c *testbed.Cluster) {
	t.Helper()
	for {
		assocs, err := c.Slurm().Associations(ctx, slurm.AssociationFilter{Accounts: []string{"proj-a", "proj-b"}})
		synced := 0
		for _, a := range assocs {
			if strings.HasPrefix(a.DefaultQOS, "guar-proj-") {
				synced++
			}
		}
		if err == nil && synced == len(assocs) && synced > 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the testbed's quotad has not applied the quotas: %+v, %v", assocs, err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func sum(m map[string]int) int {
	n := 0
	for v := range maps.Values(m) {
		n += v
	}
	return n
}

// jobOutputs is the queue and the end of every output in work (the main job's and, beside it,
// its workers'): what a failed elastic test needs to tell Slurm's part from torchrun's.
func jobOutputs(c *testbed.Cluster, work string) string {
	var b strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if out, err := c.Run(ctx, "squeue", "-a", "-o", "%.8i %.12P %.24j %.8u %.9T %.20R"); err == nil {
		fmt.Fprintf(&b, "the queue:\n%s", out)
	}
	outs, _ := filepath.Glob(filepath.Join(work, "*.out"))
	for _, f := range outs {
		data, _ := os.ReadFile(f)
		fmt.Fprintf(&b, "=== %s (%d bytes):\n%s\n", filepath.Base(f), len(data), tail(data))
	}
	return b.String()
}

func tail(data []byte) string {
	if len(data) > 4000 {
		data = data[len(data)-4000:]
	}
	return string(data)
}

// A worker Slurm refuses is not submitted again and again: the main job's constraint (a100)
// cannot be met in the pool its workers may use (v100), so sbatch refuses every worker;
// after a few tries the job holds and its status says Slurm's reason.
func TestRefusedWorkersHoldTheJobAndSayWhy(t *testing.T) {
	r := newElasticRun(t)
	d := r.d
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, main := r.submitMain(ctx, t, "#!/bin/bash\n#SBATCH --elastic=1:2:1\n#SBATCH --elastic-pools=v100\n"+
		"exec python3 "+example(t, "synthetic_trainer.py")+" --interval 0.5 --duration 600 --curve 1:100,2:190\n",
		"-p", "a100", "--gres=gpu:a100:1", "--constraint=a100")
	start := time.Now()
	var st *api.JobStatus
	for ctx.Err() == nil {
		if err := d.Cycle(ctx); err != nil {
			t.Logf("cycle: %v", err)
		}
		if st = jobStatus(d, main); st != nil && st.ReasonCode == string(reconcile.CodeWorkersRefused) {
			break
		}
		time.Sleep(time.Second)
	}
	if st == nil || st.ReasonCode != string(reconcile.CodeWorkersRefused) {
		t.Fatalf("status %+v; want the job held on Slurm's refusal", st)
	}
	t.Logf("held after %s: %s", time.Since(start).Round(time.Second), st.Reason)
	// It stays held and tries no more.
	for range 3 {
		if err := d.Cycle(ctx); err != nil {
			t.Fatal(err)
		}
	}
	d.mu.Lock()
	tries := d.jobs[main].refusals
	d.mu.Unlock()
	if st = jobStatus(d, main); tries != reconcile.MaxRefusals || st.Decision != "hold" {
		t.Fatalf("after more cycles: %d tries, status %+v", tries, st)
	}
}

// alice's elastic job fills her project's guarantee (4 a100) with its main job, so the worker
// it grows by borrows: it runs in elastic-proj-a and is requeueable. When bob's in-quota job
// needs that node, Slurm requeues the worker (it is not killed) and elasticd cancels it rather
// than let it rejoin later: the job shrinks back to its main job, which runs on.
func TestBorrowedWorkerIsReclaimedAsAShrink(t *testing.T) {
	r := newElasticRun(t)
	c, d := r.c, r.d
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	mainID, main := r.submitMain(ctx, t, "#!/bin/bash\n#SBATCH --elastic=1:2:1\n#SBATCH --elastic-pools=a100\n"+
		"exec python3 "+example(t, "synthetic_trainer.py")+" --interval 0.5 --duration 600 --curve 1:100,2:190\n",
		"-p", "a100", "--gres=gpu:a100:4")
	start := time.Now()
	var worker slurm.Job
	for ctx.Err() == nil && worker.ID == 0 {
		if err := d.Cycle(ctx); err != nil {
			t.Logf("cycle: %v", err)
		}
		jobs, err := c.Slurm().Queue(ctx, slurm.QueueRead{Fields: slurm.AllFields})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs {
			if j.Name == WorkerName(main) && j.Running() {
				worker = j
			}
		}
		time.Sleep(time.Second)
	}
	if worker.ID == 0 {
		t.Fatalf("no worker ran; status %+v", jobStatus(d, main))
	}
	t.Logf("%5.1fs worker %d runs in %s (requeue %v)", time.Since(start).Seconds(), worker.ID, worker.QOS, worker.Requeue)
	if worker.QOS != "elastic-proj-a" || !worker.Requeue {
		t.Fatalf("worker %d in QOS %q, requeue %v; want elastic-proj-a, requeueable", worker.ID, worker.QOS, worker.Requeue)
	}
	logFrom := c.CtldLogSize(t)
	claim, err := c.Submit(ctx, "bob", "-p", "a100", "--gres=gpu:a100:4", "--wrap", "sleep 120")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Cancel(claim)
	cycleUntilStopping(ctx, t, d, main, worker.ID, func() {})
	t.Logf("%5.1fs worker %d reclaimed and cancelled", time.Since(start).Seconds(), worker.ID)
	if _, err := c.WaitState(ctx, claim, "RUNNING"); err != nil {
		t.Fatalf("bob's claim: %v", err)
	}
	// Requeued by the reclaim, then cancelled by elasticd: never killed by the preemption.
	jobs, err := c.Slurm().Queue(ctx, slurm.QueueRead{Fields: slurm.AllFields})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if j.ID == worker.ID && (j.Running() || j.Restarts == 0) {
			t.Errorf("worker %d: %s, %d restarts; want requeued once and gone", j.ID, j.StateName(), j.Restarts)
		}
	}
	c.AssertNoneKilled(t, logFrom)
	if state, err := c.JobState(ctx, mainID); err != nil || state != "RUNNING" {
		t.Fatalf("main job: %q, %v; want RUNNING", state, err)
	}
}

// Elastic workers are the first borrowers reclaimed. alice's main job fills proj-a's guarantee
// (4 a100) and its worker grows onto idle v100 (no v100 guaranteed to proj-a), so it runs in
// elastic-proj-a; bob's three ordinary 2-v100 jobs are lent into borrow-proj-b and take the other
// 6 v100. Both projects are over their guarantee, bob further (6 GPUs to alice's 2), so by the
// reclaim order alone his borrowers would go first. carol claims her guarantee, 2 v100: exactly
// what one of them holds. Slurm requeues the worker, elasticd cancels it (a shrink), bob's
// borrowers keep running, and nothing is killed.
func TestElasticWorkerIsReclaimedBeforeOtherBorrowers(t *testing.T) {
	r := newElasticRun(t)
	c, d := r.c, r.d
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	waitElasticQOS(ctx, t, c)
	mainID, main := r.submitMain(ctx, t, "#!/bin/bash\n#SBATCH --elastic=1:2:2\n#SBATCH --elastic-pools=v100\n"+
		"exec python3 "+example(t, "synthetic_trainer.py")+" --interval 0.5 --duration 600 --curve 1:100,2:190\n",
		"-p", "a100", "--gres=gpu:a100:4")
	start := time.Now()
	worker := r.runningWorker(ctx, t, main)
	t.Logf("%5.1fs worker %d runs in %s (requeue %v)", time.Since(start).Seconds(), worker.ID, worker.QOS, worker.Requeue)
	if worker.QOS != "elastic-proj-a" || !worker.Requeue {
		t.Fatalf("worker %d in QOS %q, requeue %v; want elastic-proj-a, requeueable", worker.ID, worker.QOS, worker.Requeue)
	}

	var bob []string
	for range 3 {
		id, err := c.Submit(ctx, "bob", "-p", "v100", "--gres=gpu:v100:2", "--wrap", "sleep 600")
		if err != nil {
			t.Fatal(err)
		}
		bob = append(bob, id)
	}
	t.Cleanup(func() { c.Cancel(bob...) })
	lastStart := time.Now()
	for ctx.Err() == nil {
		if err := d.Cycle(ctx); err != nil {
			t.Logf("cycle: %v", err)
		}
		rows, err := jobRows(ctx, c, bob)
		if err != nil {
			t.Fatal(err)
		}
		if countRows(rows, runningIn("borrow-proj-b")) == len(bob) {
			lastStart = time.Now()
			break
		}
		time.Sleep(time.Second)
	}
	if ctx.Err() != nil {
		t.Fatalf("bob's jobs were not all lent into borrow-proj-b")
	}
	t.Logf("%5.1fs bob's %d jobs run lent in borrow-proj-b", time.Since(start).Seconds(), len(bob))

	// quotad knows the worker: over proj-a's guarantee, reclaimable, first.
	explain := quotactl(ctx, t, c, "explain", strconv.FormatUint(uint64(worker.ID), 10))
	t.Logf("quotactl explain %d: %s", worker.ID, strings.TrimSpace(explain))
	for _, want := range []string{
		fmt.Sprintf("is an elastic worker of main job %s on borrowed GPUs in elastic-proj-a (2 v100)", mainID),
		"elastic workers are reclaimed first, before any other borrower",
		"elasticd counts that as a shrink",
	} {
		if !strings.Contains(explain, want) {
			t.Errorf("quotactl explain %d:\n%s\nwant it to say %q", worker.ID, explain, want)
		}
	}
	// A missing guar-proj-c fails too: it would leave carol's claim nothing to reclaim.
	got, exists, err := c.Preempts(ctx, "guar-proj-c")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"borrow-proj-a", "borrow-proj-b", "elastic-proj-a", "elastic-proj-b"}; !exists || !slices.Equal(got, want) {
		t.Fatalf("guar-proj-c (exists %v) preempts %q, want %q", exists, got, want)
	}

	// Every borrower has run past PreemptExemptTime, so Slurm may take any of them: the
	// choice is the QOS priority's alone.
	for time.Since(lastStart) < exemptTime+2*time.Second && ctx.Err() == nil {
		if err := d.Cycle(ctx); err != nil {
			t.Logf("cycle: %v", err)
		}
		time.Sleep(time.Second)
	}
	logFrom := c.CtldLogSize(t)
	claim, err := c.Submit(ctx, "carol", "-p", "v100", "--gres=gpu:v100:2", "--wrap", "sleep 120")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Cancel(claim)
	claimedAt := time.Now()
	cycleUntilStopping(ctx, t, d, main, worker.ID, func() { bobRunning(ctx, t, c, bob) })
	t.Logf("worker %d reclaimed and cancelled %.1fs after carol's claim", worker.ID, time.Since(claimedAt).Seconds())
	if _, err := c.WaitState(ctx, claim, "RUNNING"); err != nil {
		t.Fatalf("carol's claim: %v", err)
	}
	workerID := strconv.FormatUint(uint64(worker.ID), 10)
	for ctx.Err() == nil && len(c.Preempted(t, workerID)) == 0 {
		time.Sleep(500 * time.Millisecond) // slurmdbd lags slurmctld
	}
	if got := c.Preempted(t, workerID); len(got) != 1 {
		t.Errorf("sacct shows no PREEMPTED record of worker %d", worker.ID)
	}
	if got := c.Preempted(t, bob...); len(got) > 0 {
		t.Errorf("bob's borrowers %v were preempted although an elastic worker was there to reclaim first", got)
	}
	bobRunning(ctx, t, c, bob)
	c.AssertNoneKilled(t, logFrom)
	if state, err := c.JobState(ctx, mainID); err != nil || state != "RUNNING" {
		t.Fatalf("main job: %q, %v; want RUNNING", state, err)
	}
}

// bobRunning fails the test at once when one of bob's borrowers no longer runs: a claim took
// it while an elastic worker was there to reclaim first.
func bobRunning(ctx context.Context, t *testing.T, c *testbed.Cluster, bob []string) {
	t.Helper()
	rows, err := jobRows(ctx, c, bob)
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range rows {
		if !rowRunning(row) {
			t.Fatalf("bob's borrower %s is %s (%s), want RUNNING: the claim took it, not the elastic worker", row.PrintedID, row.StateName(), row.StateReason)
		}
	}
	if len(rows) != len(bob) {
		t.Fatalf("bob's borrowers: %d of %d in the queue", len(rows), len(bob))
	}
}

// exemptTime is PreemptExemptTime in slurm-conf/testbed/quotas.yaml.
const exemptTime = 20 * time.Second

// runningWorker runs cycles until one of main's workers runs, and returns it.
func (r *elasticRun) runningWorker(ctx context.Context, t *testing.T, main uint32) slurm.Job {
	t.Helper()
	for ctx.Err() == nil {
		if err := r.d.Cycle(ctx); err != nil {
			t.Logf("cycle: %v", err)
		}
		jobs, err := r.c.Slurm().Queue(ctx, slurm.QueueRead{Fields: slurm.AllFields})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs {
			if j.Name == WorkerName(main) && j.Running() {
				return j
			}
		}
		time.Sleep(time.Second)
	}
	t.Fatalf("no worker ran; status %+v", jobStatus(r.d, main))
	return slurm.Job{}
}

// waitElasticQOS waits until the testbed's quotad has created the elastic QOS and lets
// proj-a's and proj-b's accounts and users use them (one line per association).
func waitElasticQOS(ctx context.Context, t *testing.T, c *testbed.Cluster) {
	t.Helper()
	for {
		out, err := c.Run(ctx, "sacctmgr", "-n", "-P", "show", "assoc", "where", "account=proj-a,proj-b", "format=account,qos")
		lines, allowed := 0, 0
		for line := range strings.Lines(string(out)) {
			account, qos, ok := strings.Cut(strings.TrimSpace(line), "|")
			if !ok {
				continue
			}
			lines++
			if slices.Contains(strings.Split(qos, ","), "elastic-"+account) {
				allowed++
			}
		}
		if err == nil && lines > 0 && allowed == lines {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the testbed's quotad has not set up the elastic QOS: %s, %v", out, err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// quotactl runs the checkout's bin/quotactl (built by make testbed-up) as root with the
// testbed's environment.
func quotactl(ctx context.Context, t *testing.T, c *testbed.Cluster, args ...string) string {
	t.Helper()
	bin, err := filepath.Abs(filepath.Join("..", "..", "bin", "quotactl"))
	if err != nil {
		t.Fatal(err)
	}
	return c.MustRun(ctx, t, bin, args...)
}

// cycleUntilStopping runs elasticd's cycles, then each after every one, until elasticd counts
// the reclaimed worker as stopping (its shrink); it fails the test when ctx ends first.
func cycleUntilStopping(ctx context.Context, t *testing.T, d *Daemon, main, worker uint32, each func()) {
	t.Helper()
	for ctx.Err() == nil {
		if err := d.Cycle(ctx); err != nil {
			t.Logf("cycle: %v", err)
		}
		d.mu.Lock()
		_, stopping := d.jobs[main].stopping[worker]
		d.mu.Unlock()
		each()
		if stopping {
			return
		}
		time.Sleep(time.Second)
	}
	t.Fatalf("worker %d was never reclaimed; status %+v", worker, jobStatus(d, main))
}
