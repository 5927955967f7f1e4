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

// notBatchJob is why an salloc or srun allocation cannot be requeued.
const notBatchJob = "this is an salloc or srun allocation, not a batch job"

// whyNotRequeueable says why Slurm could not requeue the job on preemption, "" when it could.
// Slurm requeues only batch jobs (job_desc->script set) whose requeue flag is 1: --requeue, or
// neither flag where slurm.conf has JobRequeue=1. Any other preempted job is killed.
func whyNotRequeueable(req *pools.Request, conf SlurmConf) string {
	switch {
	case !req.Batch:
		return notBatchJob
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
		"so it would be killed when its GPUs are reclaimed. %s", qos, why, submitWithoutQOS)
}

// submitWithoutQOS ends every refusal of a job Slurm could not requeue: what the user does instead.
const submitWithoutQOS = "Submit it without --qos: quotad lends idle GPUs to batch jobs Slurm can requeue " +
	"(sbatch, with --requeue where the cluster's JobRequeue is 0)."

// submitLendingRefusal refuses a new job of a user that asks for a lending QOS: an elastic QOS
// (elasticd submits its workers to begin later and lends them itself), or a QOS of the borrow pattern:
// the borrow QOS, one of quotad's borrow size tiers (borrow-<account>-gN) or a protected borrow
// QOS (borrow-<account>-hipri); "" lets it through. Only quotad moves jobs there. It lends only
// the GPUs that every project's lending limit leaves idle, and no Slurm limit can say that: each
// QOS' GrpTRES holds its own jobs alone, so a job submitted straight into a borrow QOS would run
// on GPUs a lending limit keeps for their owner. Each tier and the protected QOS carry the
// borrow cap on their own too (submitting into every one held the cap once per QOS), and the
// protected one escapes low-priority claims. Root, SlurmUser and borrow_qos_admins may. The
// job's --account tells an account that itself ends in -gN or -hipri (team-g2's borrow QOS is
// not tier 2 of team's), for the message only: both are refused.
func submitLendingRefusal(cfg *pools.Config, req *pools.Request, uid uint32, conf SlurmConf, admins map[uint32]bool) (pools.Refusal, string) {
	if req.QOS == "" || isPrivileged(uid, conf, admins) {
		return "", ""
	}
	pattern := cfg.BorrowQOSPattern()
	for q := range strings.SplitSeq(req.QOS, ",") {
		q = strings.TrimSpace(q)
		if cfg.IsElasticQOS(q) {
			return pools.RefusedElasticElasticdOnly, fmt.Sprintf("slurmbridge: QOS %s holds elasticd's workers on borrowed GPUs, and only "+
				"elasticd moves jobs into it, counting them in your project's borrowing limit: a job submitted straight into it "+
				"would escape that count. Submit without --qos; to grow a training job on idle GPUs, submit it with --elastic=MIN:MAX "+
				"(elasticd adds its workers).", q)
		}
		if !cfg.IsBorrowQOS(q) {
			continue
		}
		own := req.Account != "" && pools.QOSKey(cfg.BorrowQOSFor(req.Account)) == pools.QOSKey(q)
		holds, refusal := "borrowed GPUs", pools.RefusedBorrowQuotadOnly
		if account, gpus, ok := pools.BorrowTierOf(pattern, q); ok && !own {
			holds, refusal = fmt.Sprintf("%s's borrowed jobs of at most %d GPU(s)", account, gpus), pools.RefusedBorrowTierQuotadOnly
		} else if account, ok := pools.ProtectedBorrowOf(pattern, q); ok && !own {
			holds, refusal = fmt.Sprintf("%s's borrowed jobs above its reclaim priority threshold", account), pools.RefusedBorrowTierQuotadOnly
		}
		return refusal, fmt.Sprintf("slurmbridge: QOS %s holds %s, and only quotad moves jobs into it when it lends them: "+
			"it lends only GPUs that every project's lending limit leaves idle, within your project's borrowing limit, "+
			"which a job submitted straight into it would bypass. Submit without --qos: a job over your project's guarantee "+
			"waits in its guaranteed QOS, and quotad lends it idle GPUs within a cycle if it is a batch job Slurm can requeue "+
			"(quotactl explain JOBID says why it waits).", q, holds)
	}
	return "", ""
}

// modifyBorrowRefusal is the refusal of a user's update of a job into a borrow QOS and its
// message, or "" and "".
// Only quotad (root, SlurmUser or a borrow_qos_admins user) may move jobs there: it lends only
// jobs Slurm can requeue, and it alone keeps the account's borrowing within what it lends (the
// job's record, when it can be read at all, says whether the job could be requeued, not whether
// it should borrow). lentJobRefusal (modify.go) keeps a job already there requeueable.
func modifyBorrowRefusal(cfg *pools.Config, req *pools.Request, uid uint32, conf SlurmConf, admins map[uint32]bool) (pools.Refusal, string) {
	qos := borrowQOSAsked(cfg, req.QOS)
	if qos == "" || isPrivileged(uid, conf, admins) {
		return "", ""
	}
	return pools.RefusedBorrowQuotadOnly, fmt.Sprintf("slurmbridge: only quotad moves jobs into QOS %s: it is preemptable, and a job Slurm cannot requeue "+
		"(salloc, srun, --no-requeue) would be killed when its GPUs are reclaimed, and quotad alone keeps every project's "+
		"lending and borrowing limits. Leave the QOS to quotad: it lends idle GPUs to batch jobs Slurm can requeue.", qos)
}
