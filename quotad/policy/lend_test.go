package policy_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/quotad/policy"
	"github.com/slurmbridge/slurmbridge/quotad/policy/policytest"
)

// twoProjects is the testbed's quota table: proj-a and proj-b each guaranteed 4 a100, proj-c 2 v100.
func twoProjects(opts ...func(*policy.Project)) *policytest.ConfigWrapper {
	return policytest.MakeConfig().Project("proj-a", policytest.GPUs("a100", 4), opts...).Project("proj-b", policytest.GPUs("a100", 4), opts...).Project("proj-c", policytest.GPUs("v100", 2))
}

// bob (proj-b) has 4 one-GPU a100 jobs running in his guarantee, plus more pending over it.
func bobInQuota() []policy.Job { return runningA100(1, 4, "proj-b", time.Minute) }

// runningA100 is n one-a100 jobs of account, ids from first on, started since ago in its
// guaranteed QOS.
func runningA100(first uint32, n int, account string, since time.Duration) []policy.Job {
	return policytest.Jobs(first, n, func(id uint32) *policytest.JobWrapper {
		return policytest.MakeJob(id, account).GPU("a100", 1).Running(since)
	})
}

// pendingA100 is n one-a100 jobs of account, ids from first on, pending over its guarantee.
func pendingA100(first uint32, n int, account string) []policy.Job {
	return policytest.Jobs(first, n, func(id uint32) *policytest.JobWrapper {
		return policytest.MakeJob(id, account).GPU("a100", 1)
	})
}

