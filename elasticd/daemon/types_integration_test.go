//go:build integration

package daemon

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/elasticd/api"
)

// An elastic job allowed a100 and v100 grows across GPU types: with the a100 pool full
// (filled by root jobs once the main job runs), elasticd probes a v100 worker, places it in
// the v100 pool, and accounts each type's throughput separately: the synthetic trainer's v100
// workers run at 0.6 x an a100 worker, so the mixed size measures 100 + 60 samples/s, not 200.
func TestElasticJobGrowsAcrossGPUTypes(t *testing.T) {
	r := newElasticRun(t)
	c, d := r.c, r.d
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	mainID, main := r.submitMain(ctx, t, "#!/bin/bash\n#SBATCH --elastic=1:3:1\n#SBATCH --elastic-pools=a100,v100\n"+
		"exec python3 "+example(t, "synthetic_trainer.py")+" --interval 0.5 --duration 600 --curve 1:100,2:200,3:300 --pool-speed a100:1,v100:0.6\n")
	var fillers []string
	defer func() { c.Cancel(fillers...) }()
	if _, err := c.WaitState(ctx, mainID, "RUNNING"); err != nil {
		t.Fatal(err)
	}
	// The other 7 a100 GPUs (2 nodes x 4).
	for range 7 {
		id, err := c.Submit(ctx, "root", "--job-name=elastic-types-fill", "-p", "a100", "--gres=gpu:a100:1", "--wrap", "sleep 600")
		if err != nil {
			t.Fatal(err)
		}
		fillers = append(fillers, id)
	}
	for _, id := range fillers {
		if _, err := c.WaitState(ctx, id, "RUNNING"); err != nil {
			t.Fatal(err)
		}
	}

	var mixed *api.Point
	var st *api.JobStatus
	for ctx.Err() == nil && mixed == nil {
		if err := d.Cycle(ctx); err != nil {
			t.Logf("cycle: %v", err)
		}
		if st = jobStatus(d, main); st != nil {
			for i, p := range st.Throughput {
				if p.Size["a100"] == 1 && p.Size["v100"] == 1 {
					mixed = &st.Throughput[i]
				}
			}
		}
		time.Sleep(time.Second)
	}
	if mixed == nil {
		t.Fatalf("no measurement at a100=1,v100=1 before the deadline; status %+v", st)
	}
	t.Logf("at a100=1,v100=1: %.0f samples/s; decision %s: %s", mixed.SamplesPerSec, st.Decision, st.Reason)
	if math.Abs(mixed.SamplesPerSec-160) > 16 {
		t.Errorf("mixed size measured %.0f samples/s, want ~160 (a100 100 + v100 60)", mixed.SamplesPerSec)
	}
	rows, err := workerRows(ctx, c, main)
	if err != nil || !slices.ContainsFunc(rows, runningInPartition("v100")) {
		t.Fatalf("worker jobs %+v, %v: want one running in the v100 pool", rows, err)
	}
}
