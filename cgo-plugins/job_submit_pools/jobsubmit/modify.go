package jobsubmit

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/slurmbridge/slurmbridge/bridge/pools"
)

// Fields says which string fields of job_desc an update carries. An empty string that is
// carried is a change (it may clear the field); a field not carried keeps the job's value.
type Fields uint16

const (
	FieldPartition Fields = 1 << iota
	FieldTRESPerJob
	FieldTRESPerNode
	FieldTRESPerSocket
	FieldTRESPerTask
	FieldComment
	FieldQOS

	fieldsTRES = FieldTRESPerJob | FieldTRESPerNode | FieldTRESPerSocket | FieldTRESPerTask
)

// Update is job_desc on job_modify: only the fields being changed are set (numbers keep their
// NO_VAL sentinels, strings are in Set).
type Update struct {
	Request pools.Request // Op Modify
	Set     Fields
	Account string // the new account, "" when unchanged
}

// Job is the job an update changes, as slurmctld keeps it (read by the cgo layer from its job
// record): Request holds its partition list, GPU request, shape, QOS, whether it is a batch
// job and its requeue flag (0 or 1, as resolved at submission), with Op Submit.
type Job struct {
	ID      uint32
	Request pools.Request
	Account string
}

// Modify checks an update of a job, pending or running, by user uid. Its UserMessage reaches the
// user where job_modify has an err_msg (slurm.Release.ModifyRefusalReachesUser); elsewhere the
// cgo layer drops it and a refusal's reason is only in slurmctld's log.
//
// With the job known, an update by anyone but root, SlurmUser and borrow_qos_admins keeps the
// promises submission made: the job can run in the partitions it is left in (the update's
// fields over the job's, routed as a submission would be), and a job in a lending QOS stays
// one Slurm can requeue, in its account, with the request it was lent for. A move into a
// lending QOS (quotad's lend, elasticd's worker), whoever makes it, takes only a job Slurm can
// requeue, and makes its output files append from then on. With job nil (its record could not
// be read) the update is judged on its changed fields alone, except what only the record can
// tell: GPUs given by update and lends are refused.
func (p *Plugin) Modify(upd *Update, job *Job, uid uint32) Outcome {
	l := p.cfg.Load()
	if l == nil {
		return Outcome{}
	}
	conf := p.slurmConf()
	if refusal, msg := modifyBorrowRefusal(l.cfg, &upd.Request, uid, conf, l.admins); msg != "" {
		return p.refuse(fmt.Sprintf("update by uid %d", uid), Outcome{Reject: RejectQOS, Refusal: refusal, UserMessage: msg})
	}
	lendInto := ""
	if upd.Set&FieldQOS != 0 {
		lendInto = borrowQOSAsked(l.cfg, upd.Request.QOS)
	}
	if job == nil {
		if kind, msg := unreadableRefusal(upd, lendInto); msg != "" {
			return p.refuse(fmt.Sprintf("update by uid %d", uid), Outcome{Reject: kind, Refusal: pools.RefusedRecordUnreadable, UserMessage: msg})
		}
		return p.outcome(l.cfg.Route(&upd.Request), "update", uid)
	}
	who := fmt.Sprintf("update of job %d by uid %d", job.ID, uid)
	after := Merge(job, upd) // the job as the update would leave it
	if job.Request.HetJob && upd.Set&fieldsTRES != 0 {
		_, mayGPUs := gpuRequest(&after)
		if msg := hetJobGPURefusal(mayGPUs); msg != "" {
			return p.refuse(who, Outcome{Reject: RejectGRES, Refusal: pools.RefusedHetJobGPUs, UserMessage: msg})
		}
	}
	appendOutput := false
	if lendInto != "" {
		// Checked on the job as it is at the very moment of the lend: its owner may have set
		// Requeue=0 after quotad's snapshot, and Slurm would kill it instead of requeueing it.
		if why := whyNotRequeueable(&after, conf); why != "" {
			return p.refuse(who, Outcome{Reject: RejectQOS, Refusal: pools.RefusedBorrowNotRequeueable, UserMessage: fmt.Sprintf(
				"slurmbridge: job %d cannot move into QOS %s, which is preemptable: %s, so Slurm would kill it instead of "+
					"requeueing it when its GPUs are reclaimed.", job.ID, lendInto, why)})
		}
		// A job submitted before the plugin was installed, or without GPUs and given them by
		// an update, never had its open mode set at submission: its rerun after a reclaim
		// would truncate the first run's output. Slurm has no update of the open mode, so the
		// cgo layer sets it in the job's record.
		appendOutput = after.Batch && job.Request.OpenMode == 0
	}
	if isPrivileged(uid, conf, l.admins) {
		out := p.outcome(l.cfg.Route(&upd.Request), "update", uid)
		out.AppendOutput = appendOutput && out.Reject == NotRejected
		return out
	}
	if kind, refusal, msg := lentJobRefusal(l.cfg, upd, job); msg != "" {
		return p.refuse(who, Outcome{Reject: kind, Refusal: refusal, UserMessage: msg})
	}
	if !upd.changesRouting() {
		return Outcome{}
	}
	d := l.cfg.Route(&after)
	switch d.Action {
	case pools.Reject:
		before := job.Request
		before.Op = pools.Submit
		if l.cfg.Route(&before).Action == pools.Reject {
			// The job as it stands does not fit its partitions either (the pools changed since
			// it was submitted, or slurmctld resolved its request into numbers routing reads
			// differently): the update is no worse, and judged on its changed fields alone.
			return p.outcome(l.cfg.Route(&upd.Request), "update", uid)
		}
		msg := submitHint.ReplaceAllString(strings.TrimPrefix(d.Message, "slurmbridge: "), fmt.Sprintf("(scontrol update jobid=%d partition=$1)", job.ID))
		d.Message = fmt.Sprintf("slurmbridge: update of job %d refused: %s", job.ID, msg)
		return p.outcome(d, "update", uid)
	case pools.SetPartition:
		if upd.Set&FieldPartition != 0 {
			return p.outcome(d, "update", uid) // the partitions named are narrowed, as on submission
		}
		// Some of the job's partitions cannot run it after the update, but one can: the job
		// runs there, and its partitions are not changed by an update that did not name them.
		return Outcome{}
	}
	return Outcome{}
}

