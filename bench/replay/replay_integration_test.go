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

// TestQuickReplayInvariants replays a short window of the excerpt under static quotas and under
// slurmbridge on the testbed and checks what must hold whatever the timing: no job lost, every
// job accounted, static quotas never exceeded and never lent, and slurmbridge lending. The
// allocation goal (1.3x) is the full run's, not asserted here (bench/README.md).
func TestQuickReplayInvariants(t *testing.T) {
	c := testbed.Require(t)
	projects, err := TestbedProjects(filepath.Join("..", "..", "slurm-conf", "testbed", "quotas.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p := testParams()
	p.Projects = projects
	p.Span = 2 * 3600 // 30 s of arrivals: the two modes take about 3 minutes together
	p.MaxRun = 30 * time.Second
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
	if len(pl.Jobs) < 10 {
		t.Fatalf("the window holds %d jobs; the test needs contention", len(pl.Jobs))
	}
	quota := map[string]int{}
	for _, pr := range projects {
		quota[pr.Account] = pr.GPUs
	}
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	r := &Runner{Cluster: c, RepoRoot: root, Log: testLog{t}, Timeout: 4 * time.Minute}
	ctx := context.Background()
	wasRunning := r.QuotadRunning(ctx)
	t.Cleanup(func() {
		if err := r.SetQuotad(context.Background(), wasRunning); err != nil {
			t.Errorf("restoring quotad: %v", err)
		}
	})
	for _, mode := range []Mode{Static, Slurmbridge} {
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
		case Slurmbridge:
			if rep.BorrowRuns == 0 {
				t.Error("slurmbridge ran no job on borrowed GPUs")
			}
		}
	}
}

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(string(p))
	return len(p), nil
}
