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
	// Requeue is the effective requeue flag: --requeue/--no-requeue, else JobRequeue at submit.
	Requeue bool
	// Batch is Slurm's batch_flag: false for salloc and srun allocations.
	Batch      bool
	Priority   int64
	SubmitTime time.Time
	StartTime  time.Time
}

// Requeueable says whether Slurm's preemption can requeue the job. Slurm requeues only batch
// jobs with Requeue=1 and kills every other preempted job, so only these may ever borrow.
func (j *Job) Requeueable() bool { return j.Batch && j.Requeue }

// whyNotRequeueable says why Slurm would kill the job on preemption; "" when it would requeue it.
func (j *Job) whyNotRequeueable() string {
	switch {
	case !j.Batch:
		return "it is an interactive allocation (salloc or srun, not sbatch), and Slurm can requeue only batch jobs"
	case !j.Requeue:
		return "it has Requeue=0 (--no-requeue, or no --requeue where slurm.conf has JobRequeue=0), so Slurm cannot requeue it"
	}
	return ""
}

// need is the job's GPUs by type for the whole job ("" any type), as requested.
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
