// Package elastictest builds what elasticd's tests decide and act on: measurements of a job's
// workers, the reconcile state and snapshot of a job, and Slurm jobs as squeue shows them.
// Every builder returns a fresh value that a test then changes where its case differs.
package elastictest

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/gpureq"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/elasticd/policy"
	"github.com/slurmbridge/slurmbridge/elasticd/reconcile"
)

// T0 is the tests' clock's start.
var T0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// ReportEvery is how often a built job's workers report.
const ReportEvery = 10 * time.Second

// Worker is one worker's rate in a measurement, named by its job id.
func Worker(id uint32, t policy.GPUType, samplesPerSec float64) policy.WorkerRate {
	return policy.WorkerRate{Worker: strconv.FormatUint(uint64(id), 10), Type: t, SamplesPerSec: samplesPerSec}
}

// Measurements are n reports of the workers, ReportEvery apart, the first at start.
func Measurements(start time.Time, n int, workers ...policy.WorkerRate) []policy.Measurement {
	alloc := map[policy.GPUType]int{}
	for _, w := range workers {
		alloc[w.Type]++
	}
	out := make([]policy.Measurement, 0, n)
	for i := range n {
		out = append(out, policy.Measurement{Time: start.Add(time.Duration(i) * ReportEvery), Allocated: alloc, Workers: workers})
	}
	return out
}

// Bounds are MIN:MAX workers of one GPU each, of the types given (none: the main job's).
func Bounds(minWorkers, maxWorkers int, types ...policy.GPUType) policy.Bounds {
	b := policy.Bounds{MinWorkers: minWorkers, MaxWorkers: maxWorkers, GPUsPerWorker: 1}
	for _, t := range types {
		b.Types = append(b.Types, policy.TypeOption{Type: t, Pool: string(t)})
	}
	return b
}

// State is what elasticd remembers of a job of bounds MIN:MAX just followed: nothing
// submitted, stopping, replaced or leaving, no measurement yet, and a 5-minute pending timeout.
func State(id uint32, minWorkers, maxWorkers int, types ...policy.GPUType) reconcile.State {
	return reconcile.State{ID: id, Bounds: Bounds(minWorkers, maxWorkers, types...), PendingTimeout: 5 * time.Minute,
		Stopping: map[uint32]time.Time{}, Replacing: map[uint32]uint32{}, Leaving: map[uint32]reconcile.Leave{}}
}

// Snapshot is a cycle's view of a job whose active workers, main job first, are all of type
// t, with room for free more of t and no limit or waiting job in the way.
func Snapshot(t policy.GPUType, free int, active ...uint32) reconcile.Snapshot {
	return reconcile.Snapshot{MainType: t, Active: active, Allocated: map[policy.GPUType]int{t: len(active)},
		Successors: map[uint32]reconcile.Successor{}, Queued: map[uint32]bool{},
		Capacity: map[policy.GPUType]int{t: free}, CapacityLimit: map[policy.GPUType]string{},
		GrowthCapacity: map[policy.GPUType]int{}, GrowthLimit: map[policy.GPUType]string{},
		MainTypeRoom: reconcile.Room{Workers: reconcile.Unlimited}}
}

// GPUJob is a one-node job of user in account, in partition a100, holding (RUNNING) or asking
// for (PENDING) gpus a100 GPUs, as many CPUs and 1000 MB of memory per GPU.
func GPUJob(id uint32, user, account, state string, gpus uint64) slurm.Job {
	tres := gpureq.TRES{"cpu": gpus, "mem": 1000 * gpus, "node": 1, "gres/gpu": gpus, "gres/gpu:a100": gpus}
	j := slurm.Job{ID: id, User: user, Account: account, Partition: "a100", State: state, TRESReq: tres}
	if state == "RUNNING" {
		j.TRESAlloc = tres
	}
	return j
}

// QOSJob is a job in qos holding (RUNNING) or asking for (PENDING) tres.
func QOSJob(id uint32, qos, state string, tres gpureq.TRES) slurm.Job {
	j := slurm.Job{ID: id, QOS: qos, State: state}
	if state == "RUNNING" {
		j.TRESAlloc = tres
	} else {
		j.TRESReq = tres
	}
	return j
}

// AssocTree is the associations of cluster testbed: root > proj-a (alice, bob) and root > dept >
// proj-b (carol), every limit unset.
func AssocTree() []slurm.Association {
	none := func(a slurm.Association) slurm.Association {
		a.Cluster, a.GrpJobs, a.GrpSubmitJobs, a.MaxJobs, a.MaxSubmitJobs = "testbed", slurm.NoLimit, slurm.NoLimit, slurm.NoLimit, slurm.NoLimit
		return a
	}
	return []slurm.Association{
		none(slurm.Association{Account: "root"}),
		none(slurm.Association{Account: "root", User: "root"}),
		none(slurm.Association{Account: "proj-a", ParentAccount: "root"}),
		none(slurm.Association{Account: "proj-a", User: "alice"}),
		none(slurm.Association{Account: "proj-a", User: "bob"}),
		none(slurm.Association{Account: "dept", ParentAccount: "root"}),
		none(slurm.Association{Account: "proj-b", ParentAccount: "dept"}),
		none(slurm.Association{Account: "proj-b", User: "carol"}),
	}
}

// WithAssocLimits is assocs with the association of account and user ("" an account's own)
// changed by set.
func WithAssocLimits(assocs []slurm.Association, account, user string, set func(*slurm.Association)) []slurm.Association {
	out := slices.Clone(assocs)
	for i := range out {
		if out[i].Account == account && out[i].User == user {
			set(&out[i])
		}
	}
	return out
}

// MustTRES parses a TRES string as Slurm prints it, failing the test when it cannot.
func MustTRES(t *testing.T, s string) gpureq.TRES {
	t.Helper()
	tres, err := gpureq.ParseTRES(s)
	if err != nil {
		t.Fatal(err)
	}
	return tres
}
