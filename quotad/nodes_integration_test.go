//go:build integration

// Scenario tests of what quotad counts as idle on real node shapes: a node listed by two
// partitions lends its GPUs once, and a node backfill has planned for a pending job lends none.
package quotad_test

import (
	"context"
	"fmt"
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

// addPartition creates a partition over nodes for the test and deletes it at its end, after the
// jobs submitted later are gone (clean-ups run last first; slurmctld refuses to delete a
// partition that still has jobs).
func addPartition(t *testing.T, c *testbed.Cluster, name, nodes string) {
	t.Helper()
	_, _ = c.Run(ctxFor(t, 10*time.Second), "scontrol", "delete", "partition="+name) // a leftover of an interrupted run
	if out, err := c.Run(ctxFor(t, 10*time.Second), "scontrol", "create", "partition="+name, "nodes="+nodes, "state=up", "maxtime=infinite"); err != nil {
		t.Fatalf("scontrol create partition %s: %v\n%s", name, err, out)
	}
	t.Cleanup(func() {
		deadline := time.Now().Add(60 * time.Second)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			out, err := c.Run(ctx, "scontrol", "delete", "partition="+name)
			cancel()
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("scontrol delete partition %s: %v\n%s", name, err, out)
				return
			}
			time.Sleep(time.Second)
		}
	})
}

// submitTo submits a job of user asking for gpus a100 to partition part (sleep 600) and returns
// its id.
func submitTo(t *testing.T, c *testbed.Cluster, user, part string, gpus int, extra ...string) string {
	t.Helper()
	args := append([]string{"-p", part, fmt.Sprintf("--gres=gpu:a100:%d", gpus)}, extra...)
	id, err := c.Submit(ctxFor(t, 30*time.Second), user, append(args, "--wrap", "sleep 600")...)
	if err != nil {
		t.Fatalf("sbatch as %s -p %s %v: %v", user, part, extra, err)
	}
	return id
}

