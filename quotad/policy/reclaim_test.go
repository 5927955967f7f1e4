package policy_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/quotad/policy"
	"github.com/slurmbridge/slurmbridge/quotad/policy/policytest"
)

func qosNamed(t *testing.T, s *policy.Snapshot, name string) policy.QOS {
	t.Helper()
	for _, q := range s.QOS {
		if q.Name == name {
			return q
		}
	}
	t.Fatalf("no QOS %s in %+v", name, s.QOS)
	return policy.QOS{}
}

// borrowers makes n running one-a100 borrowers of account from id first on.
func borrowers(first uint32, n int, account string) []policy.Job {
	return policytest.Jobs(first, n, func(id uint32) *policytest.JobWrapper {
		return policytest.MakeJob(id, account).GPU("a100", 1).Borrowed().Running(time.Hour)
	})
}

// Reclaim follows usage: who may lose borrowers is decided every cycle from what each project
// holds, borrowers counted, and Slurm's QOS preemption is told through the guaranteed QOS'
// Preempt lists (who) and the borrow QOS' Priority (in which order).
func TestReclaimOrder(t *testing.T) {
	tests := []struct {
		name        string
		cfg         *policy.Config
		jobs        []policy.Job
		preemptable []string // every guaranteed QOS' Preempt list, sorted
		lowestFirst []string // QOS whose Priority must rise in this order: who a claim takes first
		base        int      // no borrow or elastic QOS's Priority below it
		explain     map[uint32]policytest.Says
	}{
		{
			// bob had 4 in quota and 4 borrowed; his in-quota jobs ended; carol borrowed the
			// freed a100; alice claims. Only carol may lose GPUs.
			name: "a project back within its guarantee keeps its borrowers; the one over it loses",
			cfg:  twoProjects().Obj(),
			jobs: slices.Concat(borrowers(1, 4, "proj-b"), borrowers(5, 4, "proj-c"),
				policytest.Jobs(9, 4, func(id uint32) *policytest.JobWrapper {
					return policytest.MakeJob(id, "proj-a").GPU("a100", 1).Reason("Resources")
				})),
			preemptable: []string{"borrow-proj-c", "elastic-proj-c"},
			lowestFirst: []string{"elastic-proj-c", "borrow-proj-c"},
			explain: map[uint32]policytest.Says{
				1: {Code: policy.CodeNotReclaimable, Words: "job 1 runs borrowed in borrow-proj-b (1 a100): proj-b holds 4 GPUs (0 in quota, 4 borrowed) of a 4-GPU guarantee, borrowers counted, which is within its guarantee, so no claim may reclaim it"},
				5: {Code: policy.CodeReclaimable, Words: "job 5 runs borrowed in borrow-proj-c (1 a100): proj-c holds 4 GPUs (0 in quota, 4 borrowed) of a 2-GPU guarantee, 4 GPU(s) beyond its guarantee: 1st of 1 over-quota projects to lose borrowers"},
			},
		},
		{
			name:        "bob over his guarantee with in-quota jobs and borrowers may lose borrowers",
			cfg:         twoProjects().Obj(),
			jobs:        slices.Concat(bobInQuota(), borrowers(5, 4, "proj-b")),
			preemptable: []string{"borrow-proj-b", "elastic-proj-b"},
			lowestFirst: []string{"elastic-proj-b", "borrow-proj-b"},
		},
		{
			name: "the project furthest over its guarantee loses first",
			cfg:  twoProjects().Obj(),
			// proj-a 2 over (a100 4 guaranteed), proj-c 3 over (no a100 guaranteed).
			jobs: slices.Concat(
				runningA100(1, 4, "proj-a", time.Hour),
				borrowers(5, 2, "proj-a"), borrowers(7, 3, "proj-c")),
			preemptable: []string{"borrow-proj-a", "borrow-proj-c", "elastic-proj-a", "elastic-proj-c"},
			lowestFirst: []string{"elastic-proj-c", "elastic-proj-a", "borrow-proj-c", "borrow-proj-a"},
			explain: map[uint32]policytest.Says{
				5: {Code: policy.CodeReclaimable, Words: "2 GPU(s) beyond its guarantee: 2nd of 2 over-quota projects to lose borrowers"},
				7: {Code: policy.CodeReclaimable, Words: "3 GPU(s) beyond its guarantee: 1st of 2 over-quota projects to lose borrowers"},
			},
		},
		{
			name: "per unit of weight: a heavier project over by more may lose later",
			cfg: policytest.MakeConfig().Project("proj-a", policytest.GPUs("a100", 4), policytest.Weight(4)).Project("proj-b", policytest.GPUs("a100", 4)).
				Project("proj-c", policytest.GPUs("v100", 2)).Obj(),
			// proj-a 4 over at weight 4 (1 per unit), proj-c 3 over at weight 1.
			jobs:        slices.Concat(borrowers(1, 8, "proj-a"), borrowers(9, 3, "proj-c")),
			preemptable: []string{"borrow-proj-a", "borrow-proj-c", "elastic-proj-a", "elastic-proj-c"},
			lowestFirst: []string{"elastic-proj-c", "elastic-proj-a", "borrow-proj-c", "borrow-proj-a"},
		},
		{
			name: "the borrow priority setting is the base of the order",
			cfg: func() *policy.Config {
				c := twoProjects().Obj()
				c.Settings.BorrowPriority = policytest.IntP(100)
				return c
			}(),
			jobs:        slices.Concat(bobInQuota(), borrowers(5, 1, "proj-b")),
			preemptable: []string{"borrow-proj-b", "elastic-proj-b"},
			lowestFirst: []string{"elastic-proj-b", "borrow-proj-b"},
			base:        100,
		},
		{
			name:        "nobody over quota: no guaranteed QOS may preempt",
			cfg:         twoProjects().Obj(),
			jobs:        slices.Concat(bobInQuota(), borrowers(5, 2, "proj-a")),
			preemptable: []string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := policytest.MakeSnapshot().Testbed(0, 4, 8).Jobs(tt.jobs...).Synced(t, tt.cfg).Obj()
			for _, p := range tt.cfg.Projects {
				g := qosNamed(t, snap, tt.cfg.Settings.GuaranteedQOSName(p.Account))
				if got := policy.NormalizeNames(g.Preempt); !reflect.DeepEqual(got, tt.preemptable) {
					t.Errorf("%s may preempt %q, want %q", g.Name, got, tt.preemptable)
				}
			}
			for i := 1; i < len(tt.lowestFirst); i++ {
				lo, hi := qosNamed(t, snap, tt.lowestFirst[i-1]), qosNamed(t, snap, tt.lowestFirst[i])
				if lo.Priority >= hi.Priority {
					t.Errorf("%s has priority %d, %s %d: a claim would not take the first before the second", lo.Name, lo.Priority, hi.Name, hi.Priority)
				}
			}
			for _, q := range snap.QOS {
				if !strings.HasPrefix(q.Name, "guar-") && q.Name != "normal" && q.Priority < tt.base {
					t.Errorf("%s priority %d, below the base %d", q.Name, q.Priority, tt.base)
				}
			}
			plan := policy.BuildPlan(tt.cfg, snap, policytest.T0)
			policytest.CheckExplains(t, plan, tt.explain)
		})
	}
}

