package policy_test

import (
	"os"
	"testing"

	"github.com/slurmbridge/slurmbridge/quotad/policy"
	"github.com/slurmbridge/slurmbridge/quotad/policy/policytest"
)

// FuzzParseConfig feeds quotas.yaml texts to the quota table's reader: what it accepts
// validates, and a plan on it acts without panicking on a testbed-like snapshot.
func FuzzParseConfig(f *testing.F) {
	if data, err := os.ReadFile("testdata/quotas.yaml"); err == nil {
		f.Add(data)
	} else {
		f.Fatal(err)
	}
	for _, s := range []string{
		"projects:\n  - account: proj-b\n    gpus: {a100: 4}\n",
		"projects:\n  - account: proj-a\n    gpus: {a100: 4}\n    borrowLimit: 2\n    weight: 2\nlendLimits: {a100: 3}\n",
		"settings: {borrowQOS: x}\nprojects: []\n",
		"projects:\n  - account: a\n    gpus: {a100: -1}\n",
		"x: &a [*a]\n",
		"---\n---\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := policy.ParseConfig(data)
		if err != nil {
			if cfg != nil {
				t.Fatalf("a table and an error: %v", err)
			}
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("an accepted table does not validate: %v", err)
		}
		snap := policytest.MakeSnapshot().Testbed(4, 0, 8).Jobs(policytest.MakeJob(5, "proj-b").GPU("a100", 1).Obj()).
			Unreadable(7, "proj-a", "guar-proj-a", policy.StatePending, "fuzz").Obj()
		if plan := policy.BuildPlan(cfg, snap, policytest.T0); !plan.Acting {
			t.Fatalf("a valid table gives a plan that does not act: %q", plan.Notes)
		}
	})
}
