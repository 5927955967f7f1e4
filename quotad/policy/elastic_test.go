package policy_test

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/quotad/policy"
	"github.com/slurmbridge/slurmbridge/quotad/policy/policytest"
)

// Every elastic QOS has a lower priority than every borrow QOS whatever the reclaim order and
// the base, so Slurm's preemption (lowest QOS priority first) takes elastic workers before any
// other borrower; and each guaranteed QOS may preempt a project's borrow and elastic QOS
// together, only while the project holds more than its guarantee.
func TestElasticQOSPriorityIsBelowEveryBorrowQOS(t *testing.T) {
	for _, base := range []*int{nil, policytest.IntP(0), policytest.IntP(100)} {
		for projects := 1; projects <= 5; projects++ {
			for over := 0; over <= projects; over++ {
				cb := policytest.MakeConfig()
				var js []policy.Job
				id := uint32(1)
				for i := range projects {
					acct := fmt.Sprintf("p%d", i)
					cb = cb.Project(acct, policytest.GPUs("a100", 1))
					if i < over { // over its guarantee: an in-quota job, i+1 borrowers and a worker
						js = append(js, policytest.MakeJob(id, acct).GPU("a100", 1).Running(time.Hour).Obj())
						js = append(js, policytest.Jobs(id+1, i+1, func(id uint32) *policytest.JobWrapper {
							return policytest.MakeJob(id, acct).GPU("a100", 1).Borrowed().Running(time.Hour)
						})...)
						js = append(js, policytest.MakeJob(id+50, acct).GPU("a100", 1).Worker(id).Running(time.Hour).Obj())
						id += 100
					}
				}
				cfg := cb.Obj()
				cfg.Settings.BorrowPriority = base
				snap := policytest.MakeSnapshot().Pool("a100", "a100", 64, 0).Jobs(js...).Synced(t, cfg).Obj()
				name := fmt.Sprintf("base %v, %d projects, %d over", base, projects, over)
				maxElastic, minBorrow := -1, int(^uint(0)>>1)
				var wantPreempt []string
				for i, p := range cfg.Projects {
					e, b := qosNamed(t, snap, cfg.Settings.ElasticQOSName(p.Account)).Priority, qosNamed(t, snap, cfg.Settings.BorrowQOSName(p.Account)).Priority
					maxElastic, minBorrow = max(maxElastic, e), min(minBorrow, b)
					if base != nil && e < *base {
						t.Errorf("%s: elastic-%s priority %d below the base %d", name, p.Account, e, *base)
					}
					if i < over {
						wantPreempt = append(wantPreempt, cfg.Settings.BorrowQOSName(p.Account), cfg.Settings.ElasticQOSName(p.Account))
					}
				}
				if maxElastic >= minBorrow {
					t.Errorf("%s: an elastic QOS has priority %d, a borrow QOS %d: elastic workers would not be reclaimed first", name, maxElastic, minBorrow)
				}
				wantPreempt = policy.NormalizeNames(wantPreempt)
				for _, p := range cfg.Projects {
					if got := policy.NormalizeNames(qosNamed(t, snap, cfg.Settings.GuaranteedQOSName(p.Account)).Preempt); !reflect.DeepEqual(got, wantPreempt) {
						t.Errorf("%s: guar-%s preempts %q, want %q", name, p.Account, got, wantPreempt)
					}
				}
				// Within each kind the reclaim order holds: the project furthest over (the last
				// one over, with the most borrowers) lowest.
				for i := 1; i < over; i++ {
					lo, hi := cfg.Projects[i].Account, cfg.Projects[i-1].Account
					if qosNamed(t, snap, cfg.Settings.ElasticQOSName(lo)).Priority >= qosNamed(t, snap, cfg.Settings.ElasticQOSName(hi)).Priority ||
						qosNamed(t, snap, cfg.Settings.BorrowQOSName(lo)).Priority >= qosNamed(t, snap, cfg.Settings.BorrowQOSName(hi)).Priority {
						t.Errorf("%s: %s is further over than %s but not below it", name, lo, hi)
					}
				}
			}
		}
	}
}

