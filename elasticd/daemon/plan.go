package daemon

import (
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/elasticd/capacity"
	"github.com/slurmbridge/slurmbridge/elasticd/policy"
	"github.com/slurmbridge/slurmbridge/elasticd/reconcile"
)

// jobPlan is what one cycle does with one job: reconcile's plan, and the shape and QOS of each
// worker it submits, from the job's room as the cycle counted it.
type jobPlan struct {
	reconcile.Plan
	shape capacity.Shape
	// grow, replace and succeed place the workers of Plan.Grow, of Plan.Replace (when its
	// successor joins first) and of Plan.Succeed, in the order they are submitted.
	grow, replace, succeed []capacity.Placement
}

// planJob judges one job at now from what elasticd remembers of it (state), what the cycle saw
// of it (seen, its capacity not yet counted) and the cycle's snapshot: its room, counted once
// (capacity.Of), then reconcile's plan, which asks elasticd/policy when no rule of its own
// applies, then where the workers the plan submits run. It reads nothing else and changes
// nothing: act carries the plan out.
func planJob(state reconcile.State, seen reconcile.Snapshot, snap *capacity.Snapshot, job capacity.Job, now time.Time) jobPlan {
	room := capacity.Of(snap, job)
	seen.Capacity, seen.CapacityLimit = room.Capacity()
	seen.GrowthCapacity, seen.GrowthLimit = room.Growth()
	mainType := room.ByType[room.MainType]
	seen.MainTypeRoom = reconcile.Room{Workers: mainType.Assoc, Why: mainType.AssocWhy}
	p := jobPlan{Plan: reconcile.Reconcile(state, seen, now), shape: room.Shape}
	if g := p.Grow; g != nil {
		p.grow = room.Place(g.Type, g.Count)
	}
	if r := p.Replace; r != nil && !r.LeaveFirst {
		p.replace = room.Place(r.Type, 1)
	}
	if s := p.Succeed; s != nil {
		p.succeed = room.Place(s.Type, 1)
	}
	return p
}

// capacityJob is what j's room depends on: its main job, the GPUs of each worker, the GPU types
// it may grow by (its declared pools', else the main job's) with the partitions of each, and
// its workers in the queue.
func (d *Daemon) capacityJob(j *job, main slurm.Job, workers []slurm.Job) capacity.Job {
	c := capacity.Job{Main: main, GPUsPerWorker: j.decl.GPUsPerWorker, MainType: d.typeOf(main), Partitions: map[policy.GPUType][]string{}}
	for _, o := range d.typeOptions(j) {
		c.Types = append(c.Types, o.Type)
		c.Partitions[o.Type] = d.partitionsOf(j, main, o.Type)
	}
	c.Partitions[c.MainType] = d.partitionsOf(j, main, c.MainType)
	for _, w := range workers {
		c.Workers = append(c.Workers, w.ID)
	}
	return c
}
