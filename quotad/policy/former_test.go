package policy_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/quotad/policy"
	"github.com/slurmbridge/slurmbridge/quotad/policy/policytest"
)

var guaranteed = []string{"guar-proj-a", "guar-proj-b", "guar-proj-c"}

// oldSharedBorrow is a cluster just upgraded from one borrow QOS shared by every project: the
// per-project structure is in place (as after quotad's first sync), but QOS borrow still
// exists with PreemptMode requeue, every guaranteed QOS still preempts it, proj-b's account
// still allows it, and bob's job 9 (1 a100) runs in it, lent by the old quotad.
func oldSharedBorrow(t *testing.T, cfg *policy.Config) *policy.Snapshot {
	t.Helper()
	snap := policytest.MakeSnapshot().Testbed(2, 4, 8).Jobs(bobInQuota()...).Synced(t, cfg).Obj()
	snap.QOS = append(snap.QOS, policy.QOS{Name: "borrow", PreemptMode: "requeue", PreemptExemptTime: 20 * time.Second})
	for i := range snap.QOS {
		if slices.Contains(guaranteed, snap.QOS[i].Name) {
			snap.QOS[i].Preempt = append(snap.QOS[i].Preempt, "borrow")
		}
	}
	for i := range snap.Accounts {
		if snap.Accounts[i].Name == "proj-b" {
			snap.Accounts[i].QOS = append(snap.Accounts[i].QOS, "borrow")
		}
	}
	snap.Jobs = append(snap.Jobs, policytest.MakeJob(9, "proj-b").GPU("a100", 1).QOS("borrow").Running(time.Hour).Obj())
	return snap
}

// job returns a pointer to the snapshot's job id.
func job(t *testing.T, snap *policy.Snapshot, id uint32) *policy.Job {
	t.Helper()
	for i := range snap.Jobs {
		if snap.Jobs[i].ID == id {
			return &snap.Jobs[i]
		}
	}
	t.Fatalf("no job %d", id)
	return nil
}

// preemptsAfter is each guaranteed QOS's Preempt list once plan's sync is applied to snap.
func preemptsAfter(t *testing.T, snap *policy.Snapshot, plan *policy.Plan) map[string][]string {
	t.Helper()
	policytest.ApplySync(snap, plan)
	out := map[string][]string{}
	for _, g := range guaranteed {
		out[g] = policy.NormalizeNames(qosNamed(t, snap, g).Preempt)
	}
	return out
}

