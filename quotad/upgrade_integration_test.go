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

	"github.com/slurmbridge/slurmbridge/bridge/testbed"
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
	p, err := c.Slurm().QOSPreempts(ctxFor(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The old layout: QOS borrow shared by every project, named by each project account's QOS list
// and by each guaranteed QOS' Preempt list, with bob's job over quota running in it (lent by
// the old quotad) and another one waiting there held. The upgrade as documented: the old
// table is refused with the reason, the new one is imported, quotad started; the waiting job is
// moved back by hand, and the old QOS deleted once its running job has ended. The running
// borrower is never preempted or killed, quotad lends in borrow-proj-b from then on, and the old
// QOS can be deleted.
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
	waitFor(t, "quotad's per-project borrow QOS in place of the shared one", 30*time.Second, func() bool {
		p := qosPreempts(t, c)
		_, hasB := p["borrow-proj-b"]
		return hasB && !slices.Contains(p["guar-proj-a"], "borrow") && !slices.Contains(p["guar-proj-b"], "borrow") &&
			assocQOS(t, c, "bob", "proj-b") == "borrow-proj-b,elastic-proj-b,guar-proj-b"
	})
	// Jobs still waiting in the old QOS are the administrator's to move back.
	if r := row(t, c, held); r.qos != "borrow" || r.state != "PENDING" {
		t.Errorf("the held job is %s in %s after the upgrade, want still PENDING in borrow (quotad leaves it alone)", r.state, r.qos)
	}
	if out, err := c.Run(ctxFor(t, 10*time.Second), "scontrol", "update", "jobid="+held, "qos=guar-proj-b"); err != nil {
		t.Fatalf("moving the held job back to guar-proj-b as documented: %v\n%s", err, out)
	}

	// quotad works: a new job of bob's over quota is lent in borrow-proj-b and runs (3 a100 of
	// partition a100 are idle beside the old borrower).
	next := submitN(t, c, "bob", 1)[0]
	all = append(all, next)
	waitQueue(t, c, []string{next}, "bob's next over-quota job lent in borrow-proj-b and running", 30*time.Second,
		exactly(1, []string{next}, runningIn("borrow-proj-b")))
	// alice claims her guarantee: 2 a100 are idle, bob's new borrower is reclaimable, and the old
	// one is in no Preempt list any more, so her fourth job waits; the old borrower keeps running.
	alice := submitN(t, c, "alice", 4)
	all = append(all, alice...)
	time.Sleep(exemptTime + 10*time.Second) // past the old borrower's PreemptExemptTime, and a reclaim
	if r := row(t, c, old); !runningIn("borrow")(r) {
		t.Fatalf("the old borrower %s is %s in %s after the upgrade and alice's claim, want RUNNING in borrow", old, r.state, r.qos)
	}
	if got := sacctQOS(t, c, []string{old}); got[old] != "borrow/proj-b" {
		t.Errorf("sacct: the old borrower ran as %s, want borrow/proj-b", got[old])
	}
	assertNotPreempted(t, c, []string{old})

	// Once its last job has ended, the old QOS is deleted.
	c.Cancel(old)
	waitFor(t, "the old QOS deleted once its job has ended", 30*time.Second, func() bool {
		_, err := c.Run(ctxFor(t, 10*time.Second), "sacctmgr", "-i", "delete", "qos", "borrow")
		return err == nil
	})
	if _, ok := qosPreempts(t, c)["borrow"]; ok {
		t.Error("QOS borrow still exists after its delete")
	}
	// bob's new borrower may have been requeued by alice's claim (it is over his guarantee);
	// nothing was killed.
	assertNoneKilled(t, c, logStart)
}
