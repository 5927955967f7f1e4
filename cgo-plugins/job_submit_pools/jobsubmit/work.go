package jobsubmit

import (
	"strings"

	"github.com/slurmbridge/slurmbridge/bridge/gpureq"
	"github.com/slurmbridge/slurmbridge/bridge/pools"
)

// gpuRequest reads whether the request's TRES strings ask for GPUs, in one parse. asks: they
// parse, and ask for GPUs (a request they do not parse is Slurm's to judge). mayAsk, for a
// refusal that must not fail open: asks, or they do not parse and one of them names a GPU, in
// any case.
func gpuRequest(r *pools.Request) (asks, mayAsk bool) {
	g, err := gpureq.Parse(gpureq.Fields{PerJob: r.TRESPerJob, PerNode: r.TRESPerNode, PerSocket: r.TRESPerSocket, PerTask: r.TRESPerTask})
	if err == nil {
		return g.IsGPU(), g.IsGPU()
	}
	return false, strings.Contains(strings.ToLower(r.TRESPerJob+r.TRESPerNode+r.TRESPerSocket+r.TRESPerTask), "gpu")
}

// hetJobGPURefusal is the message refusing a component of a heterogeneous job that holds GPUs,
// or "". Slurm preempts a heterogeneous job only through its leader, and only when every one of
// its components is preemptable (preempt.c skips the other components as candidates, 22.05 to
// 26.05): a GPU component lent idle GPUs could never be taken back by the owner's claim. And on
// 26.05 such a component started in its guaranteed QOS beyond the QOS' GPU limit, which did not
// count it: neither the guarantee nor lending holds for it, so the route is closed for everyone.
func hetJobGPURefusal(gpus bool) string {
	if !gpus {
		return ""
	}
	return "slurmbridge: a heterogeneous job cannot hold GPUs on this cluster: Slurm preempts a heterogeneous job only " +
		"through its leader, so GPUs lent to one of its components could not be given back to the project that owns them, " +
		"and a component's GPUs escape its QOS' guarantee. Submit the GPU work as a job of its own (sbatch, salloc or srun " +
		"without ':' or hetjob), and chain the parts with --dependency=afterok:JOBID if one must follow another."
}

// appendsOutput says whether the plugin sets a new job's --open-mode to append: a GPU batch job
// that chose no open mode. Any GPU job may be lent and requeued when its GPUs are reclaimed, and
// slurmstepd truncates a rerun's output files unless the job appends (JobFileAppend is 0 by
// default, and no release appends on a restart by itself): without it the first run's log, often
// the only record of how far training got, is gone. A job that chose --open-mode=truncate keeps
// its choice.
func appendsOutput(r *pools.Request, gpus bool) bool {
	return r.Batch && r.OpenMode == 0 && gpus
}