// unreadableRefusal refuses, for everyone, an update of a job whose record this build of the
// plugin cannot read (a Slurm micro release missing from job_record_layout.h), where the record
// alone could say the update is safe: GPUs given by update (the job may be a component of a
// heterogeneous job, which may hold none) and a move into a lending QOS (whether Slurm could
// requeue the job, and whether its output appends). "" lets it through.
func unreadableRefusal(upd *Update, lendInto string) (Rejection, string) {
	if lendInto != "" {
		return RejectQOS, fmt.Sprintf("slurmbridge: this build of the job_submit plugin cannot read slurmctld's job records (its Slurm release "+
			"is missing from the plugin's layout table; slurmbridge-doctor says so), so it cannot check that the job can be requeued "+
			"and keeps its output: no job moves into QOS %s until the plugin is built for this release (docs/adding-a-release.md).", lendInto)
	}
	if upd.Set&fieldsTRES != 0 {
		if _, mayGPUs := gpuRequest(&upd.Request); mayGPUs {
			return RejectGRES, "slurmbridge: this build of the job_submit plugin cannot read slurmctld's job records (its Slurm release " +
				"is missing from the plugin's layout table; slurmbridge-doctor says so), so it cannot check that the job is not a " +
				"component of a heterogeneous job, which may hold no GPUs: GPUs are not given by update until the plugin is built " +
				"for this release. Submit a new job with the GPUs it needs."
		}
	}
	return NotRejected, ""
}

// submitHint is the advice bridge/pools gives a refused submission; an update gets the
// scontrol line instead.
var submitHint = regexp.MustCompile(`\(submit with -p (\S+), or without -p to let slurmbridge choose\)`)

func isPrivileged(uid uint32, conf SlurmConf, admins map[uint32]bool) bool {
	return uid == 0 || (conf.Known && uid == conf.SlurmUserID) || admins[uid]
}

// changesRouting says whether the update changes anything routing reads: an update of the time
// limit, the name or the throttle of an array keeps the partitions' verdict as it was.
func (u *Update) changesRouting() bool {
	r := &u.Request
	return u.Set&(FieldPartition|fieldsTRES) != 0 ||
		r.MinCPUs != pools.NoVal || r.CPUsPerTask != pools.NoVal16 || r.PnMinCPUs != pools.NoVal16 ||
		r.PnMinMemory != pools.NoVal64 || r.MinNodes != pools.NoVal || r.MaxNodes != pools.NoVal ||
		r.NumTasks != pools.NoVal || r.NTasksPerNode != pools.NoVal16 || r.SocketsPerNode != pools.NoVal16
}

