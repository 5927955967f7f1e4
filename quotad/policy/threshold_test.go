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

// protectedB is twoProjects with proj-b's borrowers of priority 1000 or more protected.
func protectedB() *policy.Config {
	cfg := twoProjects().Obj()
	for i := range cfg.Projects {
		if cfg.Projects[i].Account == "proj-b" {
			policytest.ReclaimPriorityThreshold(1000)(&cfg.Projects[i])
		}
	}
	return cfg
}

// claim is a pending in-quota job of account asking for gpus a100, at Slurm priority prio.
func claim(id uint32, account string, gpus int, prio int64) policy.Job {
	return policytest.MakeJob(id, account).GPU("a100", gpus).Reason("Resources").Priority(prio).Obj()
}

// preempts is what each guaranteed QOS may preempt after one plan is applied.
func preempts(t *testing.T, cfg *policy.Config, snap *policy.Snapshot) map[string][]string {
	t.Helper()
	policytest.ApplySync(snap, policy.BuildPlan(cfg, snap, policytest.T0))
	out := map[string][]string{}
	for _, g := range []string{"guar-proj-a", "guar-proj-b", "guar-proj-c"} {
		out[g] = policy.NormalizeNames(qosNamed(t, snap, g).Preempt)
	}
	return out
}

// A project's borrowers at or above its reclaim priority threshold run in its protected QOS,
// which a guaranteed QOS may preempt only while that project has a claim waiting of at least
// the threshold's priority: a low-priority claim cannot take them, a high-priority one can.
func TestReclaimPriorityThresholdOpensOnlyForHighPriorityClaims(t *testing.T) {
	cfg := protectedB()
	running := slices.Concat(bobInQuota(), []policy.Job{
		sized(5, "proj-b", 2, "borrow-proj-b-hipri"),
		sized(6, "proj-b", 2, "borrow-proj-b"),
	})
	snap := policytest.MakeSnapshot().Testbed(0, 0, 8).Jobs(running...).Synced(t, cfg).Obj()
	closed := []string{"borrow-proj-b", "elastic-proj-b"}
	open := []string{"borrow-proj-b", "borrow-proj-b-hipri", "elastic-proj-b"}

	if got := preempts(t, cfg, snap); !reflect.DeepEqual(got["guar-proj-a"], closed) {
		t.Errorf("no claim waits, guar-proj-a preempts %q, want %q", got["guar-proj-a"], closed)
	}
	// Protected borrowers are the project's last to go: its protected QOS is the top of its band.
	if hi, lo := qosNamed(t, snap, "borrow-proj-b-hipri").Priority, qosNamed(t, snap, "borrow-proj-b").Priority; hi <= lo {
		t.Errorf("borrow-proj-b-hipri priority %d is not above borrow-proj-b's %d", hi, lo)
	}
	if !slices.Contains(accountNamed(t, snap, "proj-b").QOS, "borrow-proj-b-hipri") {
		t.Errorf("proj-b may not use its protected QOS: %q", accountNamed(t, snap, "proj-b").QOS)
	}

	snap.Jobs = append(slices.Clone(running), claim(20, "proj-a", 4, 999))
	if got := preempts(t, cfg, snap); !reflect.DeepEqual(got["guar-proj-a"], closed) {
		t.Errorf("a claim of priority 999 opens the protected QOS: guar-proj-a preempts %q", got["guar-proj-a"])
	}
	plan := policy.BuildPlan(cfg, snap, policytest.T0)
	policytest.CheckExplains(t, plan, map[uint32]policytest.Says{
		5: {Code: policy.CodeReclaimable, Words: "protected by proj-b's reclaim priority threshold 1000: only a claim of Slurm priority 1000 or more may reclaim it, and no such claim waits now"},
		6: {Code: policy.CodeReclaimable, Words: "runs borrowed in borrow-proj-b (2 a100)"},
	})

	snap.Jobs = append(slices.Clone(running), claim(20, "proj-a", 4, 999), claim(21, "proj-a", 1, 1000))
	got := preempts(t, cfg, snap)
	if !reflect.DeepEqual(got["guar-proj-a"], open) {
		t.Errorf("a claim of priority 1000 waits, guar-proj-a preempts %q, want %q", got["guar-proj-a"], open)
	}
	if !reflect.DeepEqual(got["guar-proj-c"], closed) {
		t.Errorf("proj-c has no claim, but guar-proj-c preempts %q", got["guar-proj-c"])
	}
	plan = policy.BuildPlan(cfg, snap, policytest.T0)
	policytest.CheckExplains(t, plan, map[uint32]policytest.Says{
		5: {Code: policy.CodeReclaimable, Words: "and proj-a has one waiting now"},
	})

	// A claim over its project's guarantee is no claim: it cannot start in its QOS.
	snap.Jobs = append(slices.Clone(running), claim(22, "proj-c", 1, 5000))
	if got := preempts(t, cfg, snap); !reflect.DeepEqual(got["guar-proj-c"], closed) {
		t.Errorf("proj-c's job needs a100, which it has no guarantee of, yet guar-proj-c preempts %q", got["guar-proj-c"])
	}
}

