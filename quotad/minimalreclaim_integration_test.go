//go:build integration

package quotad_test

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/testbed"
	"github.com/slurmbridge/slurmbridge/quotad/store"
)

// TestReclaimTakesWhatTheClaimNeeds pins down which borrowers Slurm's preemption takes for a
// claim, and that borrow size tiers make the claim take no more GPUs than it needs.
//
// a100-1 runs bob's 4-GPU job in his guarantee; on a100-2 he borrows a 3-GPU job, then a
// 1-GPU one: partition a100 is full. Once they are past PreemptExemptTime, alice claims one
// a100 of her guarantee in partition a100.
//   - One borrow QOS: Slurm tries its candidates by QOS Priority, then node count, then job
//     record order (docs/slurm-preemption.md), never by size. Both borrowers tie, so it takes
//     the older, 3-GPU one: 3 GPUs of work lost where 1 would do.
//   - Size tiers [1 2 4], and the default ones ([1 2 4 8], a table that names none): the 1-GPU
//     borrower is in a QOS one Priority below the 3-GPU one's, so Slurm takes it alone: the
//     claim requeues the 1 GPU it needs.
//
// In both, bob's job in his guarantee is never touched, nothing is killed, and quotad's audit
// trail judges the claim: not minimal, then minimal.
func TestReclaimTakesWhatTheClaimNeeds(t *testing.T) {
	c := testbed.Require(t)
	ensureQuotad(t, c)
	for _, tt := range []struct {
		name     string
		settings []string
		small    string // the 1-GPU borrower's QOS
		large    string // the 3-GPU borrower's
		takes    string // "small" or "large": whom Slurm requeues
	}{
		{"one borrow QOS (the testbed's borrowSizeTiers: []): Slurm takes the oldest borrower, whatever its size", nil, "borrow-proj-b", "borrow-proj-b", "large"},
		{"size tiers: the claim takes only the GPU it needs", []string{"borrowSizeTiers: [1, 2, 4]"}, "borrow-proj-b-g1", "borrow-proj-b-g4", "small"},
		// A table that names no tiers, as a site's may: the default ones keep the promise.
		{"the default size tiers: the claim takes only the GPU it needs", []string{"borrowSizeTiers:"}, "borrow-proj-b-g1", "borrow-proj-b-g4", "small"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			logStart := ctldLogSize(t, c)
			importTestbedQuotasWith(t, c, tt.settings...)
			inQuota := submitJobs(t, c, "bob", 1, "-p", "a100", "-w", "a100-1", "--gres=gpu:a100:4")
			waitQueue(t, c, inQuota, "bob's 4-GPU job running in his guarantee", 20*time.Second, exactly(1, inQuota, runningIn("guar-proj-b")))
			large := submitJobs(t, c, "bob", 1, "-p", "a100", "-w", "a100-2", "--gres=gpu:a100:3")
			waitQueue(t, c, large, "bob's 3-GPU job lent and running", 30*time.Second, exactly(1, large, runningIn(tt.large)))
			small := submitJobs(t, c, "bob", 1, "-p", "a100", "-w", "a100-2", "--gres=gpu:a100:1")
			waitQueue(t, c, small, "bob's 1-GPU job lent and running", 30*time.Second, exactly(1, small, runningIn(tt.small)))
			time.Sleep(exemptTime) // both borrowers past PreemptExemptTime

			alice := submitJobs(t, c, "alice", 1, "-p", "a100", "--gres=gpu:a100:1")
			waitQueue(t, c, alice, "alice's claim running", 40*time.Second, exactly(1, alice, runningIn("guar-proj-a")))
			bob := slices.Concat(inQuota, large, small)
			var want []string
			wantGPUs := 3
			if tt.takes == "small" {
				want, wantGPUs = small, 1
			} else {
				want = large
			}
			var got []string
			waitFor(t, "the reclaim recorded in sacct", 20*time.Second, func() bool { got = preemptedIn(t, c, bob); return len(got) > 0 })
			time.Sleep(testbed.Patience(3 * time.Second)) // a second victim would be recorded by now
			got = preemptedIn(t, c, bob)
			gpus := 0
			for _, id := range got {
				switch {
				case slices.Contains(inQuota, id):
					t.Errorf("the claim requeued bob's job %s, which runs in his guarantee", id)
				case slices.Contains(large, id):
					gpus += 3
				case slices.Contains(small, id):
					gpus++
				}
			}
			t.Logf("alice's 1-GPU claim requeued %v: %d GPU(s) of bob's borrowed work", got, gpus)
			if !slices.Equal(got, want) || gpus != wantGPUs {
				t.Errorf("the claim requeued %v (%d GPUs), want %v (%d)", got, gpus, want, wantGPUs)
			}
			if tt.takes == "small" && gpus > 1 {
				t.Errorf("a 1-GPU claim requeued %d GPUs", gpus)
			}
			// quotad's audit of the reclaim: alice's job claimed, bob's lost, minimal or not.
			verdict := map[string]string{"small": "minimal", "large": "not minimal"}[tt.takes]
			audit := reclaimAuditOf(t, c, alice[0])
			if audit.Old != "job "+want[0] || audit.New != verdict {
				t.Errorf("audit of alice's claim: lost %q, %q; want job %s, %q", audit.Old, audit.New, want[0], verdict)
			}
			assertNoneKilled(t, c, logStart)
		})
	}
}

