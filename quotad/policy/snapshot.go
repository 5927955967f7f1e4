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
	// Unreadable are jobs in the queue the adapter could not read (e.g. a GPU request it
	// cannot parse). Each counts at its worst (see unreadable.go) and the plan acts on the
	// rest: one user's job must not stop lending for everyone.
	Unreadable []UnreadableJob
	// Nodes are the nodes with GPUs, each once however many partitions list it: partitions
	// share their nodes' idle GPUs, CPUs and memory.
	Nodes    []Node
	QOS      []QOS
	Accounts []Account
	// Users are the user associations that set their own QOS list; the others inherit their
	// account's and need nothing of their own.
	Users []UserAssociation
	// Usage is GPU-seconds per account over the fairness window; it breaks ties among
	// borrowers with equal deficits in favour of the one that used less.
	Usage map[string]float64
	// DecayedUsage is each account's GPU-seconds as Slurm's fair share keeps them, decayed by
	// the site's half-life (sshare), read when the table's lendOrder is decayed-usage.
	DecayedUsage map[string]float64
	// WholeArrays is set where Slurm does not start an array task lent alone while the rest of
	// its array waits (22.05): an array record is then lent only when all its tasks fit.
	WholeArrays bool
	// Reclaims are the runs Slurm ended by preemption (and requeue) within ReclaimWindow, any
	// QOS, oldest first: the reclaim backoff reads those of borrow QOS.
	Reclaims []Reclaim
}

// Reclaim is one run of a job that Slurm preempted and requeued: in a borrow QOS, a claim
// took its GPUs back.
type Reclaim struct {
	JobID          uint32
	QOS            string // the QOS it ran in
	Started, Ended time.Time
}

// UnreadableJob is a job in the queue that the adapter could not turn into a Job: what of it
// could be read, which is enough to find its project and whether it holds GPUs.
type UnreadableJob struct {
	ID            uint32
	Account, User string
	QOS           string
	State         JobState
	Problem       string // what could not be read, quoting the string, e.g. tres_per_node "gres/gpu:x"
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
	// CPUs and MemoryMB are the whole job's request (tres_req_str); 0 when unknown. With Nodes
	// they give the shape a node needs free for the job to start there.
	CPUs     int
	MemoryMB int64
	// AllocatedGPUs are a started job's GPUs by type, all nodes together (from tres_alloc_str);
	// nil means "as requested". It tells which type an untyped request got.
	AllocatedGPUs map[string]int
	// Requeue is the effective requeue flag: --requeue/--no-requeue, else JobRequeue at submit.
	Requeue bool
	// Batch is Slurm's batch_flag: false for salloc and srun allocations.
	Batch bool
	// ArrayJobID and ArrayTasks name a job array's tasks: ArrayTasks are the task ids (ascending)
	// this record stands for, one for a task with a record of its own, several for the pending
	// tasks Slurm still keeps in the array's record. Each task is one job with the request
	// above: quotas, limits and fairness count tasks. Empty for a job not in an array.
	ArrayJobID uint32
	ArrayTasks []uint32
	// ArrayThrottle is the array's limit on tasks running at once (sbatch --array=...%N), on
	// every record of the array; 0 for none. A task lent beyond it would wait in the borrow QOS
	// with idle GPUs promised to it.
	ArrayThrottle int
	// ElasticMain is the main job an elastic worker's name names (a job in an elastic QOS
	// named like elasticd's workers); 0 for any other job. Only explanations use it.
	ElasticMain uint32
	Priority    int64
	SubmitTime  time.Time
	StartTime   time.Time
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

func (j *Job) nodeCount() int { return max(j.Nodes, 1) }

// need is the job's GPUs by type for the whole job ("" any type), as requested. Per type,
// --gpus (per job) and --gpus-per-node describe the same GPUs: Slurm requires the per-job
// count to be a multiple of the per-node one and sets the node count from their ratio, so the
// job holds the larger of the two, never their sum.
func (j *Job) need() map[string]int {
	nodes := j.nodeCount()
	out := map[string]int{}
	for t, n := range j.GPUsPerNode {
		if n > 0 {
			out[t] = n * nodes
		}
	}
	for t, n := range j.GPUsPerJob {
		if n > out[t] {
			out[t] = n
		}
	}
	return out
}

// RequestedGPUs is what the record asks for by type ("" any type), all its tasks together:
// an array record still holding several pending tasks asks for each of them.
func (j *Job) RequestedGPUs() map[string]int {
	out := j.need()
	for t := range out {
		out[t] *= j.tasks()
	}
	return out
}

// perNodeGPUs is what each of the job's nodes must hold, by type: the per-node count, or the
// per-job count spread evenly (rounded up) when that is larger.
func (j *Job) perNodeGPUs() map[string]int {
	nodes := j.nodeCount()
	out := map[string]int{}
	for t, n := range j.GPUsPerNode {
		if n > 0 {
			out[t] = n
		}
	}
	for t, n := range j.GPUsPerJob {
		if per := ceilDiv(n, nodes); per > out[t] {
			out[t] = per
		}
	}
	return out
}

func ceilDiv(n, d int) int {
	if n <= 0 {
		return 0
	}
	return (n-1)/d + 1
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

// Node is one node with GPUs as slurmctld reports it now.
type Node struct {
	Name       string
	Partitions []string
	GPUs       map[string]int // type → GPUs configured
	IdleGPUs   map[string]int // type → GPUs not allocated to any job
	FreeCPUs   int            // cpus - alloc_cpus
	FreeMemMB  int64          // real_memory - alloc_memory
	// Unusable says why Slurm starts no new job of ours there now (down, drained, in a
	// reservation); "" when it may. Such a node's idle GPUs are not idle for quotad.
	Unusable string
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

// Account is an account's own association: the QOS its users may use and their default, as
// Slurm resolves them (inherited from the parent account unless set on the association).
type Account struct {
	Name       string
	Parent     string // parent account; "" for root's children read without root, or root
	QOS        []string
	DefaultQOS string
	// OwnQOS and OwnDefaultQOS say the association sets its QOS list (or adds to or removes
	// from its parent's) or its default itself, rather than inheriting the parent's: a change
	// of the parent's then does not reach it.
	OwnQOS, OwnDefaultQOS bool
}

// UserAssociation is a user's association in an account (and partition, when it has one) that
// sets its own QOS list, with the list as Slurm resolves it: `sacctmgr modify user ... set
// qos=...` replaces the account's list for that user, so a QOS quotad gives the account does not
// reach them.
type UserAssociation struct {
	User, Account, Partition string
	QOS                      []string
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
