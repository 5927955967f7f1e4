package policy_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/quotad/policy"
	"github.com/slurmbridge/slurmbridge/quotad/policy/policytest"
)

// planCase is one scenario: a quota table, a snapshot, the moves wanted and what job
// explanations say (their codes; words only where a figure is what the case is about).
type planCase struct {
	name    string
	cfg     *policy.Config
	snap    func(*policytest.SnapshotWrapper) *policytest.SnapshotWrapper
	want    []string
	explain map[uint32]policytest.Says
	check   func(t *testing.T, plan *policy.Plan)
}

func runPlanCases(t *testing.T, tests []planCase) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			plan := policy.BuildPlan(tc.cfg, tc.snap(policytest.MakeSnapshot()).Synced(t, tc.cfg).Obj(), policytest.T0)
			if !plan.Acting {
				t.Fatalf("plan does not act: %q", plan.Notes)
			}
			if got := policytest.MoveLines(plan); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("moves = %q, want %q", got, tc.want)
			}
			policytest.CheckExplains(t, plan, tc.explain)
			if tc.check != nil {
				tc.check(t, plan)
			}
		})
	}
}

func TestAccountTrees(t *testing.T) {
	runPlanCases(t, []planCase{
		{
			name: "a sub-account's jobs in the parent's guaranteed QOS fill the guarantee: the parent's job over it is lent",
			cfg:  twoProjects().Obj(),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Account("team-a1", "proj-a").Testbed(4, 0, 8).
					Jobs(runningA100(1, 2, "proj-a", time.Minute)...).
					Jobs(policytest.Jobs(3, 2, func(id uint32) *policytest.JobWrapper {
						return policytest.MakeJob(id, "team-a1").QOS("guar-proj-a").GPU("a100", 1).Running(time.Minute)
					})...).
					Jobs(policytest.MakeJob(5, "proj-a").GPU("a100", 1).Obj())
			},
			want: []string{"lend 5 proj-a"},
			explain: map[uint32]policytest.Says{
				3: {Code: policy.CodeInQuota},
				// The figure is the case: the sub-account's jobs count in the parent's 4.
				5: {Code: policy.CodeLent, Words: "proj-a uses 4/4 guaranteed a100"},
			},
		},
		{
			name: "a sub-account's job over the parent's guarantee borrows as the parent",
			cfg:  twoProjects().Obj(),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Account("team-a1", "proj-a").Testbed(4, 0, 8).
					Jobs(runningA100(1, 4, "proj-a", time.Minute)...).
					Jobs(policytest.MakeJob(5, "team-a1").QOS("guar-proj-a").GPU("a100", 1).Obj())
			},
			want: []string{"lend 5 team-a1"},
			check: func(t *testing.T, plan *policy.Plan) {
				if m := plan.Moves[0]; m.Project != "proj-a" || m.To != "borrow-proj-a" {
					t.Errorf("lend = %+v, want project proj-a into borrow-proj-a", m)
				}
				if got := plan.ExplainAccount("proj-a"); len(got) != 6 {
					t.Errorf("explain proj-a lists %d lines, want its summary and 5 jobs (the sub-account's too): %q", len(got), got)
				}
				for _, ps := range plan.Projects {
					if ps.Account == "proj-a" && ps.ByType[0].Borrowed != 1 {
						t.Errorf("proj-a borrows %d, want the sub-account's 1", ps.ByType[0].Borrowed)
					}
				}
			},
		},
		{
			name: "a sub-sub-account's pending borrower returns to the project's guaranteed QOS when it has room",
			cfg:  twoProjects().Obj(),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Account("team-a1", "proj-a").Account("team-a1x", "team-a1").Testbed(4, 0, 8).
					Jobs(policytest.MakeJob(1, "proj-a").GPU("a100", 2).Running(time.Minute).Obj()).
					Jobs(policytest.MakeJob(2, "team-a1x").QOS("borrow-proj-a").Reason("Resources").GPU("a100", 1).Obj())
			},
			want:    []string{"return 2 team-a1x"},
			explain: map[uint32]policytest.Says{2: {Code: policy.CodeReturnGuaranteeRoom}},
		},
		{
			name: "nested projects: the nearest project wins, as each job counts in its own QOS's GrpTRES",
			cfg:  twoProjects().Project("proj-n", policytest.GPUs("a100", 2)).Obj(),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Account("proj-n", "proj-a").Account("team-n1", "proj-n").Testbed(4, 0, 8).
					// proj-n's own 2 fill its guarantee; proj-a's 4 are untouched by them.
					Jobs(policytest.MakeJob(1, "team-n1").QOS("guar-proj-n").GPU("a100", 2).Running(time.Minute).Obj()).
					Jobs(policytest.MakeJob(2, "team-n1").QOS("guar-proj-n").GPU("a100", 1).Obj()).
					Jobs(policytest.MakeJob(3, "proj-a").GPU("a100", 1).Reason("Resources").Obj())
			},
			want: []string{"lend 2 team-n1"},
			// The figures are the case: each job counts in its nearest project only.
			explain: map[uint32]policytest.Says{
				2: {Code: policy.CodeLent, Words: "proj-n uses 2/2 guaranteed a100"},
				3: {Code: policy.CodeWaitsInQuota, Words: "waits in proj-a's guarantee (a100 0/4 in use"},
			},
		},
		{
			name: "a project's usage is its subtree's: the one with less goes first on equal deficits",
			cfg:  twoProjects().Obj(),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Account("team-a1", "proj-a").Testbed(1, 0, 8).Usage("proj-a", 100).Usage("team-a1", 9000).Usage("proj-b", 5000).
					Jobs(policytest.MakeJob(1, "proj-a").GPU("a100", 4).Running(time.Hour).Obj(), policytest.MakeJob(2, "proj-a").GPU("a100", 1).Obj()).
					Jobs(policytest.MakeJob(3, "proj-b").GPU("a100", 4).Running(time.Hour).Obj(), policytest.MakeJob(4, "proj-b").GPU("a100", 1).Obj())
			},
			want: []string{"lend 4 proj-b"},
		},
	})
}

