//go:build integration

package quotad_test

import (
	"context"
	"encoding/json"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/testbed"
	"github.com/slurmbridge/slurmbridge/quotad/store"
)

// TestLendOrderByDecayedUsage: with lendOrder decayed-usage, quotad reads each project's
// decayed GPU usage from sshare on this release and divides idle GPUs by weights scaled by it.
// bob (proj-b) runs 4 in his guarantee; he and carol (proj-c, no a100 guaranteed) each want 6
// more of the 8 idle a100. proj-b used more than twice what proj-c used lately, so it gets
// fewer than carol (by holdings alone each gets 4), and each lend names the factor it was
// weighed by.
func TestLendOrderByDecayedUsage(t *testing.T) {
	c := testbed.Require(t)
	ensureQuotad(t, c)
	importTestbedQuotasWith(t, c, "lendOrder: decayed-usage")
	// bob's project must have used more than carol's lately, as it has after the other tests;
	// on a fresh testbed bob uses 4 GPUs until sshare counts it (PriorityCalcPeriod 1 min).
	usage := decayedUsage(t, c)
	if usage["proj-b"] <= 2*usage["proj-c"] {
		warm := submitTyped(t, c, "bob", 4)
		waitFor(t, "sshare counting bob's GPU use", 150*time.Second, func() bool {
			time.Sleep(2 * time.Second)
			usage = decayedUsage(t, c)
			return usage["proj-b"] > 2*usage["proj-c"]
		})
		c.Cancel(warm...)
	}
	// Slurm's classic factor 2^(-U/S) of each project (weight 1 each, three projects).
	total := usage["proj-a"] + usage["proj-b"] + usage["proj-c"]
	factor := func(account string) float64 { return math.Exp2(-(usage[account] / total) / (1.0 / 3)) }
	fb, fc := factor("proj-b"), factor("proj-c")
	t.Logf("decayed GPU usage (sshare, GPU-s): proj-a %.0f, proj-b %.0f, proj-c %.0f; factors proj-b %.2f, proj-c %.2f", usage["proj-a"], usage["proj-b"], usage["proj-c"], fb, fc)

	bob := submitTyped(t, c, "bob", 4)
	waitQueue(t, c, bob, "bob's 4 in-quota jobs running", 20*time.Second, exactly(4, bob, runningIn("guar-proj-b")))
	bobOver, carol := submitTyped(t, c, "bob", 6), submitTyped(t, c, "carol", 6)
	all := append(append([]string{}, bobOver...), carol...)
	waitQueue(t, c, all, "8 of bob's and carol's jobs lent", 30*time.Second,
		func(rows map[string]jobRow) bool { return count(rows, all, inABorrowQOS) == 8 })
	rows := queue(t, c, all)
	lentB, lentC := count(rows, bobOver, inQOS("borrow-proj-b")), count(rows, carol, inQOS("borrow-proj-c"))
	t.Logf("lent: proj-b %d, proj-c %d", lentB, lentC)
	if lentB >= lentC { // by holdings alone it is 4 and 4
		t.Errorf("lent proj-b %d and proj-c %d: proj-b used more per share lately (factors %.2f, %.2f) and should get fewer", lentB, lentC, fb, fc)
	}
	// Each lend's audit entry carries its reason, with the factor it was weighed by.
	var moves []store.Entry
	if err := json.Unmarshal([]byte(quotactl(t, c, "history", "--kind", "move", "--limit", "200", "--json")), &moves); err != nil {
		t.Fatal(err)
	}
	lends := map[string]string{} // "job ID" → the reason of its lend
	for _, m := range moves {
		if strings.HasPrefix(m.New, "qos=borrow-") {
			lends[m.Subject] = m.Detail
		}
	}
	for _, id := range all {
		if !inABorrowQOS(rows[id]) {
			continue
		}
		why, ok := lends["job "+id]
		switch {
		case !ok:
			t.Errorf("job %s was lent, but quotactl history has no lend of it", id)
		case !decayedUseFactor.MatchString(why):
			t.Errorf("the lend of job %s does not name its decayed-usage factor: %s", id, why)
		}
	}
}

// decayedUsage is sshare's decayed GPU usage of each account, GPU-seconds.
func decayedUsage(t *testing.T, c *testbed.Cluster) map[string]float64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	usage, err := c.Slurm().DecayedGPUUsage(ctx)
	if err != nil {
		t.Fatalf("sshare on this release: %v", err)
	}
	return usage
}

// decayedUseFactor is the weight of a project and its decayed-usage factor in a lend's reason.
var decayedUseFactor = regexp.MustCompile(`\(weight \S+ × \d+\.\d\d for\b`)
