package pools

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/slurmbridge/slurmbridge/bridge/gpureq"
)

// Action is what the plugin does with job_desc.
type Action uint8

const (
	Keep         Action = iota // leave the partition as the job has it
	SetPartition               // write Decision.Partition into job_desc
	Reject                     // refuse the job; Decision.Message says why
)

func (a Action) String() string {
	switch a {
	case Keep:
		return "keep"
	case SetPartition:
		return "set-partition"
	case Reject:
		return "reject"
	}
	return fmt.Sprintf("Action(%d)", uint8(a))
}

// Refusal is why Route refuses a job, as a kind; each Candidate's Fit says why per pool.
type Refusal string

const (
	RefusedNoGPUPool  Refusal = "no-gpu-pool-fits"   // a GPU job that names no partition: no GPU pool can run it
	RefusedNoCPUPool  Refusal = "no-cpu-pool-fits"   // a CPU job that names no partition: no CPU pool can run it
	RefusedNamedPools Refusal = "named-pools-cannot" // none of the pools the job names can run it
)

// The job_submit plugin's refusals beside routing's, about the lending QOS (borrow and
// elastic): its log line for a refusal ends with code=KIND, for admins and tests to match
// while the words may change.
const (
	RefusedBorrowNotRequeueable Refusal = "borrow-qos-not-requeueable" // a new job asks for a borrow QOS, and Slurm could not requeue it
	RefusedBorrowQuotadOnly     Refusal = "borrow-qos-quotad-only"     // a user's update moves a job into a borrow QOS: quotad's alone
	RefusedBorrowTierQuotadOnly Refusal = "borrow-tier-quotad-only"    // a new job asks for a borrow size tier: quotad's alone
	RefusedLentNoRequeue        Refusal = "lent-job-no-requeue"        // an update sets Requeue=0 on a job in a lending QOS
	RefusedLentAccount          Refusal = "lent-job-account"           // an update changes the account of a job in a lending QOS
	RefusedLentResources        Refusal = "lent-job-resources"         // a user's update changes the GPUs, nodes, tasks or partitions of a job in a lending QOS
	RefusedRecordUnreadable     Refusal = "job-record-unreadable"      // an update gives GPUs or lends a job whose record this plugin build cannot read
	RefusedHetJobGPUs           Refusal = "hetjob-gpus"                // a heterogeneous job's component asks for GPUs
	RefusedElasticElasticdOnly  Refusal = "elastic-qos-elasticd-only"  // a user's new job asks for an elastic QOS: elasticd lends its workers there
)

// Decision is the outcome of Route.
type Decision struct {
	Action    Action
	Partition string // with SetPartition: the partition list to set
	// Message is for the user (sbatch prints err_msg): where the job went, or why it was
	// refused. "" when the job keeps the partition it named.
	Message string
	// Refusal is the kind of a Reject, for logs and tests; Message says it to the user.
	Refusal Refusal
	Class   string         // the workload class the speeds were read for
	GPUs    gpureq.Request // the job's GPU request as read
	// Candidates has one entry per pool: those in Partition in their order first, then the
	// rest in config order, each saying why it is not listed. poolctl explain prints them.
	Candidates []Candidate
	// Err is set when the request could not be read (a malformed GPU string, a Config not
	// from New). Routing is then skipped with Action Keep: Slurm judges the job itself, so a
	// parser stricter than Slurm never blocks a submission.
	Err error
}

// Fit says whether a pool's nodes can ever run the job, and if not, which need is too big.
type Fit uint8

const (
	FitOK              Fit = iota
	FitNoGPUs              // a GPU job on a pool without GPUs
	FitMixedGPUTypes       // the job wants two GPU types at once; a pool has one
	FitWrongGPUType        // the job names another GPU type
	FitTooFewNodes         // the job needs more nodes than the pool has
	FitTooFewGPUs          // per node
	FitTooFewCPUs          // per node
	FitTooLittleMemory     // per node
)

// Skip says why a pool that fits the job is not in the routed list.
type Skip uint8

const (
	SkipNone             Skip = iota
	SkipNotRequested          // the job named other partitions
	SkipNotDefault            // a CPU job goes to the default CPU pool when it fits there
	SkipGPUPoolForCPUJob      // CPU jobs are not sent to GPU pools unless they ask by name
)

// Candidate is one pool as Route saw it.
type Candidate struct {
	Pool  *Pool
	Rank  int  // 1-based place in Decision.Partition; 0 when not listed
	Fit   Fit  // why the pool can never run the job, FitOK when it can
	Skip  Skip // why a pool that fits is not listed
	Need  uint64
	Have  uint64  // Need and Have are the numbers behind Fit
	Speed float64 // the pool's speed for the job's class
	// Cost is the price per GPU-hour (per CPU-hour for CPU pools) divided by Speed: what a
	// unit of the job's work costs here, relatively.
	Cost float64

	wantType, otherType string // the GPU types the job names, for Reason
}

