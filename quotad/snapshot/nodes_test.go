package snapshot

import (
	"context"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/bridge/slurm/slurmtest"
	"github.com/slurmbridge/slurmbridge/quotad/policy"
	"github.com/slurmbridge/slurmbridge/quotad/policy/policytest"
)

// The busy fixtures of every release: n1 and n2 are each in partitions cpu and a100; n1 has 1
// of its 4 a100 unallocated but all 8 CPUs allocated, n2 has 4 a100 and 6 CPUs free.
func TestNodesFromEveryRelease(t *testing.T) {
	for _, f := range []string{"sinfo-22.05-busy.json", "scontrol-nodes-24.11-busy.json", "scontrol-nodes-26.05-busy.json"} {
		t.Run(f, func(t *testing.T) {
			data := slurmtest.Fixture(t, f)
			raw, err := slurm.ParseNodes(data)
			if err != nil {
				t.Fatal(err)
			}
			got := Nodes(raw)
			want := []policy.Node{
				{Name: "n1", Partitions: []string{"cpu", "a100"}, GPUs: map[string]int{"a100": 4}, IdleGPUs: map[string]int{"a100": 1}, FreeCPUs: 0, FreeMemMB: 3200},
				{Name: "n2", Partitions: []string{"cpu", "a100"}, GPUs: map[string]int{"a100": 4}, IdleGPUs: map[string]int{"a100": 4}, FreeCPUs: 6, FreeMemMB: 3800},
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("Nodes =\n%+v\nwant\n%+v", got, want)
			}

			// The policy counts each node once although two partitions list it, and lends
			// only where a job can start: n1's idle a100 has no CPU to go with it.
			cfg, err := policy.ParseConfig([]byte("projects:\n  - account: proj-b\n    gpus: {a100: 0}\n"))
			if err != nil {
				t.Fatal(err)
			}
			snap := policytest.MakeSnapshot().Jobs(policytest.Jobs(1, 6, func(id uint32) *policytest.JobWrapper {
				return policytest.MakeJob(id, "proj-b").GPU("a100", 1).Partitions("cpu", "a100").CPUs(1).MemMB(100)
			})...)
			for _, n := range got {
				snap.Node(n)
			}
			plan := policy.BuildPlan(cfg, snap.Synced(t, cfg).Obj(), policytest.T0)
			if len(plan.Moves) != 4 {
				t.Errorf("%d lends, want 4 (n2's a100; n1's idle one has no CPU free): %v", len(plan.Moves), plan.Moves)
			}
			if ts := plan.Types[0]; ts.Total != 8 || ts.Idle != 5 {
				t.Errorf("a100 total %d idle %d, want 8 and 5: each node once", ts.Total, ts.Idle)
			}
		})
	}
}

// Captured on the testbed of each release (TestPlannedNodeLendsNothing) while backfill had
// planned a100-1 (1 a100 allocated) and a100-2 (idle) for a 2-node job: 22.05 flags only the
// idle node PLANNED, 24.11 and 26.05 both. A planned node lends nothing: a 4-a100 job over quota
// is lent nowhere, a 1-a100 job only where a100-1 is not flagged.
func TestPlannedNodesFromEveryRelease(t *testing.T) {
	for _, tc := range []struct {
		file           string
		a100OnePlanned bool
	}{
		{"sinfo-22.05-planned.json", false},
		{"scontrol-nodes-24.11-planned.json", true},
		{"scontrol-nodes-26.05-planned.json", true},
	} {
		t.Run(tc.file, func(t *testing.T) {
			data := slurmtest.Fixture(t, tc.file)
			raw, err := slurm.ParseNodes(data)
			if err != nil {
				t.Fatal(err)
			}
			unusable := map[string]string{}
			var nodes []policy.Node
			for _, n := range Nodes(raw) {
				unusable[n.Name] = n.Unusable
				if n.Name == "a100-1" || n.Name == "a100-2" {
					nodes = append(nodes, n)
				}
			}
			const planned = "planned by backfill for a pending job"
			if unusable["a100-2"] != planned || unusable["a100-spot-1"] != "" {
				t.Errorf("unusable: %q", unusable)
			}
			if got := unusable["a100-1"] == planned; got != tc.a100OnePlanned {
				t.Errorf("a100-1 (mixed) planned: %v, want %v", got, tc.a100OnePlanned)
			}

			cfg, err := policy.ParseConfig([]byte("projects:\n  - account: proj-c\n    gpus: {v100: 2}\n"))
			if err != nil {
				t.Fatal(err)
			}
			over := func(id uint32, gpus int) policy.Job {
				return policytest.MakeJob(id, "proj-c").GPU("a100", gpus).CPUs(1).MemMB(100).Obj()
			}
			lends := func(j policy.Job) int {
				snap := policytest.MakeSnapshot().Jobs(j)
				for _, n := range nodes {
					snap.Node(n)
				}
				plan := policy.BuildPlan(cfg, snap.Synced(t, cfg).Obj(), policytest.T0)
				if !plan.Acting || len(plan.Notes) != 0 {
					t.Fatalf("plan does not act, or syncs first (no moves then): %v", plan.Notes)
				}
				return len(plan.Moves)
			}
			if n := lends(over(1, 4)); n != 0 {
				t.Errorf("a 4-a100 job lent (%d moves): only a100-2 has 4 idle, and it is planned", n)
			}
			want := map[bool]int{true: 0, false: 1}[tc.a100OnePlanned]
			if n := lends(over(2, 1)); n != want {
				t.Errorf("a 1-a100 job: %d lends, want %d", n, want)
			}
		})
	}
}

