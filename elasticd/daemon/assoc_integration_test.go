//go:build integration

package daemon

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/elasticd/api"
	"github.com/slurmbridge/slurmbridge/elasticd/policy"
)

// alice's association in proj-a allows 6 GPUs (GrpTRES=gres/gpu=6). Her elastic job's main
// job fills her project's guarantee (4 a100), so its one-GPU workers borrow, in a QOS that
// sets no gres/gpu limit of its own: there the association's limit is the one Slurm applies.
// On a curve where every worker pays, and with a100 GPUs left idle, the job grows to 3 workers
// (6 GPUs) and holds: elasticd submits no worker that the limit would keep pending, and its
// status names the limit.
func TestAssociationGrpTRESHoldsGrowthAndSaysWhy(t *testing.T) {
	r := newElasticRun(t)
	c := r.c
	// The limit's hold names what alice's jobs hold or wait for: jobs an earlier package left
	// being cancelled (the replay's, say) must be gone first.
	drained := time.Now().Add(2 * time.Minute)
	for {
		jobs, err := c.Slurm().Queue(context.Background(), slurm.QueueRead{Fields: slurm.SchedulingFields})
		if err != nil {
			t.Fatal(err)
		}
		var left []uint32
		for _, j := range jobs {
			if j.User == "alice" {
				left = append(left, j.ID)
			}
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(drained) {
			t.Fatalf("alice still has jobs %v in the queue from an earlier test", left)
		}
		time.Sleep(2 * time.Second)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	setLimit := func(ctx context.Context, grp string) error {
		out, err := c.Run(ctx, "sacctmgr", "-i", "modify", "user", "where", "name=alice", "account=proj-a", "set", "grptres="+grp)
		if err != nil {
			t.Logf("sacctmgr: %s", out)
		}
		return err
	}
	if err := setLimit(ctx, "gres/gpu=6"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := setLimit(context.Background(), "gres/gpu=-1"); err != nil {
			t.Errorf("clearing alice's limit: %v", err)
		}
	})
	assocs, err := c.Slurm().Associations(ctx, slurm.AssociationFilter{})
	if i := slices.IndexFunc(assocs, func(a slurm.Association) bool { return a.User == "alice" && a.Account == "proj-a" }); err != nil || i < 0 || assocs[i].GrpTRES != "gres/gpu=6" {
		t.Fatalf("alice's association after the change: %+v, %v", assocs, err)
	}

	_, main := r.submitMain(ctx, t, "#!/bin/bash\n#SBATCH --elastic=1:4:1\n#SBATCH --elastic-pools=a100\n"+
		"exec python3 "+example(t, "synthetic_trainer.py")+" --interval 0.5 --duration 600 --curve 1:100,2:200,3:300,4:400\n",
		"-p", "a100", "--gres=gpu:a100:4")
	// The words are checked for the limit that holds the job, its figures: no code carries them.
	const why = "(the association of user alice in account proj-a has GrpTRES gres/gpu=6, and its jobs hold or wait for 6)"
	held := 0
	st := r.cycleUntil(ctx, t, main, func(st *api.JobStatus) bool {
		if st.Size["a100"] > 3 {
			t.Fatalf("grew past the association's 6 GPUs: %+v", st)
		}
		if st.ReasonCode == string(policy.CodeNoCapacity) && strings.Contains(st.Reason, why) {
			held++ // for several cycles: it stays held, and nothing pends meanwhile
		}
		return held >= 5
	})
	if st.Decision != "hold" || st.Size["a100"] != 3 {
		t.Fatalf("status %+v, want a hold at 3 workers", st)
	}
	rows, err := workerRows(ctx, c, main)
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range rows {
		if !rowRunning(row) || !strings.HasPrefix(row.QOS, "borrow-") && !strings.HasPrefix(row.QOS, "elastic-") {
			t.Errorf("worker %s: %s in %s (%s); want running on borrowed GPUs", row.PrintedID, row.StateName(), row.QOS, row.StateReason)
		}
	}
	if len(rows) != 2 {
		t.Fatalf("worker jobs %+v, want the 2 the limit allows", rows)
	}
	t.Logf("held at 3 workers: %s", st.Reason)

	// Where elasticd held, Slurm holds too: one more GPU job of alice's on borrowed GPUs
	// (idle a100 GPUs are there) waits on her association's limit.
	// It borrows as quotad lends: held, moved into the borrow QOS by root, released (a user may
	// not submit there).
	probe, err := c.Submit(ctx, "alice", "-p", "a100", "--hold", "--requeue", "--gres=gpu:a100:1", "--output=/dev/null", "--wrap", "sleep 120")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Cancel(probe)
	for _, args := range [][]string{{"update", "jobid=" + probe, "qos=borrow-proj-a"}, {"release", probe}} {
		if out, err := c.Run(ctx, "scontrol", args...); err != nil {
			t.Fatalf("scontrol %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	var row slurm.Job
	for ctx.Err() == nil && !strings.HasPrefix(row.StateReason, "AssocGrp") {
		rows, err := c.Slurm().Queue(ctx, slurm.QueueRead{Fields: slurm.SummaryFields, JobIDs: []string{probe}})
		if err != nil || len(rows) != 1 {
			t.Fatalf("squeue of job %s: %+v, %v", probe, rows, err)
		}
		if row = rows[0]; !rowPending(row) {
			t.Fatalf("job %s: %s in %s; Slurm started what elasticd held back (the association limit does not hold it)", probe, row.StateName(), row.QOS)
		}
		time.Sleep(time.Second)
	}
	t.Logf("alice's next GPU job %s pends in %s: %s", probe, row.QOS, row.StateReason)
}
