//go:build integration

// The upgrade from one shared borrow QOS to a borrow QOS per project, run as
// docs/operations.md describes it, on a cluster where a job runs borrowed in the old QOS.
package quotad_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/bridge/testbed"
	"github.com/slurmbridge/slurmbridge/quotad/policy"
)

// oldSharedBorrowTable is the testbed's quota table as it was with one shared borrow QOS.
const oldSharedBorrowTable = `settings:
  borrowQOS: borrow
  guaranteedQOS: guar-{account}
  graceTime: 0s
  preemptExemptTime: 20s
  maxSnapshotAge: 15s
projects:
  - account: proj-a
    gpus: {a100: 4}
  - account: proj-b
    gpus: {a100: 4}
  - account: proj-c
    gpus: {v100: 2}
`

// qosPreempts is the Preempt list sacctmgr shows for each QOS.
func qosPreempts(t *testing.T, c *testbed.Cluster) map[string][]string {
	t.Helper()
	qos, err := c.Slurm().QOS(ctxFor(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return slurm.PreemptsByQOS(qos)
}

// The old layout: QOS borrow shared by every project, named by each project account's QOS list
// and by each guaranteed QOS' Preempt list, with bob's job over quota running in it (lent by
// the old quotad) and another one waiting there held. The upgrade as documented: the old
// table is refused with the reason, the new one is imported, quotad started; quotad moves the
// waiting job into guar-proj-b. The promise: alice gets her guarantee back in time whatever
// the old layout left running. quotad keeps borrow in the Preempt lists that name it while the
// old borrower runs, so alice's 4 jobs all start within 30 s of the borrowers' PreemptExemptTime
// (bob's new borrower's and the old one's), the old borrower is requeued (never killed) and
// adopted into guar-proj-b, borrow then leaves the lists, and the old QOS can be deleted.
func TestUpgradeFromSharedBorrowQOS(t *testing.T) {
	c := testbed.Require(t)
	c.PauseDaemon(t, "quotad")
	logStart := ctldLogSize(t, c)
	cluster := c.Vars["SLURMBRIDGE_CLUSTER"]
	table := filepath.Join(repoRoot(t), "slurm-conf/testbed/quotas.yaml")
	quotactl(t, c, "import", table)

	// The old layout, as the quotad before per-project borrow QOS left it.
	_, _ = c.Run(ctxFor(t, 30*time.Second), "sacctmgr", "-i", "delete", "qos", "borrow") // a leftover of an interrupted run
	sacctmgrRun(t, c, "add", "qos", "borrow")
	t.Cleanup(func() { _, _ = c.Run(ctxFor(t, 30*time.Second), "sacctmgr", "-i", "delete", "qos", "borrow") })
	sacctmgrRun(t, c, "modify", "qos", "where", "name=borrow", "set", "preemptmode=requeue", "gracetime=0", "preemptexempttime=00:00:20")
	for _, p := range []string{"proj-a", "proj-b", "proj-c"} {
		sacctmgrRun(t, c, "modify", "account", "where", "name="+p, "cluster="+cluster, "set", "qos=guar-"+p+",borrow", "defaultqos=guar-"+p)
		sacctmgrRun(t, c, "modify", "qos", "where", "name=guar-"+p, "set", "preempt=borrow")
	}
	// The per-project borrow QOS, and the elastic QOS and borrow size tiers of later versions,
	// did not exist then.
	for name := range qosPreempts(t, c) {
		if strings.HasPrefix(name, "borrow-") || strings.HasPrefix(name, "elastic-") {
			_, _ = c.Run(ctxFor(t, 30*time.Second), "sacctmgr", "-i", "delete", "qos", "where", "name="+name)
		}
	}
	for name := range qosPreempts(t, c) {
		if strings.HasPrefix(name, "borrow-") || strings.HasPrefix(name, "elastic-") {
			t.Fatalf("QOS %s is left of the new layout; the old one has a shared borrow QOS only", name)
		}
	}

	var all []string
	drainAtEnd(t, c, &all)
	bob := submitN(t, c, "bob", 5)
	held := submitN(t, c, "bob", 1, "--hold")[0]
	all = append(append(all, bob...), held)
	waitQueue(t, c, bob, "bob's 4 in-quota jobs running, the fifth waiting over quota", 30*time.Second,
		exactly(4, bob, runningIn("guar-proj-b")), exactly(1, bob, both(pending, withReason("QOSGrpGRES"))))
	var old string
	for id, r := range queue(t, c, bob) {
		if r.state == "PENDING" {
			old = id
		}
	}
	// What the old quotad did: lend it in the shared QOS; the held one was lent before its hold.
	for _, id := range []string{old, held} {
		if out, err := c.Run(ctxFor(t, 10*time.Second), "scontrol", "update", "jobid="+id, "qos=borrow"); err != nil {
			t.Fatalf("moving job %s to the shared borrow QOS: %v\n%s", id, err, out)
		}
	}
	waitQueue(t, c, []string{old}, "the old borrower running in borrow", 30*time.Second, exactly(1, []string{old}, runningIn("borrow")))

	// The upgrade. The old table is refused, and says why.
	oldTable := filepath.Join(t.TempDir(), "quotas-shared-borrow.yaml")
	if err := os.WriteFile(oldTable, []byte(oldSharedBorrowTable), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := quotactlErr(c, "import", oldTable); err == nil || !strings.Contains(out, "must contain {account}") {
		t.Fatalf("quotactl import of a shared borrow QOS table: %v\n%s", err, out)
	}
	quotactl(t, c, "import", table)
	log, _ := startQuotad(t, c, "2s")
	waitSynced(t, c, log)
	waitFor(t, "quotad's per-project borrow QOS, and the accounts without the shared one", 30*time.Second, func() bool {
		_, hasB := qosPreempts(t, c)["borrow-proj-b"]
		return hasB && assocQOS(t, c, "bob", "proj-b") == "borrow-proj-b,elastic-proj-b,guar-proj-b"
	})
	// borrow stays in the Preempt lists that named it while the old borrower runs in it, and
	// the old borrower counts as proj-b's: proj-b holds 5 a100 of its 4, so a claim may take it.
	p := qosPreempts(t, c)
	for _, g := range []string{"guar-proj-a", "guar-proj-b", "guar-proj-c"} {
		if !slices.Contains(p[g], "borrow") {
			t.Errorf("%s preempts %v after the upgrade: the old borrower %s is out of every claim's reach", g, p[g], old)
		}
	}
	wantCode(t, c, old, policy.CodeReclaimable)
	// A job still waiting in the old QOS, which its account no longer allows, is moved into its
	// project's guaranteed QOS, as a job queued before the install is.
	waitQueue(t, c, []string{held}, "the held job adopted from borrow into guar-proj-b", 20*time.Second,
		exactly(1, []string{held}, both(pending, inQOS("guar-proj-b"))))

	// quotad works: a new job of bob's over quota is lent in borrow-proj-b and runs (3 a100 of
	// partition a100 are idle beside the old borrower).
	next := submitN(t, c, "bob", 1)[0]
	all = append(all, next)
	waitQueue(t, c, []string{next}, "bob's next over-quota job lent in borrow-proj-b and running", 30*time.Second,
		exactly(1, []string{next}, runningIn("borrow-proj-b")))
	exemptAt := time.Now().Add(exemptTime) // the later PreemptExemptTime of bob's two borrowers
	// alice claims her guarantee: 2 a100 are idle, and her other 2 are bob's borrowers, the new
	// one in borrow-proj-b and the old one in borrow. Both are requeued once exempt.
	alice := submitN(t, c, "alice", 4)
	all = append(all, alice...)
	waitQueue(t, c, alice, "alice's 4 jobs running within 30 s of the borrowers' exemption ending", time.Until(exemptAt)+30*time.Second,
		exactly(4, alice, runningIn("guar-proj-a")))
	t.Logf("alice's 4 jobs running %s after the borrowers' PreemptExemptTime ended", time.Since(exemptAt).Round(100*time.Millisecond))
	if p := preemptedIn(t, c, []string{old}); len(p) != 1 {
		t.Errorf("the old borrower %s has no PREEMPTED run in sacct: %v", old, queue(t, c, []string{old}))
	}
	// Requeued, it waits in borrow, which its account no longer allows: quotad adopts it into
	// guar-proj-b; then no borrower runs in borrow, so it leaves the Preempt lists.
	waitFor(t, "the old borrower requeued and adopted into guar-proj-b, borrow out of every Preempt list", 30*time.Second, func() bool {
		if r := row(t, c, old); r.qos != "guar-proj-b" {
			return false
		}
		p := qosPreempts(t, c)
		return !slices.Contains(p["guar-proj-a"], "borrow") && !slices.Contains(p["guar-proj-b"], "borrow") && !slices.Contains(p["guar-proj-c"], "borrow")
	})

	// No job runs or waits in the old QOS any more: it is deleted.
	waitFor(t, "the old QOS deleted once no job is in it", 30*time.Second, func() bool {
		_, err := c.Run(ctxFor(t, 10*time.Second), "sacctmgr", "-i", "delete", "qos", "borrow")
		return err == nil
	})
	if _, ok := qosPreempts(t, c)["borrow"]; ok {
		t.Error("QOS borrow still exists after its delete")
	}
	// bob's borrowers were requeued by alice's claim; nothing was killed.
	assertNoneKilled(t, c, logStart)
}
