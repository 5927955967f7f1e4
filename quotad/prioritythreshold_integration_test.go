//go:build integration

package quotad_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/testbed"
	"github.com/slurmbridge/slurmbridge/quotad/policy"
)

// TestReclaimPriorityThresholdKeepsImportantBorrowers: proj-b protects its borrowed jobs of
// priority 1,000,000 or more (quotactl set --reclaim-priority-threshold). a100-1 runs bob's
// 4-GPU job in his guarantee; on a100-2 he borrows 2 GPUs with an important job (an admin set
// its priority to 2,000,000) and 2 with an ordinary one. Once both are past
// PreemptExemptTime, alice claims 4 a100, which only a100-2 emptied could hold.
//   - At her job's own (multifactor) priority, far below the threshold, the claim may not take
//     the important borrower, so it takes nothing: Slurm preempts only when the claim can then
//     start. Both borrowers run on, and explain says why.
//   - Once an admin raises her claim to 2,000,000, quotad lets her guaranteed QOS preempt
//     proj-b's protected QOS, and Slurm requeues both borrowers: her claim runs.
//
// Without the threshold both borrowers would be reclaimed at once. Nothing is killed.
func TestReclaimPriorityThresholdKeepsImportantBorrowers(t *testing.T) {
	const threshold, important = "1000000", "2000000"
	c := testbed.Require(t)
	logStart := ctldLogSize(t, c)
	ensureQuotad(t, c)
	importTestbedQuotasWith(t, c)
	if out := quotactl(t, c, "set", "proj-b", "--reclaim-priority-threshold", threshold); !strings.Contains(out, "reclaimPriorityThreshold="+threshold) {
		t.Fatalf("quotactl set: %s", out)
	}

	inQuota := submitJobs(t, c, "bob", 1, "-p", "a100", "-w", "a100-1", "--gres=gpu:a100:4")
	waitQueue(t, c, inQuota, "bob's 4-GPU job running in his guarantee", 20*time.Second, exactly(1, inQuota, runningIn("guar-proj-b")))
	// Not yet eligible (BeginTime), so not lent before its priority is set; then eligible.
	hi := submitJobs(t, c, "bob", 1, "--begin=now+600", "-p", "a100", "-w", "a100-2", "--gres=gpu:a100:2")
	setPriority(t, c, hi[0], important)
	if out, err := c.Run(ctxFor(t, 10*time.Second), "scontrol", "update", "jobid="+hi[0], "starttime=now"); err != nil {
		t.Fatalf("scontrol update jobid=%s starttime=now: %v\n%s", hi[0], err, out)
	}
	waitQueue(t, c, hi, "bob's important job lent into borrow-proj-b-hipri", 30*time.Second, exactly(1, hi, runningIn("borrow-proj-b-hipri")))
	lo := submitJobs(t, c, "bob", 1, "-p", "a100", "-w", "a100-2", "--gres=gpu:a100:2")
	waitQueue(t, c, lo, "bob's ordinary job lent into borrow-proj-b", 30*time.Second, exactly(1, lo, runningIn("borrow-proj-b")))
	if preempts, _, err := c.Preempts(ctxFor(t, 10*time.Second), "guar-proj-a"); err != nil || slices.Contains(preempts, "borrow-proj-b-hipri") {
		t.Fatalf("guar-proj-a preempts %v (%v) with no claim waiting", preempts, err)
	}
	time.Sleep(exemptTime) // both borrowers past PreemptExemptTime

	alice := submitJobs(t, c, "alice", 1, "-p", "a100", "--gres=gpu:a100:4")
	bob := slices.Concat(inQuota, hi, lo)
	// Several quotad cycles and Slurm scheduling passes: the low-priority claim takes nothing.
	hold := testbed.Patience(15 * time.Second)
	for start := time.Now(); time.Since(start) < hold; time.Sleep(time.Second) {
		if got := preemptedIn(t, c, bob); len(got) > 0 {
			t.Fatalf("alice's low-priority claim requeued %v", got)
		}
		if r := row(t, c, alice[0]); r.state != "PENDING" {
			t.Fatalf("alice's claim is %s in %s, want PENDING", r.state, r.qos)
		}
	}
	waitQueue(t, c, bob, "bob's three jobs still running", 5*time.Second, exactly(3, bob, running))
	explain := wantCode(t, c, hi[0], policy.CodeReclaimable).Explanation
	t.Logf("quotactl explain %s:\n%s", hi[0], explain)
	if !strings.Contains(explain, "protected by proj-b's reclaim priority threshold "+threshold) || !strings.Contains(explain, "no such claim waits now") {
		t.Errorf("explain %s does not say it is protected:\n%s", hi[0], explain)
	}

	// An admin raises alice's claim above the threshold: quotad opens proj-b's protected QOS to
	// guar-proj-a, and Slurm requeues both borrowers for her.
	setPriority(t, c, alice[0], important)
	waitQueue(t, c, alice, "alice's high-priority claim running", 40*time.Second, exactly(1, alice, runningIn("guar-proj-a")))
	borrowers := slices.Concat(hi, lo)
	var got []string
	waitFor(t, "both borrowers PREEMPTED in sacct", 20*time.Second, func() bool { got = preemptedIn(t, c, borrowers); return len(got) == 2 })
	if taken := preemptedIn(t, c, inQuota); len(taken) > 0 {
		t.Errorf("the claim requeued bob's job %v, which runs in his guarantee", taken)
	}
	t.Logf("alice's claim at priority %s requeued %v", important, got)
	// quotad's audit: her claim needed all 4 GPUs of a100-2, and at her priority she could take
	// the protected borrower: minimal.
	audit := reclaimAuditOf(t, c, alice[0])
	if audit.New != "minimal" || !strings.Contains(audit.Old, "job "+hi[0]) || !strings.Contains(audit.Old, "job "+lo[0]) {
		t.Errorf("audit of alice's claim: lost %q, %q; want jobs %s and %s, minimal", audit.Old, audit.New, hi[0], lo[0])
	}
	assertNoneKilled(t, c, logStart)
}

// setPriority sets a pending job's priority as an admin (scontrol update jobid=ID priority=P):
// fixed from then on (Slurm refuses it for a held job).
func setPriority(t *testing.T, c *testbed.Cluster, id, priority string) {
	t.Helper()
	if out, err := c.Run(ctxFor(t, 10*time.Second), "scontrol", "update", "jobid="+id, "priority="+priority); err != nil {
		t.Fatalf("scontrol update jobid=%s priority=%s: %v\n%s", id, priority, err, out)
	}
}