// Merge is the job as the update would leave it: each field the update carries over the job's,
// as a submission (Op Submit) of its partition list. A GPU request is replaced field by field
// (tres_per_node, tres_per_job, ...), as Slurm replaces each on update.
func Merge(job *Job, upd *Update) pools.Request {
	r := job.Request
	u := &upd.Request
	r.Op = pools.Submit
	str := func(f Fields, dst *string, v string) {
		if upd.Set&f != 0 {
			*dst = v
		}
	}
	if upd.Set&FieldPartition != 0 && u.Partition != "" {
		r.Partition = u.Partition
	}
	str(FieldTRESPerJob, &r.TRESPerJob, u.TRESPerJob)
	str(FieldTRESPerNode, &r.TRESPerNode, u.TRESPerNode)
	str(FieldTRESPerSocket, &r.TRESPerSocket, u.TRESPerSocket)
	str(FieldTRESPerTask, &r.TRESPerTask, u.TRESPerTask)
	str(FieldComment, &r.Comment, u.Comment)
	if upd.Set&FieldQOS != 0 && u.QOS != "" {
		r.QOS = u.QOS
	}
	num32 := func(dst *uint32, v uint32) {
		if v != pools.NoVal {
			*dst = v
		}
	}
	num16 := func(dst *uint16, v uint16) {
		if v != pools.NoVal16 {
			*dst = v
		}
	}
	num32(&r.MinCPUs, u.MinCPUs)
	num16(&r.CPUsPerTask, u.CPUsPerTask)
	num16(&r.PnMinCPUs, u.PnMinCPUs)
	if u.PnMinMemory != pools.NoVal64 {
		r.PnMinMemory = u.PnMinMemory
	}
	num32(&r.MinNodes, u.MinNodes)
	num32(&r.MaxNodes, u.MaxNodes)
	num32(&r.NumTasks, u.NumTasks)
	num16(&r.NTasksPerNode, u.NTasksPerNode)
	num16(&r.SocketsPerNode, u.SocketsPerNode)
	num16(&r.Requeue, u.Requeue)
	return r
}

// lentJobRefusal refuses an update that would break what a job in a lending QOS relies on, and
// says which Slurm error and which kind go with it: "" when the update may go on. A job stays in the
// lending QOS unless the update moves it out (into a QOS that lends nothing; a move into
// another lending QOS is modifyBorrowRefusal's).
func lentJobRefusal(cfg *pools.Config, upd *Update, job *Job) (Rejection, pools.Refusal, string) {
	qos := borrowQOSAsked(cfg, job.Request.QOS)
	if qos == "" || (upd.Set&FieldQOS != 0 && upd.Request.QOS != "" && borrowQOSAsked(cfg, upd.Request.QOS) == "") {
		return NotRejected, "", ""
	}
	// Slurm requeues only batch jobs whose requeue flag is 1; any other it preempts it kills.
	if upd.Request.Requeue == 0 {
		return RejectQOS, pools.RefusedLentNoRequeue, fmt.Sprintf("slurmbridge: job %d is in QOS %s, which is preemptable: with Requeue=0 it would be killed "+
			"instead of requeued when its GPUs are reclaimed. Keep Requeue=1, or move it out of %s first (scontrol update jobid=%d qos=...).",
			job.ID, qos, qos, job.ID)
	}
	if upd.Account != "" && !strings.EqualFold(upd.Account, job.Account) {
		return RejectAccount, pools.RefusedLentAccount, fmt.Sprintf("slurmbridge: job %d was lent GPUs in QOS %s on behalf of account %s; only quotad "+
			"changes the account of a lent job. Move it out of %s first (scontrol update jobid=%d qos=...), then change its account.",
			job.ID, qos, job.Account, qos, job.ID)
	}
	// quotad lent the GPUs this request needs, where every lending limit let it: more GPUs, more
	// nodes or other partitions could start the job on GPUs a limit keeps for their owner
	// before the next cycle sees it.
	if upd.changesResources() {
		return RejectQOS, pools.RefusedLentResources, fmt.Sprintf("slurmbridge: job %d was lent idle GPUs in QOS %s for the GPUs, nodes and "+
			"partitions it asked for then; a change of them could take GPUs that another project's lending limit keeps for its owner. "+
			"Move it back into your project's guaranteed QOS in the same update (scontrol update jobid=%d qos=<guaranteed QOS> ...; "+
			"quotactl explain %d names it): quotad lends it again while GPUs are idle.", job.ID, qos, job.ID, job.ID)
	}
	return NotRejected, "", ""
}

// changesResources says whether the update changes how many GPUs the job may take or where:
// its GPU request, node or task counts, or its partitions. CPUs, memory, the time limit and
// the rest leave its GPUs as they were.
func (u *Update) changesResources() bool {
	r := &u.Request
	return u.Set&(FieldPartition|fieldsTRES) != 0 || r.MinNodes != pools.NoVal || r.MaxNodes != pools.NoVal ||
		r.NumTasks != pools.NoVal || r.NTasksPerNode != pools.NoVal16 || r.SocketsPerNode != pools.NoVal16
}
