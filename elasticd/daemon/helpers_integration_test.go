//go:build integration

// What the elasticd tests share about the queue: a main job's worker jobs, and jobs running
// in a QOS.
package daemon

import (
	"context"

	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/bridge/testbed"
)

// workerRows are the queue's rows of main's worker jobs (named after it), in the states squeue
// lists by default: pending, running, completing.
func workerRows(ctx context.Context, c *testbed.Cluster, main uint32) ([]slurm.Job, error) {
	return c.Slurm().Queue(ctx, slurm.QueueRead{Fields: slurm.SummaryFields, Names: []string{WorkerName(main)}})
}

// jobRows are the queue's rows of ids in every state.
func jobRows(ctx context.Context, c *testbed.Cluster, ids []string) ([]slurm.Job, error) {
	return c.Slurm().Queue(ctx, slurm.QueueRead{Fields: slurm.SummaryFields, JobIDs: ids, AllStates: true})
}

// Named predicates over one row ("row" in their names keeps them apart from the daemon's own
// words for jobs).
func rowRunning(r slurm.Job) bool { return r.StateName() == "RUNNING" }
func rowPending(r slurm.Job) bool { return r.StateName() == "PENDING" }

func runningIn(qos string) func(slurm.Job) bool {
	return func(r slurm.Job) bool { return rowRunning(r) && r.QOS == qos }
}

func runningInPartition(partition string) func(slurm.Job) bool {
	return func(r slurm.Job) bool { return rowRunning(r) && r.Partition == partition }
}

// countRows is how many of rows are.
func countRows(rows []slurm.Job, is func(slurm.Job) bool) int {
	n := 0
	for _, r := range rows {
		if is(r) {
			n++
		}
	}
	return n
}
