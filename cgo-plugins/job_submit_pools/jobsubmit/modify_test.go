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
			change: func(u *Update) { u.Request.QOS, u.Set = "borrow-proj-a", FieldQOS }, uid: quotad},
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

// Without the job (its record unreadable), an update is judged as before: on its fields alone.
func TestModifyWithoutTheJob(t *testing.T) {
	f := newFixture(t, twoPools)
	u := update()
	u.Request.Partition, u.Set = "cpu", FieldPartition
	if out := f.p.Modify(u, nil, 1001); out.Reject != NotRejected {
		t.Fatalf("outcome = %+v, want a lone partition let through", out)
	}
	u.Request.TRESPerNode, u.Set = "gres/gpu:a100=1", FieldPartition|FieldTRESPerNode
	if out := f.p.Modify(u, nil, 1001); out.Reject != RejectGRES {
		t.Fatalf("outcome = %+v, want refused", out)
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
