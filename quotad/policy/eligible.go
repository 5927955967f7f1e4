package policy

import "github.com/slurmbridge/slurmbridge/bridge/jobreason"

// notStartable says why Slurm would not start the pending job now whatever GPUs are free, or
// "" when it may. Such a job reserves nothing: neither idle GPUs kept for it in its guarantee
// nor GPUs promised to it as a borrower.
func (j *Job) notStartable() string {
	return jobreason.NotStartable(j.Reason)
}