func TestConvertJobReadsShape(t *testing.T) {
	j := slurm.Job{ID: 8, State: "PENDING", TRESPerNode: "gres/gpu:a100:2", TRESPerJob: "gres/gpu:a100:4", NodeCount: 2,
		TRESReq: map[string]uint64{"cpu": 4, "mem": 8000, "node": 2, "gres/gpu": 4, "gres/gpu:a100": 4}}
	pj, ok, err := ConvertJob(&j)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if pj.CPUs != 4 || pj.MemoryMB != 8000 || pj.GPUsPerNode["a100"] != 2 || pj.GPUsPerJob["a100"] != 4 || pj.Nodes != 2 {
		t.Errorf("job = %+v", pj)
	}
}

// doctoredFetcher replays the captured queue (squeue-22.05-borrowing.txt) with lines doctored the
// way a user's job could make them: edit gets the lines' fields and may change them.
type doctoredFetcher struct {
	fixtureFetcher
	edit func(fields [][]string) [][]string
}

func (f doctoredFetcher) Queue(ctx context.Context, r slurm.QueueRead) ([]slurm.Job, error) {
	if r.Fields != slurm.SchedulingFields {
		return f.fixtureFetcher.Queue(ctx, r)
	}
	data, err := os.ReadFile("testdata/squeue-22.05-borrowing.txt")
	if err != nil {
		f.t.Fatal(err)
	}
	var lines [][]string
	for _, l := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		lines = append(lines, strings.Split(l, "\x1f"))
	}
	var out strings.Builder
	for _, l := range f.edit(lines) {
		out.WriteString(strings.Join(l, "\x1f") + "\n")
	}
	return slurm.ParseQueue([]byte(out.String()), slurm.SchedulingFields)
}

// The captured queue with three jobs doctored: bob's pending job 19 asks for gres in a spelling
// quotad cannot read, running job 13 too (its allocation still counts it), and a copy of 19 as
// job 20 has a tres-alloc quotad cannot read. The snapshot keeps both unreadable jobs with their
// account, QOS and state, and the plan acts on the rest.
func TestTakeKeepsUnreadableJobs(t *testing.T) {
	edit := func(lines [][]string) [][]string {
		const tresPerNode, tresAlloc = 15, 19
		lines[0][tresPerNode] = "gres:gpu:a100:1(S:0)" // job 13, running
		lines[6][tresPerNode] = "gres/gpu:a100:two"    // job 19, pending
		copy20 := slices.Clone(lines[6])
		copy20[0], copy20[1], copy20[tresPerNode] = "20", "20", "gres:gpu:a100:1"
		copy20[tresAlloc] = "cpu=1,gres/gpu:a100=1,license/x y=1"
		return append(lines, copy20)
	}
	b := &Builder{Live: doctoredFetcher{fixtureFetcher{t: t}, edit}, Accounting: fakeAccounting{}}
	snap, err := b.Take(context.Background(), testConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Unreadable) != 2 {
		t.Fatalf("Unreadable = %+v, want jobs 19 and 20", snap.Unreadable)
	}
	u19, u20 := snap.Unreadable[0], snap.Unreadable[1]
	if u19.ID != 19 || u19.Account != "proj-b" || u19.User != "bob" || u19.QOS != "guar-proj-b" || u19.State != policy.StatePending ||
		!strings.Contains(u19.Problem, `tres_per_node "gres/gpu:a100:two"`) {
		t.Errorf("job 19 = %+v, want proj-b's pending job naming its tres_per_node string", u19)
	}
	if u20.ID != 20 || u20.QOS != "guar-proj-b" || !strings.Contains(u20.Problem, `tres-alloc: TRES: bad token "license/x y=1"`) {
		t.Errorf("job 20 = %+v, want its tres-alloc named", u20)
	}
	var j13 *policy.Job
	for i := range snap.Jobs {
		if snap.Jobs[i].ID == 13 {
			j13 = &snap.Jobs[i]
		}
	}
	if j13 == nil || !reflect.DeepEqual(j13.AllocatedGPUs, map[string]int{"a100": 1}) {
		t.Fatalf("running job 13 = %+v, want it read by its allocation (1 a100)", j13)
	}
	plan := policy.BuildPlan(testConfig(t), snap.Snapshot, snap.TakenAt)
	i19 := slices.IndexFunc(plan.Unreadable, func(u policy.UnreadableJob) bool { return u.ID == 19 })
	if !plan.Acting || len(plan.Unreadable) != 2 || i19 < 0 || plan.Unreadable[i19].Account != "proj-b" || plan.Unreadable[i19].QOS != "guar-proj-b" ||
		plan.Unreadable[i19].State != policy.StatePending || !slices.ContainsFunc(plan.Notes, func(n string) bool { return strings.HasPrefix(n, "job 19 (") }) {
		t.Errorf("plan acting %v unreadable %+v notes %q, want it acting and naming job 19", plan.Acting, plan.Unreadable, plan.Notes)
	}
}
