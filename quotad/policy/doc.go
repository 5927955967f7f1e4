// Package policy is quotad's decision core: a pure function from a quota table and a snapshot
// of Slurm (jobs, GPUs, QOS, accounts, usage) to a plan, with no I/O.
//
// Each project has three QOS (named by bridge/pools.QOSName): its guarantee, whose GrpTRES
// holds its GPUs (per type, and gres/gpu in all); its borrow QOS, where its over-quota jobs
// run on lent GPUs; and its elastic QOS, where elasticd's workers beyond the guarantee run.
// A guaranteed QOS may preempt the borrow and elastic QOS of the projects over their share
// (the reclaim order), never those of a project within its guarantee. Over-quota jobs pend
// with QOSGrpGRES; the plan lends idle GPUs to them by moving them to their project's borrow
// QOS (largest weighted fair-share deficit first), returns pending borrowers when their
// guarantee has room again, and keeps the QOS and accounts in line with the table.
//
// A project's quota covers its account's whole subtree, as Slurm's own limits do (sub-accounts
// inherit the guaranteed QOS); a project nested in another has its own QOS, so the nearest
// project wins. Idle GPUs are counted per node, once however many partitions list the node,
// and only where a job of the request's shape (GPUs, CPUs and memory per node) can start now;
// held, dependent and future jobs reserve nothing, and a job it could not read counts at its
// worst (unreadable.go).
//
// A project's lending limit (Project.LendLimitByType) keeps the rest of its idle guarantee
// unlent: the GPUs are counted per type (place.go, keptForOwners), not placed. A borrower a
// claim took back waits out a reclaim backoff before it is lent again (backoff.go, from
// slurmdbd's PREEMPTED runs). Settings.LendOrder may scale the borrowers' weights by their
// decayed GPU usage (fairshare.go, from sshare).
//
// Reclaim is Slurm's own QOS preemption (requeue): a plan never cancels, kills or requeues a
// job. Slurm can requeue only batch jobs with Requeue=1 and kills any other job it preempts,
// so a plan never lends any other job (Job.Requeueable), returns such a job found pending in a
// borrow QOS, and says so of one found running there.
//
// BuildPlan (build.go) calls the steps in order, each in a file named for it, and each takes
// the previous step's result and returns its own, so the order is written once and two steps
// cannot be swapped unnoticed. The cycle (table, snapshot, each job's need and project) is
// read-only. A project's facts (project: its table entry, QOS names, weight, usage) are set
// once by newProjects and read by every step (TestFactsStayFixed); what the steps count
// (projectCounts: GPUs held, borrowed, pending, reserved, claiming; what is lent) and the idle
// nodes' free room travel in the GPU books (ledger) inside each result, and a step that changes
// them works on its own copy (withOwnBooks), so the books a step was handed stay as the step
// before left them (TestStepsKeepHandedBooks). Each step returns what it said of jobs (its said
// journal); BuildPlan merges them in step order, the later step's word on a job standing.
//
//	classify.go    → counted: what jobs hold, pending jobs sorted into lists
//	reserve.go     → reserved: idle GPUs kept for in-quota jobs
//	unreadable.go  → atWorst: jobs quotad cannot read, counted at their worst
//	settle.go      → settled: pending borrowers returned or kept promised (the returns)
//	lend.go        → lent: over-quota jobs served (the lends), with fairshare.go's deficits
//	                 and place.go's placements on idle.go's nodes
//	reclaim.go     → the order in which Slurm may take borrowers back, and what running
//	                 borrowers are told
//
// explain.go turns the merged journal and the last books into the plan's per-job texts and
// status tables.
// project.go holds a project's guarantee arithmetic, counts.go the GPU-count map helpers.
package policy
