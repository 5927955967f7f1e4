package policy_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/quotad/policy"
	"github.com/slurmbridge/slurmbridge/quotad/policy/policytest"
)

// seq is the task ids first..last.
func seq(first, last uint32) []uint32 {
	var out []uint32
	for t := first; t <= last; t++ {
		out = append(out, t)
	}
	return out
}

// An array record stands for one job per pending task: lends move exactly the tasks that fit,
// and limits and fair shares count tasks.
func TestArrayTasks(t *testing.T) {
	tests := []struct {
		name    string
		cfg     *policy.Config
		snap    func(*policytest.SnapshotWrapper) *policytest.SnapshotWrapper
		want    []string                   // moves as scontrol is told them
		explain map[uint32]policytest.Says // substrings of explanations
		pending map[string]int             // account → pending GPUs in the guaranteed QOS
	}{
		{
			name: "3 idle a100 lend exactly 3 of 10 one-GPU tasks, the first ones",
			cfg:  twoProjects().Obj(),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Testbed(3, 0, 8).Jobs(bobInQuota()...).Jobs(policytest.MakeJob(20, "proj-b").GPU("a100", 1).Array(seq(0, 9)...).Obj())
			},
			want:    []string{"lend 20_0 proj-b", "lend 20_1 proj-b", "lend 20_2 proj-b"},
			explain: map[uint32]policytest.Says{20: {Code: policy.CodeLent, Words: "job 20 (array 20, 10 pending tasks): tasks 0-2 are lent (moves from guar-proj-b to borrow-proj-b)"}},
			pending: map[string]int{"proj-b": 10},
		},
		{
			name: "two-GPU tasks: 5 idle fit 2 tasks, and the rest wait with the reason",
			cfg:  twoProjects().Obj(),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Testbed(5, 0, 8).Jobs(bobInQuota()...).Jobs(policytest.MakeJob(20, "proj-b").GPU("a100", 2).Array(3, 5, 9).Obj())
			},
			want:    []string{"lend 20_3 proj-b", "lend 20_5 proj-b"},
			explain: map[uint32]policytest.Says{20: {Code: policy.CodeLent, Words: "the other 1 tasks wait: proj-b uses 4/4 guaranteed a100 and the job needs 2 a100 more; not enough idle GPUs for 2 a100: a100 has 1 a100"}},
			pending: map[string]int{"proj-b": 6},
		},
		{
			name: "the borrowing limit counts tasks",
			cfg:  twoProjects(policytest.BorrowLimit(2)).Obj(),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Testbed(4, 0, 8).Jobs(bobInQuota()...).Jobs(policytest.MakeJob(20, "proj-b").GPU("a100", 1).Array(seq(1, 6)...).Obj())
			},
			want:    []string{"lend 20_1 proj-b", "lend 20_2 proj-b"},
			explain: map[uint32]policytest.Says{20: {Code: policy.CodeLent, Words: "borrowing limit reached: proj-b borrows 2 GPUs, limit 2"}},
		},
		{
			name: "fair shares count tasks: an array does not take more than a project of single jobs",
			cfg:  policytest.MakeConfig().Project("proj-a", policytest.GPUs("a100", 0)).Project("proj-b", policytest.GPUs("a100", 0)).Obj(),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Testbed(4, 0, 8).
					Jobs(policytest.MakeJob(30, "proj-a").GPU("a100", 1).Array(seq(1, 10)...).Obj()).
					Jobs(pendingA100(1, 10, "proj-b")...)
			},
			// Equal weights: deficits tie and proj-a goes first by name, then they alternate.
			want: []string{"lend 30_1 proj-a", "lend 1 proj-b", "lend 30_2 proj-a", "lend 2 proj-b"},
		},
		{
			name: "an array waiting in its guarantee keeps idle GPUs for each task",
			cfg:  twoProjects().Obj(),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Testbed(4, 0, 8).
					Jobs(policytest.MakeJob(20, "proj-a").GPU("a100", 1).Reason("Resources").Array(seq(1, 3)...).Obj()).
					Jobs(bobInQuota()...).
					Jobs(pendingA100(5, 4, "proj-b")...)
			},
			// 3 of the 4 idle a100 are kept for proj-a's 3 tasks; one is left to lend.
			want:    []string{"lend 5 proj-b"},
			explain: map[uint32]policytest.Says{20: {Code: policy.CodeWaitsInQuota, Words: "3 a100 idle are kept for 3 of its 3 pending tasks, not lent"}},
			pending: map[string]int{"proj-a": 3},
		},
		{
			name: "pending borrower tasks return one by one while the guarantee has room",
			cfg:  twoProjects().Obj(),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Testbed(0, 0, 8).
					Jobs(runningA100(1, 2, "proj-b", time.Minute)...).
					Jobs(policytest.MakeJob(20, "proj-b").GPU("a100", 1).Borrowed().Reason("Priority").Array(7, 8, 9).Obj())
			},
			want:    []string{"return 20_7 proj-b", "return 20_8 proj-b"},
			explain: map[uint32]policytest.Says{20: {Code: policy.CodeReturnGuaranteeRoom, Words: "tasks 7-8: returns from borrow-proj-b to guar-proj-b"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan := policy.BuildPlan(tt.cfg, tt.snap(policytest.MakeSnapshot()).Synced(t, tt.cfg).Obj(), policytest.T0)
			if got := policytest.TargetLines(plan); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("moves = %q, want %q\nnotes %q", got, tt.want, plan.Notes)
			}
			policytest.CheckExplains(t, plan, tt.explain)
			for acct, want := range tt.pending {
				for _, ps := range plan.Projects {
					if ps.Account == acct && ps.ByType[0].Pending != want {
						t.Errorf("%s pending %d, want %d", acct, ps.ByType[0].Pending, want)
					}
				}
			}
		})
	}
}

