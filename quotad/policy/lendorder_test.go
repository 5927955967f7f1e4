package policy_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/slurmbridge/slurmbridge/quotad/policy"
	"github.com/slurmbridge/slurmbridge/quotad/policy/policytest"
)

// Two projects of equal weight, no guarantee, 4 pending one-a100 jobs each and 4 idle a100;
// proj-a used three times what proj-b used lately (decayed, as sshare keeps it).
func TestLendOrder(t *testing.T) {
	for _, tc := range []struct {
		order      string
		wantA      int
		wantB      int
		wantFactor string // what a lend to proj-b says of its weight
	}{
		{"", 2, 2, ""},
		{policy.LendByHoldings, 2, 2, ""},
		// Factors 2^-(0.75/0.5) = 0.35 and 2^-(0.25/0.5) = 0.71: shares 1.3 and 2.7 of 4.
		{policy.LendByDecayedUsage, 1, 3, "(weight 1 × 0.71 for its decayed GPU use)"},
	} {
		t.Run("order "+tc.order, func(t *testing.T) {
			cfg := policytest.MakeConfig().Project("proj-a", policytest.GPUs("a100", 0)).Project("proj-b", policytest.GPUs("a100", 0)).Obj()
			cfg.Settings.LendOrder = tc.order
			snap := policytest.MakeSnapshot().Pool("a100", "a100", 8, 4).
				Jobs(pendingA100(1, 4, "proj-a")...).Jobs(pendingA100(11, 4, "proj-b")...).
				Usage("proj-a", 5).Usage("proj-b", 5).
				DecayedUsage("proj-a", 3*3600).DecayedUsage("proj-b", 3600).Synced(t, cfg).Obj()
			plan := policy.BuildPlan(cfg, snap, policytest.T0)
			lent := map[string]int{}
			said := ""
			for _, m := range plan.Moves {
				if m.Kind == policy.Lend {
					lent[m.Project]++
					if m.Project == "proj-b" {
						said = m.Reason
					}
				}
			}
			if lent["proj-a"] != tc.wantA || lent["proj-b"] != tc.wantB {
				t.Errorf("lent %v, want proj-a %d, proj-b %d", lent, tc.wantA, tc.wantB)
			}
			if tc.wantFactor != "" && !strings.Contains(said, tc.wantFactor) || tc.wantFactor == "" && strings.Contains(said, "decayed") {
				t.Errorf("a lend to proj-b says %q, want %q", said, tc.wantFactor)
			}
		})
	}
	_, err := policy.ParseConfig([]byte("settings:\n  lendOrder: newest\nprojects:\n  - account: p\n"))
	if ce := (*policy.ConfigError)(nil); !errors.As(err, &ce) || ce.Path != "settings.lendOrder" || ce.Line != 2 || !strings.Contains(ce.Msg, `"newest"`) {
		t.Errorf("an unknown lend order: %v", err)
	}
}
