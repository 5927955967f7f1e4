package daemon

import (
	"fmt"
	"slices"
	"strings"

	"github.com/slurmbridge/slurmbridge/bridge/gpureq"
	"github.com/slurmbridge/slurmbridge/bridge/jobreason"
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

func (d *Daemon) shapeOf(j *job, main slurm.Job, extra slurm.JobExtra) workerShape {
	nodes := uint64(max(main.NodeCount, 1))
	tasks := max(uint64(extra.Tasks)/nodes, 1)
	cpus := max(main.TRESReq["cpu"]/nodes, 1)
	return workerShape{
		tasks:       int(tasks),
		cpusPerTask: int((cpus + tasks - 1) / tasks),
		memMB:       main.TRESReq["mem"] / nodes,
		gpus:        j.decl.GPUsPerWorker,
	}
}

// fits is how many workers of shape s the nodes of the partitions can start now: GPUs of type
// t, CPUs and memory free on nodes Slurm may start jobs on (up, not reserved), each node once.
func (s workerShape) fits(nodes []slurm.Node, parts []string, t policy.GPUType) int {
	total := 0
	for _, n := range nodes {
		if !startsJobs(n, parts) {
			continue
		}
		gpus := freeGPUs(n, t) / s.gpus
		cpus := (n.CPUs - min(n.AllocCPUs, n.CPUs)) / (s.tasks * s.cpusPerTask)
		count := min(gpus, cpus)
		if s.memMB > 0 {
			count = min(count, int((n.MemoryMB-min(n.AllocMemoryMB, n.MemoryMB))/s.memMB))
		}
		total += count
	}
	return total
}

// startsJobs: Slurm may start a worker on the node now in one of the partitions (it is up and
// not reserved).
func startsJobs(n slurm.Node, parts []string) bool {
	return n.Up() && n.Reservation == "" && anyPartition(n, parts)
}

func anyPartition(n slurm.Node, parts []string) bool {
	for _, p := range parts {
		if n.InPartition(p) {
			return true
		}
	}
	return false
}

// freeGPUs is the node's unallocated GPUs of type t ("gpu": of any type).
func freeGPUs(n slurm.Node, t policy.GPUType) int {
	count := func(gres []gpureq.Gres) int {
		c := 0
		for _, g := range gres {
			if g.IsGPU() && (t == "gpu" || g.Type == string(t)) {
				c += int(g.Count)
			}
		}
		return c
	}
	return max(count(n.Gres)-count(n.GresUsed), 0)
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
}

// roomFor reads the main job's QOS and the project's elastic QOS: their GrpTRES limits for
// GPUs of type t less what running and pending jobs in them hold or wait for. The elastic
// QOS' limit is the project's borrowing limit, which counts its borrow QOS too. A cluster whose
// quotad has not created the elastic QOS yet (an upgrade under way) lends workers in the
// borrow QOS, as before.
func (d *Daemon) roomFor(main slurm.Job, snap *snapshot, t policy.GPUType) qosRoom {
	r := qosRoom{guar: unlimited, borrow: unlimited, known: snap.qos != nil}
	elastic, borrow := d.cfg.Pools.ElasticQOSFor(main.Account), d.cfg.Pools.BorrowQOSFor(main.Account)
	mainBorrows := d.cfg.Pools.IsLendingQOS(main.QOS)
	if !mainBorrows {
		r.guarQOS = strings.ToLower(main.QOS)
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
		r.borrowQOS, r.borrow = elastic, room(limit, snap, t, elastic, borrow)
	} else if limit, ok := snap.qos[borrow]; ok {
		r.borrowQOS, r.borrow = borrow, room(limit, snap, t, borrow)
	}
	return r
}

// workers is how many workers of gpus GPUs the QOS room admits; unlimited when both are.
func (r qosRoom) workers(gpus int) int {
	if !r.known || r.guar == unlimited || (r.borrowQOS != "" && r.borrow == unlimited) {
		return unlimited
	}
	n := r.guar / gpus
	if r.borrowQOS != "" {
		n += r.borrow / gpus
	}
	return n
}

// take picks the QOS for one more worker of gpus GPUs and counts it: the guarantee while it
// has room, else the elastic QOS while the borrowing limit allows. borrowed says the worker runs on
// borrowed GPUs.
func (r *qosRoom) take(gpus int) (qos string, borrowed bool) {
	switch {
	case !r.known || r.guar == unlimited:
		return r.guarQOS, false
	case r.guar >= gpus:
		r.guar -= gpus
		return r.guarQOS, false
	case r.borrowQOS != "" && (r.borrow == unlimited || r.borrow >= gpus):
		if r.borrow != unlimited {
			r.borrow -= gpus
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
		for _, j := range snap.jobs {
			if !slices.ContainsFunc(qos, func(q string) bool { return strings.EqualFold(j.QOS, q) }) {
				continue
			}
			switch {
			case j.Running():
				used += j.TRESAlloc.GPUs(k.typ)
			case j.Pending():
				used += j.TRESReq.GPUs(k.typ)
			}
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
// guarantee and its elastic QOS (the borrowing limit) leave and what the user's and account's associations admit.
// limits says, per type, which association limit holds it where one does.
func (d *Daemon) capacity(j *job, main slurm.Job, snap *snapshot) (out map[policy.GPUType]int, limits map[policy.GPUType]string, growth map[policy.GPUType]int, growthLimits map[policy.GPUType]string) {
	types := d.typeOptions(j)
	if len(types) == 0 {
		types = []policy.TypeOption{{Type: d.typeOf(main)}}
	}
	shape := d.shapeOf(j, main, snap.extras[j.id])
	out, limits = map[policy.GPUType]int{}, map[policy.GPUType]string{}
	growth, growthLimits = map[policy.GPUType]int{}, map[policy.GPUType]string{}
	own := d.workersOf(j, snap)
	for _, o := range types {
		parts := d.partitionsOf(j, main, o.Type)
		out[o.Type] = shape.fits(snap.nodes, parts, o.Type)
		if n := d.roomFor(main, snap, o.Type).workers(shape.gpus); n != unlimited {
			out[o.Type] = min(out[o.Type], n)
		}
		qos := d.nextWorkerQOS(main, snap, o.Type, shape.gpus)
		if n, why := d.associationRoom(main, snap, shape, o.Type, parts, qos); n != unlimited && n <= out[o.Type] {
			out[o.Type], limits[o.Type] = n, why
		}
		if n, why := d.roomAfterWaiting(snap, parts, o.Type, shape.gpus, own); n != unlimited {
			growth[o.Type], growthLimits[o.Type] = n, why
		}
	}
	return out, limits, growth, growthLimits
}

// roomAfterWaiting is how many workers of gpus GPUs growth may add in the partitions once the
// jobs waiting there have their GPUs (unlimited when none waits), with why. Growth beyond MIN
// yields to any job Slurm would start, or quotad lend to, if GPUs were free: a worker's GPU adds
// less work than the same GPU gives a job of its own (scaling is sublinear), and a worker on
// GPUs a waiting job could take only delays that job (in the trace replay's busy window,
// elastic workers on such GPUs made waiting jobs later and the whole run longer). The job's own
// pending workers do not count: they are what growth is. A job pending in several of the job's
// GPU types counts against each, since it is not known which it will take.
func (d *Daemon) roomAfterWaiting(snap *snapshot, parts []string, t policy.GPUType, gpus int, own []slurm.Job) (int, string) {
	waiting := 0
	for _, j := range snap.jobs {
		if !j.Pending() || !d.waitsForGPUs(j) || slices.ContainsFunc(own, func(w slurm.Job) bool { return w.ID == j.ID }) {
			continue
		}
		if !slices.ContainsFunc(j.Partitions(), func(p string) bool { return slices.Contains(parts, p) }) {
			continue
		}
		waiting += int(j.TRESReq.GPUs("")) * j.TaskCount()
	}
	if waiting == 0 {
		return unlimited, ""
	}
	free := 0
	for _, n := range snap.nodes {
		if startsJobs(n, parts) {
			free += freeGPUs(n, t)
		}
	}
	return max(free-waiting, 0) / gpus, fmt.Sprintf("jobs waiting in %s ask for %d GPUs, %d of %s free there: growth yields to them",
		strings.Join(parts, ","), waiting, free, t)
}

// waitsForGPUs: the pending job would take GPUs that became free, by Slurm starting it or by
// quotad lending it them. quotad lends only batch jobs Slurm can requeue, waiting on their
// guarantee's GPU limit (QOSGrpGRES) outside any lending QOS.
func (d *Daemon) waitsForGPUs(j slurm.Job) bool {
	switch {
	case jobreason.StartsWhenGPUsFree(j.StateReason):
		return true
	case j.StateReason == jobreason.GuaranteeFull:
		return j.Batch && j.Requeue && !d.cfg.Pools.IsLendingQOS(j.QOS)
	}
	return false
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