func TestMoves(t *testing.T) {
	tests := []struct {
		name    string
		cfg     *policy.Config
		snap    func(*policytest.SnapshotWrapper) *policytest.SnapshotWrapper
		want    []string                   // moves, in plan order
		explain map[uint32]policytest.Says // substrings of job explanations
		// unexplained are jobs quotad has nothing to say about (no GPUs: not a quota matter).
		unexplained []uint32
	}{
		{
			name: "scenario 1: bob's 4 over-quota jobs borrow the 4 idle a100",
			cfg:  twoProjects().Obj(),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Testbed(4, 0, 8).Jobs(bobInQuota()...).
					Jobs(pendingA100(5, 4, "proj-b")...)
			},
			want: []string{"lend 5 proj-b", "lend 6 proj-b", "lend 7 proj-b", "lend 8 proj-b"},
			explain: map[uint32]policytest.Says{
				5: {Code: policy.CodeLent, Words: "job 5 is lent (moves from guar-proj-b to borrow-proj-b): proj-b uses 4/4 guaranteed a100 and the job needs 1 a100 more; borrows 1 a100 idle in partition a100"},
				1: {Code: policy.CodeInQuota, Words: "job 1 runs within proj-b's guarantee in guar-proj-b (1 a100): it is never reclaimed"},
			},
		},
		{
			name: "idle GPUs of a partition the job did not ask for are not lent",
			cfg:  twoProjects().Obj(),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Testbed(0, 4, 8).Jobs(bobInQuota()...).Jobs(policytest.MakeJob(5, "proj-b").GPU("a100", 1).Obj())
			},
			explain: map[uint32]policytest.Says{5: {Code: policy.CodeNoIdleGPUs, Words: "job 5 waits: proj-b uses 4/4 guaranteed a100 and the job needs 1 a100 more; not enough idle GPUs for 1 a100: a100 has 0 a100"}},
		},
		{
			name: "a job listing two partitions borrows from the first that has room",
			cfg:  twoProjects().Obj(),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Testbed(1, 4, 8).Jobs(bobInQuota()...).Jobs(policytest.MakeJob(5, "proj-b").GPU("a100", 2).Partitions("a100", "a100-spot").Obj())
			},
			want:    []string{"lend 5 proj-b"},
			explain: map[uint32]policytest.Says{5: {Code: policy.CodeLent, Words: "borrows 2 a100 idle in partition a100-spot"}},
		},
		{
			name: "weights divide idle GPUs: weight 3 gets 3 of 4",
			cfg:  policytest.MakeConfig().Project("proj-a", policytest.GPUs("a100", 0), policytest.Weight(1)).Project("proj-b", policytest.GPUs("a100", 0), policytest.Weight(3)).Obj(),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Testbed(4, 0, 8).
					Jobs(pendingA100(1, 4, "proj-a")...).
					Jobs(pendingA100(11, 4, "proj-b")...)
			},
			// fair shares 1 and 3: deficits b 3, a 1, b 2, then a 1 and b 1 tie and proj-a
			// goes first by name; by then the pool is empty for b's third.
			want: []string{"lend 11 proj-b", "lend 12 proj-b", "lend 1 proj-a", "lend 13 proj-b"},
			explain: map[uint32]policytest.Says{
				11: {Code: policy.CodeLent, Words: "fair share 3.0 of 4 a100 for borrowers; deficit was 3.0, the largest"},
				2:  {Code: policy.CodeNoIdleGPUs, Words: "job 2 waits: proj-a uses 0/0 guaranteed a100"},
			},
		},
		{
			name: "largest deficit first, not first come: proj-a already borrows 2",
			cfg:  twoProjects().Obj(),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Testbed(2, 0, 8).
					Jobs(policytest.MakeJob(1, "proj-a").GPU("a100", 2).Running(time.Hour).Alloc(policytest.GPUs("a100", 2)).Borrowed().Obj()).
					Jobs(policytest.MakeJob(2, "proj-a").GPU("a100", 4).Running(time.Hour).Obj()).
					Jobs(policytest.MakeJob(3, "proj-a").GPU("a100", 1).Obj(), policytest.MakeJob(4, "proj-a").GPU("a100", 1).Obj()).
					Jobs(bobInQuota()...).
					Jobs(policytest.MakeJob(20, "proj-b").GPU("a100", 1).Obj(), policytest.MakeJob(21, "proj-b").GPU("a100", 1).Obj())
			},
			want: []string{"lend 20 proj-b", "lend 21 proj-b"},
			explain: map[uint32]policytest.Says{
				3: {Code: policy.CodeNoIdleGPUs, Words: "job 3 waits: proj-a uses 4/4 guaranteed a100 and the job needs 1 a100 more; not enough idle GPUs"},
				1: {Code: policy.CodeReclaimable, Words: "job 1 runs borrowed in borrow-proj-a (2 a100): proj-a holds 6 GPUs (4 in quota, 2 borrowed) of a 4-GPU guarantee, 2 GPU(s) beyond its guarantee: 1st of 2 over-quota projects to lose borrowers; its PreemptExemptTime has passed; no project has unused guarantee of its GPU type now"},
			},
		},
		{
			name: "equal deficits: the project with less recent usage per weight goes first",
			cfg:  twoProjects().Obj(),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Testbed(1, 0, 8).Usage("proj-a", 9000).Usage("proj-b", 100).
					Jobs(policytest.MakeJob(1, "proj-a").GPU("a100", 4).Running(time.Hour).Obj(), policytest.MakeJob(2, "proj-a").GPU("a100", 1).Obj()).
					Jobs(policytest.MakeJob(3, "proj-b").GPU("a100", 4).Running(time.Hour).Obj(), policytest.MakeJob(4, "proj-b").GPU("a100", 1).Obj())
			},
			want: []string{"lend 4 proj-b"},
		},
		{
			name: "within a project, Slurm priority then age",
			cfg:  twoProjects().Obj(),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Testbed(1, 0, 8).Jobs(bobInQuota()...).
					Jobs(policytest.MakeJob(5, "proj-b").GPU("a100", 1).Obj(), policytest.MakeJob(6, "proj-b").GPU("a100", 1).Priority(10).Obj())
			},
			want: []string{"lend 6 proj-b"},
		},
		{
			name: "a too-big job waits and a smaller one behind it borrows",
			cfg:  twoProjects().Obj(),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Testbed(2, 0, 8).Jobs(bobInQuota()...).
					Jobs(policytest.MakeJob(5, "proj-b").GPU("a100", 2).Nodes(2).Obj(), policytest.MakeJob(6, "proj-b").GPU("a100", 2).Obj())
			},
			want:    []string{"lend 6 proj-b"},
			explain: map[uint32]policytest.Says{5: {Code: policy.CodeNoIdleGPUs, Words: "the job needs 4 a100 more; not enough idle GPUs for 4 a100: a100 has 2 a100"}},
		},
		{
			name: "scenario 4: a --no-requeue job is never lent",
			cfg:  twoProjects().Obj(),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Testbed(4, 0, 8).Jobs(bobInQuota()...).Jobs(policytest.MakeJob(5, "proj-b").GPU("a100", 1).NoRequeue().Obj())
			},
			explain: map[uint32]policytest.Says{5: {Code: policy.CodeNotRequeueable, Words: "job 5 waits for proj-b's guarantee in guar-proj-b: proj-b uses 4/4 guaranteed a100 and the job needs 1 a100 more; it is never lent: it has Requeue=0 (--no-requeue"}},
		},
		{
			name: "borrowing limit per type",
			cfg:  twoProjects(policytest.BorrowLimitOf("a100", 2)).Obj(),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Testbed(4, 0, 8).Jobs(bobInQuota()...).
					Jobs(pendingA100(5, 3, "proj-b")...)
			},
			want:    []string{"lend 5 proj-b", "lend 6 proj-b"},
			explain: map[uint32]policytest.Says{7: {Code: policy.CodeBorrowLimit, Words: "job 7 waits: proj-b uses 4/4 guaranteed a100 and the job needs 1 a100 more; borrowing limit of a100 reached: proj-b borrows 2 a100, limit 2"}},
		},
		{
			name: "borrowing limit over all types",
			cfg:  twoProjects(policytest.BorrowLimit(1)).Obj(),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Testbed(4, 0, 8).Jobs(bobInQuota()...).
					Jobs(policytest.MakeJob(5, "proj-b").GPU("a100", 1).Obj(), policytest.MakeJob(6, "proj-b").GPU("v100", 1).Partitions("v100").Obj())
			},
			want:    []string{"lend 5 proj-b"},
			explain: map[uint32]policytest.Says{6: {Code: policy.CodeBorrowLimit, Words: "borrowing limit reached: proj-b borrows 1 GPUs, limit 1"}},
		},
		{
			name: "lending limit of a type counts running borrowers of every project",
			cfg:  twoProjects().LendLimit("a100", 3).Obj(),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Testbed(4, 0, 8).Jobs(bobInQuota()...).
					Jobs(policytest.MakeJob(9, "proj-c").GPU("a100", 2).Borrowed().Running(time.Hour).Obj()).
					Jobs(policytest.MakeJob(5, "proj-b").GPU("a100", 1).Obj(), policytest.MakeJob(6, "proj-b").GPU("a100", 1).Obj())
			},
			want:    []string{"lend 5 proj-b"},
			explain: map[uint32]policytest.Says{6: {Code: policy.CodeLendLimit, Words: "lending limit of a100 reached: 3/3 a100 lent"}},
		},
		{
			name: "a project's lending limit keeps the rest of its idle guarantee for its own jobs",
			cfg: policytest.MakeConfig().Project("proj-a", policytest.GPUs("a100", 4), policytest.LendLimitOf("a100", 1)).
				Project("proj-b", policytest.GPUs("a100", 4)).Obj(),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Testbed(4, 0, 8).Jobs(bobInQuota()...).Jobs(pendingA100(5, 2, "proj-b")...)
			},
			want: []string{"lend 5 proj-b"},
			explain: map[uint32]policytest.Says{6: {Code: policy.CodeOwnersKeep,
				Words: "lending limits keep 3 of the 3 idle a100 for their owners' own jobs (proj-a keeps 3 of its 4 a100 (lends at most 1))"}},
		},
		{
			name: "what the owner runs in its guarantee counts toward what it keeps",
			cfg: policytest.MakeConfig().Project("proj-a", policytest.GPUs("a100", 4), policytest.LendLimitOf("a100", 1)).
				Project("proj-b", policytest.GPUs("a100", 4)).Obj(),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Testbed(2, 0, 8).Jobs(bobInQuota()...).Jobs(runningA100(20, 2, "proj-a", time.Minute)...).
					Jobs(pendingA100(5, 2, "proj-b")...)
			},
			want:    []string{"lend 5 proj-b"},
			explain: map[uint32]policytest.Says{6: {Code: policy.CodeOwnersKeep, Words: "keep 1 of the 1 idle a100"}},
		},
		{
			name: "a lending limit of 0 keeps a type whole: an untyped borrower takes another type or waits",
			cfg: policytest.MakeConfig().Project("proj-a", policytest.GPUs("a100", 4), policytest.LendLimitOf("a100", 0)).
				Project("proj-b", policytest.GPUs("a100", 4)).Project("proj-c", policytest.GPUs("v100", 2)).Obj(),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Testbed(4, 0, 1).Jobs(bobInQuota()...).
					Jobs(policytest.MakeJob(5, "proj-b").GPU("", 1).Partitions("a100", "v100").Obj(), policytest.MakeJob(6, "proj-b").GPU("", 1).Partitions("a100", "v100").Obj())
			},
			want: []string{"lend 5 proj-b"},
			explain: map[uint32]policytest.Says{
				5: {Code: policy.CodeLent, Words: "borrows 1 v100 idle in partition v100"},
				6: {Code: policy.CodeOwnersKeep, Words: "lending limits keep 4 of the 4 idle a100 for their owners' own jobs (proj-a keeps 4 of its 4 a100 (lends at most 0)); not enough idle GPUs"},
			},
		},
		{
			name: "a borrower waiting on GPUs a lending limit now keeps is returned",
			cfg: policytest.MakeConfig().Project("proj-a", policytest.GPUs("a100", 4), policytest.LendLimitOf("a100", 2)).
				Project("proj-b", policytest.GPUs("a100", 4)).Obj(),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Testbed(4, 0, 8).Jobs(bobInQuota()...).
					Jobs(policytest.MakeJob(5, "proj-b").GPU("a100", 2).Borrowed().Reason("Resources").Obj(),
						policytest.MakeJob(6, "proj-b").GPU("a100", 1).Borrowed().Reason("Resources").Obj())
			},
			want: []string{"return 6 proj-b"},
			explain: map[uint32]policytest.Says{
				5: {Code: policy.CodePromised},
				6: {Code: policy.CodeReturnOverLimit, Words: "lending limits keep 2 of the 2 idle a100"},
			},
		},
		{
			name: "Slurm says QOSGrpGRES but the guarantee has room: not lent",
			cfg:  twoProjects().Obj(),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Testbed(4, 0, 8).Jobs(policytest.MakeJob(1, "proj-b").GPU("a100", 1).Running(time.Minute).Obj(), policytest.MakeJob(5, "proj-b").GPU("a100", 1).Obj())
			},
			explain: map[uint32]policytest.Says{5: {Code: policy.CodeGuaranteeHasRoom, Words: "job 5 waits with reason QOSGrpGRES, but proj-b's guarantee has room (a100 1/4 in use)"}},
		},
		{
			name: "idle GPUs wanted by a job within its guarantee are not lent",
			cfg:  twoProjects().Obj(),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Testbed(2, 0, 8).Jobs(bobInQuota()...).
					Jobs(policytest.MakeJob(20, "proj-a").GPU("a100", 2).Reason("Resources").Obj(), policytest.MakeJob(5, "proj-b").GPU("a100", 1).Obj())
			},
			explain: map[uint32]policytest.Says{
				20: {Code: policy.CodeWaitsInQuota, Words: "job 20 waits in proj-a's guarantee (a100 0/4 in use; reason Resources): Slurm starts it when GPUs are free, preempting borrowers if it must; 2 a100 idle in partition a100 are kept for it, not lent"},
				5:  {Code: policy.CodeNoIdleGPUs, Words: "not enough idle GPUs for 1 a100: a100 has 0 a100"},
			},
		},
		{
			name: "a job asking for any GPU type borrows, in its first partition with room, the type with most room",
			cfg:  twoProjects().Obj(),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Testbed(1, 1, 8).Pool("mixed", "a100", 4, 2).Pool("mixed", "v100", 4, 3).Jobs(bobInQuota()...).
					Jobs(policytest.MakeJob(5, "proj-b").GPU("", 2).Partitions("a100-spot", "mixed", "v100").Obj())
			},
			want:    []string{"lend 5 proj-b"},
			explain: map[uint32]policytest.Says{5: {Code: policy.CodeLent, Words: "proj-b uses 4/4 guaranteed GPUs of all types and the job needs 2 any-type GPU more; borrows 2 v100 idle in partition mixed"}},
		},
		{
			name: "scenario 3: a requeued borrower returns when its project is under quota again",
			cfg:  twoProjects().Obj(),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Testbed(0, 0, 8).
					Jobs(policytest.MakeJob(1, "proj-b").GPU("a100", 3).Running(time.Hour).Obj()).
					Jobs(policytest.MakeJob(5, "proj-b").GPU("a100", 1).Borrowed().Reason("Resources").Obj(), policytest.MakeJob(6, "proj-b").GPU("a100", 1).Borrowed().Obj())
			},
			want: []string{"return 5 proj-b"},
			explain: map[uint32]policytest.Says{
				5: {Code: policy.CodeReturnGuaranteeRoom, Words: "job 5 returns from borrow-proj-b to guar-proj-b: proj-b is under quota again (a100 3/4 in use)"},
				6: {Code: policy.CodeLentWaitsForGPUs, Words: "job 6 was lent and waits in borrow-proj-b for GPUs: proj-b is over its guarantee (a100 4/4 in use)"},
			},
		},
		{
			name: "a pending borrower with Requeue=0 goes back to its guarantee",
			cfg:  twoProjects().Obj(),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Testbed(4, 0, 8).Jobs(bobInQuota()...).Jobs(policytest.MakeJob(5, "proj-b").GPU("a100", 1).Borrowed().NoRequeue().Obj())
			},
			want:    []string{"return 5 proj-b"},
			explain: map[uint32]policytest.Says{5: {Code: policy.CodeReturnNotRequeueable, Words: "job 5 returns from borrow-proj-b to guar-proj-b: it has Requeue=0 (--no-requeue, or no --requeue where slurm.conf has JobRequeue=0), so Slurm cannot requeue it: a reclaim would kill it"}},
		},
		{
			name: "a pending borrower over a lowered borrowing limit goes back",
			cfg:  twoProjects(policytest.BorrowLimit(1)).Obj(),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Testbed(4, 0, 8).Jobs(bobInQuota()...).
					Jobs(policytest.MakeJob(5, "proj-b").GPU("a100", 1).Borrowed().Obj(), policytest.MakeJob(6, "proj-b").GPU("a100", 1).Borrowed().Obj())
			},
			want:    []string{"return 6 proj-b"},
			explain: map[uint32]policytest.Says{6: {Code: policy.CodeReturnOverLimit, Words: "it may no longer borrow: borrowing limit reached: proj-b borrows 1 GPUs, limit 1"}},
		},
		{
			name: "pending borrowers keep the idle GPUs promised to them",
			cfg:  twoProjects().Obj(),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Testbed(1, 0, 8).Jobs(bobInQuota()...).
					Jobs(policytest.MakeJob(5, "proj-b").GPU("a100", 1).Borrowed().Obj()).
					Jobs(policytest.MakeJob(10, "proj-a").GPU("a100", 4).Running(time.Hour).Obj(), policytest.MakeJob(11, "proj-a").GPU("a100", 1).Obj())
			},
			explain: map[uint32]policytest.Says{
				5:  {Code: policy.CodePromised, Words: "1 a100 idle in partition a100 are promised to it"},
				11: {Code: policy.CodeNoIdleGPUs, Words: "not enough idle GPUs for 1 a100: a100 has 0 a100"},
			},
		},
		{
			name: "jobs outside the managed QOS and accounts are only explained",
			cfg:  twoProjects().Obj(),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Testbed(4, 0, 8).UserQOS("u-proj-b", "proj-b", "normal").Jobs(
					policytest.MakeJob(5, "proj-b").GPU("a100", 1).QOS("normal").Obj(), // the site gave its user normal
					policytest.MakeJob(6, "other").GPU("a100", 1).Obj(),
					policytest.MakeJob(7, "proj-b").Obj(), // no GPUs: not a quota matter
				)
			},
			explain: map[uint32]policytest.Says{
				5: {Code: policy.CodeOtherQOS, Words: "job 5 waits in QOS normal, not in proj-b's guaranteed QOS guar-proj-b: quotad does not move it"},
				6: {Code: policy.CodeNoQuota, Words: "job 6 waits in account other, which has no quota"},
			},
			unexplained: []uint32{7},
		},
		{
			// Submitted before quotad first gave proj-b its QOS: the account's list no longer
			// holds normal (Slurm 26.05 holds the job with InvalidQOS for ever). A GPU job and
			// a CPU job alike join the guarantee; nothing else moves for them this cycle.
			name: "jobs left in a QOS their account no longer allows join the guarantee",
			cfg:  twoProjects().Obj(),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Testbed(4, 0, 8).Jobs(
					policytest.MakeJob(5, "proj-b").GPU("a100", 1).QOS("normal").Reason("InvalidQOS").Obj(),
					policytest.MakeJob(7, "proj-b").QOS("normal").Reason("InvalidQOS").Obj(),
					policytest.MakeJob(8, "proj-b").GPU("a100", 1).QOS("normal").Reason("InvalidQOS").Array(2, 3).Obj(),
				)
			},
			// The array's pending record moves task by task (8_2, 8_3), never by the array's own id.
			want: []string{"adopt 5 proj-b", "adopt 7 proj-b", "adopt 8 proj-b", "adopt 8 proj-b"},
			explain: map[uint32]policytest.Says{
				5: {Code: policy.CodeAdopted, Words: "job 5 moves from normal to proj-b's guaranteed QOS guar-proj-b: it waits in QOS normal, which account proj-b no longer allows"},
				7: {Code: policy.CodeAdopted, Words: "job 7 moves from normal to proj-b's guaranteed QOS guar-proj-b"},
			},
		},
		{
			name: "a young borrower is exempt from reclaim",
			cfg:  twoProjects().Obj(),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Testbed(0, 0, 8).Jobs(bobInQuota()...).Jobs(policytest.MakeJob(5, "proj-b").GPU("a100", 1).Borrowed().Running(10 * time.Second).Obj())
			},
			explain: map[uint32]policytest.Says{5: {Code: policy.CodeReclaimable, Words: "it is exempt from reclaim until 2026-03-01T12:00:20Z (PreemptExemptTime 30s); it may be reclaimed by pending guaranteed jobs of proj-a"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := tt.snap(policytest.MakeSnapshot()).Synced(t, tt.cfg).Obj()
			plan := policy.BuildPlan(tt.cfg, snap, policytest.T0)
			if len(plan.QOS)+len(plan.Accounts) > 0 || !plan.Acting {
				t.Fatalf("unexpected sync %v %v (acting %v, notes %q)", plan.QOS, plan.Accounts, plan.Acting, plan.Notes)
			}
			if got := policytest.MoveLines(plan); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("moves %q, want %q", got, tt.want)
			}
			policytest.CheckExplains(t, plan, tt.explain)
			for _, id := range tt.unexplained {
				if got, ok := plan.Explain(id); ok {
					t.Errorf("explain %d = %q, want none", id, got)
				}
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
		snap    func(*policytest.SnapshotWrapper) *policytest.SnapshotWrapper
		want    []string                   // moves, in plan order
		explain map[uint32]policytest.Says // substrings of job explanations
		note    string                     // a substring of one of the plan's notes
	}{
		{
			name: "salloc over quota: bob's guarantee is busy, his 4-GPU salloc waits in it",
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Testbed(4, 0, 8).Jobs(bobInQuota()...).Jobs(policytest.MakeJob(5, "proj-b").GPU("a100", 4).Interactive().Obj())
			},
			explain: map[uint32]policytest.Says{5: {Code: policy.CodeNotRequeueable, Words: "job 5 waits for proj-b's guarantee in guar-proj-b: proj-b uses 4/4 guaranteed a100 and the job needs 4 a100 more; " +
				"it is never lent: it is an interactive allocation (salloc or srun, not sbatch), and Slurm can requeue only batch jobs, " +
				"and a borrower's GPUs may be reclaimed, which would kill it. To borrow idle GPUs, submit it with sbatch --requeue"}},
		},
		{
			name: "--no-requeue over quota waits in its guarantee",
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Testbed(4, 0, 8).Jobs(bobInQuota()...).Jobs(policytest.MakeJob(5, "proj-b").GPU("a100", 1).NoRequeue().Obj())
			},
			explain: map[uint32]policytest.Says{5: {Code: policy.CodeNotRequeueable, Words: "it is never lent: it has Requeue=0"}},
		},
		{
			name: "an salloc within its guarantee is left to Slurm, which starts it in guar",
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Testbed(4, 0, 8).Jobs(policytest.MakeJob(5, "proj-b").GPU("a100", 4).Interactive().Obj())
			},
			explain: map[uint32]policytest.Says{5: {Code: policy.CodeGuaranteeHasRoom, Words: "guarantee has room (a100 0/4 in use): Slurm should start it in guar-proj-b; not lent"}},
		},
		{
			name: "a batch job behind a higher-priority salloc still borrows",
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Testbed(1, 0, 8).Jobs(bobInQuota()...).
					Jobs(policytest.MakeJob(5, "proj-b").GPU("a100", 1).Interactive().Priority(100).Obj(), policytest.MakeJob(6, "proj-b").GPU("a100", 1).Obj())
			},
			want:    []string{"lend 6 proj-b"},
			explain: map[uint32]policytest.Says{5: {Code: policy.CodeNotRequeueable, Words: "it is never lent: it is an interactive allocation"}, 6: {Code: policy.CodeLent, Words: "job 6 is lent"}},
		},
		{
			name: "a pending salloc found in borrow goes back to its guarantee",
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Testbed(4, 0, 8).Jobs(bobInQuota()...).Jobs(policytest.MakeJob(5, "proj-b").GPU("a100", 1).Borrowed().Interactive().Obj())
			},
			want: []string{"return 5 proj-b"},
			explain: map[uint32]policytest.Says{5: {Code: policy.CodeReturnNotRequeueable, Words: "job 5 returns from borrow-proj-b to guar-proj-b: it is an interactive allocation (salloc or srun, not sbatch), " +
				"and Slurm can requeue only batch jobs: a reclaim would kill it, so it must not borrow"}},
		},
		{
			name: "a pending salloc in borrow goes back even while idle GPUs could be promised to it",
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Testbed(4, 0, 8).Jobs(bobInQuota()...).Jobs(policytest.MakeJob(5, "proj-b").GPU("a100", 1).Borrowed().Interactive().Reason("Resources").Obj())
			},
			want: []string{"return 5 proj-b"},
		},
		{
			name: "a running salloc in borrow is not moved and explain says a reclaim would kill it",
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Testbed(0, 0, 8).Jobs(bobInQuota()...).Jobs(policytest.MakeJob(5, "proj-b").GPU("a100", 2).Borrowed().Interactive().Running(time.Hour).Obj())
			},
			explain: map[uint32]policytest.Says{5: {Code: policy.CodeReclaimWouldKill, Words: "job 5 runs borrowed in borrow-proj-b (2 a100): proj-b holds 6 GPUs (4 in quota, 2 borrowed) of a 4-GPU guarantee, 2 GPU(s) beyond its guarantee: 1st of 1 over-quota projects to lose borrowers; " +
				"its PreemptExemptTime has passed; it may be reclaimed by pending guaranteed jobs of proj-a (unused guarantee of its type); " +
				"a reclaim would KILL it, not requeue it: it is an interactive allocation (salloc or srun, not sbatch), and Slurm can requeue only batch jobs. quotad cannot move a running job out of borrow-proj-b"}},
			note: "job 5 (proj-b) runs in borrow-proj-b but Slurm cannot requeue it (it is an interactive allocation",
		},
		{
			name: "a running salloc in borrow within its project's guarantee: not reclaimable now, and explain says what a reclaim would do",
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Testbed(0, 0, 8).Jobs(policytest.MakeJob(5, "proj-b").GPU("a100", 2).Borrowed().Interactive().Running(time.Hour).Obj())
			},
			explain: map[uint32]policytest.Says{5: {Code: policy.CodeNotReclaimable, Words: "so no claim may reclaim it (quotad re-checks this every cycle); should its project go over its guarantee, a reclaim would KILL it, not requeue it: it is an interactive allocation"}},
			note:    "job 5 (proj-b) runs in borrow-proj-b but Slurm cannot requeue it (it is an interactive allocation",
		},
		{
			name: "a running --no-requeue borrower: the same",
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Testbed(0, 0, 8).Jobs(bobInQuota()...).Jobs(policytest.MakeJob(5, "proj-b").GPU("a100", 1).Borrowed().NoRequeue().Running(time.Hour).Obj())
			},
			explain: map[uint32]policytest.Says{5: {Code: policy.CodeReclaimWouldKill, Words: "a reclaim would KILL it, not requeue it: it has Requeue=0"}},
			note:    "job 5 (proj-b) runs in borrow-proj-b but Slurm cannot requeue it (it has Requeue=0",
		},
		{
			name: "a running batch borrower with Requeue=1 is requeued on reclaim",
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Testbed(0, 0, 8).Jobs(bobInQuota()...).Jobs(policytest.MakeJob(5, "proj-b").GPU("a100", 1).Borrowed().Running(time.Hour).Obj())
			},
			explain: map[uint32]policytest.Says{5: {Code: policy.CodeReclaimable, Words: "a reclaim sends it SIGTERM (or its --signal, where PreemptParameters=send_user_signal) and requeues it 10s later (it is a batch job with Requeue=1), so it runs again later. To keep its work: save a checkpoint on SIGTERM"}},
		},
		{
			name: "a pending salloc of another account in a project's borrow QOS goes back too",
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Testbed(4, 0, 8).Jobs(policytest.MakeJob(5, "other").GPU("a100", 1).QOS("borrow-proj-b").Interactive().Obj())
			},
			want:    []string{"return 5 other"},
			explain: map[uint32]policytest.Says{5: {Code: policy.CodeReturnNotRequeueable, Words: "job 5 returns from borrow-proj-b to guar-proj-b: it is an interactive allocation (salloc or srun, not sbatch), and Slurm can requeue only batch jobs: a reclaim would kill it"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := twoProjects().Obj()
			snap := tt.snap(policytest.MakeSnapshot()).Synced(t, cfg).Obj()
			plan := policy.BuildPlan(cfg, snap, policytest.T0)
			if !plan.Acting || len(plan.QOS)+len(plan.Accounts) > 0 {
				t.Fatalf("unexpected sync %v %v (acting %v, notes %q)", plan.QOS, plan.Accounts, plan.Acting, plan.Notes)
			}
			if got := policytest.MoveLines(plan); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("moves %q, want %q", got, tt.want)
			}
			policytest.CheckExplains(t, plan, tt.explain)
			if tt.note != "" && !containsLine(plan.Notes, tt.note) {
				t.Errorf("notes %q lack %q", plan.Notes, tt.note)
			}
		})
	}
}

