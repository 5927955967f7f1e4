package policy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/slurmbridge/slurmbridge/bridge/jobreason"
)

// WaitingJob is a job pending in the queue, as growth's yielding to waiting jobs weighs it.
type WaitingJob struct {
	// Reason is Slurm's reason the job is pending.
	Reason string
	// Batch: a batch job (not an allocation); Requeue: Slurm may requeue it; LendingQOS: it
	// runs in a QOS quotad lends in (borrow or elastic).
	Batch, Requeue, LendingQOS bool
	// Own: one of the elastic job's own workers.
	Own bool
	// Partitions are those it may start in.
	Partitions []string
	// GPUsPerTask is what each of its Tasks asks for (an array's pending tasks are one job).
	GPUsPerTask, Tasks int
}

// WaitsForGPUs: the pending job would take GPUs that became free, by Slurm starting it or by
// quotad lending it them. quotad lends only batch jobs Slurm can requeue, waiting on their
// guarantee's GPU limit (QOSGrpGRES) outside any lending QOS.
func (w WaitingJob) WaitsForGPUs() bool {
	switch {
	case jobreason.StartsWhenGPUsFree(w.Reason):
		return true
	case w.Reason == jobreason.GuaranteeFull:
		return w.Batch && w.Requeue && !w.LendingQOS
	}
	return false
}

// GrowthRoom is how many workers of gpus GPUs growth may add in the partitions parts once the
// jobs waiting there have their GPUs, free being the GPUs of type t free on the nodes that
// start jobs there, with why; yields is false when no job waits there for GPUs (growth then
// has the room Input.Capacity gives it). Growth beyond MIN yields to any job Slurm would start,
// or quotad lend to, if GPUs were free: a worker's GPU adds less work than the same GPU gives
// a job of its own (scaling is sublinear), and a worker on GPUs a waiting job could take only
// delays that job (in the trace replay's busy window, elastic workers on such GPUs made
// waiting jobs later and the whole run longer). The job's own pending workers do not count:
// they are what growth is. A job pending in several of the job's GPU types counts against
// each, since it is not known which it will take.
func GrowthRoom(waiting []WaitingJob, parts []string, t GPUType, free, gpus int) (room int, why string, yields bool) {
	asked := 0
	for _, w := range waiting {
		if w.Own || !w.WaitsForGPUs() {
			continue
		}
		if !slices.ContainsFunc(w.Partitions, func(p string) bool { return slices.Contains(parts, p) }) {
			continue
		}
		asked += w.GPUsPerTask * w.Tasks
	}
	if asked == 0 {
		return 0, "", false
	}
	return max(free-asked, 0) / gpus, fmt.Sprintf("jobs waiting in %s ask for %d GPUs, %d of %s free there: growth yields to them",
		strings.Join(parts, ","), asked, free, t), true
}