// A QOS that a guaranteed QOS preempts in Slurm and that the table does not name (the shared
// borrow QOS of an older layout) stays in the Preempt lists that name it while a job of a
// project runs in it on GPUs, counted as that project's borrower, so that no claim waits on
// it; and only where Slurm would requeue, never kill, whatever it preempts there, and no site
// user may still submit into it. Otherwise, or once it empties, it is dropped as before.
func TestFormerBorrowQOSStaysInTheListsThatNameIt(t *testing.T) {
	for _, tt := range []struct {
		name string
		edit func(t *testing.T, s *policy.Snapshot)
		// keptBy are the guaranteed QOS whose lists keep borrow after the plan.
		keptBy   []string
		borrowed int  // proj-b's borrowed a100 in the plan
		over     bool // proj-b holds more than its guarantee, so its own borrow QOS is in the lists
		note     string
		explain  policytest.Says
	}{
		{
			name:   "a borrower of the old shared QOS: kept where named, counted as proj-b's borrower",
			keptBy: guaranteed, borrowed: 1, over: true,
			explain: policytest.Says{Code: policy.CodeReclaimable, Words: "runs borrowed in borrow (1 a100), a QOS the quota table does not name that guar-proj-a, guar-proj-b, guar-proj-c preempted"},
		},
		{
			name: "named by guar-proj-a only: kept there alone",
			edit: func(t *testing.T, s *policy.Snapshot) {
				for i := range s.QOS {
					if s.QOS[i].Name != "guar-proj-a" {
						s.QOS[i].Preempt = slices.DeleteFunc(s.QOS[i].Preempt, func(q string) bool { return q == "borrow" })
					}
				}
			},
			keptBy: []string{"guar-proj-a"}, borrowed: 1, over: true,
			explain: policytest.Says{Code: policy.CodeReclaimable, Words: "that guar-proj-a preempted"},
		},
		{
			name: "proj-b within its guarantee, borrower counted: still open to claims, as when it was lent",
			edit: func(t *testing.T, s *policy.Snapshot) {
				s.Jobs = slices.DeleteFunc(s.Jobs, func(j policy.Job) bool { return j.ID == 1 || j.ID == 2 })
			},
			keptBy: guaranteed, borrowed: 1,
			explain: policytest.Says{Code: policy.CodeReclaimable, Words: "proj-b holds 3 GPUs (2 in quota, 1 borrowed) of a 4-GPU guarantee, and a pending job in any of those QOS may reclaim it whatever proj-b holds"},
		},
		{
			name:     "emptied: dropped",
			edit:     func(t *testing.T, s *policy.Snapshot) { s.Jobs = s.Jobs[:len(s.Jobs)-1] },
			borrowed: 0,
		},
		{
			name: "its last job requeued, waiting there: dropped (adopted once proj-b's list no longer allows borrow)",
			edit: func(t *testing.T, s *policy.Snapshot) {
				j := job(t, s, 9)
				j.State, j.Reason, j.StartTime = policy.StatePending, "BeginTime", time.Time{}
			},
			explain: policytest.Says{Code: policy.CodeOtherQOS, Words: "waits in QOS borrow"},
		},
		{
			name: "only a CPU job of a project runs in it: dropped",
			edit: func(t *testing.T, s *policy.Snapshot) {
				j := job(t, s, 9)
				j.GPUsPerNode = nil
			},
		},
		{
			name:     "a job in it that Slurm cannot requeue: dropped, as a claim would kill it",
			edit:     func(t *testing.T, s *policy.Snapshot) { job(t, s, 9).Requeue = false },
			note:     "QOS borrow, which guar-proj-a, guar-proj-b, guar-proj-c preempt now, leaves their Preempt lists although jobs still run in it: job 9 (proj-b) runs in it and Slurm cannot requeue it",
			explain:  policytest.Says{Code: policy.CodeOtherQOS, Words: "runs in QOS borrow"},
			borrowed: 0,
		},
		{
			name: "its PreemptMode is cancel: dropped",
			edit: func(t *testing.T, s *policy.Snapshot) {
				for i := range s.QOS {
					if s.QOS[i].Name == "borrow" {
						s.QOS[i].PreemptMode = "cancel"
					}
				}
			},
			note: "its PreemptMode is cancel, not requeue",
		},
		{
			name: "the cluster's PreemptMode (unknown to quotad): dropped",
			edit: func(t *testing.T, s *policy.Snapshot) {
				for i := range s.QOS {
					if s.QOS[i].Name == "borrow" {
						s.QOS[i].PreemptMode = "cluster"
					}
				}
			},
			note: "its PreemptMode is cluster, not requeue",
		},
		{
			name: "the site's QOS, in the user's own QOS list: dropped, never turned into a borrow QOS",
			edit: func(t *testing.T, s *policy.Snapshot) {
				s.Users = append(s.Users, policy.UserAssociation{User: "u-proj-b", Account: "proj-b", QOS: []string{"borrow", "guar-proj-b", "borrow-proj-b", "elastic-proj-b"}})
			},
			note: "user u-proj-b may use it in account proj-b (a QOS list of their own)",
		},
		{
			name: "a job of an account under no project runs in it too: dropped",
			edit: func(t *testing.T, s *policy.Snapshot) {
				s.Jobs = append(s.Jobs, policytest.MakeJob(10, "other").GPU("a100", 1).QOS("borrow").Running(time.Hour).Obj())
			},
			note: "job 10 of account other, which is under no project, runs in it",
		},
		{
			name: "a job quotad cannot read runs in it: dropped",
			edit: func(t *testing.T, s *policy.Snapshot) {
				s.Unreadable = append(s.Unreadable, policy.UnreadableJob{ID: 11, Account: "proj-a", User: "u-proj-a", QOS: "borrow", State: policy.StateRunning, Problem: `tres_per_node "gres/gpu:x"`})
			},
			note: "job 11 runs in it and cannot be read",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := twoProjects().Obj()
			snap := oldSharedBorrow(t, cfg)
			if tt.edit != nil {
				tt.edit(t, snap)
			}
			plan := policy.BuildPlan(cfg, snap, policytest.T0)
			if tt.explain.Code != "" {
				policytest.CheckExplains(t, plan, map[uint32]policytest.Says{9: tt.explain})
			}
			noted := slices.ContainsFunc(plan.Notes, func(n string) bool { return tt.note != "" && strings.Contains(n, tt.note) })
			if tt.note != "" && !noted {
				t.Errorf("no note says %q: %q", tt.note, plan.Notes)
			}
			if tt.note == "" && slices.ContainsFunc(plan.Notes, func(n string) bool { return strings.Contains(n, "QOS borrow") }) {
				t.Errorf("a note about QOS borrow: %q", plan.Notes)
			}
			for _, p := range plan.Projects {
				for _, ts := range p.ByType {
					if p.Account == "proj-b" && ts.Type == "a100" && ts.Borrowed != tt.borrowed {
						t.Errorf("proj-b borrows %d a100, want %d", ts.Borrowed, tt.borrowed)
					}
				}
			}
			for _, a := range plan.Accounts {
				if a.QOS != nil && slices.Contains(a.QOS.To, "borrow") {
					t.Errorf("%s: no new job may enter the old QOS", a)
				}
			}
			after := preemptsAfter(t, snap, plan)
			for _, g := range guaranteed {
				if got, want := slices.Contains(after[g], "borrow"), slices.Contains(tt.keptBy, g); got != want {
					t.Errorf("%s preempts %q: borrow kept %v, want %v", g, after[g], got, want)
				}
				// proj-b's own borrow QOS is there exactly while proj-b holds more than its
				// guarantee, the old borrower counted.
				if got, want := slices.Contains(after[g], "borrow-proj-b"), tt.over; got != want {
					t.Errorf("%s preempts %q: borrow-proj-b there %v, want %v", g, after[g], got, want)
				}
			}
			// The next cycle sees its own sync and keeps to it: nothing re-added, nothing churned.
			again := policy.BuildPlan(cfg, snap, policytest.T0)
			for _, c := range again.QOS {
				if c.Preempt != nil {
					t.Errorf("the next cycle changes a Preempt list again: %s", c)
				}
			}
		})
	}
}