func TestStaleSnapshotActsNot(t *testing.T) {
	cfg := twoProjects().Obj()
	tests := []struct {
		name  string
		taken time.Time
		note  string
	}{
		{"older than maxSnapshotAge", policytest.T0.Add(-16 * time.Second), "snapshot is 16s old, more than maxSnapshotAge 15s: nothing is done"},
		{"undated", time.Time{}, "snapshot has no time"},
		{"from the future", policytest.T0.Add(time.Minute), "snapshot is 1m0s in the future"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Unsynced and with a lendable job: a fresh snapshot would give actions of both kinds.
			snap := policytest.MakeSnapshot().Testbed(4, 0, 8).Jobs(bobInQuota()...).Jobs(policytest.MakeJob(5, "proj-b").GPU("a100", 1).Obj()).TakenAt(tt.taken).Obj()
			plan := policy.BuildPlan(cfg, snap, policytest.T0)
			if plan.Acting || plan.HasActions() || !containsLine(plan.Notes, tt.note) {
				t.Fatalf("acting %v actions %v notes %q", plan.Acting, plan.HasActions(), plan.Notes)
			}
			if fresh := policy.BuildPlan(cfg, snap, tt.taken.Add(time.Second)); !tt.taken.IsZero() && !fresh.HasActions() {
				t.Fatalf("the same snapshot when fresh gave no actions: %q", fresh.Notes)
			}
		})
	}
}

