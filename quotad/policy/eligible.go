package policy

// notStartableReasons are the pending reasons (the same strings in Slurm 22.05, 24.11 and
// 26.05) with which slurmctld will not start a job whatever GPUs are free: it is held (by
// scontrol hold, a requeue in held state, or too many requeues: slurmctld sets one of these
// reasons with the job's priority 0), waits for another job or its begin time, or for its
// reservation. Such a job reserves nothing: neither idle GPUs kept for it in its guarantee
// nor GPUs promised to it as a borrower.
var notStartableReasons = map[string]string{
	"JobHeldUser":              "it is held by its user",
	"JobHeldAdmin":             "it is held by an administrator",
	"JobHoldMaxRequeue":        "it is held after too many requeues",
	"Dependency":               "it waits for another job (dependency)",
	"DependencyNeverSatisfied": "its dependency can never be satisfied",
	"BeginTime":                "its begin time is in the future",
	"Reservation":              "it waits for its reservation",
}

// notStartable says why Slurm would not start the pending job now whatever GPUs are free, or
// "" when it may.
func (j *Job) notStartable() string {
	return notStartableReasons[j.Reason]
}