// The upgrade's whole course, cycle by cycle: borrow stays in the lists while bob's old
// borrower runs; a claim requeues it; it waits in borrow, is adopted into guar-proj-b, and
// borrow leaves the lists for good.
func TestFormerBorrowQOSLeavesOnceEmpty(t *testing.T) {
	cfg := twoProjects().Obj()
	snap := oldSharedBorrow(t, cfg)
	plan := policy.BuildPlan(cfg, snap, policytest.T0)
	if after := preemptsAfter(t, snap, plan); !slices.Contains(after["guar-proj-a"], "borrow") {
		t.Fatalf("guar-proj-a preempts %q on the upgrade's first cycle, want borrow kept", after["guar-proj-a"])
	}
	// alice's claim: Slurm requeues job 9, which waits in borrow.
	j := job(t, snap, 9)
	j.State, j.Reason, j.StartTime = policy.StatePending, "BeginTime", time.Time{}
	plan = policy.BuildPlan(cfg, snap, policytest.T0)
	if m := plan.Moves; len(m) != 1 || m[0].JobID != 9 || m[0].Kind != policy.Adopt || m[0].From != "borrow" || m[0].To != "guar-proj-b" {
		t.Errorf("moves %+v, want job 9 adopted from borrow into guar-proj-b", m)
	}
	after := preemptsAfter(t, snap, plan)
	for _, g := range guaranteed {
		if slices.Contains(after[g], "borrow") {
			t.Errorf("%s still preempts borrow once no job runs in it: %q", g, after[g])
		}
	}
	// Started again in borrow before the adoption (a Slurm that runs a job in a QOS its account
	// no longer allows): no list names borrow any more, so it is not kept again.
	j.State, j.StartTime = policy.StateRunning, policytest.T0
	plan = policy.BuildPlan(cfg, snap, policytest.T0)
	for g, l := range preemptsAfter(t, snap, plan) {
		if slices.Contains(l, "borrow") {
			t.Errorf("%s preempts borrow again: %q", g, l)
		}
	}
}