func TestInvalidConfigActsNot(t *testing.T) {
	cfg := twoProjects(policytest.Weight(-1)).Obj()
	plan := policy.BuildPlan(cfg, policytest.MakeSnapshot().Testbed(4, 0, 8).Obj(), policytest.T0)
	if plan.Acting || plan.HasActions() || !containsLine(plan.Notes, "quota table is invalid") {
		t.Fatalf("acting %v notes %q", plan.Acting, plan.Notes)
	}
}

func TestStatuses(t *testing.T) {
	cfg := twoProjects().LendLimit("a100", 6).Obj()
	snap := policytest.MakeSnapshot().Testbed(3, 1, 8).Synced(t, cfg).Jobs(bobInQuota()...).
		Jobs(policytest.MakeJob(5, "proj-b").GPU("a100", 1).Borrowed().Running(time.Hour).Obj()).
		Jobs(pendingA100(6, 3, "proj-b")...).Obj()
	plan := policy.BuildPlan(cfg, snap, policytest.T0)
	if got := policytest.MoveLines(plan); !reflect.DeepEqual(got, []string{"lend 6 proj-b", "lend 7 proj-b", "lend 8 proj-b"}) {
		t.Fatalf("moves %q", got)
	}
	wantTypes := []policy.TypeStatus{
		{Type: "a100", Total: 12, Idle: 4, Lent: 4, LendLimit: 6},
		{Type: "v100", Total: 8, Idle: 8, Lent: 0, LendLimit: -1},
	}
	if !reflect.DeepEqual(plan.Types, wantTypes) {
		t.Errorf("types %+v", plan.Types)
	}
	b := plan.Projects[1]
	if b.Account != "proj-b" || !reflect.DeepEqual(b.ByType, []policy.ProjectTypeStatus{
		{Type: "a100", Guaranteed: 4, InUse: 4, Borrowed: 4, Pending: 3, LendLimit: -1},
		{Type: "v100", Guaranteed: 0, LendLimit: -1},
	}) {
		t.Errorf("proj-b %+v", b)
	}
	want := "proj-b (QOS guar-proj-b, weight 1): a100 4/4 guaranteed in use, 4 borrowed, 3 pending; v100 0/0 guaranteed in use, 0 borrowed, 0 pending; all types 4/4 guaranteed in use, 4 borrowed"
	if got := plan.ExplainAccount("proj-b"); len(got) != 9 || got[0] != want {
		t.Errorf("explain account: %d lines, first %q", len(got), got[0])
	}
}