// An elastic worker counts as its project's borrowed GPUs: it puts the project over its
// guarantee (or not), and its explanation names its main job, says it is reclaimed first and
// that elasticd counts a reclaim as a shrink.
func TestElasticWorkersCountAsBorrowed(t *testing.T) {
	cfg := twoProjects().Obj()
	t.Run("over the guarantee: reclaimable, first", func(t *testing.T) {
		// alice: main job and 3 more in quota (4/4 a100), 1 worker on borrowed a100.
		js := slices.Concat(
			[]policy.Job{policytest.MakeJob(1, "proj-a").GPU("a100", 1).Running(time.Hour).Obj()},
			runningA100(2, 3, "proj-a", time.Hour),
			[]policy.Job{policytest.MakeJob(10, "proj-a").GPU("a100", 1).Worker(1).Running(time.Hour).Obj()},
			borrowers(20, 1, "proj-c"))
		snap := policytest.MakeSnapshot().Testbed(2, 4, 8).Jobs(js...).Synced(t, cfg).Obj()
		if got := policy.NormalizeNames(qosNamed(t, snap, "guar-proj-b").Preempt); !reflect.DeepEqual(got, []string{"borrow-proj-a", "borrow-proj-c", "elastic-proj-a", "elastic-proj-c"}) {
			t.Fatalf("guar-proj-b preempts %q", got)
		}
		plan := policy.BuildPlan(cfg, snap, policytest.T0)
		text, _ := plan.Explain(10)
		for _, want := range []string{
			"job 10 is an elastic worker of main job 1 on borrowed GPUs in elastic-proj-a (1 a100)",
			"proj-a holds 5 GPUs (4 in quota, 1 borrowed) of a 4-GPU guarantee, 1 GPU(s) beyond its guarantee",
			"elastic workers are reclaimed first, before any other borrower (elastic-proj-a has the lowest QOS priority), since losing one costs a job a transition, not its progress",
			"elasticd counts that as a shrink",
		} {
			if !strings.Contains(text, want) {
				t.Errorf("explain 10:\n got %q\nwant %q", text, want)
			}
		}
		for _, ps := range plan.Projects {
			if ps.Account != "proj-a" {
				continue
			}
			for _, row := range ps.ByType {
				if row.Type == "a100" && (row.Borrowed != 1 || row.Elastic != 1 || row.InUse != 4) {
					t.Errorf("proj-a a100 %+v, want 4 in use, 1 borrowed, all of it elastic", row)
				}
			}
			if !strings.Contains(ps.Summary, "1 borrowed (1 by elastic workers)") {
				t.Errorf("summary %q", ps.Summary)
			}
		}
	})
	t.Run("within the guarantee, workers counted: never reclaimed", func(t *testing.T) {
		js := []policy.Job{
			policytest.MakeJob(1, "proj-a").GPU("a100", 2).Running(time.Hour).Obj(),
			policytest.MakeJob(10, "proj-a").GPU("a100", 2).Worker(1).Running(time.Hour).Obj(),
		}
		snap := policytest.MakeSnapshot().Testbed(4, 4, 8).Jobs(js...).Synced(t, cfg).Obj()
		if got := qosNamed(t, snap, "guar-proj-b").Preempt; len(got) != 0 {
			t.Fatalf("guar-proj-b preempts %q although proj-a holds 4 of its 4", got)
		}
		policytest.CheckExplains(t, policy.BuildPlan(cfg, snap, policytest.T0), map[uint32]policytest.Says{10: {Code: policy.CodeNotReclaimable}})
	})
	t.Run("a name that is not the user's job's is a plain worker", func(t *testing.T) {
		js := []policy.Job{
			policytest.MakeJob(1, "proj-b").GPU("a100", 1).Running(time.Hour).Obj(), // bob's, not alice's
			policytest.MakeJob(10, "proj-a").GPU("a100", 1).Worker(1).Running(time.Hour).Obj(),
			policytest.MakeJob(11, "proj-a").GPU("a100", 1).Worker(99).Running(time.Hour).Obj(), // no such job
		}
		plan := policy.BuildPlan(cfg, policytest.MakeSnapshot().Testbed(4, 4, 8).Jobs(js...).Synced(t, cfg).Obj(), policytest.T0)
		// The words are the case: which main job they name (none), not the kind of explanation.
		for _, id := range []uint32{10, 11} {
			if text, _ := plan.Explain(id); !strings.Contains(text, fmt.Sprintf("job %d is an elastic worker on borrowed GPUs", id)) {
				t.Errorf("explain %d: %q", id, text)
			}
		}
	})
}

