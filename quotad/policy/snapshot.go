package policy

import (
	"sort"
	"time"
)

// JobState is Slurm's base job state as squeue --json spells it.
type JobState string

const (
	StatePending     JobState = "PENDING"
	StateRunning     JobState = "RUNNING"
	StateSuspended   JobState = "SUSPENDED"
	StateCompleting  JobState = "COMPLETING"
	StateConfiguring JobState = "CONFIGURING"
)

// holdsGPUs: a suspended job keeps its GRES, and a completing one has not released them yet.
func (s JobState) holdsGPUs() bool {
	switch s {
	case StateRunning, StateSuspended, StateCompleting, StateConfiguring:
		return true
	}
	return false
}

// Snapshot is everything the policy looks at, already parsed by the adapter.
type Snapshot struct {
	// TakenAt is when the OLDEST of the snapshot's sources (slurmctld, slurmdbd) was read.
	TakenAt time.Time
	Jobs    []Job
	// GPUs lists GPU counts per partition and type. Partitions must not share nodes, or the
	// adapter must count each node's GPUs in one of them only.
	GPUs     []GPUPool
	QOS      []QOS
	Accounts []Account
	// Usage is GPU-seconds per account over the fairness window; it breaks ties among
	// borrowers with equal deficits in favour of the one that used less.
	Usage map[string]float64
	// WholeArrays is set where Slurm does not start an array task lent alone while the rest of
	// its array waits (22.05): an array record is then lent only when all its tasks fit.
	WholeArrays bool
}

// Job is one job from squeue, with its GPU request already parsed.
type Job struct {
	ID         uint32
	Account    string
	User       string
	State      JobState
	Reason     string // state_reason, e.g. QOSGrpGRES, Resources, Priority
	QOS        string
	Partitions []string // in the order the job listed them
	// GPUsPerNode (tres_per_node) and GPUsPerJob (tres_per_job) by GPU type; "" is any type.
	GPUsPerNode map[string]int
	GPUsPerJob  map[string]int
	Nodes       int
	// AllocatedGPUs are a started job's GPUs by type, all nodes together (from tres_alloc_str);
	// nil means "as requested". It tells which type an untyped request got.
	AllocatedGPUs map[string]int
	Requeue       bool // false for --no-requeue: such a job is cancelled, not requeued, on preemption
	// ArrayJobID and ArrayTasks name a job array's tasks: ArrayTasks are the task ids (ascending)
	// this record stands for, one for a task with a record of its own, several for the pending
	// tasks Slurm still keeps in the array's record. Each task is one job with the request
	// above: quotas, limits and fairness count tasks. Empty for a job not in an array.
	ArrayJobID uint32
	ArrayTasks []uint32
	Priority   int64
	SubmitTime time.Time
	StartTime  time.Time
}

// tasks is how many jobs the record stands for.
func (j *Job) tasks() int { return max(1, len(j.ArrayTasks)) }

// target names the record's i-th task (0 for a job not in an array) as scontrol does: "123",
// or "123_7", which also splits a task off its array's pending record.
func (j *Job) target(i int) (arrayJob, task uint32) {
	if j.ArrayJobID == 0 || len(j.ArrayTasks) == 0 {
		return 0, 0
	}
	return j.ArrayJobID, j.ArrayTasks[i]
}

// need is the job's GPUs by type for the whole job ("" any type), as requested; for an array
// record, for each of its tasks.
func (j *Job) need() map[string]int {
	nodes := j.Nodes
	if nodes < 1 {
		nodes = 1
	}
	out := map[string]int{}
	for t, n := range j.GPUsPerNode {
		if n > 0 {
			out[t] += n * nodes
		}
	}
	for t, n := range j.GPUsPerJob {
		if n > 0 {
			out[t] += n
		}
	}
	return out
}

// held is what a started job holds: its allocation when known, else its request.
func (j *Job) held() map[string]int {
	if j.AllocatedGPUs != nil {
		out := map[string]int{}
		for t, n := range j.AllocatedGPUs {
			if n > 0 {
				out[t] = n
			}
		}
		return out
	}
	return j.need()
}

// GPUPool is the GPUs of one type in one partition.
type GPUPool struct {
	Partition string
	Type      string
	Total     int
	Idle      int
}

// QOS is a QOS object as slurmdbd holds it.
type QOS struct {
	Name string
	// GrpTRES by TRES name ("gres/gpu", "gres/gpu:a100", "cpu"...); an absent key is no limit.
	GrpTRES           map[string]int64
	Preempt           []string
	PreemptMode       string // "requeue", "cluster", ...
	GraceTime         time.Duration
	PreemptExemptTime time.Duration
	Priority          int
}

// Account is an account's own association: the QOS its users may use and their default.
type Account struct {
	Name       string
	QOS        []string
	DefaultQOS string
}

// jobOrder is the order in which one project's jobs are served: Slurm's priority, then age.
func jobOrder(jobs []*Job) {
	sort.Slice(jobs, func(a, b int) bool {
		x, y := jobs[a], jobs[b]
		if x.Priority != y.Priority {
			return x.Priority > y.Priority
		}
		if !x.SubmitTime.Equal(y.SubmitTime) {
			return x.SubmitTime.Before(y.SubmitTime)
		}
		return x.ID < y.ID
	})
}
