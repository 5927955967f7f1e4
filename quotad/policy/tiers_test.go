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

// tiered is twoProjects with borrow size tiers.
func tiered(tiers ...int) *policy.Config {
	c := twoProjects().Obj()
	c.Settings.BorrowSizeTiers = tiers
	return c
}

// sized is a running borrower of account with gpus a100 on one node, in qos.
func sized(id uint32, account string, gpus int, qos string) policy.Job {
	return policytest.MakeJob(id, account).GPU("a100", gpus).QOS(qos).Running(time.Hour).Obj()
}

// A claim takes a project's smallest borrowers first: Slurm tries the lowest QOS Priority first
// and, among equals, the oldest job whatever its size, so each size tier is a QOS of its own
// one Priority above the smaller tier, all inside the project's place in the reclaim order.
func TestBorrowSizeTiersOrderReclaimBySize(t *testing.T) {
	cfg := tiered(1, 2, 4)
	jobs := slices.Concat(bobInQuota(),
		[]policy.Job{sized(5, "proj-b", 3, "borrow-proj-b-g4"), sized(6, "proj-b", 1, "borrow-proj-b-g1")})
	snap := policytest.MakeSnapshot().Testbed(0, 0, 8).Jobs(jobs...).Synced(t, cfg).Obj()

	want := []string{"borrow-proj-b", "borrow-proj-b-g1", "borrow-proj-b-g2", "borrow-proj-b-g4", "elastic-proj-b"}
	for _, g := range []string{"guar-proj-a", "guar-proj-b", "guar-proj-c"} {
		if got := policy.NormalizeNames(qosNamed(t, snap, g).Preempt); !reflect.DeepEqual(got, want) {
			t.Errorf("%s preempts %q, want every QOS proj-b borrows in %q", g, got, want)
		}
	}
	// proj-b is first to lose: its elastic QOS, then its tiers smallest first and its borrow
	// QOS, each one Priority above the one before, all below any other project's borrowers.
	prio := func(name string) int { return qosNamed(t, snap, name).Priority }
	band := []string{"borrow-proj-b-g1", "borrow-proj-b-g2", "borrow-proj-b-g4", "borrow-proj-b"}
	for i, name := range band {
		if got, want := prio(name), prio(band[0])+i; got != want {
			t.Errorf("%s priority %d, want %d (one above the tier below)", name, got, want)
		}
	}
	if prio("elastic-proj-b") >= prio("borrow-proj-b-g1") {
		t.Errorf("elastic-proj-b priority %d, not below borrow-proj-b-g1's %d", prio("elastic-proj-b"), prio("borrow-proj-b-g1"))
	}
	for _, a := range snap.Accounts {
		if a.Name == "proj-b" && !slices.Contains(a.QOS, "borrow-proj-b-g2") {
			t.Errorf("proj-b may use %q: its jobs could not be moved into its tiers", a.QOS)
		}
	}
	// Both borrowers count as proj-b's, and may be reclaimed.
	plan := policy.BuildPlan(cfg, snap, policytest.T0)
	policytest.CheckExplains(t, plan, map[uint32]policytest.Says{
		5: {Code: policy.CodeReclaimable, Words: "runs borrowed in borrow-proj-b-g4 (3 a100)"},
		6: {Code: policy.CodeReclaimable, Words: "runs borrowed in borrow-proj-b-g1 (1 a100)"},
	})
}

// A job is lent into the smallest tier that holds it, and one larger than every tier into the
// project's borrow QOS.
func TestLendPicksTheSizeTier(t *testing.T) {
	cfg := tiered(1, 2)
	pending := []policy.Job{
		policytest.MakeJob(10, "proj-b").GPU("a100", 1).Obj(),
		policytest.MakeJob(11, "proj-b").GPU("a100", 2).Obj(),
		policytest.MakeJob(12, "proj-b").GPU("a100", 3).Obj(),
	}
	snap := policytest.MakeSnapshot().Testbed(8, 0, 8).Jobs(slices.Concat(bobInQuota(), pending)...).Synced(t, cfg).Obj()
	plan := policy.BuildPlan(cfg, snap, policytest.T0)
	got := map[uint32]string{}
	for _, m := range plan.Moves {
		got[m.JobID] = m.To
	}
	if want := map[uint32]string{10: "borrow-proj-b-g1", 11: "borrow-proj-b-g2", 12: "borrow-proj-b"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("lent into %v, want %v (notes %q)", got, want, plan.Notes)
	}
}

