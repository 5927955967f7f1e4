package jobsubmit

import (
	"fmt"
	"strings"

	"github.com/slurmbridge/slurmbridge/bridge/pools"
)

// SlurmConf is what the plugin reads from slurmctld's own configuration (its slurm_conf, in
// memory: no I/O) when it decides.
type SlurmConf struct {
	// Known is false when slurm_conf could not be found in the process; JobRequeue then counts
	// as 0, so only an explicit --requeue makes a job requeueable.
	Known       bool
	JobRequeue  bool   // slurm.conf's JobRequeue: the requeue flag of jobs without --requeue/--no-requeue
	SlurmUserID uint32 // SlurmUser's uid
}

// borrowQOSAsked returns the first QOS of the request's list that is a borrow or an elastic
// QOS (both preemptable), or "". From 24.11 --qos may list several QOS, comma-separated, for
// Slurm to try in order.
func borrowQOSAsked(cfg *pools.Config, qosList string) string {
	for q := range strings.SplitSeq(qosList, ",") {
		if q = strings.TrimSpace(q); cfg.IsLendingQOS(q) {
			return q
		}
	}
	return ""
}

// whyNotRequeueable says why Slurm could not requeue the job on preemption, "" when it could.
// Slurm requeues only batch jobs (job_desc->script set) whose requeue flag is 1: --requeue, or
// neither flag where slurm.conf has JobRequeue=1. Any other preempted job is killed.
func whyNotRequeueable(req *pools.Request, conf SlurmConf) string {
	switch {
	case !req.Batch:
		return "this is an salloc or srun allocation, not a batch job"
	case req.Requeue == 0:
		return "this job was submitted with --no-requeue"
	case req.Requeue == pools.NoVal16 && !conf.Known:
		return "this job was submitted without --requeue and slurmbridge cannot read this cluster's JobRequeue"
	case req.Requeue == pools.NoVal16 && !conf.JobRequeue:
		return "this job was submitted without --requeue and this cluster's JobRequeue is 0"
	}
	return ""
}

// submitBorrowRefusal is the message refusing a new job that asks for a borrow QOS although
// Slurm could not requeue it, or "" to let it through: reclaiming its GPUs would kill it.
func submitBorrowRefusal(cfg *pools.Config, req *pools.Request, conf SlurmConf) string {
	qos := borrowQOSAsked(cfg, req.QOS)
	if qos == "" {
		return ""
	}
	why := whyNotRequeueable(req, conf)
	if why == "" {
		return ""
	}
	return fmt.Sprintf("slurmbridge: QOS %s is preemptable and Slurm can only requeue batch jobs with --requeue; %s, "+
		"so it would be killed when its GPUs are reclaimed. Submit without --qos (quotad lends idle GPUs to eligible jobs), "+
		"or use sbatch --requeue.", qos, why)
}

// submitTierRefusal is the message refusing a new job that asks for one of quotad's borrow
// size tiers (borrow-<account>-gN) or protected borrow QOS (borrow-<account>-hipri), or "".
// quotad moves a lent job into the tier of its size, or the protected QOS by its priority;
// each has the borrow QOS' caps, so a user submitting straight into every one could hold the
// borrow cap once per QOS, and into the protected one would escape low-priority claims at any
// priority. Root, SlurmUser and borrow_qos_admins may. An account that itself ends in -gN or
// -hipri names its own borrow QOS with --account: the job's account is the only way to tell
// team-g2's borrow QOS from tier 2 of team's (Slurm fills a default account in only after
// job_submit).
func submitTierRefusal(cfg *pools.Config, req *pools.Request, uid uint32, conf SlurmConf, admins map[uint32]bool) string {
	if req.QOS == "" || isPrivileged(uid, conf, admins) {
		return ""
	}
	pattern := cfg.BorrowQOSPattern()
	for q := range strings.SplitSeq(req.QOS, ",") {
		q = strings.TrimSpace(q)
		var holds, suffix string
		account, gpus, ok := pools.BorrowTierOf(pattern, q)
		if ok {
			holds, suffix = fmt.Sprintf("%s's borrowed jobs of at most %d GPU(s)", account, gpus), fmt.Sprintf("-g%d", gpus)
		} else if account, ok = pools.ProtectedBorrowOf(pattern, q); ok {
			holds, suffix = fmt.Sprintf("%s's borrowed jobs above its reclaim priority threshold", account), "-hipri"
		}
		if !ok || (req.Account != "" && pools.QOSKey(cfg.BorrowQOSFor(req.Account)) == pools.QOSKey(q)) {
			continue
		}
		own := ""
		if req.Account == "" {
			own = fmt.Sprintf(" If %s is the borrow QOS of your own account %s%s, name that account: --account=%s%s.", q, account, suffix, account, suffix)
		}
		return fmt.Sprintf("slurmbridge: QOS %s holds %s, and only quotad moves jobs into it "+
			"when it lends them. Submit without --qos (quotad lends idle GPUs to eligible jobs), or with sbatch --requeue --qos=%s.%s",
			q, holds, cfg.BorrowQOSFor(account), own)
	}
	return ""
}

// modifyBorrowRefusal is the message refusing a user's update of a job into a borrow QOS, or "".
// Only quotad (root, SlurmUser or a borrow_qos_admins user) may move jobs there: it lends only
// jobs Slurm can requeue, and it alone keeps the account's borrowing within what it lends (the
// job's record, when it can be read at all, says whether the job could be requeued, not whether
// it should borrow). lentJobRefusal (modify.go) keeps a job already there requeueable.
func modifyBorrowRefusal(cfg *pools.Config, req *pools.Request, uid uint32, conf SlurmConf, admins map[uint32]bool) string {
	qos := borrowQOSAsked(cfg, req.QOS)
	if qos == "" || isPrivileged(uid, conf, admins) {
		return ""
	}
	return fmt.Sprintf("slurmbridge: only quotad moves jobs into QOS %s: it is preemptable, and a job Slurm cannot requeue "+
		"(salloc, srun, --no-requeue) would be killed when its GPUs are reclaimed. Leave the QOS to quotad (it lends idle GPUs "+
		"to eligible jobs), or submit with sbatch --requeue --qos=%s.", qos, qos)
}
