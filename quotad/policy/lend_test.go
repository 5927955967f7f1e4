package policy

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// twoProjects is the scenario table: proj-a and proj-b each guaranteed 4 a100.
func twoProjects(opts ...func(*Project)) *configBuilder {
	return config().project("proj-a", gpus("a100", 4), opts...).project("proj-b", gpus("a100", 4), opts...).project("proj-c", gpus("v100", 2))
}

// bob (proj-b) has 4 one-GPU a100 jobs running in his guarantee, plus more pending over it.
func bobInQuota() []Job {
	return jobs(1, 4, func(id uint32) *jobBuilder { return job(id, "proj-b").gpu("a100", 1).running(time.Minute) })
}

func TestMoves(t *testing.T) {
	tests := []struct {
		name    string
		cfg     *Config
		snap    func(*snapBuilder) *snapBuilder
		want    []string          // moves, in plan order
		explain map[uint32]string // substrings of job explanations
	}{
		{
			name: "scenario 1: bob's 4 over-quota jobs borrow the 4 idle a100",
			cfg:  twoProjects().obj(),
			snap: func(b *snapBuilder) *snapBuilder {
				return b.testbed(4, 0, 8).jobs(bobInQuota()...).
					jobs(jobs(5, 4, func(id uint32) *jobBuilder { return job(id, "proj-b").gpu("a100", 1) })...)
			},
			want: []string{"lend 5 proj-b", "lend 6 proj-b", "lend 7 proj-b", "lend 8 proj-b"},
			explain: map[uint32]string{
				5: "job 5 is lent (moves from guar-proj-b to borrow-proj-b): proj-b uses 4/4 guaranteed a100 and the job needs 1 a100 more; borrows 1 a100 idle in partition a100",
				1: "job 1 runs within proj-b's guarantee in guar-proj-b (1 a100): it is never reclaimed",
			},
		},
		{
			name: "idle GPUs of a partition the job did not ask for are not lent",
			cfg:  twoProjects().obj(),
			snap: func(b *snapBuilder) *snapBuilder {
				return b.testbed(0, 4, 8).jobs(bobInQuota()...).jobs(job(5, "proj-b").gpu("a100", 1).obj())
			},
			explain: map[uint32]string{5: "job 5 waits: proj-b uses 4/4 guaranteed a100 and the job needs 1 a100 more; not enough idle GPUs for 1 a100: a100 has 0 a100"},
		},
		{
			name: "a job listing two partitions borrows from the first that has room",
			cfg:  twoProjects().obj(),
			snap: func(b *snapBuilder) *snapBuilder {
				return b.testbed(1, 4, 8).jobs(bobInQuota()...).jobs(job(5, "proj-b").gpu("a100", 2).partitions("a100", "a100-spot").obj())
			},
			want:    []string{"lend 5 proj-b"},
			explain: map[uint32]string{5: "borrows 2 a100 idle in partition a100-spot"},
		},
		{
			name: "weights divide idle GPUs: weight 3 gets 3 of 4",
			cfg:  config().project("proj-a", gpus("a100", 0), weight(1)).project("proj-b", gpus("a100", 0), weight(3)).obj(),
			snap: func(b *snapBuilder) *snapBuilder {
				return b.testbed(4, 0, 8).
					jobs(jobs(1, 4, func(id uint32) *jobBuilder { return job(id, "proj-a").gpu("a100", 1) })...).
					jobs(jobs(11, 4, func(id uint32) *jobBuilder { return job(id, "proj-b").gpu("a100", 1) })...)
			},
			// fair shares 1 and 3: deficits b 3, a 1, b 2, then a 1 and b 1 tie and proj-a
			// goes first by name; by then the pool is empty for b's third.
			want: []string{"lend 11 proj-b", "lend 12 proj-b", "lend 1 proj-a", "lend 13 proj-b"},
			explain: map[uint32]string{
				11: "fair share 3.0 of 4 a100 for borrowers; deficit was 3.0, the largest",
				2:  "job 2 waits: proj-a uses 0/0 guaranteed a100",
			},
		},
		{
			name: "largest deficit first, not first come: proj-a already borrows 2",
			cfg:  twoProjects().obj(),
			snap: func(b *snapBuilder) *snapBuilder {
				return b.testbed(2, 0, 8).
					jobs(job(1, "proj-a").gpu("a100", 2).running(time.Hour).alloc(gpus("a100", 2)).borrowed().obj()).
					jobs(job(2, "proj-a").gpu("a100", 4).running(time.Hour).obj()).
					jobs(job(3, "proj-a").gpu("a100", 1).obj(), job(4, "proj-a").gpu("a100", 1).obj()).
					jobs(bobInQuota()...).
					jobs(job(20, "proj-b").gpu("a100", 1).obj(), job(21, "proj-b").gpu("a100", 1).obj())
			},
			want: []string{"lend 20 proj-b", "lend 21 proj-b"},
			explain: map[uint32]string{
				3: "job 3 waits: proj-a uses 4/4 guaranteed a100 and the job needs 1 a100 more; not enough idle GPUs",
				1: "job 1 runs borrowed in borrow-proj-a (2 a100): proj-a holds 6 GPUs (4 in quota, 2 borrowed) of a 4-GPU guarantee, 2 GPU(s) beyond its guarantee: 1st of 2 over-quota projects to lose borrowers; its PreemptExemptTime has passed; no project has unused guarantee of its GPU type now",
			},
		},
		{
			name: "equal deficits: the project with less recent usage per weight goes first",
			cfg:  twoProjects().obj(),
			snap: func(b *snapBuilder) *snapBuilder {
				return b.testbed(1, 0, 8).usage("proj-a", 9000).usage("proj-b", 100).
					jobs(job(1, "proj-a").gpu("a100", 4).running(time.Hour).obj(), job(2, "proj-a").gpu("a100", 1).obj()).
					jobs(job(3, "proj-b").gpu("a100", 4).running(time.Hour).obj(), job(4, "proj-b").gpu("a100", 1).obj())
			},
			want: []string{"lend 4 proj-b"},
		},
		{
			name: "within a project, Slurm priority then age",
			cfg:  twoProjects().obj(),
			snap: func(b *snapBuilder) *snapBuilder {
				return b.testbed(1, 0, 8).jobs(bobInQuota()...).
					jobs(job(5, "proj-b").gpu("a100", 1).obj(), job(6, "proj-b").gpu("a100", 1).priority(10).obj())
			},
			want: []string{"lend 6 proj-b"},
		},
		{
			name: "a too-big job waits and a smaller one behind it borrows",
			cfg:  twoProjects().obj(),
			snap: func(b *snapBuilder) *snapBuilder {
				return b.testbed(2, 0, 8).jobs(bobInQuota()...).
					jobs(job(5, "proj-b").gpu("a100", 2).nodes(2).obj(), job(6, "proj-b").gpu("a100", 2).obj())
			},
			want:    []string{"lend 6 proj-b"},
			explain: map[uint32]string{5: "the job needs 4 a100 more; not enough idle GPUs for 4 a100: a100 has 2 a100"},
		},
		{
			name: "scenario 4: a --no-requeue job is never lent",
			cfg:  twoProjects().obj(),
			snap: func(b *snapBuilder) *snapBuilder {
				return b.testbed(4, 0, 8).jobs(bobInQuota()...).jobs(job(5, "proj-b").gpu("a100", 1).noRequeue().obj())
			},
			explain: map[uint32]string{5: "job 5 waits for proj-b's guarantee in guar-proj-b: proj-b uses 4/4 guaranteed a100 and the job needs 1 a100 more; it is never lent: it has Requeue=0 (--no-requeue"},
		},
		{
			name: "borrowing limit per type",
			cfg:  twoProjects(borrowLimitOf("a100", 2)).obj(),
			snap: func(b *snapBuilder) *snapBuilder {
				return b.testbed(4, 0, 8).jobs(bobInQuota()...).
					jobs(jobs(5, 3, func(id uint32) *jobBuilder { return job(id, "proj-b").gpu("a100", 1) })...)
			},
			want:    []string{"lend 5 proj-b", "lend 6 proj-b"},
			explain: map[uint32]string{7: "job 7 waits: proj-b uses 4/4 guaranteed a100 and the job needs 1 a100 more; borrowing limit of a100 reached: proj-b borrows 2 a100, limit 2"},
		},
		{
			name: "borrowing limit over all types",
			cfg:  twoProjects(borrowLimit(1)).obj(),
			snap: func(b *snapBuilder) *snapBuilder {
				return b.testbed(4, 0, 8).jobs(bobInQuota()...).
					jobs(job(5, "proj-b").gpu("a100", 1).obj(), job(6, "proj-b").gpu("v100", 1).partitions("v100").obj())
			},
			want:    []string{"lend 5 proj-b"},
			explain: map[uint32]string{6: "borrowing limit reached: proj-b borrows 1 GPUs, limit 1"},
		},
		{
			name: "lending limit of a type counts running borrowers of every project",
			cfg:  twoProjects().lendLimit("a100", 3).obj(),
			snap: func(b *snapBuilder) *snapBuilder {
				return b.testbed(4, 0, 8).jobs(bobInQuota()...).
					jobs(job(9, "proj-c").gpu("a100", 2).borrowed().running(time.Hour).obj()).
					jobs(job(5, "proj-b").gpu("a100", 1).obj(), job(6, "proj-b").gpu("a100", 1).obj())
			},
			want:    []string{"lend 5 proj-b"},
			explain: map[uint32]string{6: "lending limit of a100 reached: 3/3 a100 lent"},
		},
		{
			name: "Slurm says QOSGrpGRES but the guarantee has room: not lent",
			cfg:  twoProjects().obj(),
			snap: func(b *snapBuilder) *snapBuilder {
				return b.testbed(4, 0, 8).jobs(job(1, "proj-b").gpu("a100", 1).running(time.Minute).obj(), job(5, "proj-b").gpu("a100", 1).obj())
			},
			explain: map[uint32]string{5: "job 5 waits with reason QOSGrpGRES, but proj-b's guarantee has room (a100 1/4 in use)"},
		},
		{
			name: "idle GPUs wanted by a job within its guarantee are not lent",
			cfg:  twoProjects().obj(),
			snap: func(b *snapBuilder) *snapBuilder {
				return b.testbed(2, 0, 8).jobs(bobInQuota()...).
					jobs(job(20, "proj-a").gpu("a100", 2).reason("Resources").obj(), job(5, "proj-b").gpu("a100", 1).obj())
			},
			explain: map[uint32]string{
				20: "job 20 waits in proj-a's guarantee (a100 0/4 in use; reason Resources): Slurm starts it when GPUs are free, preempting borrowers if it must; 2 a100 idle in partition a100 are kept for it, not lent",
				5:  "not enough idle GPUs for 1 a100: a100 has 0 a100",
			},
		},
		{
			name: "a job asking for any GPU type borrows, in its first partition with room, the type with most room",
			cfg:  twoProjects().obj(),
			snap: func(b *snapBuilder) *snapBuilder {
				return b.testbed(1, 1, 8).pool("mixed", "a100", 4, 2).pool("mixed", "v100", 4, 3).jobs(bobInQuota()...).
					jobs(job(5, "proj-b").gpu("", 2).partitions("a100-spot", "mixed", "v100").obj())
			},
			want:    []string{"lend 5 proj-b"},
			explain: map[uint32]string{5: "proj-b uses 4/4 guaranteed GPUs of all types and the job needs 2 any-type GPU more; borrows 2 v100 idle in partition mixed"},
		},
		{
			name: "scenario 3: a requeued borrower returns when its project is under quota again",
			cfg:  twoProjects().obj(),
			snap: func(b *snapBuilder) *snapBuilder {
				return b.testbed(0, 0, 8).
					jobs(job(1, "proj-b").gpu("a100", 3).running(time.Hour).obj()).
					jobs(job(5, "proj-b").gpu("a100", 1).borrowed().reason("Resources").obj(), job(6, "proj-b").gpu("a100", 1).borrowed().obj())
			},
			want: []string{"return 5 proj-b"},
			explain: map[uint32]string{
				5: "job 5 returns from borrow-proj-b to guar-proj-b: proj-b is under quota again (a100 3/4 in use)",
				6: "job 6 was lent and waits in borrow-proj-b for GPUs: proj-b is over its guarantee (a100 4/4 in use)",
			},
		},
		{
			name: "a pending borrower with Requeue=0 goes back to its guarantee",
			cfg:  twoProjects().obj(),
			snap: func(b *snapBuilder) *snapBuilder {
				return b.testbed(4, 0, 8).jobs(bobInQuota()...).jobs(job(5, "proj-b").gpu("a100", 1).borrowed().noRequeue().obj())
			},
			want:    []string{"return 5 proj-b"},
			explain: map[uint32]string{5: "job 5 returns from borrow-proj-b to guar-proj-b: it has Requeue=0 (--no-requeue, or no --requeue where slurm.conf has JobRequeue=0), so Slurm cannot requeue it: a reclaim would kill it"},
		},
		{
			name: "a pending borrower over a lowered borrowing limit goes back",
			cfg:  twoProjects(borrowLimit(1)).obj(),
			snap: func(b *snapBuilder) *snapBuilder {
				return b.testbed(4, 0, 8).jobs(bobInQuota()...).
					jobs(job(5, "proj-b").gpu("a100", 1).borrowed().obj(), job(6, "proj-b").gpu("a100", 1).borrowed().obj())
			},
			want:    []string{"return 6 proj-b"},
			explain: map[uint32]string{6: "it may no longer borrow: borrowing limit reached: proj-b borrows 1 GPUs, limit 1"},
		},
		{
			name: "pending borrowers keep the idle GPUs promised to them",
			cfg:  twoProjects().obj(),
			snap: func(b *snapBuilder) *snapBuilder {
				return b.testbed(1, 0, 8).jobs(bobInQuota()...).
					jobs(job(5, "proj-b").gpu("a100", 1).borrowed().obj()).
					jobs(job(10, "proj-a").gpu("a100", 4).running(time.Hour).obj(), job(11, "proj-a").gpu("a100", 1).obj())
			},
			explain: map[uint32]string{
				5:  "1 a100 idle in partition a100 are promised to it",
				11: "not enough idle GPUs for 1 a100: a100 has 0 a100",
			},
		},
		{
			name: "jobs outside the managed QOS and accounts are only explained",
			cfg:  twoProjects().obj(),
			snap: func(b *snapBuilder) *snapBuilder {
				return b.testbed(4, 0, 8).jobs(
					job(5, "proj-b").gpu("a100", 1).qos("normal").obj(),
					job(6, "other").gpu("a100", 1).obj(),
					job(7, "proj-b").obj(), // no GPUs: not a quota matter
				)
			},
			explain: map[uint32]string{
				5: "job 5 waits in QOS normal, not in proj-b's guaranteed QOS guar-proj-b: quotad does not move it",
				6: "job 6 waits in account other, which has no quota",
			},
		},
		{
			name: "a young borrower is exempt from reclaim",
			cfg:  twoProjects().obj(),
			snap: func(b *snapBuilder) *snapBuilder {
				return b.testbed(0, 0, 8).jobs(bobInQuota()...).jobs(job(5, "proj-b").gpu("a100", 1).borrowed().running(10 * time.Second).obj())
			},
			explain: map[uint32]string{5: "it is exempt from reclaim until 2026-03-01T12:00:20Z (PreemptExemptTime 30s); it may be reclaimed by pending guaranteed jobs of proj-a"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := tt.snap(snapshot()).synced(t, tt.cfg).obj()
			plan := BuildPlan(tt.cfg, snap, t0)
			if len(plan.QOS)+len(plan.Accounts) > 0 || !plan.Acting {
				t.Fatalf("unexpected sync %v %v (acting %v, notes %q)", plan.QOS, plan.Accounts, plan.Acting, plan.Notes)
			}
			if got := moveLines(plan); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("moves %q, want %q", got, tt.want)
			}
			for id, want := range tt.explain {
				if got, ok := plan.Explain(id); !ok || !strings.Contains(got, want) {
					t.Errorf("explain %d:\n got %q\nwant %q", id, got, want)
				}
			}
			if _, ok := plan.Explain(7); tt.name == "jobs outside the managed QOS and accounts are only explained" && ok {
				t.Errorf("a job without GPUs got an explanation")
			}
		})
	}
}

