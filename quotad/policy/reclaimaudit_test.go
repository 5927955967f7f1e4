package policy_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/quotad/policy"
	"github.com/slurmbridge/slurmbridge/quotad/policy/policytest"
)

// at is a time relative to the preemption, at T0.
func at(d time.Duration) time.Time { return policytest.T0.Add(d) }

func run(id uint32, account, qos string, gpus int, started, ended time.Duration, nodes ...string) policy.Run {
	r := policy.Run{JobID: id, Account: account, QOS: qos, GPUs: gpus, Nodes: nodes, Started: at(started)}
	if ended != 0 {
		r.Ended = at(ended)
	}
	return r
}

func preempted(r policy.Run) policy.Run { r.Preempted = true; return r }

// The audit pairs each reclaim with its claim and says whether Slurm took the fewest borrowed
// GPUs that would make room, and only borrowers.
func TestAuditReclaims(t *testing.T) {
	cfg := twoProjects().Obj() // PreemptExemptTime 30 s
	nodes := map[string]int{"a100-1": 4, "a100-2": 4}
	bobInQuota := run(1, "proj-b", "guar-proj-b", 4, -time.Hour, 0, "a100-1")
	claim := run(9, "proj-a", "guar-proj-a", 1, 2*time.Second, 0, "a100-2")
	tests := []struct {
		name    string
		runs    []policy.Run
		minimal bool
		lost    []uint32
		fewest  int
		would   []uint32
		text    string
	}{
		{
			name: "the older 3-GPU borrower for a 1-GPU claim: not minimal",
			runs: []policy.Run{bobInQuota, claim,
				preempted(run(2, "proj-b", "borrow-proj-b", 3, -time.Minute, time.Nanosecond, "a100-2")),
				run(3, "proj-b", "borrow-proj-b", 1, -time.Minute, 0, "a100-2")},
			lost: []uint32{2}, fewest: 1, would: []uint32{3},
			text: "job 9 of proj-a (1 GPU(s) on a100-2) claimed: Slurm requeued job 2 of proj-b (3 GPU(s) in borrow-proj-b, after 1m0s); not minimal: 3 GPU(s) requeued where 1 would do (job(s) [3])",
		},
		{
			name: "the 1-GPU borrower: minimal",
			runs: []policy.Run{bobInQuota, claim,
				run(2, "proj-b", "borrow-proj-b-g4", 3, -time.Minute, 0, "a100-2"),
				preempted(run(3, "proj-b", "borrow-proj-b-g1", 1, -time.Minute, time.Nanosecond, "a100-2"))},
			minimal: true, lost: []uint32{3}, fewest: 1, would: []uint32{3},
			text: "minimal: it needed 1 borrowed GPU(s), 1 GPU(s) requeued",
		},
		{
			name: "a borrower still within PreemptExemptTime could not have been taken",
			runs: []policy.Run{bobInQuota, claim,
				preempted(run(2, "proj-b", "borrow-proj-b", 3, -time.Minute, time.Nanosecond, "a100-2")),
				run(3, "proj-b", "borrow-proj-b", 1, -10*time.Second, 0, "a100-2")},
			minimal: true, lost: []uint32{2}, fewest: 3, would: []uint32{2},
		},
		{
			name: "a GPU idle on the node: the claim needed none, yet took 1",
			runs: []policy.Run{bobInQuota, claim,
				preempted(run(3, "proj-b", "borrow-proj-b", 1, -time.Minute, time.Nanosecond, "a100-2"))},
			lost: []uint32{3}, fewest: 0,
		},
		{
			name: "a job in a guaranteed QOS preempted: never minimal",
			runs: []policy.Run{claim,
				preempted(run(1, "proj-b", "guar-proj-b", 4, -time.Hour, time.Nanosecond, "a100-2"))},
			lost: []uint32{1}, fewest: 0,
			text: "NOT MINIMAL: job(s) [1] ran in no borrow QOS",
		},
		{
			name: "no claimant started on the nodes",
			runs: []policy.Run{bobInQuota,
				preempted(run(2, "proj-b", "borrow-proj-b", 3, -time.Minute, time.Nanosecond, "a100-2"))},
			lost: []uint32{2},
			text: "no job of a guaranteed QOS started on its nodes within 2m0s: Slurm requeued job 2",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := policy.AuditReclaims(cfg, tt.runs, nodes)
			if len(got) != 1 {
				t.Fatalf("%d audits, want 1: %+v", len(got), got)
			}
			a := got[0]
			var lost []uint32
			for _, r := range a.Lost {
				lost = append(lost, r.JobID)
			}
			if a.Minimal() != tt.minimal || !reflect.DeepEqual(lost, tt.lost) || a.Fewest != tt.fewest || !reflect.DeepEqual(a.Would, tt.would) {
				t.Errorf("minimal %v lost %v fewest %d would %v, want %v %v %d %v\n%s", a.Minimal(), lost, a.Fewest, a.Would, tt.minimal, tt.lost, tt.fewest, tt.would, a.Text())
			}
			if !strings.Contains(a.Text(), tt.text) {
				t.Errorf("%q\nwant it to hold %q", a.Text(), tt.text)
			}
		})
	}
}