// quotad picks the QOS when it lends: a job of priority at least the threshold goes to the
// protected QOS, whatever its size tier; one below it to its tier or the borrow QOS.
func TestLendIntoTheProtectedQOSByPriority(t *testing.T) {
	cfg := protectedB()
	cfg.Settings.BorrowSizeTiers = []int{1}
	pending := []policy.Job{
		policytest.MakeJob(10, "proj-b").GPU("a100", 1).Priority(1000).Obj(),
		policytest.MakeJob(11, "proj-b").GPU("a100", 1).Priority(999).Obj(),
		policytest.MakeJob(12, "proj-b").GPU("a100", 2).Priority(50).Obj(),
		policytest.MakeJob(13, "proj-a").GPU("a100", 1).Priority(5000).Obj(),
	}
	snap := policytest.MakeSnapshot().Testbed(8, 0, 8).Jobs(slices.Concat(bobInQuota(), runningA100(30, 4, "proj-a", time.Minute), pending)...).Synced(t, cfg).Obj()
	plan := policy.BuildPlan(cfg, snap, policytest.T0)
	got := map[uint32]string{}
	for _, m := range plan.Moves {
		got[m.JobID] = m.To
	}
	want := map[uint32]string{10: "borrow-proj-b-hipri", 11: "borrow-proj-b-g1", 12: "borrow-proj-b", 13: "borrow-proj-a-g1"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("lent into %v, want %v (notes %q)", got, want, plan.Notes)
	}
	policytest.CheckExplains(t, plan, map[uint32]policytest.Says{
		10: {Code: policy.CodeLent, Words: "its priority 1000 is at least proj-b's reclaim priority threshold 1000, so only a claim of priority 1000 or more may take it"},
	})
}

// With the threshold removed, borrowers still in the protected QOS are ordinary borrowers: the
// QOS stays in every claimant's Preempt list until it empties.
func TestProtectedQOSWithoutThresholdIsReclaimableByAll(t *testing.T) {
	cfg := protectedB()
	jobs := slices.Concat(bobInQuota(), []policy.Job{sized(5, "proj-b", 2, "borrow-proj-b-hipri")})
	snap := policytest.MakeSnapshot().Testbed(0, 0, 8).Jobs(jobs...).Synced(t, cfg).Obj()
	cfg = twoProjects().Obj()
	want := []string{"borrow-proj-b", "borrow-proj-b-hipri", "elastic-proj-b"}
	for g, got := range preempts(t, cfg, snap) {
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s preempts %q, want %q", g, got, want)
		}
	}
	policytest.CheckExplains(t, policy.BuildPlan(cfg, snap, policytest.T0), map[uint32]policytest.Says{
		5: {Code: policy.CodeReclaimable, Words: "runs borrowed in borrow-proj-b-hipri (2 a100)"},
	})
}

func TestReclaimPriorityThresholdIsValidated(t *testing.T) {
	for _, tt := range []struct {
		threshold int64
		want      string
	}{
		{0, "a Slurm job priority, 1 to 4294967294; got 0"},
		{1 << 32, "got 4294967296"},
	} {
		cfg := twoProjects(policytest.ReclaimPriorityThreshold(tt.threshold)).Obj()
		if err := cfg.Validate(); err == nil || !contains(err.Error(), tt.want) {
			t.Errorf("threshold %d: %v, want %q", tt.threshold, err, tt.want)
		}
	}
	// Project team's protected QOS would be project team-hipri's borrow QOS.
	cfg := policytest.MakeConfig().Project("team", policytest.GPUs("a100", 4), policytest.ReclaimPriorityThreshold(10)).Project("team-hipri", policytest.GPUs("a100", 4)).Obj()
	if err := cfg.Validate(); err == nil || !contains(err.Error(), `QOS "borrow-team-hipri"`) {
		t.Errorf("clash accepted: %v", err)
	}
}

func accountNamed(t *testing.T, s *policy.Snapshot, name string) policy.Account {
	t.Helper()
	for _, a := range s.Accounts {
		if a.Name == name {
			return a
		}
	}
	t.Fatalf("no account %s", name)
	return policy.Account{}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