// reclaimAuditOf waits for quotad's audit row of the reclaim claimant made room for (quotactl
// history --kind reclaim) and logs it.
func reclaimAuditOf(t *testing.T, c *testbed.Cluster, claimant string) store.Entry {
	t.Helper()
	var audit store.Entry
	waitFor(t, "the reclaim in quotad's audit trail", 30*time.Second, func() bool {
		var rows []store.Entry
		if err := json.Unmarshal([]byte(quotactl(t, c, "history", "--kind", "reclaim", "--limit", "20", "--json")), &rows); err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if r.Subject == "job "+claimant {
				audit = r
				return true
			}
		}
		return false
	})
	t.Logf("audit: %s", audit.Detail)
	return audit
}

// TestReclaimReachesBorrowersOfAnotherPartitionOnASharedNode: a site's partitions often share
// nodes. An admin adds partition a100-shared over a100-2 (scontrol create partition). a100-1
// runs bob's 4-GPU job in his guarantee; on a100-2 he borrows 2 GPUs in partition a100-shared,
// then 2 in partition a100. Past PreemptExemptTime, alice claims 2 a100 in partition a100.
// Slurm's preemption goes by node, not partition: of the two equal borrowers it requeues the
// older, the one in a100-shared, and only it. The audit judges the claim minimal.
func TestReclaimReachesBorrowersOfAnotherPartitionOnASharedNode(t *testing.T) {
	c := testbed.Require(t)
	logStart := ctldLogSize(t, c)
	ensureQuotad(t, c)
	importTestbedQuotasWith(t, c)
	if out, err := c.Run(ctxFor(t, 10*time.Second), "scontrol", "create", "partitionname=a100-shared", "nodes=a100-2", "state=up"); err != nil {
		t.Fatalf("scontrol create partition: %v\n%s", err, out)
	}
	// Registered first, so it runs after the jobs' cancellation: a partition with jobs in it
	// cannot be deleted, and cancelled jobs take a moment to leave it.
	t.Cleanup(func() {
		waitFor(t, "partition a100-shared deleted", 30*time.Second, func() bool {
			_, err := c.Run(ctxFor(t, 10*time.Second), "scontrol", "delete", "partitionname=a100-shared")
			return err == nil
		})
	})

	inQuota := submitJobs(t, c, "bob", 1, "-p", "a100", "-w", "a100-1", "--gres=gpu:a100:4")
	waitQueue(t, c, inQuota, "bob's 4-GPU job running in his guarantee", 20*time.Second, exactly(1, inQuota, runningIn("guar-proj-b")))
	shared := submitJobs(t, c, "bob", 1, "-p", "a100-shared", "--gres=gpu:a100:2")
	waitQueue(t, c, shared, "bob's job in a100-shared lent and running", 30*time.Second, exactly(1, shared, runningIn("borrow-proj-b")))
	own := submitJobs(t, c, "bob", 1, "-p", "a100", "-w", "a100-2", "--gres=gpu:a100:2")
	waitQueue(t, c, own, "bob's job in a100 lent and running", 30*time.Second, exactly(1, own, runningIn("borrow-proj-b")))
	time.Sleep(exemptTime)

	alice := submitJobs(t, c, "alice", 1, "-p", "a100", "--gres=gpu:a100:2")
	waitQueue(t, c, alice, "alice's claim running", 40*time.Second, exactly(1, alice, runningIn("guar-proj-a")))
	bob := slices.Concat(inQuota, shared, own)
	var got []string
	waitFor(t, "the reclaim recorded in sacct", 20*time.Second, func() bool { got = preemptedIn(t, c, bob); return len(got) > 0 })
	time.Sleep(testbed.Patience(3 * time.Second)) // a second victim would be recorded by now
	got = preemptedIn(t, c, bob)
	t.Logf("alice's 2-GPU claim in partition a100 requeued %v (a100-shared: %v, a100: %v)", got, shared, own)
	if !slices.Equal(got, shared) {
		t.Errorf("the claim requeued %v, want bob's older borrower %v in the other partition on the shared node", got, shared)
	}
	if audit := reclaimAuditOf(t, c, alice[0]); audit.New != "minimal" {
		t.Errorf("audit of alice's claim: %q, want minimal", audit.New)
	}
	assertNoneKilled(t, c, logStart)
}
