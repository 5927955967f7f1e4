//go:build integration

package quotad_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slurmbridge/slurmbridge/bridge/pools"
	"github.com/slurmbridge/slurmbridge/bridge/testbed"
)

// quotactlErr runs bin/quotactl and returns its combined output and error.
func quotactlErr(c *testbed.Cluster, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(binDir, "quotactl"), args...)
	cmd.Env = c.Env()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// quotactl set and lend-limit change the quota table in the database, are audited, and refuse
// what slurmdbd does not know; the testbed's table is restored afterwards.
func TestQuotactlSetLendLimitAndHistory(t *testing.T) {
	c := testbed.Require(t)
	table := filepath.Join(repoRoot(t), "slurm-conf/testbed/quotas.yaml")
	quotactl(t, c, "import", table)
	t.Cleanup(func() { quotactl(t, c, "import", table) })

	out := quotactl(t, c, "set", "proj-c", "--gpus", "v100=2,a100=1", "--borrow-limit", "3", "--weight", "2")
	if !strings.Contains(out, "project proj-c") || !strings.Contains(out, "a100:1") {
		t.Errorf("set printed %q, want the old -> new of proj-c", out)
	}
	out = quotactl(t, c, "lend-limit", "a100", "6")
	if !strings.Contains(out, "lend limit a100: (none) -> 6") {
		t.Errorf("lend-limit printed %q", out)
	}
	exported := quotactl(t, c, "export")
	for _, want := range []string{"a100: 1", "borrowLimit: 3", "weight: 2", "a100: 6"} {
		if !strings.Contains(exported, want) {
			t.Errorf("export lacks %q:\n%s", want, exported)
		}
	}
	history := quotactl(t, c, "history", "--kind", "quota", "--limit", "5")
	if !strings.Contains(history, "project proj-c") || !strings.Contains(history, "lend limit a100") {
		t.Errorf("history lacks the two changes:\n%s", history)
	}

	for _, bad := range [][]string{
		{"set", "proj-zz", "--gpus", "a100=1"},   // no such account
		{"set", "proj-c", "--gpus", "h100=1"},    // no such GPU TRES
		{"set", "proj-c", "--gpus", "a100=-1"},   // negative
		{"lend-limit", "a100", "lots"},           // not a number
		{"set", "proj-c", "--gpus", "a100=1;ls"}, // shell metacharacters are just bad input
	} {
		if out, err := quotactlErr(c, bad...); err == nil {
			t.Errorf("quotactl %s accepted: %s", strings.Join(bad, " "), out)
		}
	}
	// A refused change leaves the table as it was.
	if after := quotactl(t, c, "export"); after != exported {
		t.Errorf("refused changes altered the table:\nbefore:\n%s\nafter:\n%s", exported, after)
	}
}

// Two admins set two projects at the same moment, round after round: each set must survive
// the other. Before edits ran inside the store's transaction, the later writer put back the
// table it had read, undoing the earlier one.
func TestConcurrentSetsLoseNoUpdate(t *testing.T) {
	c := testbed.Require(t)
	table := filepath.Join(repoRoot(t), "slurm-conf/testbed/quotas.yaml")
	quotactl(t, c, "import", table)
	t.Cleanup(func() { quotactl(t, c, "import", table) })

	const rounds = 8
	for round := 1; round <= rounds; round++ {
		wa, wb := fmt.Sprintf("%d.5", round), fmt.Sprintf("%d.25", round)
		start := make(chan struct{})
		errs := make(chan error, 2)
		for _, set := range [][]string{{"set", "proj-a", "--weight", wa}, {"set", "proj-b", "--weight", wb}} {
			go func() {
				<-start
				out, err := quotactlErr(c, set...)
				if err != nil {
					err = fmt.Errorf("quotactl %s: %v: %s", strings.Join(set, " "), err, out)
				}
				errs <- err
			}()
		}
		close(start)
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		exported := quotactl(t, c, "export")
		if !strings.Contains(exported, "weight: "+wa) || !strings.Contains(exported, "weight: "+wb) {
			t.Fatalf("round %d: a concurrent set was lost: want proj-a weight %s and proj-b weight %s:\n%s", round, wa, wb, exported)
		}
	}
	// Each set is in the audit once, with the value it set.
	history := quotactl(t, c, "history", "--kind", "quota", "--limit", "100")
	for round := 1; round <= rounds; round++ {
		for _, w := range []string{fmt.Sprintf("weight=%d.5", round), fmt.Sprintf("weight=%d.25", round)} {
			if n := strings.Count(history, w+"\n"); n < 1 {
				t.Errorf("history lacks the set to %s:\n%s", w, history)
			}
		}
	}
}

// A quota table naming another borrow QOS pattern than pools.yaml is refused by quotactl
// import, as every quotad cycle would refuse it, and the table in use stays; one naming the
// same pattern is taken.
func TestImportRefusesATableThatContradictsPoolsYAML(t *testing.T) {
	c := testbed.Require(t)
	table := filepath.Join(repoRoot(t), "slurm-conf/testbed/quotas.yaml")
	quotactl(t, c, "import", table)
	t.Cleanup(func() { quotactl(t, c, "import", table) })
	before := quotactl(t, c, "export")
	data, err := os.ReadFile(table)
	if err != nil {
		t.Fatal(err)
	}
	withBorrow := func(pattern string) string {
		f := filepath.Join(t.TempDir(), "quotas.yaml")
		out := strings.Replace(string(data), "\n  borrowQOS: borrow-{account}\n", "\n  borrowQOS: "+pattern+"\n", 1)
		if !strings.Contains(out, "borrowQOS: "+pattern) {
			t.Fatal("the testbed's quota table does not name borrowQOS: borrow-{account} as this test expects")
		}
		if err := os.WriteFile(f, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}

	out, err := quotactlErr(c, "import", withBorrow("lend-{account}"))
	if err == nil {
		t.Fatalf("quotactl import of a table contradicting pools.yaml was accepted:\n%s", out)
	}
	for _, setting := range []string{pools.TableBorrowQOS, pools.PoolsBorrowQOS, "lend-{account}"} {
		if !strings.Contains(out, setting) {
			t.Errorf("the refusal does not name %s:\n%s", setting, out)
		}
	}
	if after := quotactl(t, c, "export"); after != before {
		t.Errorf("the refused import altered the table:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	quotactl(t, c, "import", withBorrow("borrow-{account}"))
}