// Slurm requeues a preempted job only when it is a batch job with Requeue=1 and kills any
// other: salloc and srun allocations, --no-requeue jobs, and jobs submitted without --requeue
// where JobRequeue=0 (Requeue=0 in squeue, like --no-requeue). None of them may borrow.
func TestJobsSlurmCannotRequeueNeverBorrow(t *testing.T) {
	tests := []struct {
		name    string
		snap    func(*snapBuilder) *snapBuilder
		want    []string          // moves, in plan order
		explain map[uint32]string // substrings of job explanations
		never   map[uint32]string // substrings a job's explanation must not hold
		note    string            // a substring of one of the plan's notes
	}{
		{
			name: "salloc over quota: bob's guarantee is busy, his 4-GPU salloc waits in it",
			snap: func(b *snapBuilder) *snapBuilder {
				return b.testbed(4, 0, 8).jobs(bobInQuota()...).jobs(job(5, "proj-b").gpu("a100", 4).interactive().obj())
			},
			explain: map[uint32]string{5: "job 5 waits for proj-b's guarantee in guar-proj-b: proj-b uses 4/4 guaranteed a100 and the job needs 4 a100 more; " +
				"it is never lent: it is an interactive allocation (salloc or srun, not sbatch), and Slurm can requeue only batch jobs, " +
				"and a borrower's GPUs may be reclaimed, which would kill it. To borrow idle GPUs, submit it with sbatch --requeue"},
			never: map[uint32]string{5: "is lent"},
		},
		{
			name: "--no-requeue over quota waits in its guarantee",
			snap: func(b *snapBuilder) *snapBuilder {
				return b.testbed(4, 0, 8).jobs(bobInQuota()...).jobs(job(5, "proj-b").gpu("a100", 1).noRequeue().obj())
			},
			explain: map[uint32]string{5: "it is never lent: it has Requeue=0"},
		},
		{
			name: "an salloc within its guarantee is left to Slurm, which starts it in guar",
			snap: func(b *snapBuilder) *snapBuilder {
				return b.testbed(4, 0, 8).jobs(job(5, "proj-b").gpu("a100", 4).interactive().obj())
			},
			explain: map[uint32]string{5: "guarantee has room (a100 0/4 in use): Slurm should start it in guar-proj-b; not lent"},
		},
		{
			name: "a batch job behind a higher-priority salloc still borrows",
			snap: func(b *snapBuilder) *snapBuilder {
				return b.testbed(1, 0, 8).jobs(bobInQuota()...).
					jobs(job(5, "proj-b").gpu("a100", 1).interactive().priority(100).obj(), job(6, "proj-b").gpu("a100", 1).obj())
			},
			want:    []string{"lend 6 proj-b"},
			explain: map[uint32]string{5: "it is never lent: it is an interactive allocation", 6: "job 6 is lent"},
		},
		{
			name: "a pending salloc found in borrow goes back to its guarantee",
			snap: func(b *snapBuilder) *snapBuilder {
				return b.testbed(4, 0, 8).jobs(bobInQuota()...).jobs(job(5, "proj-b").gpu("a100", 1).borrowed().interactive().obj())
			},
			want: []string{"return 5 proj-b"},
			explain: map[uint32]string{5: "job 5 returns from borrow-proj-b to guar-proj-b: it is an interactive allocation (salloc or srun, not sbatch), " +
				"and Slurm can requeue only batch jobs: a reclaim would kill it, so it must not borrow"},
		},
		{
			name: "a pending salloc in borrow goes back even while idle GPUs could be promised to it",
			snap: func(b *snapBuilder) *snapBuilder {
				return b.testbed(4, 0, 8).jobs(bobInQuota()...).jobs(job(5, "proj-b").gpu("a100", 1).borrowed().interactive().reason("Resources").obj())
			},
			want: []string{"return 5 proj-b"},
		},
		{
			name: "a running salloc in borrow is not moved and explain says a reclaim would kill it",
			snap: func(b *snapBuilder) *snapBuilder {
				return b.testbed(0, 0, 8).jobs(bobInQuota()...).jobs(job(5, "proj-b").gpu("a100", 2).borrowed().interactive().running(time.Hour).obj())
			},
			explain: map[uint32]string{5: "job 5 runs borrowed in borrow-proj-b (2 a100): proj-b holds 6 GPUs (4 in quota, 2 borrowed) of a 4-GPU guarantee, 2 GPU(s) beyond its guarantee: 1st of 1 over-quota projects to lose borrowers; " +
				"its PreemptExemptTime has passed; it may be reclaimed by pending guaranteed jobs of proj-a (unused guarantee of its type); " +
				"a reclaim would KILL it, not requeue it: it is an interactive allocation (salloc or srun, not sbatch), and Slurm can requeue only batch jobs. quotad cannot move a running job out of borrow-proj-b"},
			never: map[uint32]string{5: "requeues it"},
			note:  "job 5 (proj-b) runs in borrow-proj-b but Slurm cannot requeue it (it is an interactive allocation",
		},
		{
			name: "a running salloc in borrow within its project's guarantee: not reclaimable now, and explain says what a reclaim would do",
			snap: func(b *snapBuilder) *snapBuilder {
				return b.testbed(0, 0, 8).jobs(job(5, "proj-b").gpu("a100", 2).borrowed().interactive().running(time.Hour).obj())
			},
			explain: map[uint32]string{5: "so no claim may reclaim it (quotad re-checks this every cycle); should its project go over its guarantee, a reclaim would KILL it, not requeue it: it is an interactive allocation"},
			never:   map[uint32]string{5: "requeues it"},
			note:    "job 5 (proj-b) runs in borrow-proj-b but Slurm cannot requeue it (it is an interactive allocation",
		},
		{
			name: "a running --no-requeue borrower: the same",
			snap: func(b *snapBuilder) *snapBuilder {
				return b.testbed(0, 0, 8).jobs(bobInQuota()...).jobs(job(5, "proj-b").gpu("a100", 1).borrowed().noRequeue().running(time.Hour).obj())
			},
			explain: map[uint32]string{5: "a reclaim would KILL it, not requeue it: it has Requeue=0"},
			never:   map[uint32]string{5: "requeues it"},
			note:    "job 5 (proj-b) runs in borrow-proj-b but Slurm cannot requeue it (it has Requeue=0",
		},
		{
			name: "a running batch borrower with Requeue=1 is requeued on reclaim",
			snap: func(b *snapBuilder) *snapBuilder {
				return b.testbed(0, 0, 8).jobs(bobInQuota()...).jobs(job(5, "proj-b").gpu("a100", 1).borrowed().running(time.Hour).obj())
			},
			explain: map[uint32]string{5: "a reclaim requeues it after a 10s grace period (it is a batch job with Requeue=1), so it runs again later"},
			never:   map[uint32]string{5: "KILL"},
		},
		{
			name: "a pending salloc of another account in a project's borrow QOS goes back too",
			snap: func(b *snapBuilder) *snapBuilder {
				return b.testbed(4, 0, 8).jobs(job(5, "other").gpu("a100", 1).qos("borrow-proj-b").interactive().obj())
			},
			want:    []string{"return 5 other"},
			explain: map[uint32]string{5: "job 5 returns from borrow-proj-b to guar-proj-b: it is an interactive allocation (salloc or srun, not sbatch), and Slurm can requeue only batch jobs: a reclaim would kill it"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := twoProjects().obj()
			snap := tt.snap(snapshot()).synced(t, cfg).obj()
			plan := BuildPlan(cfg, snap, t0)
			if !plan.Acting || len(plan.QOS)+len(plan.Accounts) > 0 {
				t.Fatalf("unexpected sync %v %v (acting %v, notes %q)", plan.QOS, plan.Accounts, plan.Acting, plan.Notes)
			}
			if got := moveLines(plan); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("moves %q, want %q", got, tt.want)
			}
			for id, want := range tt.explain {
				if got, ok := plan.Explain(id); !ok || !strings.Contains(got, want) {
					t.Errorf("explain %d:\n got %q\nwant %q", id, got, want)
				}
			}
			for id, bad := range tt.never {
				if got, _ := plan.Explain(id); strings.Contains(got, bad) {
					t.Errorf("explain %d says %q: %q", id, bad, got)
				}
			}
			if tt.note != "" && !containsLine(plan.Notes, tt.note) {
				t.Errorf("notes %q lack %q", plan.Notes, tt.note)
			}
		})
	}
}

