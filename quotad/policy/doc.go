// Package policy is quotad's decision core: a pure function from a quota table and a snapshot
// of Slurm (jobs, GPUs, QOS, accounts, usage) to a plan, with no I/O.
//
// A project's guarantee is a QOS whose GrpTRES holds its GPUs (per type, and gres/gpu in all)
// and which may preempt the shared borrow QOS. Over-quota jobs pend with QOSGrpGRES; the plan
// lends idle GPUs to them by moving them to the borrow QOS (largest weighted fair-share deficit
// first), returns pending borrowers when their guarantee has room again, and keeps the QOS and
// accounts in line with the table. Reclaim is Slurm's own QOS preemption (requeue): a plan never
// cancels, kills or requeues a job. Slurm can requeue only batch jobs with Requeue=1 and kills
// any other job it preempts, so a plan never lends any other job (Job.Requeueable), returns such
// a job found pending in the borrow QOS, and says so of one found running there.
package policy
