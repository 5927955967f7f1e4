//go:build integration

package replay

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/testbed"
)

// TestQuickReplayInvariants replays a short window of the excerpt under static quotas, under
// slurmbridge and under slurmbridge with elastic jobs on the testbed and checks what must hold
// whatever the timing: no job lost, every job accounted, static quotas never exceeded and never
// lent, slurmbridge lending, and elasticd growing an elastic job with worker jobs that ran. The
// allocation goal (1.3x) is the full run's, not asserted here (bench/README.md).
func TestQuickReplayInvariants(t *testing.T) {
	c := testbed.Require(t)
	projects, err := TestbedProjects(filepath.Join("..", "..", "slurm-conf", "testbed", "quotas.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p := testParams()
	p.Projects = projects
	p.Span = 2 * 3600 // 30 s of arrivals: a mode takes about a minute and a half
	// An elastic job must outlast elasticd's measuring and its worker's start to grow: on
	// cores shared with other suites both take longer, and so may the job.
	p.MaxRun = testbed.Patience(30 * time.Second)
	p.Elastic = DefaultElastic
	f, err := os.Open(excerpt)
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := ReadTasks(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	pl, err := Map(tasks, p)
	if err != nil {
		t.Fatal(err)
	}
	if len(pl.Jobs) < 10 || pl.ElasticJobs == 0 {
		t.Fatalf("the window holds %d jobs, %d elastic; the test needs contention and an elastic job", len(pl.Jobs), pl.ElasticJobs)
	}
	quota := map[string]int{}
	for _, pr := range projects {
		quota[pr.Account] = pr.GPUs
	}
	work, err := os.MkdirTemp("", "replay-elastic-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(work) })
	if err := os.Chmod(work, 0o777); err != nil { // the testbed users write the jobs' output
		t.Fatal(err)
	}
	poolsByType, err := ElasticPools(filepath.Join(c.Dir, "etc", "pools.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	r := &Runner{Cluster: c, Log: testLog{t}, Timeout: testbed.Patience(4 * time.Minute), ElasticdMetrics: c.ElasticdURL() + "/metrics",
		Elastic: &ElasticSetup{Rule: p.Elastic, Trainer: filepath.Join(c.Examples(), "synthetic_trainer.py"), WorkDir: work, Pools: poolsByType}}
	ctx := context.Background()
	for _, d := range Daemons {
		restore := c.KeepDaemon(ctx, d)
		t.Cleanup(func() {
			if err := restore(context.Background()); err != nil {
				t.Errorf("restoring %v", err)
			}
		})
	}
	for _, mode := range []Mode{Static, Slurmbridge, Elastic} {
		rep, subs, err := r.Run(ctx, mode, pl, "itest-"+string(mode))
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		var b testLog = testLog{t}
		rep.Print(b)
		if len(subs) != len(pl.Jobs) || rep.Submitted != len(pl.Jobs) {
			t.Errorf("%s: submitted %d of %d jobs", mode, len(subs), len(pl.Jobs))
		}
		if rep.Accounted != rep.Submitted || len(rep.Lost) != 0 || rep.Completed != rep.Submitted {
			t.Errorf("%s: %d submitted, %d accounted, %d completed, lost %v", mode, rep.Submitted, rep.Accounted, rep.Completed, rep.Lost)
		}
		if rep.AllocRatio <= 0 || rep.AllocRatio > 1 {
			t.Errorf("%s: allocation ratio %v outside (0, 1]", mode, rep.AllocRatio)
		}
		// Every job slept its run time on its GPUs at least once.
		var least float64
		for _, j := range pl.Jobs {
			least += float64(j.GPUs) * j.Runtime.Seconds()
		}
		if rep.GPUSeconds < least {
			t.Errorf("%s: %.0f GPU-seconds allocated, less than the %.0f the jobs slept", mode, rep.GPUSeconds, least)
		}
		for acct, peak := range rep.PeakGuaranteed {
			if peak > quota[acct] {
				t.Errorf("%s: %s held %d GPUs in its guaranteed QOS, quota %d", mode, acct, peak, quota[acct])
			}
		}
		switch mode {
		case Static:
			if rep.BorrowRuns != 0 || rep.Preemptions != 0 {
				t.Errorf("static quotas lent: %d borrow runs, %d preemptions", rep.BorrowRuns, rep.Preemptions)
			}
		case Slurmbridge, Elastic:
			if rep.BorrowRuns == 0 {
				t.Errorf("%s ran no job on borrowed GPUs", mode)
			}
		}
		if mode != Elastic {
			if rep.ElasticJobs != 0 || rep.WorkerJobs != 0 || rep.Grows != 0 {
				t.Errorf("%s: %d elastic jobs, %d worker jobs, %d grows: elastic outside mode elastic", mode, rep.ElasticJobs, rep.WorkerJobs, rep.Grows)
			}
			continue
		}
		// Grown means a worker job that elasticd submitted ran beside its main job.
		if rep.ElasticJobs != pl.ElasticJobs || rep.Grows == 0 || rep.WorkerRuns == 0 || rep.Grown == 0 || rep.WorkerGPUSeconds <= 0 {
			t.Errorf("elastic: %d of %d elastic jobs, %d grows, %d worker runs (%.0f GPU-s), %d grown: want growth",
				rep.ElasticJobs, pl.ElasticJobs, rep.Grows, rep.WorkerRuns, rep.WorkerGPUSeconds, rep.Grown)
		}
		if rep.WorkerRuns > rep.Grows {
			t.Errorf("elastic: %d worker jobs ran but elasticd counted %d grows", rep.WorkerRuns, rep.Grows)
		}
	}
}

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(string(p))
	return len(p), nil
}
