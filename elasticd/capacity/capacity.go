// Package capacity counts what one elastic job may start in one cycle, from that cycle's
// snapshot of the cluster: the worker's shape (the main job's request per node), how many
// workers of it fit on the nodes Slurm may start jobs on, what the project's guarantee, its
// elastic QOS (the borrowing limit) and the other projects' lending limits leave, what the
// user's and account's associations admit, and what the jobs waiting for the same GPUs leave
// to growth; each with the limit that holds it, in words. It reads no clock, runs no command
// and touches no file: elasticd/daemon reads the snapshot and hands it in.
package capacity

import (
	"github.com/slurmbridge/slurmbridge/bridge/gpureq"
	"github.com/slurmbridge/slurmbridge/bridge/pools"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/elasticd/policy"
)

// Unlimited is a room no limit bounds.
const Unlimited = policy.Unlimited

// Snapshot is one cycle's view of the cluster, which every job's room is counted from. The
// cycle makes it and nothing writes it afterwards; the sums over it (scans.go) are made the
// first time a job asks for them, without a lock: one cycle reads a snapshot at a time.
type Snapshot struct {
	Jobs  map[uint32]slurm.Job
	Nodes []slurm.Node
	// QOS is every QOS' GrpTRES by lower-case name; nil when they could not be read, and
	// workers then run in their main job's QOS.
	QOS map[string]gpureq.TRES
	// Assocs are the cluster's associations with their limits; AssocErr says why they could
	// not be read, and then no worker is submitted (it could wait on a limit for ever).
	Assocs   []slurm.Association
	AssocErr error
	// Lending is what the projects' lending limits keep idle (KeptNow); unless it is fresh,
	// no worker borrows.
	Lending policy.Lending
	// Pools names each project's elastic and borrow QOS (nil: the defaults).
	Pools *pools.Config

	sums *scans
}

// Job is what one elastic job's room depends on besides the snapshot.
type Job struct {
	Main slurm.Job
	// GPUsPerWorker is each worker's declared GPUs.
	GPUsPerWorker int
	// MainType is the main job's GPU type: below its min the job grows by workers of it.
	MainType policy.GPUType
	// Types are the GPU types the job may grow by (its declared pools'), in order; none: the
	// main job's.
	Types []policy.GPUType
	// Partitions are where the job's workers of each type, MainType's included, may run.
	Partitions map[policy.GPUType][]string
	// Workers are the job's workers in the queue: its own pending ones are what growth is,
	// not jobs it yields to.
	Workers []uint32
}

// Room is what one job may start this cycle, counted once, per GPU type.
type Room struct {
	Shape    Shape
	MainType policy.GPUType
	// Types are the types the job may grow by, in order.
	Types []policy.GPUType
	// ByType has each of Types and MainType.
	ByType map[policy.GPUType]TypeRoom
}

// TypeRoom is the room for workers of one GPU type.
type TypeRoom struct {
	Partitions []string
	// Workers is how many more workers could start now: the nodes' free GPUs, CPUs and memory
	// for the worker's shape, within what the guarantee, the borrowing limit, the other
	// projects' lending limits and the associations admit. Why names the association or
	// lending limit that holds it, where one does. Counted for the types the job grows by.
	Workers int
	Why     string
	// Assoc is what the associations alone admit (Unlimited: no limit applies), AssocWhy the
	// tightest of them.
	Assoc    int
	AssocWhy string
	// Growth is what growth beyond the min may add once the jobs waiting for these GPUs have
	// them, with why; Yields is false when none waits (policy.GrowthRoom).
	Growth    int
	GrowthWhy string
	Yields    bool
	// qos is where the type's next workers run, and what the QOS limits leave of it.
	qos qosRoom
}

