package daemon

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/slurmbridge/slurmbridge/bridge/gpureq"
	"github.com/slurmbridge/slurmbridge/bridge/quotaapi"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/elasticd/capacity"
	"github.com/slurmbridge/slurmbridge/elasticd/elastictest"
	"github.com/slurmbridge/slurmbridge/elasticd/policy"
)

// keeps is quotad's project row of account whose lending limit keeps n idle a100 for its own
// jobs.
func keeps(account string, n int) quotaapi.Project {
	return quotaapi.Project{Account: account, GuaranteedQOS: "guar-" + account,
		GPUs: []quotaapi.ProjectGPUs{{GPUType: "a100", Guaranteed: 4, LendLimit: new(4 - n), KeptIdle: n}}}
}

// lendingHarness is alice's job of proj-a (min 1, max 4) on the node's 4 a100, its main job
// in proj-a's guarantee of 4 a100 beside another job of proj-a's holding 2 elsewhere: one
// worker fits in the guarantee, the next ones borrow in elastic-proj-a as far as quotad's
// answer lets them. quotad nil: the daemon has none.
func lendingHarness(t *testing.T, quotad *fakeQuotad) *harness {
	t.Helper()
	h := newHarness(t, 1, 4)
	if quotad == nil {
		h.d.cfg.Quotad = nil
	} else {
		*h.quotad = *quotad
	}
	h.slurm.qos = []slurm.QOS{{Name: "guar-proj-a", GrpTRES: gpureq.TRES{"gres/gpu:a100": 4}}, {Name: "borrow-proj-a", GrpTRES: gpureq.TRES{"gres/gpu:a100": 3}},
		{Name: "elastic-proj-a", GrpTRES: gpureq.TRES{"gres/gpu:a100": 3}}}
	h.slurm.jobs[50] = slurm.Job{ID: 50, User: "alice", Account: "proj-a", QOS: "guar-proj-a", State: "RUNNING", TRESAlloc: elastictest.MustTRES(t, "gres/gpu:a100=2")}
	h.slurm.extras[50] = slurm.Job{ID: 50, Name: "other"}
	h.slurm.countUsed = true
	return h
}

// growByThroughput runs cycles with throughput that pays every step, starting each worker the
// daemon submits on the node in the QOS it chose, until cycles have run; it returns the
// active workers' QOS, the main job's first.
func growByThroughput(t *testing.T, h *harness, cycles int) []string {
	t.Helper()
	gpus := gpureq.TRES{"cpu": 1, "node": 1, "gres/gpu": 1, "gres/gpu:a100": 1}
	runGPU := func(id uint32, name, qos string) {
		h.slurm.run(id, name, h.uid, h.now)
		j := h.slurm.jobs[id]
		j.TRESAlloc, j.TRESReq, j.QOS = gpus, gpus, qos
		h.slurm.jobs[id] = j
	}
	runGPU(mainID, "train", "guar-proj-a")
	workers := []uint32{mainID}
	for range cycles {
		h.report(100*float64(len(workers)), workers...)
		h.cycle()
		if n := len(h.slurm.submits); n > len(workers)-1 {
			id := uint32(200 + n)
			runGPU(id, WorkerName(mainID), submittedQOS(h)[n-1])
			workers = append(workers, id)
		}
	}
	var qos []string
	for _, id := range workers {
		qos = append(qos, h.slurm.jobs[id].QOS)
	}
	return qos
}

// proj-b's lending limit keeps 2 idle a100 for bob's next jobs: alice's job grows by its last
// guaranteed GPU, then holds with the 2 GPUs left free, and says which limit holds it. Her
// own project's kept GPUs are its own; with 1 kept by proj-b, one worker borrows the other.
func TestBorrowedWorkersLeaveOtherProjectsKeptGPUsIdle(t *testing.T) {
	h := lendingHarness(t, &fakeQuotad{projects: []quotaapi.Project{keeps("proj-a", 0), keeps("proj-b", 2)}})
	if qos := growByThroughput(t, h, 30); strings.Join(qos, " ") != "guar-proj-a guar-proj-a" || len(h.slurm.lent) != 0 {
		t.Fatalf("workers in %v, lent %v; want the main job and one guaranteed worker", qos, h.slurm.lent)
	}
	want := "(lending limits keep 2 idle a100 for their owners' own jobs (proj-b keeps 2), 2 of a100 free: borrowed workers leave them idle)"
	if st := h.d.Status()[0]; st.Decision != "hold" || st.ReasonCode != string(policy.CodeNoCapacity) || !strings.Contains(st.Reason, want) {
		t.Fatalf("status %s %s %q; want a hold saying %q", st.Decision, st.ReasonCode, st.Reason, want)
	}

	for _, tc := range []struct {
		name     string
		projects []quotaapi.Project
		want     string
	}{
		{"the job's own project keeps GPUs", []quotaapi.Project{keeps("proj-a", 2)}, "guar-proj-a guar-proj-a elastic-proj-a elastic-proj-a"},
		{"another project keeps 1 of the 2 left to borrow", []quotaapi.Project{keeps("proj-b", 1)}, "guar-proj-a guar-proj-a elastic-proj-a"},
		{"no lending limit", nil, "guar-proj-a guar-proj-a elastic-proj-a elastic-proj-a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := lendingHarness(t, &fakeQuotad{projects: tc.projects})
			if qos := growByThroughput(t, h, 40); strings.Join(qos, " ") != tc.want {
				t.Fatalf("workers in %v, want %s (decision %+v)", qos, tc.want, h.decision())
			}
		})
	}
}