// A project's borrowing limit counts its borrow and elastic QOS together: a running worker
// leaves room for fewer lends.
func TestBorrowingLimitCountsElasticWorkers(t *testing.T) {
	cfg := twoProjects().Obj()
	cfg.Projects[1].BorrowLimit = policytest.IntP(2) // proj-b
	js := slices.Concat(bobInQuota(),
		[]policy.Job{policytest.MakeJob(10, "proj-b").GPU("a100", 1).Worker(1).Running(time.Hour).Obj()},
		pendingA100(20, 3, "proj-b"))
	plan := policy.BuildPlan(cfg, policytest.MakeSnapshot().Testbed(3, 4, 8).Jobs(js...).Synced(t, cfg).Obj(), policytest.T0)
	if got := policytest.MoveLines(plan); !reflect.DeepEqual(got, []string{"lend 20 proj-b"}) {
		t.Fatalf("moves %q, want one lend (limit 2, a worker holds 1)", got)
	}
	// The figure is the case: the running worker counts among the 2 borrowed.
	policytest.CheckExplains(t, plan, map[uint32]policytest.Says{21: {Code: policy.CodeBorrowLimit, Words: "proj-b borrows 2 GPUs, limit 2"}})
}

// quotad leaves pending workers to elasticd: it never lends them into a borrow QOS nor returns
// them for a limit, only back into the guarantee when it has room (where nothing reclaims
// them), or when Slurm could not requeue them.
func TestPendingElasticWorkers(t *testing.T) {
	cfg := twoProjects().Obj()
	cfg.Projects[0].BorrowLimit = policytest.IntP(0) // proj-a may hold nothing borrowed
	tests := []struct {
		name  string
		jobs  []policy.Job
		moves []string
		code  policy.Code
	}{
		{
			name:  "over the guarantee: it waits, GPUs promised, limits or not",
			jobs:  slices.Concat(runningA100(1, 4, "proj-a", time.Hour), []policy.Job{policytest.MakeJob(10, "proj-a").GPU("a100", 1).Worker(1).Reason("Priority").Obj()}),
			moves: nil,
			code:  policy.CodeElasticWorker,
		},
		{
			name:  "the guarantee has room again: back into it",
			jobs:  []policy.Job{policytest.MakeJob(1, "proj-a").GPU("a100", 1).Running(time.Hour).Obj(), policytest.MakeJob(10, "proj-a").GPU("a100", 1).Worker(1).Reason("Priority").Obj()},
			moves: []string{"return 10 proj-a"},
			code:  policy.CodeElasticWorkerReturned,
		},
		{
			name:  "requeued by a reclaim: left to elasticd",
			jobs:  slices.Concat(runningA100(1, 4, "proj-a", time.Hour), []policy.Job{policytest.MakeJob(10, "proj-a").GPU("a100", 1).Worker(1).Reason("BeginTime").Obj()}),
			moves: nil,
			code:  policy.CodeNotStartable,
		},
		{
			name:  "Slurm could not requeue it: returned, as from a borrow QOS",
			jobs:  slices.Concat(runningA100(1, 4, "proj-a", time.Hour), []policy.Job{policytest.MakeJob(10, "proj-a").GPU("a100", 1).Worker(1).NoRequeue().Reason("Priority").Obj()}),
			moves: []string{"return 10 proj-a"},
			code:  policy.CodeReturnNotRequeueable,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan := policy.BuildPlan(cfg, policytest.MakeSnapshot().Testbed(4, 4, 8).Jobs(tt.jobs...).Synced(t, cfg).Obj(), policytest.T0)
			if got := policytest.MoveLines(plan); !reflect.DeepEqual(got, tt.moves) {
				t.Errorf("moves %q, want %q", got, tt.moves)
			}
			policytest.CheckExplains(t, plan, map[uint32]policytest.Says{10: {Code: tt.code}})
		})
	}
}
