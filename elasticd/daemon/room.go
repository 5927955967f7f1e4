package daemon

import (
	"slices"

	"github.com/slurmbridge/slurmbridge/bridge/gpureq"
	"github.com/slurmbridge/slurmbridge/bridge/noderoom"
	"github.com/slurmbridge/slurmbridge/bridge/pools"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/elasticd/policy"
	"github.com/slurmbridge/slurmbridge/elasticd/reconcile"
)

// workerShape is what one worker asks Slurm for on its one node: the main job's tasks, CPUs
// and memory per node (as Slurm recorded its request, #SBATCH lines and command line merged),
// with the declared GPUs of the chosen type.
type workerShape struct {
	tasks, cpusPerTask int
	memMB              uint64
	gpus               int
}

// shapeOf is a worker's shape from the main job as the snapshot read it (squeue --json: the
// tasks it asked for too).
func (d *Daemon) shapeOf(j *job, main slurm.Job) workerShape {
	nodes := uint64(max(main.NodeCount, 1))
	tasks := max(uint64(main.Tasks)/nodes, 1)
	cpus := max(main.TRESReq["cpu"]/nodes, 1)
	return workerShape{
		tasks:       int(tasks),
		cpusPerTask: int((cpus + tasks - 1) / tasks),
		memMB:       main.TRESReq["mem"] / nodes,
		gpus:        j.decl.GPUsPerWorker,
	}
}

// fits is how many workers of shape s the snapshot's nodes of the partitions can start now:
// GPUs of type t, CPUs and memory free on nodes Slurm may start jobs on, each node once
// (bridge/noderoom's rule, quotad's too).
func (s workerShape) fits(snap *snapshot, parts []string, t policy.GPUType) int {
	each := noderoom.Shape{GPUs: []noderoom.GPUCount{{Type: roomType(t), Count: s.gpus}}, CPUs: s.tasks * s.cpusPerTask, MemoryMB: int64(s.memMB)}
	free := snap.free()
	total := 0
	for i := range snap.nodes {
		if startsJobs(&snap.nodes[i], parts) {
			total += free[i].Fits(each)
		}
	}
	return total
}

// roomType is t as bridge/noderoom names it: "gpu" (a worker of any type) is AnyType.
func roomType(t policy.GPUType) string {
	if t == "gpu" {
		return noderoom.AnyType
	}
	return string(t)
}

// startsJobs: Slurm may start a worker on the node now in one of the partitions (see
// slurm.Node.WhyNoNewJobs: up, not reserved, not planned by backfill for another job).
func startsJobs(n *slurm.Node, parts []string) bool {
	return anyPartition(n, parts) && n.WhyNoNewJobs() == ""
}

func anyPartition(n *slurm.Node, parts []string) bool {
	for _, p := range parts {
		if n.InPartition(p) {
			return true
		}
	}
	return false
}

// unlimited is a QOS room without a limit.
const unlimited = reconcile.Unlimited

// qosRoom is where the job's next workers of one GPU type may run: the project's guarantee
// while it has GPUs idle, then its elastic QOS, which Slurm preempts (by requeue) when
// guaranteed work claims the GPUs, before any other borrower (quotad keeps its priority lowest).
type qosRoom struct {
	guarQOS   string // the main job's own QOS; "" when the main job borrows itself (or none is known)
	guar      int    // GPUs of the type free in the guarantee now, or unlimited
	borrowQOS string // where borrowed workers run; "" when the cluster has no such QOS for the project
	borrow    int    // GPUs the project's borrowing limit leaves there, or unlimited
	known     bool   // the QOS limits could be read this cycle
	// lend is the GPUs the job's workers may take in all, guaranteed and borrowed, while the
	// GPUs other projects' lending limits keep for their owners stay idle (policy.LendingRoom),
	// or unlimited; lendWhy says what holds it.
	lend    int
	lendWhy string
}