// Reason says why the candidate is not listed, "" when it is.
func (c *Candidate) Reason() string {
	switch c.Fit {
	case FitOK:
	case FitNoGPUs:
		return fmt.Sprintf("it has no GPUs; the job needs %d on a node", c.Need)
	case FitMixedGPUTypes:
		return fmt.Sprintf("the job asks for %s and %s GPUs at once; a pool's nodes have one type", c.wantType, c.otherType)
	case FitWrongGPUType:
		return fmt.Sprintf("it has %s GPUs; the job asks for %s", c.Pool.GPUType, c.wantType)
	case FitTooFewNodes:
		return fmt.Sprintf("it has %d nodes; the job needs %d", c.Have, c.Need)
	case FitTooFewGPUs:
		return fmt.Sprintf("its nodes have %d GPUs; the job needs %d on one node", c.Have, c.Need)
	case FitTooFewCPUs:
		return fmt.Sprintf("its nodes have %d CPUs; the job needs %d on one node", c.Have, c.Need)
	case FitTooLittleMemory:
		return fmt.Sprintf("its nodes have %d MB of memory; the job needs %d MB on one node", c.Have, c.Need)
	}
	switch c.Skip {
	case SkipNotRequested:
		return "fits, but the job names other partitions"
	case SkipNotDefault:
		return "fits, but CPU jobs go to the default CPU pool"
	case SkipGPUPoolForCPUJob:
		return "fits, but CPU-only jobs go to GPU pools only when they name them with -p"
	}
	if c.Rank == 0 {
		return "not listed"
	}
	return ""
}

var errNotReady = errors.New("pools: config was not prepared by New, Parse or Load")

// Route decides where a job goes. It is a pure function of the config and the request: no
// I/O, no map iteration, time linear in the pools and the request's length. See the package
// documentation for the rules.
func (c *Config) Route(r *Request) Decision {
	if c == nil || !c.ready {
		return Decision{Action: Keep, Err: errNotReady}
	}
	job, err := newJobShape(r)
	if err != nil {
		return Decision{Action: Keep, Err: err}
	}
	d := Decision{Class: WorkloadClass(r.Comment), GPUs: job.gpus}
	d.Candidates = c.assess(&job, d.Class)
	isGPU := job.gpus.IsGPU()
	switch {
	case r.Partition != "":
		c.checkNamed(&d, r.Partition, isGPU)
	case r.Op == Modify:
		// The update leaves the partition alone; what the job runs in is not ours to change.
	case !isGPU && len(job.gpus.Other) > 0:
		d.Message = fmt.Sprintf("slurmbridge: job not routed: pools do not describe GRES %s; Slurm's default partition applies",
			job.gpus.Other[0].Name)
	case isGPU:
		c.routeGPU(&d)
	default:
		c.routeCPU(&d)
	}
	listedFirst(d.Candidates)
	return d
}

// assess is the feasibility step: one Candidate per pool, in config order.
func (c *Config) assess(job *jobShape, class string) []Candidate {
	isGPU := job.gpus.IsGPU()
	want, other := job.gpus.NamedTypes()
	cands := make([]Candidate, len(c.Pools))
	for i := range c.Pools {
		p := &c.Pools[i]
		speed := p.SpeedFor(class)
		price := p.PricePerCPUHour
		if p.IsGPU() {
			price = p.PricePerGPUHour
		}
		cand := Candidate{Pool: p, Speed: speed, Cost: price / speed, wantType: want, otherType: other}
		needs := job.needsOn(uint64(p.NodeCount))
		switch {
		case isGPU && !p.IsGPU():
			cand.Fit, cand.Need = FitNoGPUs, needs.gpus
		case isGPU && other != "":
			cand.Fit = FitMixedGPUTypes
		case isGPU && want != "" && want != p.GPUType:
			cand.Fit = FitWrongGPUType
		case p.NodeCount > 0 && needs.nodes > uint64(p.NodeCount):
			cand.Fit, cand.Need, cand.Have = FitTooFewNodes, needs.nodes, uint64(p.NodeCount)
		case needs.gpus > uint64(p.Node.GPUs):
			cand.Fit, cand.Need, cand.Have = FitTooFewGPUs, needs.gpus, uint64(p.Node.GPUs)
		case needs.cpus > uint64(p.Node.CPUs):
			cand.Fit, cand.Need, cand.Have = FitTooFewCPUs, needs.cpus, uint64(p.Node.CPUs)
		case needs.memoryMB > p.Node.MemoryMB:
			cand.Fit, cand.Need, cand.Have = FitTooLittleMemory, needs.memoryMB, p.Node.MemoryMB
		}
		cands[i] = cand
	}
	return cands
}