// Two borrowers preempted for one 4-GPU claim are one audit; the fewest set is found across
// borrowers of several projects.
func TestAuditReclaimsGroupsVictimsByClaim(t *testing.T) {
	cfg := twoProjects().Obj()
	runs := []policy.Run{
		run(9, "proj-a", "guar-proj-a", 4, 3*time.Second, 0, "a100-2"),
		preempted(run(2, "proj-b", "borrow-proj-b", 2, -time.Minute, time.Nanosecond, "a100-2")),
		preempted(run(3, "proj-c", "borrow-proj-c", 2, -time.Minute, time.Second, "a100-2")),
	}
	got := policy.AuditReclaims(cfg, runs, map[string]int{"a100-2": 4})
	if len(got) != 1 || len(got[0].Lost) != 2 || !got[0].Minimal() || got[0].Needed != 4 {
		t.Fatalf("%+v", got)
	}
}

// A borrower in a protected QOS is the claim's to take only at or above its project's reclaim
// priority threshold: below it, the audit flags it, and does not count it among what the claim
// could have taken instead.
func TestAuditReclaimsOfProtectedBorrowers(t *testing.T) {
	cfg := protectedB() // proj-b protects priority 1000 and up
	nodes := map[string]int{"a100-1": 4, "a100-2": 4}
	bobInQuota := run(1, "proj-b", "guar-proj-b", 4, -time.Hour, 0, "a100-1")
	hi := preempted(run(2, "proj-b", "borrow-proj-b-hipri", 2, -time.Minute, time.Nanosecond, "a100-2"))
	lo := run(3, "proj-b", "borrow-proj-b", 2, -time.Minute, 0, "a100-2")
	for _, tt := range []struct {
		name      string
		priority  int64
		protected []uint32
		fewest    int
		would     []uint32
		verdict   string
	}{
		{"a claim of priority 999 reached it", 999, []uint32{2}, 2, []uint32{3}, "not minimal"},
		{"a claim of priority 1000 may take it", 1000, nil, 2, []uint32{2}, "minimal"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			claim := run(9, "proj-a", "guar-proj-a", 2, 2*time.Second, 0, "a100-2")
			claim.Priority = tt.priority
			got := policy.AuditReclaims(cfg, []policy.Run{bobInQuota, claim, hi, lo}, nodes)
			if len(got) != 1 {
				t.Fatalf("%d audits, want 1: %+v", len(got), got)
			}
			a := got[0]
			if !reflect.DeepEqual(a.Protected, tt.protected) || a.Fewest != tt.fewest || !reflect.DeepEqual(a.Would, tt.would) || a.Verdict() != tt.verdict {
				t.Errorf("protected %v, fewest %d by %v, %s; want %v, %d by %v, %s\n%s", a.Protected, a.Fewest, a.Would, a.Verdict(), tt.protected, tt.fewest, tt.would, tt.verdict, a.Text())
			}
			// The text names the claim's priority, the figure the protection is about.
			if tt.protected != nil && (a.Claimant == nil || a.Claimant.Priority != tt.priority || !strings.Contains(a.Text(), fmt.Sprintf("priority %d", tt.priority))) {
				t.Errorf("claimant %+v, text: %s", a.Claimant, a.Text())
			}
		})
	}
}

// A started claim's priority is the queue's: slurmdbd recorded the one it had when it became
// eligible, before an admin raised it. A run that ended, or a job gone, keeps slurmdbd's.
func TestWithQueuePriorities(t *testing.T) {
	runs := []policy.Run{
		{JobID: 9, Priority: 11000},
		{JobID: 10, Priority: 500},
		{JobID: 11, Priority: 700, Ended: at(time.Second)},
		{JobID: 12, Priority: 800},
	}
	policy.WithQueuePriorities(runs, []policy.Job{
		policytest.MakeJob(9, "proj-a").Priority(2000000).Running(time.Minute).Obj(),
		policytest.MakeJob(10, "proj-a").Priority(9).Obj(), // pending again: its run is not this one
		policytest.MakeJob(11, "proj-a").Priority(9).Running(time.Minute).Obj(),
	})
	var got []int64
	for _, r := range runs {
		got = append(got, r.Priority)
	}
	if want := []int64{2000000, 500, 700, 800}; !reflect.DeepEqual(got, want) {
		t.Errorf("priorities %v, want %v", got, want)
	}
}