// Both a100 nodes are also in a second partition, a100-both. bob holds his 4 guaranteed a100,
// so 4 a100 are idle on those nodes; he asks for 6 more, 3 in each partition. quotad lends 4,
// not 8: each node's idle GPUs count once however many partitions list it, and no job waits in
// the borrow QOS on GPUs promised twice. Nothing is killed.
func TestNodeInTwoPartitionsLendsItsGPUsOnce(t *testing.T) {
	c := testbed.Require(t)
	ensureQuotad(t, c)
	logStart := ctldLogSize(t, c)
	addPartition(t, c, "a100-both", "a100-[1-2]")
	var all []string
	drainAtEnd(t, c, &all)

	for range 4 {
		all = append(all, submitTo(t, c, "bob", "a100", 1))
	}
	inQuota := slices.Clone(all)
	waitQueue(t, c, inQuota, "bob's 4 in-quota jobs running", 20*time.Second, exactly(4, inQuota, runningIn("guar-proj-b")))
	var over []string
	for _, part := range []string{"a100", "a100-both", "a100", "a100-both", "a100", "a100-both"} {
		over = append(over, submitTo(t, c, "bob", part, 1))
		// Apart by more than sched_min_interval, so that slurmctld tries each at submission and
		// marks it QOSGrpGRES (quotad lends only such jobs) instead of leaving reason None until
		// its next scheduling pass.
		time.Sleep(300 * time.Millisecond)
	}
	all = append(all, over...)
	lentRunning := runningIn("borrow-proj-b")
	waitQueue(t, c, over, "4 of bob's 6 over-quota jobs lent and running", 30*time.Second, exactly(4, over, lentRunning))
	// The test means something only once quotad's policy takes the 2 left as lendable (Slurm
	// marks them QOSGrpGRES, and 24.11 sets a lower-priority job's reason back to None between
	// its passes) and finds no idle GPUs for them: quotactl explain plans as quotad does.
	var waiting []string
	for id, r := range queue(t, c, over) {
		if both(pending, inQOS("guar-proj-b"))(r) {
			waiting = append(waiting, id)
		}
	}
	if len(waiting) != 2 {
		t.Fatalf("%d of bob's over-quota jobs wait in guar-proj-b, want 2: %v", len(waiting), queue(t, c, over))
	}
	seen := map[string]string{}
	waitFor(t, "quotad's plan finding no idle a100 for the 2 jobs not lent", 90*time.Second, func() bool {
		for _, id := range waiting {
			if _, ok := seen[id]; !ok {
				if j := explained(t, c, id); j.Code == string(policy.CodeNoIdleGPUs) {
					seen[id] = j.Explanation
				}
			}
		}
		return len(seen) == len(waiting)
	})
	for id, explain := range seen {
		t.Logf("explain of waiting job %s:\n%s", id, explain)
	}
	time.Sleep(6 * time.Second) // three more quotad cycles
	q := queue(t, c, over)
	inBorrow := count(q, over, inQOS("borrow-proj-b"))
	stillWaiting := count(q, over, both(pending, inQOS("guar-proj-b")))
	if inBorrow != 4 || count(q, over, lentRunning) != 4 || stillWaiting != 2 {
		t.Fatalf("bob's over-quota jobs: %d in borrow-proj-b (%d running), %d pending in guar-proj-b; want 4 lent and running, 2 waiting in guar-proj-b: %v",
			inBorrow, count(q, over, lentRunning), stillWaiting, q)
	}
	// Slurm agrees: the two nodes hold 8 a100, all allocated once.
	nodes, err := c.Slurm().Nodes(ctxFor(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if strings.HasPrefix(n.Name, "a100-") && !strings.HasPrefix(n.Name, "a100-spot") {
			if !n.InPartition("a100") || !n.InPartition("a100-both") {
				t.Errorf("node %s is in partitions %v, want a100 and a100-both", n.Name, n.Partitions)
			}
			if n.AllocGPUs() != 4 {
				t.Errorf("node %s has %d of its GPUs allocated, want 4", n.Name, n.AllocGPUs())
			}
		}
	}
	assertNotPreempted(t, c, all)
	assertNoneKilled(t, c, logStart)
}

// nodesJSON is the JSON node read of this release (the text read's oracle), as slurmctld
// printed it.
func nodesJSON(t *testing.T, c *testbed.Cluster) []byte {
	t.Helper()
	rel, err := c.Release(ctxFor(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"sinfo", "--json"}
	if rel.NodesInScontrol() {
		args = []string{"scontrol", "show", "nodes", "--json"}
	}
	out, err := c.Run(ctxFor(t, 10*time.Second), args[0], args[1:]...)
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func planned(n *slurm.Node) bool { return slices.Contains(n.StateFlags, "PLANNED") }

// Backfill plans a100-2 for a 2-node job that waits for a100-1, where a short job runs: Slurm
// marks the node PLANNED and starts nothing there that would delay that job. carol's proj-c has
// no a100 guarantee, so her 4-a100 job is over quota; the only node with 4 a100 idle is a100-2,
// so quotad lends nothing (before, it lent the job, which then waited in the borrow QOS behind
// the planned one with a100-2's GPUs promised to it). With SLURMBRIDGE_TEST_CAPTURE set, the
// node read is saved there, for the adapter's fixtures.
func TestPlannedNodeLendsNothing(t *testing.T) {
	c := testbed.Require(t)
	ensureQuotad(t, c)
	logStart := ctldLogSize(t, c)
	// An account under no project: its jobs run in QOS normal, which limits nothing, so only
	// nodes hold the 2-node job back.
	addSubAccount(t, c, "bf-plan", "root", "carol")
	var all []string
	drainAtEnd(t, c, &all)

	short := submitTo(t, c, "carol", "a100", 1, "-A", "bf-plan", "-w", "a100-1", "-t", "10")
	all = append(all, short)
	waitQueue(t, c, []string{short}, "carol's short job running on a100-1", 20*time.Second, exactly(1, []string{short}, running))
	wide, err := c.Submit(ctxFor(t, 30*time.Second), "carol", "-A", "bf-plan", "-p", "a100", "-N", "2", "--gres=gpu:a100:4", "-t", "10", "--wrap", "sleep 60")
	if err != nil {
		t.Fatal(err)
	}
	all = append(all, wide)
	var nodes []slurm.Node
	waitFor(t, "backfill marking a100-2 PLANNED for the 2-node job", 30*time.Second, func() bool {
		nodes, err = c.Slurm().Nodes(ctxFor(t, 10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for i := range nodes {
			if nodes[i].Name == "a100-2" {
				return planned(&nodes[i])
			}
		}
		return false
	})
	for _, n := range nodes {
		if strings.HasPrefix(n.Name, "a100-") {
			t.Logf("node %s: %s %v", n.Name, n.State, n.StateFlags)
		}
	}
	if dir := os.Getenv("SLURMBRIDGE_TEST_CAPTURE"); dir != "" {
		rel, _ := c.Release(ctxFor(t, 10*time.Second))
		text, err := c.Run(ctxFor(t, 10*time.Second), "env", append([]string{"SLURM_TIME_FORMAT=%s", "TZ=UTC", "scontrol"}, slurm.NodesArgs...)...)
		if err != nil {
			t.Fatalf("scontrol %v: %v", slurm.NodesArgs, err)
		}
		for name, data := range map[string][]byte{"nodes-" + rel.String() + "-planned.json": nodesJSON(t, c), "nodes-" + rel.String() + "-planned.txt": text} {
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("saved %s", filepath.Join(dir, name))
		}
	}

	over := submitTo(t, c, "carol", "a100", 4, "-A", "proj-c")
	all = append(all, over)
	time.Sleep(6 * time.Second) // three quotad cycles
	r := row(t, c, over)
	if r.state != "PENDING" || r.qos != "guar-proj-c" {
		t.Fatalf("carol's over-quota job %s is %s in %s, want PENDING in guar-proj-c: a100-2 is planned for job %s", over, r.state, r.qos, wide)
	}
	t.Logf("quotactl explain %s:\n%s", over, wantCode(t, c, over, policy.CodeNoIdleGPUs).Explanation)
	if w := row(t, c, wide); w.state != "PENDING" {
		t.Errorf("the 2-node job %s is %s, want still PENDING behind the short job", wide, w.state)
	}
	assertNotPreempted(t, c, all)
	assertNoneKilled(t, c, logStart)
}