// routeGPU sends a GPU job without a partition to every GPU pool that fits, ordered by the
// policy and then by fallbacks.
func (c *Config) routeGPU(d *Decision) {
	var scratch [32]int
	order := c.rank(d.Candidates, scratch[:0], func(cand *Candidate) bool { return cand.Fit == FitOK })
	if len(order) == 0 {
		d.Action, d.Refusal = Reject, RefusedNoGPUPool
		d.Message = "slurmbridge: no pool can run this job (" + d.GPUs.String() + "): " + reasons(d.Candidates, true)
		return
	}
	c.list(d, order)
	d.Action = SetPartition
	var b strings.Builder
	b.Grow(128)
	b.WriteString("slurmbridge: job sent to ")
	writePools(&b, d.Partition, len(order))
	if len(order) > 1 {
		b.WriteString("; Slurm starts it in the first with room")
	}
	b.WriteString(" (policy ")
	b.WriteString(string(c.Policy))
	if d.Class != "" {
		b.WriteString(", workload class ")
		b.WriteString(d.Class)
	}
	b.WriteByte(')')
	d.Message = b.String()
}

// routeCPU sends a CPU job without a partition to the default CPU pool, or, when it does not
// fit there, to the CPU pools that fit.
func (c *Config) routeCPU(d *Decision) {
	if c.defaultCPU < 0 {
		return // Slurm's own default partition applies
	}
	for i := range d.Candidates {
		if d.Candidates[i].Fit == FitOK && d.Candidates[i].Pool.IsGPU() {
			d.Candidates[i].Skip = SkipGPUPoolForCPUJob
		}
	}
	var scratch [32]int
	order := scratch[:0]
	if d.Candidates[c.defaultCPU].Fit == FitOK {
		order = append(order, c.defaultCPU)
		for i := range d.Candidates {
			if i != c.defaultCPU && d.Candidates[i].Fit == FitOK && !d.Candidates[i].Pool.IsGPU() {
				d.Candidates[i].Skip = SkipNotDefault
			}
		}
	} else {
		order = c.rank(d.Candidates, order, func(cand *Candidate) bool { return cand.Fit == FitOK && !cand.Pool.IsGPU() })
	}
	if len(order) == 0 {
		d.Action, d.Refusal = Reject, RefusedNoCPUPool
		d.Message = "slurmbridge: no CPU pool can run this job: " + reasons(d.Candidates, false) + c.suggestAny(d.Candidates)
		return
	}
	c.list(d, order)
	d.Action = SetPartition
	var b strings.Builder
	b.WriteString("slurmbridge: job sent to ")
	writePools(&b, d.Partition, len(order))
	d.Message = b.String()
}

// checkNamed judges the partitions a job names: pools that can never run it are dropped, the
// rest (and every partition that is not a pool) kept in the job's order.
func (c *Config) checkNamed(d *Decision, partitions string, isGPU bool) {
	var keptBuf, droppedBuf [32]int
	kept, dropped := keptBuf[:0], droppedBuf[:0]
	others := 0 // named partitions that are not pools
	for name := range strings.SplitSeq(partitions, ",") {
		i, ok := c.byPartition[name]
		switch {
		case name == "":
		case !ok:
			others++
		case d.Candidates[i].Fit == FitOK:
			kept = append(kept, i)
		default:
			dropped = append(dropped, i)
		}
	}
	for i := range d.Candidates {
		if d.Candidates[i].Fit == FitOK && !slices.Contains(kept, i) {
			d.Candidates[i].Skip = SkipNotRequested
		}
	}
	c.setRanks(d.Candidates, kept)
	if len(dropped) == 0 {
		return // every pool named fits: the job keeps its partitions
	}
	if len(kept) == 0 && others == 0 {
		d.Action, d.Refusal = Reject, RefusedNamedPools
		d.Message = "slurmbridge: " + droppedPhrase(d.Candidates, dropped) + c.suggest(d.Candidates, isGPU)
		return
	}
	var b strings.Builder
	for name := range strings.SplitSeq(partitions, ",") {
		if i, ok := c.byPartition[name]; ok && d.Candidates[i].Fit != FitOK || name == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(name)
	}
	d.Action = SetPartition
	d.Partition = b.String()
	d.Message = "slurmbridge: job sent to " + d.Partition + " only: " + droppedPhrase(d.Candidates, dropped)
}