// On 22.05 a task lent alone would not start while the rest of its array waits over quota in
// the same partition: arrays are lent whole or not at all, and whole ones without interleaving.
func TestWholeArrays(t *testing.T) {
	cfg := policytest.MakeConfig().Project("proj-a", policytest.GPUs("a100", 0)).Project("proj-b", policytest.GPUs("a100", 0)).Obj()
	tests := []struct {
		name string
		idle int
		want []string
		code policy.Code
	}{
		{"3 of 4 tasks fit: none is lent, the single jobs are", 3, []string{"lend 1 proj-b", "lend 2 proj-b", "lend 3 proj-b"}, policy.CodeArrayNotWhole},
		{"all 4 fit: lent in a row", 6, []string{"lend 30_1 proj-a", "lend 30_2 proj-a", "lend 30_3 proj-a", "lend 30_4 proj-a", "lend 1 proj-b", "lend 2 proj-b"}, policy.CodeLent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := policytest.MakeSnapshot().Testbed(tt.idle, 0, 8).
				Jobs(policytest.MakeJob(30, "proj-a").GPU("a100", 1).Array(1, 2, 3, 4).Obj()).
				Jobs(pendingA100(1, 3, "proj-b")...).
				Synced(t, cfg).Obj()
			snap.WholeArrays = true
			plan := policy.BuildPlan(cfg, snap, policytest.T0)
			if got := policytest.TargetLines(plan); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("moves = %q, want %q", got, tt.want)
			}
			policytest.CheckExplains(t, plan, map[uint32]policytest.Says{30: {Code: tt.code}})
		})
	}
}