// Of counts job's room in snap: for each type it may grow by, the workers that could start
// now and the room growth leaves to waiting jobs; for the main job's type, what the
// associations admit (a job below its min grows by it as far as they do, whatever the nodes
// have free: its workers then wait in the queue for them).
func Of(snap *Snapshot, job Job) Room {
	types := job.Types
	if len(types) == 0 {
		types = []policy.GPUType{job.MainType}
	}
	shape := ShapeOf(job.Main, job.GPUsPerWorker)
	r := Room{Shape: shape, MainType: job.MainType, Types: types, ByType: make(map[policy.GPUType]TypeRoom, len(types)+1)}
	waiting := snap.waitingJobs(job.Workers)
	for _, t := range types {
		tr := limitsOf(snap, job, shape, t)
		tr.Workers = shape.fits(snap, tr.Partitions, t)
		if n := tr.qos.workers(shape.GPUs); n != Unlimited {
			if n <= tr.Workers && tr.qos.lendHolds(shape.GPUs) {
				tr.Why = tr.qos.lendWhy
			}
			tr.Workers = min(tr.Workers, n)
		}
		if tr.Assoc != Unlimited && tr.Assoc <= tr.Workers {
			tr.Workers, tr.Why = tr.Assoc, tr.AssocWhy
		}
		tr.Growth, tr.GrowthWhy, tr.Yields = policy.GrowthRoom(waiting, tr.Partitions, t, freeGPUsIn(snap, tr.Partitions, t), shape.GPUs)
		r.ByType[t] = tr
	}
	if _, counted := r.ByType[job.MainType]; !counted {
		r.ByType[job.MainType] = limitsOf(snap, job, shape, job.MainType)
	}
	return r
}

// limitsOf is the QOS and association room of workers of type t.
func limitsOf(snap *Snapshot, job Job, shape Shape, t policy.GPUType) TypeRoom {
	parts := job.Partitions[t]
	tr := TypeRoom{Partitions: parts, qos: roomFor(snap, job.Main, t, parts)}
	// The associations skip the limits of the QOS the next worker runs in (associationRoom).
	next := tr.qos
	qos, _ := next.take(shape.GPUs)
	tr.Assoc, tr.AssocWhy = associationRoom(snap, job.Main, shape, t, parts, snap.QOS[pools.QOSKey(qos)])
	return tr
}

// Capacity is, per type the job grows by, how many workers could start now, and the limit
// that holds each type where one does.
func (r Room) Capacity() (workers map[policy.GPUType]int, limits map[policy.GPUType]string) {
	workers, limits = make(map[policy.GPUType]int, len(r.Types)), map[policy.GPUType]string{}
	for _, t := range r.Types {
		tr := r.ByType[t]
		workers[t] = tr.Workers
		if tr.Why != "" {
			limits[t] = tr.Why
		}
	}
	return workers, limits
}

// Growth is, per type the job grows by where jobs wait for its GPUs, the room growth beyond
// the min leaves them, and why.
func (r Room) Growth() (room map[policy.GPUType]int, limits map[policy.GPUType]string) {
	room, limits = map[policy.GPUType]int{}, map[policy.GPUType]string{}
	for _, t := range r.Types {
		if tr := r.ByType[t]; tr.Yields {
			room[t], limits[t] = tr.Growth, tr.GrowthWhy
		}
	}
	return room, limits
}

// Placement is the QOS one new worker runs in. A borrowed one (on GPUs other projects lend)
// is submitted in GuarQOS ("" the account's default) to begin later, then lent into QOS.
type Placement struct {
	QOS      string
	Borrowed bool
	GuarQOS  string
}

// Place picks the QOS of n new workers of type t, in turn: the guarantee while it has room,
// then the elastic QOS while the borrowing and lending limits allow, else the guarantee, to
// wait there like any job. A type the room has not counted (no pool of the job has it, and it
// is not the main job's) is placed in the main job's QOS: such a worker is refused before it
// is submitted.
func (r Room) Place(t policy.GPUType, n int) []Placement {
	room, counted := r.ByType[t]
	if !counted {
		room.qos = qosRoom{guarQOS: r.ByType[r.MainType].qos.guarQOS} // limits unknown: the guarantee
	}
	q := room.qos // each call places from the room as the snapshot left it
	out := make([]Placement, 0, n)
	for range n {
		qos, borrowed := q.take(r.Shape.GPUs)
		out = append(out, Placement{QOS: qos, Borrowed: borrowed, GuarQOS: q.guarQOS})
	}
	return out
}
