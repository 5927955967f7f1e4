package policy

// Code names the kind of a job's explanation or move, the way Slurm's pending reasons name
// why a job waits: stable, for tests, scripts and the API to compare (quotactl explain's JSON
// and the cluster page carry it), while the words beside it give the figures and may change.
type Code string

// The kinds, by the step that decides them (see BuildPlan).
const (
	// classify: jobs quotad counts but does not manage, and in-quota jobs.
	CodeInQuota  Code = "in-quota"  // runs within its project's guarantee: never reclaimed
	CodeNoQuota  Code = "no-quota"  // its account is under no project: quotad does not manage it
	CodeOtherQOS Code = "other-qos" // in a QOS that is not its project's: quotad does not move it
	CodeAdopted  Code = "adopted"   // pending in a QOS its account no longer allows: moved into its project's guarantee

	// reserveInQuota: pending in the guaranteed QOS.
	CodeNotStartable      Code = "not-startable"       // held, dependent, begin time or the like: Slurm would not start it now
	CodeArrayThrottled    Code = "array-throttled"     // its array runs at most N tasks at once (lend says it too, of tasks it does not lend)
	CodeWaitsInQuota      Code = "waits-in-quota"      // Slurm starts it within the guarantee; idle GPUs may be kept for it
	CodeOverQuotaUnmarked Code = "over-quota-unmarked" // over its guarantee, not yet marked so by Slurm

	// countUnreadable.
	CodeUnreadable          Code = "unreadable"           // quotad cannot read the job: counted at its worst
	CodeUnreadableUnmanaged Code = "unreadable-unmanaged" // quotad cannot read the job, in no project's QOS: not counted

	// settleBorrowers: pending in a borrow or elastic QOS.
	CodeReturnNotStartable    Code = "return-not-startable"    // returned: a borrower must be ready to start
	CodeReturnNotRequeueable  Code = "return-not-requeueable"  // returned: a reclaim would kill it
	CodeReturnGuaranteeRoom   Code = "return-guarantee-room"   // returned: its guarantee has room again
	CodeReturnOverLimit       Code = "return-over-limit"       // returned: a borrowing or lending limit no longer allows it
	CodeReturnBackoff         Code = "return-reclaim-backoff"  // returned: a claim took it back, and its reclaim backoff has not ended
	CodePromised              Code = "promised"                // lent, and idle GPUs are promised to it
	CodeLentWaitsForGPUs      Code = "lent-waits-for-gpus"     // lent, and no idle GPUs it can use now
	CodeElasticWorker         Code = "elastic-worker"          // elasticd's worker on borrowed GPUs: elasticd's to end
	CodeElasticWorkerReturned Code = "elastic-worker-returned" // elasticd's worker moved into its guarantee, which has room again

	// lend: over-quota pending jobs.
	CodeUnaccounted      Code = "unaccounted"        // its project has a job quotad cannot read: not lent (nor returned, if lent)
	CodeGuaranteeHasRoom Code = "guarantee-has-room" // marked over quota, yet the guarantee has room: Slurm should start it
	CodeNotRequeueable   Code = "not-requeueable"    // never lent: a reclaim would kill it
	CodeReclaimBackoff   Code = "reclaim-backoff"    // not lent: a claim took it back, and its reclaim backoff has not ended
	CodeMovesHeld        Code = "moves-held"         // no job moves while QOS or accounts are being synced
	CodeNoLends          Code = "no-lends"           // nothing is lent this cycle (a lending limit cannot be checked)
	CodeLent             Code = "lent"               // moved to its borrow QOS this cycle
	CodeNoIdleGPUs       Code = "no-idle-gpus"       // cannot borrow: no idle GPUs (on nodes with the CPUs and memory it needs) fit it
	CodeBorrowLimit      Code = "borrow-limit"       // cannot borrow: its project's borrowing limit (in all or of a type) stops it
	CodeLendLimit        Code = "lend-limit"         // cannot borrow: the lending limit of its GPU type stops it
	CodeOwnersKeep       Code = "owners-keep"        // cannot borrow: the idle GPUs left are those projects' lending limits keep for their own jobs
	CodeNoTypeRoom       Code = "no-type-room"       // cannot borrow: no GPU type has both borrowing and lending room for its any-type GPUs
	CodeArraySplit       Code = "array-split"        // not lent: its array's pending tasks are in several records, on a release that lends arrays whole
	CodeArrayNotWhole    Code = "array-not-whole"    // not lent: not all its array's pending tasks fit at once, on a release that lends arrays whole

	// explainRunning: started borrowers.
	CodeNotReclaimable   Code = "not-reclaimable"    // its project is within its guarantee: no claim may take it
	CodeReclaimable      Code = "reclaimable"        // a claim may requeue it, in the reclaim order
	CodeReclaimWouldKill Code = "reclaim-would-kill" // a claim may take it, and Slurm cannot requeue it
)
