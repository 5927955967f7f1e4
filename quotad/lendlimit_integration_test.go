//go:build integration

package quotad_test

import (
	"encoding/json"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/testbed"
	"github.com/slurmbridge/slurmbridge/quotad/cli"
	"github.com/slurmbridge/slurmbridge/quotad/policy"
	"github.com/slurmbridge/slurmbridge/quotad/view"
)

// TestLendingLimitKeepsTheOwnersGPUs: proj-a lends at most 1 of its 4 a100. bob (proj-b)
// fills his guarantee and wants 8 more; of the 8 idle a100 quotad lends him 5 and keeps 3 idle
// for proj-a. alice's 3 jobs then start on them at once, with no reclaim: no borrower of bob's
// is requeued, and nothing is killed.
func TestLendingLimitKeepsTheOwnersGPUs(t *testing.T) {
	c := testbed.Require(t)
	logStart := ctldLogSize(t, c)
	ensureQuotad(t, c)
	t.Cleanup(func() { importTestbedQuotas(t, c) })
	quotactl(t, c, "set", "proj-a", "--lend-limit", "a100=1")

	// No partition given: the plugin sends an a100 job to a100-spot and a100, all 12 a100.
	bob := submitTyped(t, c, "bob", 12)
	waitLent(t, c, bob, "guar-proj-b", 4, "borrow-proj-b", 5, 30*time.Second)
	// A few more cycles (quotad runs every 2 s here): still 5, the other 3 wait.
	time.Sleep(testbed.Patience(6 * time.Second))
	rows := queue(t, c, bob)
	if n := count(rows, bob, inQOS("borrow-proj-b")); n != 5 {
		t.Fatalf("%d of bob's jobs lent, want 5 (8 idle less the 3 proj-a keeps):\n%s", n, listRows(rows, bob))
	}
	_, borrowers := splitBorrowers(t, c, bob, "borrow-proj-b")
	var waiting string
	for _, id := range bob {
		if r := rows[id]; r.state == "PENDING" && r.qos == "guar-proj-b" {
			waiting = id
			break
		}
	}
	if waiting == "" {
		t.Fatalf("none of bob's jobs waits in guar-proj-b:\n%s", listRows(rows, bob))
	}
	// The explanation's figures are what the test is about: the 3 a100 kept, of the 3 idle.
	if j := wantCode(t, c, waiting, policy.CodeOwnersKeep); !slices.Equal(figures(keptOfIdleA100, j.Explanation), []string{"3", "3"}) {
		t.Errorf("explain %s: %q, want proj-a's 3 kept a100 named", waiting, j.Explanation)
	}
	out := quotactl(t, c, "explain", "--json", "proj-a")
	var proj cli.AccountExplanation
	if err := json.Unmarshal([]byte(out), &proj); err != nil || proj.Project == nil {
		t.Fatalf("quotactl explain --json proj-a: %v\n%s", err, out)
	}
	if i := slices.IndexFunc(proj.Project.GPUs, func(g view.ProjectGPUs) bool { return g.GPUType == "a100" }); i < 0 ||
		proj.Project.GPUs[i].LendLimit == nil || *proj.Project.GPUs[i].LendLimit != 1 || proj.Project.GPUs[i].KeptIdle != 3 {
		t.Errorf("quotactl explain proj-a does not show its lending limit 1 and the 3 a100 it keeps:\n%s", out)
	}

	alice := submitTyped(t, c, "alice", 3)
	// Well within the borrowers' PreemptExemptTime: no claim could have made this room.
	d := waitQueue(t, c, alice, "alice's 3 jobs running on the GPUs her lending limit kept", 15*time.Second, exactly(3, alice, running))
	t.Logf("alice's 3 jobs running %s after submission, no reclaim", d.Round(100*time.Millisecond))
	if p := preemptedIn(t, c, borrowers); len(p) > 0 {
		t.Errorf("bob's borrowers %v were preempted: the kept GPUs should have been idle", p)
	}
	if n := count(queue(t, c, borrowers), borrowers, runningIn("borrow-proj-b")); n != 5 {
		t.Errorf("%d of bob's 5 borrowers still running, want 5", n)
	}
	assertNoneKilled(t, c, logStart)
}

// figures are the numbers re captures in text, nil when it does not match.
func figures(re *regexp.Regexp, text string) []string {
	if m := re.FindStringSubmatch(text); m != nil {
		return m[1:]
	}
	return nil
}

// keptOfIdleA100 reads from an explanation the a100 the lending limits keep and those idle.
var keptOfIdleA100 = regexp.MustCompile(`keep (\d+) of the (\d+) idle a100`)