func TestSyncKeepsSubAccountsInTheirProjectsQOS(t *testing.T) {
	cfg := twoProjects().Project("proj-n", policytest.GPUs("a100", 1)).Obj()
	snap := policytest.MakeSnapshot().Testbed(8, 4, 8).
		Account("proj-a", "").Account("team-a1", "proj-a"). // inherits: no change of its own
		Account("proj-n", "proj-a").Account("team-n1", "proj-n").
		Account("other", "").Account("team-o1", "other").Obj()
	snap.Accounts = append(snap.Accounts,
		policy.Account{Name: "team-a2", Parent: "proj-a", QOS: []string{"normal", "guar-proj-a"}, DefaultQOS: "normal", OwnQOS: true, OwnDefaultQOS: true},
		policy.Account{Name: "proj-b", QOS: []string{"normal"}, DefaultQOS: "normal", OwnQOS: true, OwnDefaultQOS: true},
		policy.Account{Name: "proj-c", QOS: []string{"normal"}, DefaultQOS: "normal", OwnQOS: true, OwnDefaultQOS: true})
	snap.Accounts[0].QOS, snap.Accounts[0].DefaultQOS, snap.Accounts[0].OwnQOS, snap.Accounts[0].OwnDefaultQOS = []string{"normal"}, "normal", true, true
	policytest.Inherit(snap.Accounts)

	plan := policy.BuildPlan(cfg, snap, policytest.T0)
	var got []string
	for _, c := range plan.Accounts {
		got = append(got, c.String())
	}
	want := []string{
		"modify account proj-a: qos [normal]->[borrow-proj-a,elastic-proj-a,guar-proj-a] defaultqos normal->guar-proj-a",
		"modify account proj-n: qos [normal]->[borrow-proj-n,elastic-proj-n,guar-proj-n] defaultqos normal->guar-proj-n",
		"modify account team-a2: qos [guar-proj-a,normal]->[borrow-proj-a,elastic-proj-a,guar-proj-a] defaultqos normal->guar-proj-a",
		"modify account proj-b: qos [normal]->[borrow-proj-b,elastic-proj-b,guar-proj-b] defaultqos normal->guar-proj-b",
		"modify account proj-c: qos [normal]->[borrow-proj-c,elastic-proj-c,guar-proj-c] defaultqos normal->guar-proj-c",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("account changes:\n got %q\nwant %q", got, want)
	}
	// Applied as sacctmgr would, with inheritance, the next plan has nothing to change: the
	// inheriting sub-accounts are right through their parents, and accounts under no project
	// are left alone.
	policytest.ApplySync(snap, plan)
	if again := policy.BuildPlan(cfg, snap, policytest.T0); len(again.Accounts) > 0 {
		t.Fatalf("sync does not converge: %v", again.Accounts)
	}
	for _, a := range snap.Accounts {
		if a.Name == "team-o1" && (a.DefaultQOS != "" || len(a.QOS) != 0) {
			t.Errorf("team-o1, under no project, was changed: %+v", a)
		}
		if a.Name == "team-n1" && a.DefaultQOS != "guar-proj-n" {
			t.Errorf("team-n1 resolves to default %q, want its nearest project's guar-proj-n", a.DefaultQOS)
		}
	}
}