// Dropping a tier from the table while borrowers run in it leaves them reclaimable: the tier's
// QOS stays in the claimants' Preempt lists and its jobs count as the project's borrowers.
// Once it empties, it leaves the lists.
func TestDroppedSizeTierStaysReclaimable(t *testing.T) {
	cfg := tiered(1, 4)
	jobs := slices.Concat(bobInQuota(), []policy.Job{sized(5, "proj-b", 3, "borrow-proj-b-g4")})
	snap := policytest.MakeSnapshot().Testbed(0, 1, 8).Jobs(jobs...).Synced(t, cfg).Obj()
	cfg.Settings.BorrowSizeTiers = []int{1}
	plan := policy.BuildPlan(cfg, snap, policytest.T0)
	for _, c := range plan.QOS {
		if c.Preempt != nil && !slices.Contains(c.Preempt.To, "borrow-proj-b-g4") {
			t.Errorf("%s: %s drops the tier its borrower runs in", c.Name, c)
		}
	}
	for _, a := range plan.Accounts {
		if a.Account == "proj-b" && a.QOS != nil && !slices.Contains(a.QOS.To, "borrow-proj-b-g4") {
			t.Errorf("%s", a)
		}
	}
	policytest.CheckExplains(t, plan, map[uint32]policytest.Says{
		5: {Code: policy.CodeReclaimable, Words: "runs borrowed in borrow-proj-b-g4"},
	})

	snap.Jobs = slices.Concat(bobInQuota(), []policy.Job{sized(6, "proj-b", 1, "borrow-proj-b-g1")})
	plan = policy.BuildPlan(cfg, snap, policytest.T0)
	for _, c := range plan.QOS {
		if c.Name == "guar-proj-a" && (c.Preempt == nil || slices.Contains(c.Preempt.To, "borrow-proj-b-g4")) {
			t.Errorf("the emptied tier stays: %s", c)
		}
	}
}

// Without tiers, projects team and team-g2 may both exist: team-g2's borrowers run in its own
// borrow QOS, borrow-team-g2, which reads like tier 2 of team but is not one.
func TestAnAccountNamedLikeATierIsNotOne(t *testing.T) {
	cfg := policytest.MakeConfig().Project("team", policytest.GPUs("a100", 4)).Project("team-g2", policytest.GPUs("a100", 4)).Obj()
	jobs := slices.Concat(runningA100(1, 4, "team-g2", time.Minute), []policy.Job{sized(5, "team-g2", 2, "borrow-team-g2")})
	snap := policytest.MakeSnapshot().Testbed(0, 2, 8).Jobs(jobs...).Synced(t, cfg).Obj()
	if got := policy.NormalizeNames(qosNamed(t, snap, "guar-team").Preempt); !reflect.DeepEqual(got, []string{"borrow-team-g2", "elastic-team-g2"}) {
		t.Errorf("guar-team preempts %q", got)
	}
	for _, a := range snap.Accounts {
		if a.Name == "team" && slices.Contains(a.QOS, "borrow-team-g2") {
			t.Errorf("team may use %q: team-g2's borrow QOS taken for a tier of team's", a.QOS)
		}
	}
	policytest.CheckExplains(t, policy.BuildPlan(cfg, snap, policytest.T0), map[uint32]policytest.Says{
		5: {Code: policy.CodeReclaimable, Words: "runs borrowed in borrow-team-g2"},
	})
}

func TestBorrowSizeTiersValidation(t *testing.T) {
	for _, tt := range []struct {
		name  string
		edit  func(*policy.Config)
		error string
	}{
		{"not ascending", func(c *policy.Config) { c.Settings.BorrowSizeTiers = []int{2, 1} }, "tiers go from the smallest up: 1 follows 2"},
		{"zero", func(c *policy.Config) { c.Settings.BorrowSizeTiers = []int{0, 4} }, "at least 1; got 0"},
		{"an account named like a tier", func(c *policy.Config) {
			c.Settings.BorrowSizeTiers = []int{1}
			c.Projects = append(c.Projects, policy.Project{Account: "proj-a-g1", GPUs: map[string]int{"a100": 1}})
		}, `borrow QOS "borrow-proj-a-g1" of proj-a-g1 is also the borrow tier 1 QOS of proj-a`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := twoProjects().Obj()
			tt.edit(c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.error) {
				t.Fatalf("Validate() = %v, want %q", err, tt.error)
			}
		})
	}
	if err := tiered(1, 2, 4, 8).Validate(); err != nil {
		t.Fatal(err)
	}
}