// When a project's in-quota jobs end, the next plan takes its borrow QOS off every Preempt
// list at once, and still moves jobs: the reclaim order never holds lends back.
func TestReclaimOrderFollowsUsageWithoutHoldingMoves(t *testing.T) {
	cfg := twoProjects().Obj()
	snap := policytest.MakeSnapshot().Testbed(0, 4, 8).Jobs(slices.Concat(bobInQuota(), borrowers(5, 4, "proj-b"))...).Synced(t, cfg).Obj()
	if got := qosNamed(t, snap, "guar-proj-a").Preempt; !reflect.DeepEqual(got, []string{"borrow-proj-b", "elastic-proj-b"}) {
		t.Fatalf("while bob is over quota guar-proj-a preempts %q", got)
	}
	// bob's in-quota jobs end; carol waits over her guarantee for the a100 they freed.
	snap.Jobs = slices.Concat(borrowers(5, 4, "proj-b"), []policy.Job{policytest.MakeJob(20, "proj-c").GPU("a100", 2).Obj()})
	snap.Nodes = policytest.MakeSnapshot().Testbed(4, 4, 8).Obj().Nodes
	plan := policy.BuildPlan(cfg, snap, policytest.T0)
	// carol alone is in the order now: every QOS keeps its Priority, only who may be taken changes.
	want := []string{
		"modify qos guar-proj-a: preempt [borrow-proj-b,elastic-proj-b]->[borrow-proj-c,elastic-proj-c]",
		"modify qos guar-proj-b: preempt [borrow-proj-b,elastic-proj-b]->[borrow-proj-c,elastic-proj-c]",
		"modify qos guar-proj-c: preempt [borrow-proj-b,elastic-proj-b]->[borrow-proj-c,elastic-proj-c]",
	}
	if got := syncLines(plan); !reflect.DeepEqual(got, want) {
		t.Fatalf("sync:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := policytest.MoveLines(plan); !reflect.DeepEqual(got, []string{"lend 20 proj-c"}) {
		t.Fatalf("moves %q (notes %q)", got, plan.Notes)
	}
}