func TestJobsThatCannotStartReserveNothing(t *testing.T) {
	runPlanCases(t, []planCase{
		{
			name: "a held borrower is returned and its promised GPUs go to another project",
			cfg:  twoProjects().Obj(),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Testbed(4, 0, 8).Jobs(bobInQuota()...).
					Jobs(policytest.MakeJob(5, "proj-b").Borrowed().Reason("JobHeldUser").GPU("a100", 4).Obj()).
					Jobs(policytest.MakeJob(10, "proj-a").GPU("a100", 4).Running(time.Hour).Obj(), policytest.MakeJob(11, "proj-a").GPU("a100", 4).Obj())
			},
			want:    []string{"return 5 proj-b", "lend 11 proj-a"},
			explain: map[uint32]policytest.Says{5: {Code: policy.CodeReturnNotStartable}},
		},
		{
			name: "dependent, begin-time, admin-held and max-requeue-held borrowers are returned",
			cfg:  twoProjects().Obj(),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Testbed(4, 0, 8).Jobs(bobInQuota()...).
					Jobs(policytest.MakeJob(5, "proj-b").Borrowed().Reason("Dependency").GPU("a100", 1).Obj()).
					Jobs(policytest.MakeJob(6, "proj-b").Borrowed().Reason("BeginTime").GPU("a100", 1).Obj()).
					Jobs(policytest.MakeJob(7, "proj-b").Borrowed().Reason("JobHeldAdmin").GPU("a100", 1).Obj()).
					Jobs(policytest.MakeJob(8, "proj-b").Borrowed().Reason("JobHoldMaxRequeue").GPU("a100", 1).Obj()).
					Jobs(policytest.MakeJob(9, "proj-b").Borrowed().Reason("DependencyNeverSatisfied").GPU("a100", 1).Obj())
			},
			want: []string{"return 5 proj-b", "return 6 proj-b", "return 7 proj-b", "return 8 proj-b", "return 9 proj-b"},
		},
		{
			name: "a held job within its guarantee keeps no idle GPUs",
			cfg:  twoProjects().Obj(),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Testbed(4, 0, 8).Jobs(bobInQuota()...).Jobs(policytest.MakeJob(5, "proj-b").GPU("a100", 1).Obj()).
					Jobs(policytest.MakeJob(10, "proj-a").GPU("a100", 4).Reason("JobHeldUser").Obj())
			},
			want:    []string{"lend 5 proj-b"},
			explain: map[uint32]policytest.Says{10: {Code: policy.CodeNotStartable}},
		},
		{
			name: "an over-quota job still waiting on Priority keeps nothing",
			cfg:  twoProjects().Obj(),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Testbed(4, 0, 8).
					Jobs(policytest.MakeJob(1, "proj-a").GPU("a100", 4).Running(time.Hour).Obj(), policytest.MakeJob(2, "proj-a").GPU("a100", 2).Reason("Priority").Obj()).
					Jobs(policytest.MakeJob(3, "proj-b").GPU("a100", 4).Running(time.Hour).Obj(), policytest.MakeJob(4, "proj-b").GPU("a100", 4).Obj())
			},
			want:    []string{"lend 4 proj-b"},
			explain: map[uint32]policytest.Says{2: {Code: policy.CodeOverQuotaUnmarked}},
		},
		{
			name: "in-quota jobs keep idle GPUs only up to the guarantee, in priority order",
			cfg:  twoProjects().Obj(),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Testbed(4, 0, 8).
					Jobs(policytest.MakeJob(1, "proj-a").GPU("a100", 2).Running(time.Hour).Obj(),
						policytest.MakeJob(2, "proj-a").GPU("a100", 2).Reason("Resources").Priority(9).Obj(),
						policytest.MakeJob(3, "proj-a").GPU("a100", 2).Reason("Priority").Obj()).
					Jobs(policytest.MakeJob(10, "proj-b").GPU("a100", 4).Running(time.Hour).Obj(), policytest.MakeJob(11, "proj-b").GPU("a100", 2).Obj())
			},
			want: []string{"lend 11 proj-b"},
			explain: map[uint32]policytest.Says{
				// The figure is the case: job 2 keeps the 2 left of the guarantee, job 3 none.
				2: {Code: policy.CodeWaitsInQuota, Words: "2 a100 idle in partition a100 are kept for it"},
				3: {Code: policy.CodeOverQuotaUnmarked},
			},
		},
	})
}

