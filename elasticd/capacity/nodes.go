package capacity

import (
	"slices"

	"github.com/slurmbridge/slurmbridge/bridge/gpureq"
	"github.com/slurmbridge/slurmbridge/bridge/noderoom"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/elasticd/policy"
)

// Shape is what one worker asks Slurm for on its one node: the main job's tasks, CPUs and
// memory per node (as Slurm recorded its request, #SBATCH lines and command line merged),
// with the declared GPUs of the chosen type.
type Shape struct {
	Tasks, CPUsPerTask int
	MemMB              uint64
	GPUs               int
}

// ShapeOf is a worker's shape from the main job as the snapshot read it (squeue --json: the
// tasks it asked for too), with gpus GPUs.
func ShapeOf(main slurm.Job, gpus int) Shape {
	nodes := uint64(max(main.NodeCount, 1))
	tasks := max(uint64(main.Tasks)/nodes, 1)
	cpus := max(main.TRESReq["cpu"]/nodes, 1)
	return Shape{
		Tasks:       int(tasks),
		CPUsPerTask: int((cpus + tasks - 1) / tasks),
		MemMB:       main.TRESReq["mem"] / nodes,
		GPUs:        gpus,
	}
}

// tres is what one worker of shape s and GPU type t asks Slurm for, as association limits
// name it.
func (s Shape) tres(t policy.GPUType) gpureq.TRES {
	worker := gpureq.TRES{"cpu": uint64(s.Tasks * s.CPUsPerTask), "node": 1, "gres/gpu": uint64(s.GPUs)}
	if t != "gpu" {
		worker["gres/gpu:"+string(t)] = uint64(s.GPUs)
	}
	if s.MemMB > 0 {
		worker["mem"] = s.MemMB
	}
	return worker
}

// fits is how many workers of shape s the snapshot's nodes of the partitions can start now:
// GPUs of type t, CPUs and memory free on nodes Slurm may start jobs on, each node once
// (bridge/noderoom's rule, quotad's too).
func (s Shape) fits(snap *Snapshot, parts []string, t policy.GPUType) int {
	each := noderoom.Shape{GPUs: []noderoom.GPUCount{{Type: roomType(t), Count: s.GPUs}}, CPUs: s.Tasks * s.CPUsPerTask, MemoryMB: int64(s.MemMB)}
	free := snap.free()
	total := 0
	for i := range snap.Nodes {
		if startsJobs(&snap.Nodes[i], parts) {
			total += free[i].Fits(each)
		}
	}
	return total
}

// freeGPUsIn is the GPUs of type t ("gpu": of any type) free on the snapshot's nodes that
// start jobs in the partitions.
func freeGPUsIn(snap *Snapshot, parts []string, t policy.GPUType) int {
	free := snap.free()
	n := 0
	for i := range snap.Nodes {
		if startsJobs(&snap.Nodes[i], parts) {
			n += free[i].GPUsOf(roomType(t))
		}
	}
	return n
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
	return slices.ContainsFunc(parts, n.InPartition) && n.WhyNoNewJobs() == ""
}
