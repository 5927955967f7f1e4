package policy

import (
	"reflect"
	"strings"
	"testing"
	"time"
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
		cfg     *Config
		snap    func(*snapBuilder) *snapBuilder
		want    []string          // moves as scontrol is told them
		explain map[uint32]string // substrings of explanations
		pending map[string]int    // account → pending GPUs in the guaranteed QOS
	}{
		{
			name: "3 idle a100 lend exactly 3 of 10 one-GPU tasks, the first ones",
			cfg:  twoProjects().obj(),
			snap: func(b *snapBuilder) *snapBuilder {
				return b.testbed(3, 0, 8).jobs(bobInQuota()...).jobs(job(20, "proj-b").gpu("a100", 1).array(seq(0, 9)...).obj())
			},
			want: []string{"lend 20_0 proj-b", "lend 20_1 proj-b", "lend 20_2 proj-b"},
			explain: map[uint32]string{20: "job 20 (array 20, 10 pending tasks): tasks 0-2 are lent (moves from guar-proj-b to borrow-proj-b)",
				0: ""},
			pending: map[string]int{"proj-b": 10},
		},
		{
			name: "two-GPU tasks: 5 idle fit 2 tasks, and the rest wait with the reason",
			cfg:  twoProjects().obj(),
			snap: func(b *snapBuilder) *snapBuilder {
				return b.testbed(5, 0, 8).jobs(bobInQuota()...).jobs(job(20, "proj-b").gpu("a100", 2).array(3, 5, 9).obj())
			},
			want:    []string{"lend 20_3 proj-b", "lend 20_5 proj-b"},
			explain: map[uint32]string{20: "the other 1 tasks wait: proj-b uses 4/4 guaranteed a100 and the job needs 2 a100 more; not enough idle GPUs for 2 a100: a100 has 1 a100"},
			pending: map[string]int{"proj-b": 6},
		},
		{
			name: "the borrowing limit counts tasks",
			cfg:  twoProjects(borrowLimit(2)).obj(),
			snap: func(b *snapBuilder) *snapBuilder {
				return b.testbed(4, 0, 8).jobs(bobInQuota()...).jobs(job(20, "proj-b").gpu("a100", 1).array(seq(1, 6)...).obj())
			},
			want:    []string{"lend 20_1 proj-b", "lend 20_2 proj-b"},
			explain: map[uint32]string{20: "borrowing limit reached: proj-b borrows 2 GPUs, limit 2"},
		},
		{
			name: "fair shares count tasks: an array does not take more than a project of single jobs",
			cfg:  config().project("proj-a", gpus("a100", 0)).project("proj-b", gpus("a100", 0)).obj(),
			snap: func(b *snapBuilder) *snapBuilder {
				return b.testbed(4, 0, 8).
					jobs(job(30, "proj-a").gpu("a100", 1).array(seq(1, 10)...).obj()).
					jobs(jobs(1, 10, func(id uint32) *jobBuilder { return job(id, "proj-b").gpu("a100", 1) })...)
			},
			// Equal weights: deficits tie and proj-a goes first by name, then they alternate.
			want: []string{"lend 30_1 proj-a", "lend 1 proj-b", "lend 30_2 proj-a", "lend 2 proj-b"},
		},
		{
			name: "an array waiting in its guarantee keeps idle GPUs for each task",
			cfg:  twoProjects().obj(),
			snap: func(b *snapBuilder) *snapBuilder {
				return b.testbed(4, 0, 8).
					jobs(job(20, "proj-a").gpu("a100", 1).reason("Resources").array(seq(1, 3)...).obj()).
					jobs(bobInQuota()...).
					jobs(jobs(5, 4, func(id uint32) *jobBuilder { return job(id, "proj-b").gpu("a100", 1) })...)
			},
			// 3 of the 4 idle a100 are kept for proj-a's 3 tasks; one is left to lend.
			want:    []string{"lend 5 proj-b"},
			explain: map[uint32]string{20: "3 a100 idle are kept for 3 of its 3 pending tasks, not lent"},
			pending: map[string]int{"proj-a": 3},
		},
		{
			name: "pending borrower tasks return one by one while the guarantee has room",
			cfg:  twoProjects().obj(),
			snap: func(b *snapBuilder) *snapBuilder {
				return b.testbed(0, 0, 8).
					jobs(jobs(1, 2, func(id uint32) *jobBuilder { return job(id, "proj-b").gpu("a100", 1).running(time.Minute) })...).
					jobs(job(20, "proj-b").gpu("a100", 1).borrowed().reason("Priority").array(7, 8, 9).obj())
			},
			want:    []string{"return 20_7 proj-b", "return 20_8 proj-b"},
			explain: map[uint32]string{20: "tasks 7-8: returns from borrow-proj-b to guar-proj-b"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan := BuildPlan(tt.cfg, tt.snap(snapshot()).synced(t, tt.cfg).obj(), t0)
			if got := targetLines(plan); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("moves = %q, want %q\nnotes %q", got, tt.want, plan.Notes)
			}
			for id, want := range tt.explain {
				if want == "" {
					continue
				}
				if text, _ := plan.Explain(id); !strings.Contains(text, want) {
					t.Errorf("explain %d = %q, want it to contain %q", id, text, want)
				}
			}
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
	cfg := config().project("proj-a", gpus("a100", 0)).project("proj-b", gpus("a100", 0)).obj()
	tests := []struct {
		name string
		idle int
		want []string
		why  string
	}{
		{"3 of 4 tasks fit: none is lent, the single jobs are", 3, []string{"lend 1 proj-b", "lend 2 proj-b", "lend 3 proj-b"},
			"the array's 4 pending tasks are lent together or not at all"},
		{"all 4 fit: lent in a row", 6, []string{"lend 30_1 proj-a", "lend 30_2 proj-a", "lend 30_3 proj-a", "lend 30_4 proj-a", "lend 1 proj-b", "lend 2 proj-b"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := snapshot().testbed(tt.idle, 0, 8).
				jobs(job(30, "proj-a").gpu("a100", 1).array(1, 2, 3, 4).obj()).
				jobs(jobs(1, 3, func(id uint32) *jobBuilder { return job(id, "proj-b").gpu("a100", 1) })...).
				synced(t, cfg).obj()
			snap.WholeArrays = true
			plan := BuildPlan(cfg, snap, t0)
			if got := targetLines(plan); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("moves = %q, want %q", got, tt.want)
			}
			if text, _ := plan.Explain(30); !strings.Contains(text, tt.why) {
				t.Errorf("explain = %q, want %q", text, tt.why)
			}
		})
	}
}

