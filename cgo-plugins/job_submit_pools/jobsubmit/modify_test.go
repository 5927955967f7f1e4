package jobsubmit

import (
	"strings"
	"testing"

	"github.com/slurmbridge/slurmbridge/bridge/pools"
)

// pendingJob is a job as slurmctld keeps it after submission: a batch job, its requeue flag
// resolved to 1, in the partitions it was routed to.
func pendingJob(partition, tresPerNode, qos string) *Job {
	r := unset()
	r.Partition, r.TRESPerNode, r.QOS, r.Requeue = partition, tresPerNode, qos, 1
	r.MinCPUs, r.CPUsPerTask, r.PnMinCPUs, r.MinNodes, r.MaxNodes = 1, 1, 1, 1, 0
	return &Job{ID: 77, Request: r, Account: "proj-a"}
}

// update is a job_desc on job_modify that changes nothing yet: every number at NO_VAL.
func update() *Update {
	r := pools.UnsetRequest()
	r.Op, r.MinCPUs = pools.Modify, pools.NoVal
	return &Update{Request: r}
}

func TestModifyWithTheJobKeepsSubmitsPromises(t *testing.T) {
	const quotad, alice = 998, 1001
	conf := func() SlurmConf { return SlurmConf{Known: true, JobRequeue: false, SlurmUserID: 64030} }
	tests := []struct {
		name          string
		job           *Job
		change        func(u *Update)
		uid           uint32
		want          Rejection
		wantPartition string
		code          pools.Refusal // the refusal's kind
		wantMessage   string        // part of the message to the user, where the words are the case; "": none unless refused
		wantAppend    bool          // the job's record is set to append its output
	}{
		{name: "GPU job moved to the CPU pool", job: pendingJob("a100", "gres/gpu:a100=1", "normal"),
			change: func(u *Update) { u.Request.Partition, u.Set = "cpu", FieldPartition },
			uid:    alice, want: RejectGRES, code: pools.RefusedNamedPools,
			// The words are the case: an update is told the scontrol line, not sbatch -p.
			wantMessage: "update of job 77 refused: pool cpu cannot run this job: it has no GPUs; the job needs 1 on a node. Pools that can run it: a100 (scontrol update jobid=77 partition=a100)."},
		{name: "22.05 spelling of the job's GPU request", job: pendingJob("a100", "gres:gpu:a100:1", "normal"),
			change: func(u *Update) { u.Request.Partition, u.Set = "cpu", FieldPartition },
			uid:    alice, want: RejectGRES, code: pools.RefusedNamedPools},
		{name: "GPU type no listed pool has", job: pendingJob("a100", "gres/gpu:a100=1", "normal"),
			change: func(u *Update) { u.Request.TRESPerNode, u.Set = "gres/gpu:h100=1", FieldTRESPerNode },
			uid:    alice, want: RejectGRES, code: pools.RefusedNamedPools},
		{name: "more GPUs per node than the pool's nodes hold", job: pendingJob("a100", "gres/gpu:a100=1", "normal"),
			change: func(u *Update) { u.Request.TRESPerNode, u.Set = "gres/gpu:a100=8", FieldTRESPerNode },
			uid:    alice, want: RejectGRES, code: pools.RefusedNamedPools},
		{name: "GPU request added to a CPU job in the CPU pool", job: pendingJob("cpu", "", "normal"),
			change: func(u *Update) { u.Request.TRESPerNode, u.Set = "gres/gpu=1", FieldTRESPerNode },
			uid:    alice, want: RejectGRES, code: pools.RefusedNamedPools},
		{name: "more CPUs than the job's pool's nodes have", job: pendingJob("a100", "gres/gpu:a100=1", "normal"),
			change: func(u *Update) { u.Request.MinCPUs, u.Request.MaxNodes = 64, 1 },
			uid:    alice, want: RejectGRES, code: pools.RefusedNamedPools},
		{name: "partition list with a pool that fits is narrowed", job: pendingJob("a100", "gres/gpu:a100=1", "normal"),
			change: func(u *Update) { u.Request.Partition, u.Set = "cpu,a100", FieldPartition },
			uid:    alice, wantPartition: "a100", wantMessage: "job sent to a100 only: pool cpu cannot run this job: it has no GPUs"},
		{name: "partition that is not a pool is Slurm's to judge", job: pendingJob("a100", "gres/gpu:a100=1", "normal"),
			change: func(u *Update) { u.Request.Partition, u.Set = "debug", FieldPartition },
			uid:    alice},
		{name: "GPU type change to a pool the job is listed in", job: pendingJob("a100,v100", "gres/gpu:a100=1", "normal"),
			change: func(u *Update) { u.Request.TRESPerNode, u.Set = "gres/gpu:v100=1", FieldTRESPerNode },
			uid:    alice},
		{name: "GPU request dropped and the job moved to the CPU pool at once", job: pendingJob("a100", "gres/gpu:a100=1", "normal"),
			change: func(u *Update) {
				u.Request.Partition, u.Request.TRESPerNode, u.Set = "cpu", "", FieldPartition|FieldTRESPerNode
			},
			uid: alice},
		{name: "time limit only", job: pendingJob("a100", "gres/gpu:a100=1", "normal"),
			change: func(u *Update) {}, uid: alice},
		{name: "root moves a GPU job anywhere as before", job: pendingJob("a100", "gres/gpu:a100=1", "normal"),
			change: func(u *Update) { u.Request.Partition, u.Set = "cpu", FieldPartition },
			uid:    0},
		{name: "requeue=0 of a lent job", job: pendingJob("a100", "gres/gpu:a100=1", "borrow-proj-a"),
			change: func(u *Update) { u.Request.Requeue = 0 },
			uid:    alice, want: RejectQOS, code: pools.RefusedLentNoRequeue},
		{name: "requeue=0 of a job in the elastic QOS", job: pendingJob("a100", "gres/gpu:a100=1", "elastic-proj-a"),
			change: func(u *Update) { u.Request.Requeue = 0 },
			uid:    alice, want: RejectQOS, code: pools.RefusedLentNoRequeue},
		{name: "requeue=0 with a move out of the lending QOS", job: pendingJob("a100", "gres/gpu:a100=1", "borrow-proj-a"),
			change: func(u *Update) { u.Request.Requeue, u.Request.QOS, u.Set = 0, "normal", FieldQOS },
			uid:    alice},
		{name: "requeue=0 of a job that is not lent", job: pendingJob("a100", "gres/gpu:a100=1", "normal"),
			change: func(u *Update) { u.Request.Requeue = 0 }, uid: alice},
		{name: "quotad's requeue=0 of a lent job", job: pendingJob("a100", "gres/gpu:a100=1", "borrow-proj-a"),
			change: func(u *Update) { u.Request.Requeue = 0 }, uid: quotad},
		{name: "requeue=1 of a lent job", job: pendingJob("a100", "gres/gpu:a100=1", "borrow-proj-a"),
			change: func(u *Update) { u.Request.Requeue = 1 }, uid: alice},
		{name: "account change of a lent job", job: pendingJob("a100", "gres/gpu:a100=1", "borrow-proj-a"),
			change: func(u *Update) { u.Account = "proj-b" },
			uid:    alice, want: RejectAccount, code: pools.RefusedLentAccount},
		{name: "account change of a job that is not lent", job: pendingJob("a100", "gres/gpu:a100=1", "normal"),
			change: func(u *Update) { u.Account = "proj-b" }, uid: alice},
		{name: "quotad moves a lent job back to its guarantee", job: pendingJob("a100", "gres/gpu:a100=1", "borrow-proj-a"),
			change: func(u *Update) { u.Request.QOS, u.Set = "normal", FieldQOS }, uid: quotad},
		{name: "user moves a requeueable job into the borrow QOS", job: pendingJob("a100", "gres/gpu:a100=1", "normal"),
			change: func(u *Update) { u.Request.QOS, u.Set = "borrow-proj-a", FieldQOS },
			uid:    alice, want: RejectQOS, code: pools.RefusedBorrowQuotadOnly},
		{name: "quotad lends a job", job: pendingJob("a100", "gres/gpu:a100=1", "normal"),
			change: func(u *Update) { u.Request.QOS, u.Set = "borrow-proj-a", FieldQOS }, uid: quotad, wantAppend: true},
		{name: "quotad lends a job into a size tier", job: pendingJob("a100", "gres/gpu:a100=1", "normal"),
			change: func(u *Update) { u.Request.QOS, u.Set = "borrow-proj-a-g1", FieldQOS }, uid: quotad, wantAppend: true},
		{name: "elasticd lends a worker into the elastic QOS", job: pendingJob("a100", "gres/gpu:a100=1", "normal"),
			change: func(u *Update) { u.Request.QOS, u.Set = "elastic-proj-a", FieldQOS }, uid: 0, wantAppend: true},
		{name: "quotad lends a job that already appends", job: withOpenMode(pendingJob("a100", "gres/gpu:a100=1", "normal"), 1),
			change: func(u *Update) { u.Request.QOS, u.Set = "borrow-proj-a", FieldQOS }, uid: quotad},
		{name: "quotad lends a job that chose --open-mode=truncate", job: withOpenMode(pendingJob("a100", "gres/gpu:a100=1", "normal"), 2),
			change: func(u *Update) { u.Request.QOS, u.Set = "borrow-proj-a", FieldQOS }, uid: quotad},
		{name: "quotad moves a job back to its guarantee: its open mode is left", job: pendingJob("a100", "gres/gpu:a100=1", "borrow-proj-a"),
			change: func(u *Update) { u.Request.QOS, u.Set = "guar-proj-a", FieldQOS }, uid: quotad},
		{name: "quotad lends a job whose owner set requeue=0 after quotad's snapshot", job: withRequeue(pendingJob("a100", "gres/gpu:a100=1", "normal"), 0),
			change: func(u *Update) { u.Request.QOS, u.Set = "borrow-proj-a", FieldQOS },
			uid:    quotad, want: RejectQOS, code: pools.RefusedBorrowNotRequeueable},
		{name: "root moves an salloc allocation into the borrow QOS", job: notBatch(pendingJob("a100", "gres/gpu:a100=1", "normal")),
			change: func(u *Update) { u.Request.QOS, u.Set = "borrow-proj-a", FieldQOS },
			uid:    0, want: RejectQOS, code: pools.RefusedBorrowNotRequeueable},
		{name: "quotad lends a job with requeue=0 in the same update", job: pendingJob("a100", "gres/gpu:a100=1", "normal"),
			change: func(u *Update) { u.Request.QOS, u.Request.Requeue, u.Set = "borrow-proj-a", 0, FieldQOS },
			uid:    quotad, want: RejectQOS, code: pools.RefusedBorrowNotRequeueable},
		{name: "owner raises the GPUs of a lent job", job: pendingJob("a100", "gres/gpu:a100=1", "borrow-proj-a-g1"),
			change: func(u *Update) { u.Request.TRESPerNode, u.Set = "gres/gpu:a100=4", FieldTRESPerNode },
			uid:    alice, want: RejectQOS, code: pools.RefusedLentResources},
		{name: "owner gives a lent job more nodes", job: pendingJob("a100", "gres/gpu:a100=1", "borrow-proj-a"),
			change: func(u *Update) { u.Request.MinNodes, u.Request.MaxNodes = 2, 2 },
			uid:    alice, want: RejectQOS, code: pools.RefusedLentResources},
		{name: "owner gives a lent job more tasks", job: pendingJob("a100", "gres/gpu:a100=1", "borrow-proj-a"),
			change: func(u *Update) { u.Request.NumTasks = 8 },
			uid:    alice, want: RejectQOS, code: pools.RefusedLentResources},
		{name: "owner moves a lent job to other partitions", job: pendingJob("a100", "gres/gpu:a100=1", "elastic-proj-a"),
			change: func(u *Update) { u.Request.Partition, u.Set = "a100,v100", FieldPartition },
			uid:    alice, want: RejectQOS, code: pools.RefusedLentResources},
		{name: "owner raises the GPUs of a lent job as it leaves the lending QOS", job: pendingJob("a100", "gres/gpu:a100=1", "borrow-proj-a"),
			change: func(u *Update) {
				u.Request.TRESPerNode, u.Request.QOS, u.Set = "gres/gpu:a100=2", "guar-proj-a", FieldTRESPerNode|FieldQOS
			},
			uid: alice},
		{name: "owner changes the time limit and CPUs of a lent job", job: pendingJob("a100", "gres/gpu:a100=1", "borrow-proj-a"),
			change: func(u *Update) { u.Request.CPUsPerTask = 2 }, uid: alice},
		{name: "quotad changes the GPUs of a lent job", job: pendingJob("a100", "gres/gpu:a100=1", "borrow-proj-a"),
			change: func(u *Update) { u.Request.TRESPerNode, u.Set = "gres/gpu:a100=2", FieldTRESPerNode }, uid: quotad},
	}
	f := &fixture{t: t, log: &recorder{}}
	f.path = t.TempDir() + "/pools.yaml"
	f.write("borrow_qos_admins: [slurmbridge]\n" + threePools)
	f.p = New(f.path, f.log.log)
	f.p.SlurmConf = conf
	f.p.lookupUID = func(string) (uint32, error) { return quotad, nil }
	f.p.Init()
	t.Cleanup(f.p.Fini)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := update()
			tt.change(u)
			out := f.p.Modify(u, tt.job, tt.uid)
			refused := tt.want != NotRejected
			if out.Reject != tt.want || out.Refusal != tt.code || out.SetPartition != tt.wantPartition || !strings.Contains(out.UserMessage, tt.wantMessage) ||
				!refused && tt.wantMessage == "" && out.UserMessage != "" || refused && !strings.HasPrefix(out.UserMessage, "slurmbridge: ") {
				t.Fatalf("outcome = %+v, want rejection %d (%s), partition %q, a message with %q", out, tt.want, tt.code, tt.wantPartition, tt.wantMessage)
			}
			if out.AppendOutput != tt.wantAppend {
				t.Fatalf("AppendOutput = %v, want %v", out.AppendOutput, tt.wantAppend)
			}
			if refused && !f.log.endsWith(" refused: "+out.UserMessage+" code="+string(tt.code)) {
				t.Fatalf("refusal not logged with code=%s: %q", tt.code, f.log.lines)
			}
		})
	}
}

