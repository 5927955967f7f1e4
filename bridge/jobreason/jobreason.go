// Package jobreason reads a pending job's reason (squeue's %r, job_info's state_reason: the same
// strings in Slurm 22.05, 24.11 and 26.05) for what matters to who may use idle GPUs: whether
// Slurm would start the job now if GPUs were free.
package jobreason

// notStartable are the reasons with which slurmctld will not start a job whatever GPUs are
// free: it is held (by scontrol hold, a requeue in held state, or too many requeues: slurmctld
// sets one of these reasons with the job's priority 0), waits for another job or its begin
// time, or for its reservation.
var notStartable = map[string]string{
	"JobHeldUser":              "it is held by its user",
	"JobHeldAdmin":             "it is held by an administrator",
	"JobHoldMaxRequeue":        "it is held after too many requeues",
	"Dependency":               "it waits for another job (dependency)",
	"DependencyNeverSatisfied": "its dependency can never be satisfied",
	"BeginTime":                "its begin time is in the future",
	"Reservation":              "it waits for its reservation",
}

// NotStartable says why Slurm would not start a pending job with this reason whatever GPUs are
// free, or "" when it may.
func NotStartable(reason string) string {
	return notStartable[reason]
}

// StartsWhenGPUsFree says a pending job with this reason waits only for its turn (Priority),
// room on the nodes (Resources) or to be considered at all (None): Slurm would start it on GPUs
// that became free. Held and dependent jobs, and jobs held back by a limit, would not.
func StartsWhenGPUsFree(reason string) bool {
	switch reason {
	case "Priority", "Resources", "None", "":
		return true
	}
	return false
}

// GuaranteeFull is the reason of a job its QOS' GrpTRES on GPUs holds back: in a project's
// guaranteed QOS, an over-quota job quotad may lend idle GPUs to.
const GuaranteeFull = "QOSGrpGRES"
