//go:build integration

package agent

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/testbed"
)

// The agent's queue read asks squeue for its own nodes' running jobs. From 23.02 squeue --json
// honours --nodelist and --states, so a job on another node and a held job are not even
// printed; 22.05's prints them and the read drops what is not running.
func TestAgentQueueReadIsLimitedToItsNodesRunningJobs(t *testing.T) {
	c := testbed.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), testbed.Patience(90*time.Second))
	defer cancel()
	here, err := c.Submit(ctx, "alice", "-p", "a100", "--gres=gpu:a100:1", "--wrap", "sleep 120")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Cancel(here)
	held, err := c.Submit(ctx, "alice", "-p", "a100", "--gres=gpu:a100:1", "--hold", "--wrap", "sleep 120")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Cancel(held)
	if _, err := c.WaitState(ctx, here, "RUNNING"); err != nil {
		t.Fatal(err)
	}
	node, err := c.Nodes(ctx, here)
	if err != nil || node == "" {
		t.Fatalf("job %s's node: %q, %v", here, node, err)
	}
	// Another job running on another node, where there is one.
	there, err := c.Submit(ctx, "bob", "-p", "a100", "--exclude="+node, "--gres=gpu:a100:1", "--wrap", "sleep 120")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Cancel(there)
	if _, err := c.WaitState(ctx, there, "RUNNING"); err != nil {
		t.Fatal(err)
	}
	rel, err := c.Release(ctx)
	if err != nil {
		t.Fatal(err)
	}
	jobs, extras, err := c.Slurm().RunningOn(ctx, []string{node})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range jobs {
		ids = append(ids, strconv.FormatUint(uint64(jobs[i].ID), 10))
		if !jobs[i].Running() {
			t.Errorf("job %d in state %s kept", jobs[i].ID, jobs[i].StateName())
		}
	}
	t.Logf("Slurm %s: RunningOn(%s) = jobs %v", rel, node, ids)
	if !slices.Contains(ids, here) || slices.Contains(ids, held) {
		t.Fatalf("jobs %v: want running %s and not held %s", ids, here, held)
	}
	if _, ok := extras[uint32(mustAtoi(t, here))]; !ok {
		t.Fatalf("no gres_detail for job %s", here)
	}
	if rel.AtLeast(23, 2) && slices.Contains(ids, there) {
		t.Fatalf("Slurm %s: job %s on another node listed for %s: --nodelist ignored", rel, there, node)
	}
}

func mustAtoi(t *testing.T, s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
