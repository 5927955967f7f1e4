//go:build integration

package daemon

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/quotaapi"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/bridge/testbed"
	"github.com/slurmbridge/slurmbridge/elasticd/policy"
)

// proj-a lends at most 1 of its 4 guaranteed a100, so quotad's plan keeps 3 idle for alice's
// own jobs. bob's elastic job fills proj-b's guarantee (4 a100) with its main job on pool a100,
// whose other 4 a100 are idle; every worker it grows by borrows. elasticd lends it 1 worker,
// not the 3 more the free GPUs and its throughput would take, and says which limit holds it.
// alice's 3 jobs then start at once on the GPUs her lending limit kept, with no reclaim: bob's
// worker is not preempted, and nothing is killed.
func TestElasticWorkersKeepOtherProjectsLendingLimits(t *testing.T) {
	r := newElasticRun(t)
	c, d := r.c, r.d
	ctx, cancel := context.WithTimeout(context.Background(), testbed.Patience(4*time.Minute))
	defer cancel()
	waitElasticQOS(ctx, t, c)
	t.Cleanup(func() {
		cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
		defer ccancel()
		quotactl(cctx, t, c, "import", filepath.Join("..", "..", "slurm-conf", "testbed", "quotas.yaml"))
	})
	quotactl(ctx, t, c, "set", "proj-a", "--lend-limit", "a100=1")
	waitKept(ctx, t, c, "proj-a", "a100", 3)

	script := filepath.Join(r.work, "bob.sh")
	body := "#!/bin/bash\n#SBATCH --elastic=1:5:1\n#SBATCH --elastic-pools=a100\n" +
		"exec python3 " + example(t, "synthetic_trainer.py") + " --interval 0.5 --duration 600 --curve 1:100,2:199,3:298,4:397,5:496\n"
	if err := os.WriteFile(script, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	mainID, err := c.Submit(ctx, "bob", "-p", "a100", "--gres=gpu:a100:4", "--output="+filepath.Join(r.work, "main-%j.out"), script)
	if err != nil {
		t.Fatal(err)
	}
	main := r.follow(t, mainID)

	// Grow until the lending limit holds the job: each step pays (the curve is near linear).
	want := "lending limits keep 3 idle a100 for their owners' own jobs (proj-a keeps 3)"
	start := time.Now()
	var last string
	var workers []slurm.Job
	for {
		if ctx.Err() != nil {
			t.Fatalf("the job was never held by proj-a's lending limit (last %q); workers %v", last, ids(workers))
		}
		if err := d.Cycle(ctx); err != nil {
			t.Logf("cycle: %v", err)
		}
		rows, err := workerRows(ctx, c, main)
		if err != nil {
			t.Fatal(err)
		}
		workers = rows
		if n := countRows(rows, rowRunning); n > 1 {
			t.Fatalf("%d workers of bob's run on borrowed a100, want 1: the 3 proj-a keeps were lent (%v)", n, ids(rows))
		}
		st := jobStatus(d, main)
		if st != nil && st.Decision+" "+st.Reason != last {
			last = st.Decision + " " + st.Reason
			t.Logf("%5.1fs size %v: %s", time.Since(start).Seconds(), st.Size, last)
		}
		if st != nil && st.ReasonCode == string(policy.CodeNoCapacity) && strings.Contains(st.Reason, want) && countRows(rows, rowRunning) == 1 {
			break
		}
		time.Sleep(time.Second)
	}
	worker := workers[0]
	for _, w := range workers {
		if rowRunning(w) {
			worker = w
		}
	}
	if worker.QOS != "elastic-proj-b" {
		t.Fatalf("bob's worker %d runs in %s, want elastic-proj-b", worker.ID, worker.QOS)
	}
	t.Logf("%5.1fs bob's job holds at its main job and worker %d, in %s", time.Since(start).Seconds(), worker.ID, worker.QOS)

	logFrom := c.CtldLogSize(t)
	var alice []string
	for range 3 {
		id, err := c.Submit(ctx, "alice", "-p", "a100", "--gres=gpu:a100:1", "--wrap", "sleep 120")
		if err != nil {
			t.Fatal(err)
		}
		alice = append(alice, id)
	}
	t.Cleanup(func() { c.Cancel(alice...) })
	// elasticd runs on meanwhile, as it would. alice's jobs start on idle GPUs at once: a
	// reclaim would first have to requeue bob's worker (graceTime 0, so within a cycle or
	// two), which the checks below see.
	submitted := time.Now()
	deadline := submitted.Add(testbed.Patience(15 * time.Second))
	for {
		if err := d.Cycle(ctx); err != nil {
			t.Logf("cycle: %v", err)
		}
		rows, err := jobRows(ctx, c, alice)
		if err != nil {
			t.Fatal(err)
		}
		if countRows(rows, rowRunning) == len(alice) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("alice's jobs not all running %s after submission: %v", time.Since(submitted).Round(time.Second), states(rows))
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("alice's 3 jobs running %s after submission", time.Since(submitted).Round(100*time.Millisecond))
	workerID := strconv.FormatUint(uint64(worker.ID), 10)
	rows, err := jobRows(ctx, c, []string{workerID})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || !rowRunning(rows[0]) || rows[0].Restarts != 0 {
		t.Errorf("bob's worker %d: %v, want still running, never requeued: alice's jobs took kept GPUs, not his", worker.ID, states(rows))
	}
	if p := c.Preempted(t, workerID); len(p) > 0 {
		t.Errorf("bob's worker %d was preempted: the kept GPUs should have been idle", worker.ID)
	}
	c.AssertNoneKilled(t, logFrom)
	if state, err := c.JobState(ctx, mainID); err != nil || state != "RUNNING" {
		t.Fatalf("bob's main job: %q, %v; want RUNNING", state, err)
	}
}

// waitKept waits until the testbed's quotad's fresh plan says account's lending limit keeps n
// idle GPUs of type gpuType: elasticd reads the same answer.
func waitKept(ctx context.Context, t *testing.T, c *testbed.Cluster, account, gpuType string, n int) {
	t.Helper()
	q := &quotaapi.Client{BaseURL: c.QuotadURL()}
	var last string
	for {
		resp, err := q.Projects(ctx)
		if err == nil && resp.Status.Plan != nil && !resp.Status.Plan.Stale {
			for _, p := range resp.Projects {
				for _, g := range p.GPUs {
					if p.Account == account && g.GPUType == gpuType && g.KeptIdle == n {
						return
					}
				}
				if p.Account == account {
					last = p.Summary
				}
			}
		} else if err != nil {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			t.Fatalf("quotad's plan never said %s keeps %d idle %s: %s", account, n, gpuType, last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func ids(rows []slurm.Job) []uint32 {
	var out []uint32
	for _, r := range rows {
		out = append(out, r.ID)
	}
	return out
}

func states(rows []slurm.Job) []string {
	var out []string
	for _, r := range rows {
		out = append(out, r.PrintedID+" "+r.StateName()+" "+r.StateReason+" "+r.QOS)
	}
	return out
}
