package policy_test

import (
	"strings"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/quotad/policy"
	"github.com/slurmbridge/slurmbridge/quotad/policy/policytest"
)

const badGres = `GPU request tres_per_node "gres/gpu:a100:x": bad count`

// An unreadable job counts at its worst (unreadable.go); the plan acts on every other job.
func TestUnreadableJobCountsAtItsWorst(t *testing.T) {
	proj := func(name string) string { return name }
	runPlanCases(t, []planCase{
		{
			name: "pending in a guarantee with room: that room is kept back, the rest is lent",
			cfg:  twoProjects().Obj(),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				// proj-a runs 2 of its 4 a100: job 77 may start on the other 2 of the 4 idle.
				return b.Testbed(4, 0, 8).Jobs(bobInQuota()...).Jobs(runningA100(20, 2, "proj-a", time.Hour)...).
					Jobs(pendingA100(5, 3, "proj-b")...).
					Unreadable(77, proj("proj-a"), "guar-proj-a", policy.StatePending, badGres)
			},
			want: []string{"lend 5 proj-b", "lend 6 proj-b"},
			explain: map[uint32]policytest.Says{
				// The figure is the case: the guarantee's 2 left are kept back.
				77: {Code: policy.CodeUnreadable, Words: "2 a100 idle kept back, not lent"},
				7:  {Code: policy.CodeNoIdleGPUs},
			},
		},
		{
			name: "pending in another type's guarantee: lending of a100 goes on",
			cfg:  twoProjects().Obj(),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Testbed(4, 0, 8).Jobs(bobInQuota()...).Jobs(pendingA100(5, 1, "proj-b")...).
					Unreadable(77, "proj-c", "guar-proj-c", policy.StatePending, badGres)
			},
			want:    []string{"lend 5 proj-b"},
			explain: map[uint32]policytest.Says{77: {Code: policy.CodeUnreadable, Words: "2 v100 idle kept back"}}, // the figure: proj-c's room
		},
		{
			name: "its own project is neither lent to nor returned on its counts; other projects are lent",
			cfg:  twoProjects().Obj(),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				// proj-b runs 3 in its guarantee: without job 77 its borrower 9 would return
				// (room for 1), and its pending job 5 could borrow.
				return b.Testbed(4, 0, 8).Jobs(runningA100(1, 3, "proj-b", time.Minute)...).Jobs(pendingA100(5, 1, "proj-b")...).
					Jobs(policytest.MakeJob(9, "proj-b").Borrowed().Reason("Resources").GPU("a100", 1).Obj()).
					Jobs(runningA100(20, 4, "proj-a", time.Hour)...).Jobs(pendingA100(30, 1, "proj-a")...).
					Unreadable(77, "proj-b", "guar-proj-b", policy.StateRunning, "tres-alloc: TRES: bad token")
			},
			want: []string{"lend 30 proj-a"},
			explain: map[uint32]policytest.Says{
				5:  {Code: policy.CodeUnaccounted},
				9:  {Code: policy.CodeUnaccounted},
				77: {Code: policy.CodeUnreadable},
			},
		},
		{
			name: "a borrower that cannot start is still returned in an unaccounted project",
			cfg:  twoProjects().Obj(),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Testbed(4, 0, 8).Jobs(bobInQuota()...).
					Jobs(policytest.MakeJob(9, "proj-b").Borrowed().Reason("JobHeldUser").GPU("a100", 1).Obj()).
					Unreadable(77, "proj-b", "guar-proj-b", policy.StatePending, badGres)
			},
			want: []string{"return 9 proj-b"},
		},
		{
			name: "pending in a borrow QOS: what the project may still borrow is kept back",
			cfg:  twoProjects(policytest.BorrowLimit(1)).Obj(),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Testbed(4, 0, 8).Jobs(bobInQuota()...).Jobs(runningA100(20, 4, "proj-a", time.Hour)...).
					Jobs(pendingA100(30, 1, "proj-a")...).
					Unreadable(77, "proj-b", "borrow-proj-b", policy.StatePending, badGres)
			},
			want:    []string{"lend 30 proj-a"},
			explain: map[uint32]policytest.Says{77: {Code: policy.CodeUnreadable, Words: "1 a100 idle kept back"}}, // the figure: proj-b's borrowing limit
			check: func(t *testing.T, plan *policy.Plan) {
				for _, m := range plan.Moves {
					if m.JobID == 77 {
						t.Errorf("the unreadable job was moved: %+v", m)
					}
				}
			},
		},
		{
			name: "pending in a borrow QOS without a borrowing limit: every idle GPU may be its, nothing is lent",
			cfg:  twoProjects().Obj(),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Testbed(4, 0, 8).Jobs(bobInQuota()...).Jobs(runningA100(20, 4, "proj-a", time.Hour)...).
					Jobs(pendingA100(30, 1, "proj-a")...).
					Unreadable(77, "proj-b", "borrow-proj-b", policy.StatePending, badGres)
			},
			explain: map[uint32]policytest.Says{77: {Code: policy.CodeUnreadable, Words: "4 a100 + 8 v100 idle kept back"}, 30: {Code: policy.CodeNoIdleGPUs}}, // the figure: every idle GPU
		},
		{
			name: "running in a borrow QOS under lending limits: nothing is lent",
			cfg:  twoProjects().LendLimit("a100", 4).Obj(),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Testbed(4, 0, 8).Jobs(bobInQuota()...).Jobs(runningA100(20, 4, "proj-a", time.Hour)...).
					Jobs(pendingA100(30, 1, "proj-a")...).
					Unreadable(77, "proj-b", "borrow-proj-b", policy.StateRunning, badGres)
			},
			explain: map[uint32]policytest.Says{30: {Code: policy.CodeNoLends}},
			check: func(t *testing.T, plan *policy.Plan) {
				// A guess must never make a project's borrowers preemptible: proj-b holds its
				// guarantee and nothing known beyond it.
				for _, q := range plan.QOS {
					if q.Name == "guar-proj-a" && q.Preempt != nil && strings.Contains(strings.Join(q.Preempt.To, ","), "borrow-proj-b") {
						t.Errorf("guar-proj-a may preempt borrow-proj-b on a guess: %+v", q.Preempt)
					}
				}
			},
		},
		{
			name: "running in a borrow QOS without lending limits: other projects are lent",
			cfg:  twoProjects().Obj(),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Testbed(4, 0, 8).Jobs(bobInQuota()...).Jobs(runningA100(20, 4, "proj-a", time.Hour)...).
					Jobs(pendingA100(30, 1, "proj-a")...).
					Unreadable(77, "proj-b", "borrow-proj-b", policy.StateRunning, badGres)
			},
			want: []string{"lend 30 proj-a"},
		},
		{
			name: "a job under no project changes nothing",
			cfg:  twoProjects().Obj(),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Testbed(4, 0, 8).Jobs(bobInQuota()...).Jobs(pendingA100(5, 1, "proj-b")...).
					Unreadable(77, "other", "normal", policy.StatePending, badGres)
			},
			want:    []string{"lend 5 proj-b"},
			explain: map[uint32]policytest.Says{77: {Code: policy.CodeUnreadableUnmanaged}},
		},
	})
}