// A throttled array (--array=...%N) runs at most N tasks at once: a task lent past that would
// wait in the borrow QOS on idle GPUs promised to it, so lends stop at the throttle, counting the
// array's running tasks and those already lent.
func TestArrayThrottle(t *testing.T) {
	cfg := twoProjects().Obj()
	tests := []struct {
		name  string
		whole bool
		jobs  []policy.Job
		want  []string
		code  policy.Code // of the array record's explanation
	}{
		{"4 idle, throttle 2: two tasks lent", false,
			[]policy.Job{policytest.MakeJob(20, "proj-b").GPU("a100", 1).Array(seq(0, 9)...).Throttle(2).Obj()},
			[]string{"lend 20_0 proj-b", "lend 20_1 proj-b"}, policy.CodeLent},
		{"one task runs borrowed, one waits lent: no slot left", false,
			[]policy.Job{
				policytest.MakeJob(20, "proj-b").GPU("a100", 1).Array(seq(2, 9)...).Throttle(2).Obj(),
				policytest.MakeJob(31, "proj-b").GPU("a100", 1).Borrowed().Running(time.Minute).TaskOf(20, 0).Throttle(2).Obj(),
				policytest.MakeJob(32, "proj-b").GPU("a100", 1).Borrowed().Reason("Priority").TaskOf(20, 1).Throttle(2).Obj(),
			},
			nil, policy.CodeArrayThrottled},
		{"throttle 3, one running: two more", false,
			[]policy.Job{
				policytest.MakeJob(20, "proj-b").GPU("a100", 1).Array(seq(1, 9)...).Throttle(3).Obj(),
				policytest.MakeJob(31, "proj-b").GPU("a100", 1).Borrowed().Running(time.Minute).TaskOf(20, 0).Throttle(3).Obj(),
			},
			[]string{"lend 20_1 proj-b", "lend 20_2 proj-b"}, policy.CodeLent},
		{"Slurm holds the rest at the throttle: said so, nothing kept", false,
			[]policy.Job{
				policytest.MakeJob(20, "proj-b").GPU("a100", 1).Reason("JobArrayTaskLimit").Array(seq(2, 9)...).Throttle(2).Obj(),
				policytest.MakeJob(31, "proj-b").GPU("a100", 1).Borrowed().Running(time.Minute).TaskOf(20, 0).Throttle(2).Obj(),
				policytest.MakeJob(32, "proj-b").GPU("a100", 1).Borrowed().Running(time.Minute).TaskOf(20, 1).Throttle(2).Obj(),
				policytest.MakeJob(40, "proj-b").GPU("a100", 1).Obj(),
			},
			[]string{"lend 40 proj-b"}, policy.CodeArrayThrottled},
		{"lent whole: 3 tasks over a throttle of 2 are not lent", true,
			[]policy.Job{policytest.MakeJob(20, "proj-b").GPU("a100", 1).Array(0, 1, 2).Throttle(2).Obj()},
			nil, policy.CodeArrayThrottled},
		{"lent whole: 2 tasks under a throttle of 2 are", true,
			[]policy.Job{policytest.MakeJob(20, "proj-b").GPU("a100", 1).Array(0, 1).Throttle(2).Obj()},
			[]string{"lend 20_0 proj-b", "lend 20_1 proj-b"}, policy.CodeLent},
		{"a task split off in the guaranteed QOS: the rest is lent up to the throttle", false,
			[]policy.Job{
				policytest.MakeJob(20, "proj-b").GPU("a100", 1).Array(0, 1).Throttle(2).Obj(),
				policytest.MakeJob(22, "proj-b").GPU("a100", 1).TaskOf(20, 2).Throttle(2).Obj(),
			},
			[]string{"lend 20_0 proj-b", "lend 20_1 proj-b"}, policy.CodeLent},
		{"lent whole: an array whose pending tasks are in two records is not lent", true,
			[]policy.Job{
				policytest.MakeJob(20, "proj-b").GPU("a100", 1).Array(0, 1).Throttle(2).Obj(),
				policytest.MakeJob(22, "proj-b").GPU("a100", 1).TaskOf(20, 2).Throttle(2).Obj(),
			},
			nil, policy.CodeArraySplit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := policytest.MakeSnapshot().Testbed(4, 0, 8).Jobs(bobInQuota()...).Jobs(tt.jobs...).Synced(t, cfg).Obj()
			snap.WholeArrays = tt.whole
			plan := policy.BuildPlan(cfg, snap, policytest.T0)
			if got := policytest.TargetLines(plan); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("moves = %q, want %q\nnotes %q", got, tt.want, plan.Notes)
			}
			policytest.CheckExplains(t, plan, map[uint32]policytest.Says{20: {Code: tt.code}})
		})
	}
}