func TestIdleIsWhereAJobCanStart(t *testing.T) {
	overB := func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper { return b.Jobs(bobInQuota()...) }
	runPlanCases(t, []planCase{
		{
			name: "a node in two partitions lends its idle GPUs once",
			cfg:  twoProjects().Obj(),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return overB(b.Node(policytest.GPUNode("n1", "a100", 4, 4, 64, 256000, "a100", "a100-long")).
					Pool("v100", "v100", 8, 8)).
					Jobs(policytest.MakeJob(5, "proj-b").GPU("a100", 4).Partitions("a100").Obj()).
					Jobs(policytest.MakeJob(6, "proj-b").GPU("a100", 4).Partitions("a100-long").Obj())
			},
			want: []string{"lend 5 proj-b"},
			// The figure is the case: the node's 4 idle are gone from a100-long too.
			explain: map[uint32]policytest.Says{6: {Code: policy.CodeNoIdleGPUs, Words: "a100-long has 0 a100"}},
			check: func(t *testing.T, plan *policy.Plan) {
				for _, ts := range plan.Types {
					if ts.Type == "a100" && (ts.Idle != 4 || ts.Total != 4) {
						t.Errorf("a100 idle %d total %d, want 4 and 4: the node counts once", ts.Idle, ts.Total)
					}
				}
			},
		},
		{
			name: "--gpus with --gpus-per-node counts the job's GPUs once",
			cfg:  twoProjects().Obj(),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return overB(b.Node(policytest.GPUNode("n1", "a100", 4, 2, 8, 32000, "a100")).Node(policytest.GPUNode("n2", "a100", 4, 2, 8, 32000, "a100"))).
					Jobs(policytest.MakeJob(5, "proj-b").GPU("a100", 2).PerJob("a100", 4).Nodes(2).Obj())
			},
			want: []string{"lend 5 proj-b"},
			check: func(t *testing.T, plan *policy.Plan) {
				if g := plan.Moves[0].GPUs; !reflect.DeepEqual(g, policytest.GPUs("a100", 4)) {
					t.Errorf("lend counts %v, want 4 a100", g)
				}
			},
		},
		{
			name: "idle GPUs on a node without free CPUs are not lent",
			cfg:  twoProjects().Obj(),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return overB(b.Node(policytest.GPUNode("n1", "a100", 4, 4, 0, 32000, "a100"))).Jobs(policytest.MakeJob(5, "proj-b").GPU("a100", 1).Obj())
			},
			// The words are the case: the GPUs are idle, the CPUs are what is missing.
			explain: map[uint32]policytest.Says{5: {Code: policy.CodeNoIdleGPUs, Words: "a100 has 4 a100; it needs 1 node with 1 a100, 1 CPUs"}},
		},
		{
			name: "a job needing more CPUs or memory than a node has free is not lent there",
			cfg:  twoProjects().Obj(),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return overB(b.Node(policytest.GPUNode("n1", "a100", 4, 2, 2, 32000, "a100")).Node(policytest.GPUNode("n2", "a100", 4, 2, 8, 1000, "a100")).
					Node(policytest.GPUNode("n3", "a100", 4, 1, 8, 32000, "a100"))).
					Jobs(policytest.MakeJob(5, "proj-b").GPU("a100", 1).CPUs(4).MemMB(8000).Obj(), policytest.MakeJob(6, "proj-b").GPU("a100", 2).CPUs(2).MemMB(1000).Obj())
			},
			// Job 5 fits only n3; job 6 (2 GPUs, 2 CPUs, 1000 MB) fits n1 or n2.
			want: []string{"lend 5 proj-b", "lend 6 proj-b"},
			check: func(t *testing.T, plan *policy.Plan) {
				snap := &policy.Snapshot{Nodes: []policy.Node{policytest.GPUNode("n1", "a100", 4, 2, 2, 32000, "a100")}}
				j := policytest.MakeJob(9, "proj-b").GPU("a100", 1).CPUs(4).Obj()
				if policy.Placeable(twoProjects().Obj(), snap, []string{"a100"}, policytest.T0, &j) {
					t.Error("a 4-CPU job is placed on a node with 2 CPUs free")
				}
			},
		},
		{
			name: "what one lend takes of a node's CPUs is gone for the next",
			cfg:  twoProjects().Obj(),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return overB(b.Node(policytest.GPUNode("n1", "a100", 4, 4, 4, 32000, "a100"))).
					Jobs(policytest.MakeJob(5, "proj-b").GPU("a100", 1).CPUs(3).Obj(), policytest.MakeJob(6, "proj-b").GPU("a100", 1).CPUs(3).Obj())
			},
			want: []string{"lend 5 proj-b"},
		},
		{
			name: "drained, down and reserved nodes lend nothing",
			cfg:  twoProjects().Obj(),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				drained := policytest.GPUNode("n1", "a100", 4, 4, 8, 32000, "a100")
				drained.Unusable = "state idle+DRAIN"
				reserved := policytest.GPUNode("n2", "a100", 4, 4, 8, 32000, "a100")
				reserved.Unusable = "in reservation maint"
				return overB(b.Node(drained).Node(reserved)).Jobs(policytest.MakeJob(5, "proj-b").GPU("a100", 1).Obj())
			},
			explain: map[uint32]policytest.Says{5: {Code: policy.CodeNoIdleGPUs}},
			check: func(t *testing.T, plan *policy.Plan) {
				if plan.Types[0].Idle != 0 || plan.Types[0].Total != 8 {
					t.Errorf("a100 status %+v, want 8 in total and none idle", plan.Types[0])
				}
			},
		},
	})
}

