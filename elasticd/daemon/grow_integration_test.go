//go:build integration

package daemon

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/bridge/testbed"
)

// The torchrun example as shipped: alice runs `sbatch elasticd/examples/torchrun.sbatch` from
// a directory holding the examples. Its #SBATCH lines declare --elastic=2:8:4 over a100 and
// v100 and ask for --gpus-per-node=4 and 8 CPUs: every worker must be a request Slurm accepts
// (typed GPUs, not mixed with the script's untyped ones), and the job must reach MIN and grow
// past it, each world formed through torchrun's rendezvous (every worker of 3 reports).
func TestShippedTorchrunExampleGrowsPastMin(t *testing.T) {
	r := newElasticRun(t)
	c, d, work := r.c, r.d, r.work
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
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
		if strings.Contains(st.Reason, "refused") {
			t.Fatalf("workers refused: %s", st.Reason)
		}
		for _, p := range st.Throughput {
			grown = grown || sum(p.Size) > st.MinWorkers
		}
		time.Sleep(time.Second)
	}
	if !grown {
		data, _ := os.ReadFile(filepath.Join(work, "main-"+id+".out"))
		t.Fatalf("after %s no world past MIN reported (last decision %q); main job output:\n%s", time.Since(start).Round(time.Second), last, tail(data))
	}
	t.Logf("a world of more than MIN reported after %s", time.Since(start).Round(time.Second))
	// Every worker asked for 4 typed GPUs on one node, requeueable, beside the main job.
	jobs, extras, err := c.Slurm().Queue(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if extras[j.ID].Name != WorkerName(main) {
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
		assocs, err := c.Slurm().ShowAssociations(ctx, slurm.AssociationFilter{Accounts: []string{"proj-a", "proj-b"}})
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
	var st *JobStatus
	for ctx.Err() == nil {
		if err := d.Cycle(ctx); err != nil {
			t.Logf("cycle: %v", err)
		}
		if st = jobStatus(d, main); st != nil && strings.Contains(st.Reason, "Slurm refused") {
			break
		}
		time.Sleep(time.Second)
	}
	if st == nil || !strings.Contains(st.Reason, "Slurm refused 3 worker submissions in a row") {
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
	if st = jobStatus(d, main); tries != maxRefusals || st.Decision != "hold" {
		t.Fatalf("after more cycles: %d tries, status %+v", tries, st)
	}
}

// alice's elastic job fills her project's guarantee (4 a100) with its main job, so the worker
// it grows by borrows: it runs in borrow-proj-a and is requeueable. When bob's in-quota job
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
		jobs, extras, err := c.Slurm().Queue(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs {
			if extras[j.ID].Name == WorkerName(main) && j.Running() {
				worker = j
			}
		}
		time.Sleep(time.Second)
	}
	if worker.ID == 0 {
		t.Fatalf("no worker ran; status %+v", jobStatus(d, main))
	}
	t.Logf("%5.1fs worker %d runs in %s (requeue %v)", time.Since(start).Seconds(), worker.ID, worker.QOS, worker.Requeue)
	if worker.QOS != "borrow-proj-a" || !worker.Requeue {
		t.Fatalf("worker %d in QOS %q, requeue %v; want borrow-proj-a, requeueable", worker.ID, worker.QOS, worker.Requeue)
	}
	logFrom := c.CtldLogSize(t)
	claim, err := c.Submit(ctx, "bob", "-p", "a100", "--gres=gpu:a100:4", "--wrap", "sleep 120")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Cancel(claim)
	var cancelled bool
	for ctx.Err() == nil && !cancelled {
		if err := d.Cycle(ctx); err != nil {
			t.Logf("cycle: %v", err)
		}
		d.mu.Lock()
		_, cancelled = d.jobs[main].stopping[worker.ID]
		d.mu.Unlock()
		time.Sleep(time.Second)
	}
	if !cancelled {
		t.Fatalf("worker %d was never reclaimed; status %+v", worker.ID, jobStatus(d, main))
	}
	t.Logf("%5.1fs worker %d reclaimed and cancelled", time.Since(start).Seconds(), worker.ID)
	if _, err := c.WaitState(ctx, claim, "RUNNING"); err != nil {
		t.Fatalf("bob's claim: %v", err)
	}
	// Requeued by the reclaim, then cancelled by elasticd: never killed by the preemption.
	jobs, extras, err := c.Slurm().Queue(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if j.ID == worker.ID && (j.Running() || extras[j.ID].Restarts == 0) {
			t.Errorf("worker %d: %s, %d restarts; want requeued once and gone", j.ID, j.StateName(), extras[j.ID].Restarts)
		}
	}
	c.AssertNoneKilled(t, logFrom)
	if state, err := c.JobState(ctx, mainID); err != nil || state != "RUNNING" {
		t.Fatalf("main job: %q, %v; want RUNNING", state, err)
	}
}
