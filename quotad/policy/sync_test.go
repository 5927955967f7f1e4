package policy_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/quotad/policy"
	"github.com/slurmbridge/slurmbridge/quotad/policy/policytest"
)

func syncLines(plan *policy.Plan) []string {
	var out []string
	for _, c := range plan.QOS {
		out = append(out, c.String())
	}
	for _, c := range plan.Accounts {
		out = append(out, c.String())
	}
	for _, c := range plan.Users {
		out = append(out, c.String())
	}
	return out
}

func TestSyncFromNothing(t *testing.T) {
	cfg, err := policy.LoadConfig("testdata/quotas.yaml")
	if err != nil {
		t.Fatal(err)
	}
	snap := policytest.MakeSnapshot().Testbed(8, 4, 8).Obj()
	snap.Accounts = []policy.Account{
		{Name: "proj-a", QOS: []string{"normal"}, DefaultQOS: "normal"},
		{Name: "proj-b", QOS: []string{"normal"}, DefaultQOS: "normal"},
		{Name: "proj-c", QOS: []string{"normal"}, DefaultQOS: "normal"},
	}
	plan := policy.BuildPlan(cfg, snap, policytest.T0)
	// Each borrow QOS, and each elastic QOS alike, caps its project's borrowing (borrowLimit,
	// borrowLimitByType) and each type at the lending limit; with nobody over quota, no
	// guaranteed QOS may preempt, and every elastic and borrow QOS has the out-of-reach rank
	// (3 projects): elastic 3, borrow 3+1+3, every elastic below every borrow QOS.
	want := []string{
		"create qos borrow-proj-a: grptres gres/gpu none->4 grptres gres/gpu:a100 none->8 grptres gres/gpu:v100 none->6 preemptmode none->requeue gracetime 0s->10s preemptexempttime 0s->30s priority 0->32",
		"create qos borrow-proj-b: grptres gres/gpu none->4 grptres gres/gpu:a100 none->8 grptres gres/gpu:v100 none->6 preemptmode none->requeue gracetime 0s->10s preemptexempttime 0s->30s priority 0->32",
		"create qos borrow-proj-c: grptres gres/gpu none->8 grptres gres/gpu:a100 none->2 grptres gres/gpu:v100 none->6 preemptmode none->requeue gracetime 0s->10s preemptexempttime 0s->30s priority 0->32",
		"create qos elastic-proj-a: grptres gres/gpu none->4 grptres gres/gpu:a100 none->8 grptres gres/gpu:v100 none->6 preemptmode none->requeue gracetime 0s->10s preemptexempttime 0s->30s priority 0->15",
		"create qos elastic-proj-b: grptres gres/gpu none->4 grptres gres/gpu:a100 none->8 grptres gres/gpu:v100 none->6 preemptmode none->requeue gracetime 0s->10s preemptexempttime 0s->30s priority 0->15",
		"create qos elastic-proj-c: grptres gres/gpu none->8 grptres gres/gpu:a100 none->2 grptres gres/gpu:v100 none->6 preemptmode none->requeue gracetime 0s->10s preemptexempttime 0s->30s priority 0->15",
		"create qos guar-proj-a: grptres gres/gpu none->4 grptres gres/gpu:a100 none->4 grptres gres/gpu:v100 none->0",
		"create qos guar-proj-b: grptres gres/gpu none->4 grptres gres/gpu:a100 none->4 grptres gres/gpu:v100 none->0",
		"create qos guar-proj-c: grptres gres/gpu none->2 grptres gres/gpu:a100 none->0 grptres gres/gpu:v100 none->2",
		"modify account proj-a: qos [normal]->[borrow-proj-a,elastic-proj-a,guar-proj-a] defaultqos normal->guar-proj-a",
		"modify account proj-b: qos [normal]->[borrow-proj-b,elastic-proj-b,guar-proj-b] defaultqos normal->guar-proj-b",
		"modify account proj-c: qos [normal]->[borrow-proj-c,elastic-proj-c,guar-proj-c] defaultqos normal->guar-proj-c",
	}
	if got := syncLines(plan); !reflect.DeepEqual(got, want) {
		t.Fatalf("sync:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(plan.Moves) != 0 || !plan.Acting {
		t.Fatalf("moves %v acting %v", plan.Moves, plan.Acting)
	}

	policytest.ApplySync(snap, plan)
	if again := policy.BuildPlan(cfg, snap, policytest.T0); again.HasActions() {
		t.Fatalf("not idempotent, second plan: %v", syncLines(again))
	}
}

func TestSyncOnlyDifferences(t *testing.T) {
	base := func() *policytest.ConfigWrapper {
		return policytest.MakeConfig().Project("proj-a", policytest.GPUs("a100", 4)).Project("proj-b", policytest.GPUs("a100", 4)).LendLimit("a100", 6)
	}
	tests := []struct {
		name   string
		cfg    *policy.Config
		change func(*policy.Snapshot) // applied to the synced snapshot of base()
		want   []string
	}{
		{
			name: "raised guarantee touches one QOS, one entry",
			cfg:  base().Obj(),
			change: func(s *policy.Snapshot) {
				s.QOS[4].GrpTRES["gres/gpu:a100"] = 2
				s.QOS[4].GrpTRES["gres/gpu"] = 2
			},
			want: []string{"modify qos guar-proj-a: grptres gres/gpu 2->4 grptres gres/gpu:a100 2->4"},
		},
		{
			name:   "a GPU limit the table does not want is cleared, other TRES are left alone",
			cfg:    base().Obj(),
			change: func(s *policy.Snapshot) { s.QOS[0].GrpTRES["gres/gpu:h100"] = 1; s.QOS[0].GrpTRES["cpu"] = 64 },
			want:   []string{"modify qos borrow-proj-a: grptres gres/gpu:h100 1->none"},
		},
		{
			name: "dropped lend limit clears the cap",
			cfg:  policytest.MakeConfig().Project("proj-a", policytest.GPUs("a100", 4)).Project("proj-b", policytest.GPUs("a100", 4)).Obj(),
			want: []string{"modify qos borrow-proj-a: grptres gres/gpu:a100 6->none", "modify qos borrow-proj-b: grptres gres/gpu:a100 6->none",
				"modify qos elastic-proj-a: grptres gres/gpu:a100 6->none", "modify qos elastic-proj-b: grptres gres/gpu:a100 6->none"},
		},
		{
			name: "case of names and order of lists do not matter",
			cfg:  base().Obj(),
			change: func(s *policy.Snapshot) {
				s.QOS[0].PreemptMode = "REQUEUE"
				s.Accounts[0].QOS = []string{"GUAR-PROJ-A", "Elastic-Proj-A", "Borrow-Proj-A"}
			},
		},
		{
			name:   "borrow QOS must preempt nobody",
			cfg:    base().Obj(),
			change: func(s *policy.Snapshot) { s.QOS[0].Preempt = []string{"guar-proj-a"} },
			want:   []string{"modify qos borrow-proj-a: preempt [guar-proj-a]->[]"},
		},
		{
			name: "other QOS are taken off a project's account",
			cfg:  base().Obj(),
			change: func(s *policy.Snapshot) {
				s.Accounts[1].QOS = append(s.Accounts[1].QOS, "normal")
				s.Accounts[1].DefaultQOS = "normal"
			},
			want: []string{"modify account proj-b: qos [borrow-proj-b,elastic-proj-b,guar-proj-b,normal]->[borrow-proj-b,elastic-proj-b,guar-proj-b] defaultqos normal->guar-proj-b"},
		},
		{
			name: "times and priority",
			cfg: func() *policy.Config {
				c := base().Obj()
				c.Settings.GuaranteedPriority = policytest.IntP(100)
				return c
			}(),
			change: func(s *policy.Snapshot) { s.QOS[0].GraceTime = time.Minute },
			want: []string{
				"modify qos borrow-proj-a: gracetime 1m0s->10s",
				"modify qos guar-proj-a: priority 0->100",
				"modify qos guar-proj-b: priority 0->100",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := policytest.MakeSnapshot().Testbed(8, 4, 8).Synced(t, base().Obj()).Obj()
			if snap.QOS[0].Name != "borrow-proj-a" || snap.QOS[2].Name != "elastic-proj-a" || snap.QOS[4].Name != "guar-proj-a" || snap.Accounts[0].Name != "proj-a" {
				t.Fatalf("synced snapshot order changed: %+v", snap.QOS)
			}
			if tt.change != nil {
				tt.change(snap)
			}
			plan := policy.BuildPlan(tt.cfg, snap, policytest.T0)
			if got := syncLines(plan); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("sync:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// A user association with its own QOS list does not inherit its account's: quotad adds the
// project's QOS to it (and only those), or Slurm would refuse the user's job in the borrow
// QOS. Users outside every project, and users whose list has them all, are left alone.
func TestSyncUsersWithTheirOwnQOSList(t *testing.T) {
	cfg := policytest.MakeConfig().Project("proj-a", policytest.GPUs("a100", 4)).Project("proj-b", policytest.GPUs("a100", 4)).Obj()
	snap := policytest.MakeSnapshot().Testbed(8, 4, 8).Synced(t, cfg).Obj()
	snap.Accounts = append(snap.Accounts,
		policy.Account{Name: "team-b1", Parent: "proj-b", QOS: []string{"borrow-proj-b", "elastic-proj-b", "guar-proj-b"}, DefaultQOS: "guar-proj-b"},
		policy.Account{Name: "other", Parent: "root", QOS: []string{"normal"}, DefaultQOS: "normal"})
	snap.Users = []policy.UserAssociation{
		{User: "bob", Account: "proj-b", QOS: []string{"guar-proj-b", "normal", "elastic-proj-b"}},
		{User: "dave", Account: "team-b1", Partition: "a100", QOS: []string{"Normal"}},
		{User: "alice", Account: "proj-a", QOS: []string{"BORROW-PROJ-A", "guar-proj-a", "elastic-proj-a", "long"}},
		{User: "erin", Account: "other", QOS: []string{"normal"}},
	}
	plan := policy.BuildPlan(cfg, snap, policytest.T0)
	want := []string{
		"modify user bob (account proj-b): qos [elastic-proj-b,guar-proj-b,normal] += [borrow-proj-b]",
		"modify user dave (account team-b1, partition a100): qos [normal] += [borrow-proj-b,elastic-proj-b,guar-proj-b]",
	}
	if got := syncLines(plan); !reflect.DeepEqual(got, want) {
		t.Fatalf("sync:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(plan.Moves) != 0 || !containsLine(plan.Notes, "quotad first applies 2 QOS/account change(s)") {
		t.Errorf("moves %v notes %q: jobs must wait for the users' lists", plan.Moves, plan.Notes)
	}
	policytest.ApplySync(snap, plan)
	if again := policy.BuildPlan(cfg, snap, policytest.T0); again.HasActions() {
		t.Fatalf("not idempotent, second plan: %v", syncLines(again))
	}
	if got := snap.Users[0].QOS; !reflect.DeepEqual(got, []string{"guar-proj-b", "normal", "elastic-proj-b", "borrow-proj-b"}) {
		t.Errorf("bob's list after the sync: %v, want his own QOS kept", got)
	}
}

func TestSyncMissingAccountIsReportedNotCreated(t *testing.T) {
	cfg := policytest.MakeConfig().Project("proj-a", policytest.GPUs("a100", 4)).Project("proj-z", policytest.GPUs("a100", 1)).Obj()
	snap := policytest.MakeSnapshot().Testbed(8, 4, 8).Obj()
	snap.Accounts = []policy.Account{{Name: "proj-a", QOS: []string{"borrow-proj-a", "elastic-proj-a", "guar-proj-a"}, DefaultQOS: "guar-proj-a"}}
	plan := policy.BuildPlan(cfg, snap, policytest.T0)
	for _, c := range plan.Accounts {
		if c.Account == "proj-z" {
			t.Fatalf("planned a change on a missing account: %v", c)
		}
	}
	if !containsLine(plan.Notes, "account proj-z is in the quota table but not in slurmdbd") {
		t.Fatalf("notes %q", plan.Notes)
	}
}

// While QOS or accounts differ from the table, jobs are not moved: the moves would rest on
// limits Slurm does not have yet.
func TestNoMovesWhileSyncIsPending(t *testing.T) {
	cfg := policytest.MakeConfig().Project("proj-a", policytest.GPUs("a100", 1)).Obj()
	snap := policytest.MakeSnapshot().Testbed(8, 4, 8).Synced(t, cfg).Jobs(
		policytest.MakeJob(1, "proj-a").GPU("a100", 1).Running(time.Minute).Obj(),
		policytest.MakeJob(2, "proj-a").GPU("a100", 1).Obj(),
		policytest.MakeJob(3, "proj-a").GPU("a100", 1).Borrowed().NoRequeue().Obj(),
	).Obj()
	snap.QOS[2].GrpTRES["gres/gpu:a100"] = 0 // guar-proj-a
	plan := policy.BuildPlan(cfg, snap, policytest.T0)
	if len(plan.QOS) != 1 || len(plan.Moves) != 0 {
		t.Fatalf("qos %v moves %v", plan.QOS, plan.Moves)
	}
	policytest.CheckExplains(t, plan, map[uint32]policytest.Says{2: {Code: policy.CodeMovesHeld}, 3: {Code: policy.CodeMovesHeld}})
}

func containsLine(lines []string, sub string) bool {
	for _, l := range lines {
		if strings.Contains(l, sub) {
			return true
		}
	}
	return false
}