func TestStaleSnapshotActsNot(t *testing.T) {
	cfg := twoProjects().obj()
	tests := []struct {
		name  string
		taken time.Time
		note  string
	}{
		{"older than maxSnapshotAge", t0.Add(-16 * time.Second), "snapshot is 16s old, more than maxSnapshotAge 15s: nothing is done"},
		{"undated", time.Time{}, "snapshot has no time"},
		{"from the future", t0.Add(time.Minute), "snapshot is 1m0s in the future"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Unsynced and with a lendable job: a fresh snapshot would give actions of both kinds.
			snap := snapshot().testbed(4, 0, 8).jobs(bobInQuota()...).jobs(job(5, "proj-b").gpu("a100", 1).obj()).takenAt(tt.taken).obj()
			plan := BuildPlan(cfg, snap, t0)
			if plan.Acting || plan.HasActions() || !containsLine(plan.Notes, tt.note) {
				t.Fatalf("acting %v actions %v notes %q", plan.Acting, plan.HasActions(), plan.Notes)
			}
			if fresh := BuildPlan(cfg, snap, tt.taken.Add(time.Second)); !tt.taken.IsZero() && !fresh.HasActions() {
				t.Fatalf("the same snapshot when fresh gave no actions: %q", fresh.Notes)
			}
		})
	}
}