// roomFor reads the main job's QOS and the project's elastic QOS: their GrpTRES limits for
// GPUs of type t less what running and pending jobs in them hold or wait for. The elastic
// QOS' limit is the project's borrowing limit, which counts its borrow QOS too. A cluster whose
// quotad has not created the elastic QOS yet (an upgrade under way) has workers only within the
// guarantee: the job_submit plugin refuses a user's job straight into the borrow QOS, and
// elasticd submits as the job's user. Borrowed workers also leave idle, of the GPUs free in
// the partitions parts, what other projects' lending limits keep for their owners' own jobs
// (quotad's plan; none borrows when it cannot be read fresh): no QOS limit keeps that, and an
// owner whose kept GPUs a worker took would wait for a reclaim.
func (d *Daemon) roomFor(main slurm.Job, snap *snapshot, t policy.GPUType, parts []string) qosRoom {
	r := qosRoom{guar: unlimited, borrow: unlimited, known: snap.qos != nil, lend: unlimited}
	elastic, borrow := d.cfg.Pools.ElasticQOSFor(main.Account), d.cfg.Pools.BorrowQOSFor(main.Account)
	mainBorrows := d.cfg.Pools.IsLendingQOS(main.QOS)
	if !mainBorrows {
		r.guarQOS = pools.QOSKey(main.QOS)
	}
	if snap.qos == nil {
		return r // unknown limits: the worker asks for the main job's QOS, as the main job did
	}
	if mainBorrows {
		r.guar = 0 // the project is past its guarantee already
	} else if limit, ok := snap.qos[r.guarQOS]; ok {
		r.guar = room(limit, snap, t, r.guarQOS)
	}
	if limit, ok := snap.qos[elastic]; ok {
		// The borrowing limit counts the project's borrowers in every size tier and in its
		// protected borrow QOS too.
		counted := append([]string{elastic, borrow}, snap.borrowTiers(d.cfg.Pools.BorrowQOSPattern(), main.Account)...)
		r.borrowQOS, r.borrow = elastic, room(limit, snap, t, counted...)
		if n, limited, why := policy.LendingRoom(snap.lending, main.Account, t, freeGPUsIn(snap, parts, t)); limited {
			r.lend, r.lendWhy = n, why
		}
	}
	return r
}

// workers is how many workers of gpus GPUs the QOS room admits: those the guarantee holds,
// then those the borrowing limit and the other projects' lending limits leave room to borrow
// once the guaranteed ones have taken their GPUs; unlimited when no limit applies.
func (r qosRoom) workers(gpus int) int {
	if !r.known || r.guar == unlimited {
		return unlimited
	}
	n := r.guar / gpus
	if r.borrowQOS == "" {
		return n
	}
	borrow := r.borrow
	if r.lend != unlimited {
		if left := max(r.lend-n*gpus, 0); borrow == unlimited || left < borrow {
			borrow = left
		}
	}
	if borrow == unlimited {
		return unlimited
	}
	return n + borrow/gpus
}

// lendHolds says the other projects' lending limits (or quotad's plan missing) hold the room
// to fewer workers of gpus GPUs than the QOS limits alone would admit.
func (r qosRoom) lendHolds(gpus int) bool {
	free := r
	free.lend = unlimited
	n, m := r.workers(gpus), free.workers(gpus)
	return r.lendWhy != "" && n != unlimited && (m == unlimited || n < m)
}

// take picks the QOS for one more worker of gpus GPUs and counts it: the guarantee while it
// has room, else the elastic QOS while the borrowing limit and the other projects' lending
// limits allow. borrowed says the worker runs on borrowed GPUs.
func (r *qosRoom) take(gpus int) (qos string, borrowed bool) {
	switch {
	case !r.known || r.guar == unlimited:
		return r.guarQOS, false
	case r.guar >= gpus:
		r.guar -= gpus
		if r.lend != unlimited {
			r.lend = max(r.lend-gpus, 0) // a guaranteed worker takes free GPUs too
		}
		return r.guarQOS, false
	case r.borrowQOS != "" && (r.borrow == unlimited || r.borrow >= gpus) && (r.lend == unlimited || r.lend >= gpus):
		if r.borrow != unlimited {
			r.borrow -= gpus
		}
		if r.lend != unlimited {
			r.lend -= gpus
		}
		return r.borrowQOS, true
	}
	return r.guarQOS, false // no room anywhere: it waits in the guarantee like any job
}

// room is a QOS' GrpTRES limit on GPUs of type t (and on all GPUs) less the GPUs the running
// jobs in any of qos hold and their pending jobs ask for; unlimited without such a limit.
func room(limit gpureq.TRES, snap *snapshot, t policy.GPUType, qos ...string) int {
	left := unlimited
	keys := []struct{ key, typ string }{{"gres/gpu", ""}}
	if t != "gpu" {
		keys = append(keys, struct{ key, typ string }{"gres/gpu:" + string(t), string(t)})
	}
	for _, k := range keys {
		lim, ok := limit[k.key]
		if !ok {
			continue
		}
		used := uint64(0)
		for _, q := range distinctFold(qos) {
			used += snap.qosGPUs(q, k.typ)
		}
		free := max(int(lim)-int(used), 0)
		if left == unlimited || free < left {
			left = free
		}
	}
	return left
}

