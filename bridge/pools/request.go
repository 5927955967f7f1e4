package pools

import (
	"math"
	"strings"

	"github.com/slurmbridge/slurmbridge/bridge/gpureq"
)

// Slurm's "not set" sentinels (slurm.h, 22.05). The cgo layer copies job_desc fields as they
// are; they are interpreted here and nowhere else.
const (
	NoVal16    uint16 = 0xfffe
	NoVal      uint32 = 0xfffffffe
	NoVal64    uint64 = 0xfffffffffffffffe
	Infinite16 uint16 = 0xffff
	Infinite   uint32 = 0xffffffff
	Infinite64 uint64 = 0xffffffffffffffff
	// MemPerCPU flags pn_min_memory as per allocated CPU (--mem-per-cpu) instead of per node.
	MemPerCPU uint64 = 0x8000000000000000
)

// Op says which plugin entry the request comes from.
type Op uint8

const (
	// Submit is job_submit: a field left unset means the job does not ask for it.
	Submit Op = iota
	// Modify is job_modify: job_desc holds only what the update changes, so an unset field
	// means "unchanged and unknown", not "none".
	Modify
)

// Request is the part of job_desc_msg_t that routing reads, copied 1:1 by the cgo layer (NULL
// strings become ""; numbers keep Slurm's NO_VAL/INFINITE sentinels).
type Request struct {
	Op             Op
	Partition      string // possibly a comma-separated list
	TRESPerJob     string
	TRESPerNode    string
	TRESPerSocket  string
	TRESPerTask    string
	MinCPUs        uint32 // total CPUs of the job
	CPUsPerTask    uint16
	PnMinCPUs      uint16
	PnMinMemory    uint64 // MB per node, or per CPU when MemPerCPU is set
	MinNodes       uint32
	MaxNodes       uint32
	NumTasks       uint32
	NTasksPerNode  uint16
	SocketsPerNode uint16 // for --gpus-per-socket
	Comment        string // carries the workload class: "class=NAME"
	Features       string // --constraint; not interpreted (see the package doc)
	// QOS is the requested QOS, possibly a comma-separated list (24.11 on).
	QOS string
	// Account is --account, "" for the user's default account (Slurm fills it in after
	// job_submit). Routing never reads it: only the borrow QOS guard does.
	Account string
	// Batch is job_desc->script != NULL: an sbatch job, not an salloc or srun allocation.
	// Unknown (false) on Modify.
	Batch bool
	// Requeue is --requeue (1), --no-requeue (0) or neither (NoVal16: slurm.conf's JobRequeue).
	Requeue uint16
	// HetJob: the job is a component of a heterogeneous job (sbatch's hetjob, `:` between
	// components of salloc or srun). Slurm preempts a heterogeneous job only through its leader.
	HetJob bool
	// OpenMode is --open-mode: OpenModeAppend, OpenModeTruncate, or 0 when the job leaves it to
	// the cluster's JobFileAppend.
	OpenMode uint8
}

// Slurm's --open-mode values (slurm.h OPEN_MODE_*, the same from 22.05 to 26.05).
const (
	OpenModeAppend   uint8 = 1
	OpenModeTruncate uint8 = 2
)

// UnsetRequest is a submission that asks for nothing, as slurmctld fills job_desc for
// `sbatch --wrap true` (bridge/testdata/job_desc-22.05.8.txt): every count at its NO_VAL
// sentinel, min_cpus 1, neither --requeue nor --no-requeue. Batch is false: whoever knows that
// a script came with it sets it. poolctl explain starts from it, and tests build jobs on it.
func UnsetRequest() Request {
	return Request{
		Op:             Submit,
		MinCPUs:        1,
		CPUsPerTask:    NoVal16,
		PnMinCPUs:      NoVal16,
		PnMinMemory:    NoVal64,
		MinNodes:       NoVal,
		MaxNodes:       NoVal,
		NumTasks:       NoVal,
		NTasksPerNode:  NoVal16,
		SocketsPerNode: NoVal16,
		Requeue:        NoVal16,
	}
}