func TestInvalidConfigActsNot(t *testing.T) {
	cfg := twoProjects(weight(-1)).obj()
	plan := BuildPlan(cfg, snapshot().testbed(4, 0, 8).obj(), t0)
	if plan.Acting || plan.HasActions() || !containsLine(plan.Notes, "quota table is invalid") {
		t.Fatalf("acting %v notes %q", plan.Acting, plan.Notes)
	}
}

func TestStatuses(t *testing.T) {
	cfg := twoProjects().lendLimit("a100", 6).obj()
	snap := snapshot().testbed(3, 1, 8).synced(t, cfg).jobs(bobInQuota()...).
		jobs(job(5, "proj-b").gpu("a100", 1).borrowed().running(time.Hour).obj()).
		jobs(jobs(6, 3, func(id uint32) *jobBuilder { return job(id, "proj-b").gpu("a100", 1) })...).obj()
	plan := BuildPlan(cfg, snap, t0)
	if got := moveLines(plan); !reflect.DeepEqual(got, []string{"lend 6 proj-b", "lend 7 proj-b", "lend 8 proj-b"}) {
		t.Fatalf("moves %q", got)
	}
	wantTypes := []TypeStatus{
		{Type: "a100", Total: 12, Idle: 4, Lent: 4, LendLimit: 6},
		{Type: "v100", Total: 8, Idle: 8, Lent: 0, LendLimit: -1},
	}
	if !reflect.DeepEqual(plan.Types, wantTypes) {
		t.Errorf("types %+v", plan.Types)
	}
	b := plan.Projects[1]
	if b.Account != "proj-b" || !reflect.DeepEqual(b.ByType, []ProjectTypeStatus{
		{Type: "a100", Guaranteed: 4, InUse: 4, Borrowed: 4, Pending: 3},
		{Type: "v100", Guaranteed: 0},
	}) {
		t.Errorf("proj-b %+v", b)
	}
	want := "proj-b (QOS guar-proj-b, weight 1): a100 4/4 guaranteed in use, 4 borrowed, 3 pending; v100 0/0 guaranteed in use, 0 borrowed, 0 pending; all types 4/4 guaranteed in use, 4 borrowed"
	if got := plan.ExplainAccount("proj-b"); len(got) != 9 || got[0] != want {
		t.Errorf("explain account: %d lines, first %q", len(got), got[0])
	}
}