// A job that no longer fits its partitions (the pools changed since it was submitted) is not
// held hostage: an update is judged on its changed fields alone, as without the job.
func TestModifyOfAJobThePoolsNoLongerFit(t *testing.T) {
	f := newFixture(t, twoPools)
	job := pendingJob("a100", "gres/gpu:v100=1", "normal") // v100 pool since removed
	u := update()
	u.Request.Partition, u.Set = "a100", FieldPartition
	if out := f.p.Modify(u, job, 1001); out.Reject != NotRejected {
		t.Fatalf("outcome = %+v, want the update let through", out)
	}
	u.Request.Partition = "cpu"
	if out := f.p.Modify(u, job, 1001); out.Reject != NotRejected {
		t.Fatalf("outcome = %+v: a CPU partition named alone fits a request without GPUs", out)
	}
}

func withOpenMode(j *Job, mode uint8) *Job    { j.Request.OpenMode = mode; return j }
func withRequeue(j *Job, requeue uint16) *Job { j.Request.Requeue = requeue; return j }
func notBatch(j *Job) *Job                    { j.Request.Batch = false; return j }

// Without the job (its record unreadable: a Slurm micro release missing from the layout table),
// an update is judged on its fields alone, except where only the record could tell that it is
// safe: GPUs given by update (the job may be a heterogeneous job's component) and a lend
// (whether Slurm could requeue the job and whether its output appends) are refused, for
// everyone.
func TestModifyWithoutTheJob(t *testing.T) {
	f := newFixture(t, twoPools)
	tests := []struct {
		name   string
		change func(u *Update)
		uid    uint32
		want   Rejection
		code   pools.Refusal
	}{
		{name: "a lone partition", change: func(u *Update) { u.Request.Partition, u.Set = "cpu", FieldPartition }, uid: 1001},
		{name: "CPUs and the time limit", change: func(u *Update) { u.Request.MinCPUs = 4 }, uid: 1001},
		{name: "GPUs given by update", change: func(u *Update) { u.Request.TRESPerNode, u.Set = "gres/gpu:a100=1", FieldTRESPerNode },
			uid: 1001, want: RejectGRES, code: pools.RefusedRecordUnreadable},
		{name: "GPUs given by root", change: func(u *Update) { u.Request.TRESPerJob, u.Set = "gres/gpu=2", FieldTRESPerJob },
			uid: 0, want: RejectGRES, code: pools.RefusedRecordUnreadable},
		{name: "GPUs in a request that does not parse", change: func(u *Update) { u.Request.TRESPerNode, u.Set = "gres/gpu:a100=x", FieldTRESPerNode },
			uid: 1001, want: RejectGRES, code: pools.RefusedRecordUnreadable},
		{name: "GPU request dropped", change: func(u *Update) { u.Request.TRESPerNode, u.Set = "", FieldTRESPerNode }, uid: 1001},
		{name: "a lend by root", change: func(u *Update) { u.Request.QOS, u.Set = "borrow-proj-a", FieldQOS },
			uid: 0, want: RejectQOS, code: pools.RefusedRecordUnreadable},
		{name: "a user's move into the borrow QOS is quotad's alone first", change: func(u *Update) { u.Request.QOS, u.Set = "borrow-proj-a", FieldQOS },
			uid: 1001, want: RejectQOS, code: pools.RefusedBorrowQuotadOnly},
		{name: "a move to another QOS", change: func(u *Update) { u.Request.QOS, u.Set = "guar-proj-a", FieldQOS }, uid: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := update()
			tt.change(u)
			out := f.p.Modify(u, nil, tt.uid)
			if out.Reject != tt.want || out.Refusal != tt.code || out.AppendOutput {
				t.Fatalf("outcome = %+v, want rejection %d (%s)", out, tt.want, tt.code)
			}
		})
	}
}

func TestMergeTakesTheUpdatesFieldsOverTheJobs(t *testing.T) {
	job := pendingJob("a100,v100", "gres/gpu:a100=1", "normal")
	job.Request.TRESPerTask, job.Request.Comment, job.Request.PnMinMemory = "cpu=4", "class=resnet", 16000
	u := update()
	u.Request.TRESPerNode, u.Request.MinNodes, u.Request.Requeue = "gres/gpu:v100=2", 2, 0
	u.Set = FieldTRESPerNode
	got := Merge(job, u)
	want := job.Request
	want.TRESPerNode, want.MinNodes, want.Requeue = "gres/gpu:v100=2", 2, 0
	if got != want {
		t.Fatalf("Merge =\n%+v\nwant\n%+v", got, want)
	}
	// An empty string carried is a change; a NULL one is not.
	u = update()
	u.Request.Comment, u.Set = "", FieldComment
	if got := Merge(job, u); got.Comment != "" || got.TRESPerNode != "gres/gpu:a100=1" || got.TRESPerTask != "cpu=4" {
		t.Fatalf("Merge = %+v", got)
	}
}
