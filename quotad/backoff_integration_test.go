//go:build integration

package quotad_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/testbed"
	"github.com/slurmbridge/slurmbridge/quotad/policy"
)

// importTestbedQuotasWith loads the testbed's quota table with settings lines added (e.g.
// "reclaimBackoff: 60s"), and the plain table again when the test ends.
func importTestbedQuotasWith(t *testing.T, c *testbed.Cluster, settings ...string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "slurm-conf/testbed/quotas.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	table, err := testbed.QuotaTableWith(data, settings...)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "quotas.yaml")
	if err := os.WriteFile(path, table, 0o644); err != nil {
		t.Fatal(err)
	}
	quotactl(t, c, "import", path)
	t.Cleanup(func() { importTestbedQuotas(t, c) })
}

// TestReclaimBackoffStopsPingPong: with a reclaim backoff of 75 s, bob's 4 borrowers that
// alice's claim took back are not lent again when her jobs end a moment later: they wait in
// bob's guarantee, explained, and are lent and run again once the backoff has passed.
func TestReclaimBackoffStopsPingPong(t *testing.T) {
	const backoff = 75 * time.Second
	c := testbed.Require(t)
	logStart := ctldLogSize(t, c)
	ensureQuotad(t, c)
	importTestbedQuotasWith(t, c, "reclaimBackoff: "+backoff.String())

	bob := submitN(t, c, "bob", 8)
	waitLent(t, c, bob, "guar-proj-b", 4, "borrow-proj-b", 4, 20*time.Second)
	inQuota, borrowers := splitBorrowers(t, c, bob, "borrow-proj-b")
	alice := submitN(t, c, "alice", 4)
	waitQueue(t, c, alice, "alice's 4 jobs running, her claim taking bob's borrowers back", exemptTime+40*time.Second, exactly(4, alice, running))
	waitFor(t, "4 PREEMPTED borrowers in sacct", 20*time.Second, func() bool { return len(preemptedIn(t, c, borrowers)) == 4 })
	reclaimedBy := time.Now()
	c.Cancel(alice...)

	// Without the backoff they would run again within seconds (cred_expire is 10 s here).
	hold := testbed.Patience(25 * time.Second)
	for start := time.Now(); time.Since(start) < hold; time.Sleep(time.Second) {
		if q := queue(t, c, borrowers); count(q, borrowers, running) > 0 {
			t.Fatalf("a reclaimed borrower runs again %s after the reclaim, within its %s backoff:\n%s", time.Since(reclaimedBy).Round(time.Second), backoff, listRows(q, borrowers))
		}
	}
	// A requeued job first waits for the begin time Slurm gives it (its requeue delay,
	// cred_expire + 1 s after the requeue has completed: later under load), and until then
	// quotad rightly explains that it cannot start. Past it, the backoff is what holds it.
	waitFor(t, "the first reclaimed borrower past the begin time of its requeue", max(time.Until(reclaimedBy.Add(backoff-15*time.Second)), 5*time.Second), func() bool {
		return row(t, c, borrowers[0]).reason != "BeginTime"
	})
	wantCode(t, c, borrowers[0], policy.CodeReclaimBackoff, policy.CodeReturnBackoff)

	waitQueue(t, c, borrowers, "bob's reclaimed borrowers lent and running again after the backoff", time.Until(reclaimedBy.Add(backoff))+40*time.Second,
		exactly(4, borrowers, runningIn("borrow-proj-b")))
	if after := time.Since(reclaimedBy); after < backoff-10*time.Second { // the reclaim ended a little before it was seen
		t.Errorf("bob's borrowers ran again %s after the reclaim, before the %s backoff", after.Round(time.Second), backoff)
	}
	t.Logf("bob's 4 borrowers lent and running again %s after the reclaim (backoff %s)", time.Since(reclaimedBy).Round(time.Second), backoff)
	if n := count(queue(t, c, inQuota), inQuota, running); n != 4 {
		t.Errorf("%d of bob's in-quota jobs running, want 4", n)
	}
	assertNoneKilled(t, c, logStart)
}