// quotad unreachable, without a plan yet, with a stale plan, or not configured: the job still
// grows within its guarantee, lends no worker, and its status says why; once quotad's plan is
// fresh again, the next worker borrows.
func TestNoWorkerBorrowsWithoutAFreshQuotadPlan(t *testing.T) {
	for _, tc := range []struct {
		name   string
		quotad *fakeQuotad
		why    string
	}{
		{"unreachable", &fakeQuotad{err: errors.New("reaching quotad at http://127.0.0.1:9817: connection refused")},
			"cannot read quotad's plan: reaching quotad at http://127.0.0.1:9817: connection refused: no worker borrows GPUs"},
		{"no plan yet", &fakeQuotad{noPlan: true}, "quotad has no plan yet: no worker borrows GPUs"},
		{"stale", &fakeQuotad{stale: true}, "quotad's plan is stale: its snapshot is 95 s old: no worker borrows GPUs"},
		{"no quotad", nil, "no quotad to read the lending limits from: no worker borrows GPUs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := lendingHarness(t, tc.quotad)
			if qos := growByThroughput(t, h, 30); strings.Join(qos, " ") != "guar-proj-a guar-proj-a" || len(h.slurm.lent) != 0 {
				t.Fatalf("workers in %v, lent %v; want the main job and one guaranteed worker", qos, h.slurm.lent)
			}
			if st := h.d.Status()[0]; st.Decision != "hold" || !strings.Contains(st.Reason, tc.why) {
				t.Fatalf("status %s %q; want a hold saying %q", st.Decision, st.Reason, tc.why)
			}
			h.d.cfg.Quotad = &fakeQuotad{} // a fresh plan, nothing kept
			h.cycle()
			if len(h.slurm.lent) != 1 {
				t.Fatalf("with a fresh plan again, lent %v (decision %+v); want one borrowed worker", h.slurm.lent, h.decision())
			}
		})
	}
}

// What the lending limits keep is counted from elasticd's own queue, a cycle newer than
// quotad's plan: proj-a lends at most 1 of its 4 a100 (it never lends 3).
func TestKeptNowCountsTheOwnersJobsFromTheQueue(t *testing.T) {
	limitA := capacity.LendLimit{Account: "proj-a", GuarQOS: "guar-proj-a", GPUType: "a100", Never: 3, KeptIdle: 0}
	running := func(id uint32, qos, tres string) slurm.Job {
		return slurm.Job{ID: id, Account: "proj-a", QOS: qos, State: "RUNNING", TRESAlloc: elastictest.MustTRES(t, tres)}
	}
	with := func(l capacity.LendLimit, edit func(*capacity.LendLimit)) capacity.LendLimit { edit(&l); return l }
	tests := []struct {
		name   string
		answer capacity.QuotadAnswer
		jobs   []slurm.Job
		want   policy.Lending
	}{
		{
			name:   "alice's jobs just ended, quotad's plan still counts them: the limit keeps 3",
			answer: capacity.QuotadAnswer{Fresh: true, Limits: []capacity.LendLimit{limitA}},
			want:   policy.Lending{Fresh: true, Kept: []policy.KeptIdle{{Account: "proj-a", Type: "a100", GPUs: 3}}},
		},
		{
			name:   "alice's 2 running jobs in her guarantee use 2 of the 3 never lent",
			answer: capacity.QuotadAnswer{Fresh: true, Limits: []capacity.LendLimit{with(limitA, func(l *capacity.LendLimit) { l.KeptIdle = 3 })}},
			jobs: []slurm.Job{running(1, "guar-proj-a", "gres/gpu=1,gres/gpu:a100=1"), running(2, "GUAR-PROJ-A", "gres/gpu=1,gres/gpu:a100=1"),
				running(3, "borrow-proj-a", "gres/gpu=1,gres/gpu:a100=1"), running(4, "guar-proj-a", "gres/gpu=1,gres/gpu:v100=1")},
			want: policy.Lending{Fresh: true, Kept: []policy.KeptIdle{{Account: "proj-a", Type: "a100", GPUs: 1}}},
		},
		{
			name:   "a limit whose guarantee is all in use keeps nothing",
			answer: capacity.QuotadAnswer{Fresh: true, Limits: []capacity.LendLimit{limitA}},
			jobs:   []slurm.Job{running(1, "guar-proj-a", "gres/gpu=4,gres/gpu:a100=4")},
			want:   policy.Lending{Fresh: true},
		},
		{
			name:   "requests of no type keep quotad's count",
			answer: capacity.QuotadAnswer{Fresh: true, Limits: []capacity.LendLimit{with(limitA, func(l *capacity.LendLimit) { l.GPUType, l.KeptIdle = quotaapi.AnyType, 2 })}},
			want:   policy.Lending{Fresh: true, Kept: []policy.KeptIdle{{Account: "proj-a", Type: quotaapi.AnyType, GPUs: 2}}},
		},
		{
			name:   "a plan not read fresh is no count",
			answer: capacity.QuotadAnswer{Why: "quotad has no plan yet", Limits: []capacity.LendLimit{limitA}},
			want:   policy.Lending{Why: "quotad has no plan yet"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			jobs := map[uint32]slurm.Job{}
			for _, j := range tc.jobs {
				jobs[j.ID] = j
			}
			if got := capacity.KeptNow(tc.answer, jobs); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("KeptNow = %+v, want %+v", got, tc.want)
			}
		})
	}
}