// capacity counts, per type the job may use, how many more workers could start now: the
// nodes' free GPUs, CPUs and memory for the worker's shape, within what the project's
// guarantee and its elastic QOS (the borrowing limit) leave, what the other projects' lending
// limits leave to borrow, and what the user's and account's associations admit. limits says,
// per type, which association or lending limit holds it where one does.
func (d *Daemon) capacity(j *job, main slurm.Job, snap *snapshot) (out map[policy.GPUType]int, limits map[policy.GPUType]string, growth map[policy.GPUType]int, growthLimits map[policy.GPUType]string) {
	types := d.typeOptions(j)
	if len(types) == 0 {
		types = []policy.TypeOption{{Type: d.typeOf(main)}}
	}
	shape := d.shapeOf(j, main)
	out, limits = map[policy.GPUType]int{}, map[policy.GPUType]string{}
	growth, growthLimits = map[policy.GPUType]int{}, map[policy.GPUType]string{}
	waiting := d.waitingJobs(snap, d.workersOf(j, snap))
	for _, o := range types {
		parts := d.partitionsOf(j, main, o.Type)
		out[o.Type] = shape.fits(snap, parts, o.Type)
		room := d.roomFor(main, snap, o.Type, parts)
		if n := room.workers(shape.gpus); n != unlimited {
			if n <= out[o.Type] && room.lendHolds(shape.gpus) {
				limits[o.Type] = room.lendWhy
			}
			out[o.Type] = min(out[o.Type], n)
		}
		qos := d.nextWorkerQOS(main, snap, o.Type, shape.gpus, parts)
		if n, why := d.associationRoom(main, snap, shape, o.Type, parts, qos); n != unlimited && n <= out[o.Type] {
			out[o.Type], limits[o.Type] = n, why
		}
		if n, why, yields := policy.GrowthRoom(waiting, parts, o.Type, freeGPUsIn(snap, parts, o.Type), shape.gpus); yields {
			growth[o.Type], growthLimits[o.Type] = n, why
		}
	}
	return out, limits, growth, growthLimits
}

// waitingJobs are the queue's pending jobs as policy.GrowthRoom weighs them; own are the
// elastic job's workers.
func (d *Daemon) waitingJobs(snap *snapshot, own []slurm.Job) []policy.WaitingJob {
	sc := snap.scans()
	if sc.pending == nil {
		sc.pending = []policy.WaitingJob{}
		for _, j := range snap.jobs {
			if !j.Pending() {
				continue
			}
			sc.pending = append(sc.pending, policy.WaitingJob{
				Reason: j.StateReason, Batch: j.Batch, Requeue: j.Requeue, LendingQOS: d.cfg.Pools.IsLendingQOS(j.QOS),
				Partitions: j.Partitions(), GPUsPerTask: int(j.TRESReq.GPUs("")), Tasks: j.TaskCount(),
			})
			sc.pendIDs = append(sc.pendIDs, j.ID)
		}
	}
	mine := make(map[uint32]bool, len(own))
	for _, w := range own {
		mine[w.ID] = true
	}
	out := slices.Clone(sc.pending)
	for i, id := range sc.pendIDs {
		out[i].Own = mine[id]
	}
	return out
}

// distinctFold is qos without repeats, compared as Slurm compares QOS names (pools.QOSKey).
func distinctFold(qos []string) []string {
	var out []string
	for _, q := range qos {
		if !slices.ContainsFunc(out, func(o string) bool { return pools.QOSKey(o) == pools.QOSKey(q) }) {
			out = append(out, q)
		}
	}
	return out
}

// freeGPUsIn is the GPUs of type t ("gpu": of any type) free on the snapshot's nodes that
// start jobs in the partitions.
func freeGPUsIn(snap *snapshot, parts []string, t policy.GPUType) int {
	free := snap.free()
	n := 0
	for i := range snap.nodes {
		if startsJobs(&snap.nodes[i], parts) {
			n += free[i].GPUsOf(roomType(t))
		}
	}
	return n
}

// partitionsOf are the partitions a worker of type t may run in: the declared pools of that
// type, else the main job's partition.
func (d *Daemon) partitionsOf(j *job, main slurm.Job, t policy.GPUType) []string {
	ps := d.poolsOfType(j, t)
	if len(ps) == 0 {
		return []string{main.Partition}
	}
	parts := make([]string, 0, len(ps))
	for _, p := range ps {
		parts = append(parts, p.Partition)
	}
	return parts
}