func TestNeedCountsCombinedGPUOptionsOnce(t *testing.T) {
	tests := []struct {
		name          string
		j             policy.Job
		need, perNode map[string]int
	}{
		{"--gpus=4 --gpus-per-node=2 -N2", policytest.MakeJob(1, "a").GPU("a100", 2).PerJob("a100", 4).Nodes(2).Obj(), policytest.GPUs("a100", 4), policytest.GPUs("a100", 2)},
		{"--gpus=4 -N2", policytest.MakeJob(1, "a").PerJob("a100", 4).Nodes(2).Obj(), policytest.GPUs("a100", 4), policytest.GPUs("a100", 2)},
		{"--gpus=3 -N2 rounds up per node", policytest.MakeJob(1, "a").PerJob("", 3).Nodes(2).Obj(), policytest.GPUs("", 3), policytest.GPUs("", 2)},
		{"--gpus-per-node=2 -N3", policytest.MakeJob(1, "a").GPU("a100", 2).Nodes(3).Obj(), policytest.GPUs("a100", 6), policytest.GPUs("a100", 2)},
		{"two types add up", policytest.MakeJob(1, "a").GPU("a100", 1).PerJob("v100", 2).Obj(), policytest.GPUs("a100", 1, "v100", 2), policytest.GPUs("a100", 1, "v100", 2)},
	}
	for _, tc := range tests {
		if got := tc.j.Need(); !reflect.DeepEqual(got, tc.need) {
			t.Errorf("%s: need %v, want %v", tc.name, got, tc.need)
		}
		if got := tc.j.PerNodeGPUs(); !reflect.DeepEqual(got, tc.perNode) {
			t.Errorf("%s: per node %v, want %v", tc.name, got, tc.perNode)
		}
	}
}