// WorkloadClass is the job's workload class: the value of the first "class=NAME" word of its
// comment (words are separated by spaces, commas or semicolons), or "" when there is none.
func WorkloadClass(comment string) string {
	for comment != "" {
		i := strings.IndexAny(comment, " \t,;")
		word := comment
		if i >= 0 {
			word, comment = comment[:i], comment[i+1:]
		} else {
			comment = ""
		}
		if class, ok := strings.CutPrefix(word, "class="); ok && validClass(class) {
			return class
		}
	}
	return ""
}

// unbounded stands for "as many as it takes" in node counts; gpureq divides by it to 1.
const unbounded = math.MaxUint64

// jobShape is the request with its sentinels resolved, computed once per request.
type jobShape struct {
	gpus           gpureq.Request
	minNodes       uint64 // ≥ 1
	maxNodes       uint64 // unbounded when not set
	tasks          uint64 // 0 = not set
	tasksPerNode   uint64 // 0 = not set
	cpusPerTask    uint64 // ≥ 1
	pnMinCPUs      uint64 // 0 = not set
	minCPUs        uint64 // 0 = not set
	memMB          uint64 // per node, or per CPU when memPerCPU; 0 = not set or whole node
	memPerCPU      bool
	socketsPerNode uint64 // 0 = not set
}

func newJobShape(r *Request) (jobShape, error) {
	gpus, err := gpureq.Parse(gpureq.Fields{
		PerJob: r.TRESPerJob, PerNode: r.TRESPerNode, PerSocket: r.TRESPerSocket, PerTask: r.TRESPerTask,
	})
	if err != nil {
		return jobShape{}, err
	}
	s := jobShape{
		gpus:           gpus,
		minNodes:       max(set32(r.MinNodes), 1),
		maxNodes:       set32(r.MaxNodes),
		tasks:          set32(r.NumTasks),
		tasksPerNode:   set16(r.NTasksPerNode),
		cpusPerTask:    max(set16(r.CPUsPerTask), 1),
		pnMinCPUs:      set16(r.PnMinCPUs),
		minCPUs:        set32(r.MinCPUs),
		socketsPerNode: set16(r.SocketsPerNode),
	}
	if s.maxNodes == 0 {
		s.maxNodes = unbounded
	}
	if m := r.PnMinMemory; m != NoVal64 && m != Infinite64 {
		// --mem=0 means "all of a node's memory": it fits any node, like no request.
		s.memMB, s.memPerCPU = m&^MemPerCPU, m&MemPerCPU != 0
	}
	return s, nil
}

// set32 and set16 read a job_desc number: 0 and the sentinels mean "not set".
func set32(v uint32) uint64 {
	if v == NoVal || v == Infinite {
		return 0
	}
	return uint64(v)
}

func set16(v uint16) uint64 {
	if v == NoVal16 || v == Infinite16 {
		return 0
	}
	return uint64(v)
}

// nodeNeeds is what one node of a pool must hold for the job: the lower bounds routing checks.
type nodeNeeds struct {
	nodes    uint64 // nodes the job needs at least
	gpus     uint64
	cpus     uint64
	memoryMB uint64
}

// needsOn spreads the job over a pool with poolNodes nodes (0 = unknown) as thinly as its
// request allows, which gives the least each node must hold.
func (s *jobShape) needsOn(poolNodes uint64) nodeNeeds {
	spread := s.maxNodes
	if poolNodes > 0 {
		spread = min(spread, poolNodes)
	}
	if s.tasks > 0 {
		spread = min(spread, s.tasks) // Slurm gives each node at least one task
	}
	spread = max(spread, s.minNodes)

	tasksPerNode := s.tasksPerNode
	if tasksPerNode == 0 {
		tasksPerNode = 1
		if s.tasks > 0 {
			tasksPerNode = gpureq.CeilDiv(s.tasks, spread)
		}
	}
	cpus := max(s.pnMinCPUs, gpureq.MulSat(s.cpusPerTask, tasksPerNode), gpureq.CeilDiv(s.minCPUs, spread))
	mem := s.memMB
	if s.memPerCPU {
		mem = gpureq.MulSat(mem, cpus)
	}
	return nodeNeeds{
		nodes:    s.minNodes,
		gpus:     s.gpus.GPUsPerNode(spread, tasksPerNode, s.socketsPerNode),
		cpus:     cpus,
		memoryMB: mem,
	}
}