// A throttled array (--array=...%N) runs at most N tasks at once: a task lent past that would
// wait in the borrow QOS on idle GPUs promised to it, so lends stop at the throttle, counting the
// array's running tasks and those already lent.
func TestArrayThrottle(t *testing.T) {
	cfg := twoProjects().obj()
	tests := []struct {
		name  string
		whole bool
		jobs  []Job
		want  []string
		why   string
	}{
		{"4 idle, throttle 2: two tasks lent", false,
			[]Job{job(20, "proj-b").gpu("a100", 1).array(seq(0, 9)...).throttle(2).obj()},
			[]string{"lend 20_0 proj-b", "lend 20_1 proj-b"}, "its array runs at most 2 tasks at once (--array=...%2) and 2 run or were lent"},
		{"one task runs borrowed, one waits lent: no slot left", false,
			[]Job{
				job(20, "proj-b").gpu("a100", 1).array(seq(2, 9)...).throttle(2).obj(),
				job(31, "proj-b").gpu("a100", 1).borrowed().running(time.Minute).taskOf(20, 0).throttle(2).obj(),
				job(32, "proj-b").gpu("a100", 1).borrowed().reason("Priority").taskOf(20, 1).throttle(2).obj(),
			},
			nil, "and 2 run or were lent"},
		{"throttle 3, one running: two more", false,
			[]Job{
				job(20, "proj-b").gpu("a100", 1).array(seq(1, 9)...).throttle(3).obj(),
				job(31, "proj-b").gpu("a100", 1).borrowed().running(time.Minute).taskOf(20, 0).throttle(3).obj(),
			},
			[]string{"lend 20_1 proj-b", "lend 20_2 proj-b"}, ""},
		{"Slurm holds the rest at the throttle: said so, nothing kept", false,
			[]Job{
				job(20, "proj-b").gpu("a100", 1).reason("JobArrayTaskLimit").array(seq(2, 9)...).throttle(2).obj(),
				job(31, "proj-b").gpu("a100", 1).borrowed().running(time.Minute).taskOf(20, 0).throttle(2).obj(),
				job(32, "proj-b").gpu("a100", 1).borrowed().running(time.Minute).taskOf(20, 1).throttle(2).obj(),
				job(40, "proj-b").gpu("a100", 1).obj(),
			},
			[]string{"lend 40 proj-b"}, "waits in guar-proj-b: its array runs at most 2 tasks at once (--array=...%2) and 2 run or were lent"},
		{"lent whole: 3 tasks over a throttle of 2 are not lent", true,
			[]Job{job(20, "proj-b").gpu("a100", 1).array(0, 1, 2).throttle(2).obj()},
			nil, "its array runs at most 2 tasks at once"},
		{"lent whole: 2 tasks under a throttle of 2 are", true,
			[]Job{job(20, "proj-b").gpu("a100", 1).array(0, 1).throttle(2).obj()},
			[]string{"lend 20_0 proj-b", "lend 20_1 proj-b"}, ""},
		{"a task split off in the guaranteed QOS: the rest is lent up to the throttle", false,
			[]Job{
				job(20, "proj-b").gpu("a100", 1).array(0, 1).throttle(2).obj(),
				job(22, "proj-b").gpu("a100", 1).taskOf(20, 2).throttle(2).obj(),
			},
			[]string{"lend 20_0 proj-b", "lend 20_1 proj-b"}, ""},
		{"lent whole: an array whose pending tasks are in two records is not lent", true,
			[]Job{
				job(20, "proj-b").gpu("a100", 1).array(0, 1).throttle(2).obj(),
				job(22, "proj-b").gpu("a100", 1).taskOf(20, 2).throttle(2).obj(),
			},
			nil, "array 20's pending tasks are in 2 records (some were split off)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := snapshot().testbed(4, 0, 8).jobs(bobInQuota()...).jobs(tt.jobs...).synced(t, cfg).obj()
			snap.WholeArrays = tt.whole
			plan := BuildPlan(cfg, snap, t0)
			if got := targetLines(plan); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("moves = %q, want %q\nnotes %q", got, tt.want, plan.Notes)
			}
			if text, _ := plan.Explain(20); !strings.Contains(text, tt.why) {
				t.Errorf("explain = %q, want %q", text, tt.why)
			}
		})
	}
}