func TestUnreadableJobsAreNamedInTheNotes(t *testing.T) {
	cfg := twoProjects().Obj()
	snap := policytest.MakeSnapshot().Testbed(4, 0, 8).Jobs(bobInQuota()...).Jobs(pendingA100(5, 1, "proj-b")...).
		Unreadable(78, "proj-c", "guar-proj-c", policy.StatePending, "GPU request tres_per_task \"gres/gpu:x=\"").
		Unreadable(77, "proj-c", "guar-proj-c", policy.StatePending, badGres).Synced(t, cfg).Obj()
	plan := policy.BuildPlan(cfg, snap, policytest.T0)
	if !plan.Acting || len(plan.Unreadable) != 2 {
		t.Fatalf("acting %v, unreadable %+v", plan.Acting, plan.Unreadable)
	}
	if len(plan.Notes) < 2 || !strings.HasPrefix(plan.Notes[0], "job 77 (account proj-c, QOS guar-proj-c, pending) cannot be read ("+badGres+")") ||
		!strings.HasPrefix(plan.Notes[1], "job 78 ") {
		t.Errorf("notes = %q", plan.Notes)
	}
	// Both wait in proj-c's guarantee: its room (2 v100) is kept back once, not twice, so
	// exactly one of them names those GPUs as kept back for it.
	keptOnce := 0
	for _, id := range []uint32{77, 78} {
		x, _ := plan.Explanation(id)
		if x.Code != policy.CodeUnreadable {
			t.Errorf("job %d: code %s, want %s", id, x.Code, policy.CodeUnreadable)
		}
		if strings.Contains(x.Text, "2 v100") {
			keptOnce++
		}
	}
	if keptOnce != 1 {
		t.Errorf("%d of jobs 77 and 78 name the 2 v100 kept back, want 1", keptOnce)
	}
}
