package daemon

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/slurmbridge/slurmbridge/bridge/gpureq"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/elasticd/elastictest"
	"github.com/slurmbridge/slurmbridge/elasticd/policy"
)

// assocTree is root > proj-a (alice, bob) and root > dept > proj-b (carol), every limit unset.
func assocTree() []slurm.AssociationLimits {
	none := func(a slurm.AssociationLimits) slurm.AssociationLimits {
		a.Cluster, a.GrpJobs, a.GrpSubmitJobs, a.MaxJobs, a.MaxSubmitJobs = "testbed", slurm.NoLimit, slurm.NoLimit, slurm.NoLimit, slurm.NoLimit
		return a
	}
	return []slurm.AssociationLimits{
		none(slurm.AssociationLimits{Account: "root"}),
		none(slurm.AssociationLimits{Account: "root", User: "root"}),
		none(slurm.AssociationLimits{Account: "proj-a", ParentAccount: "root"}),
		none(slurm.AssociationLimits{Account: "proj-a", User: "alice"}),
		none(slurm.AssociationLimits{Account: "proj-a", User: "bob"}),
		none(slurm.AssociationLimits{Account: "dept", ParentAccount: "root"}),
		none(slurm.AssociationLimits{Account: "proj-b", ParentAccount: "dept"}),
		none(slurm.AssociationLimits{Account: "proj-b", User: "carol"}),
	}
}

// Each association limit, on alice's association or up her account tree, caps how many more
// workers of one a100 GPU (1 CPU, 1000 MB) her job may submit; the reason names the limit.
func TestAssociationLimitsCapWorkers(t *testing.T) {
	main := elastictest.GPUJob(100, "alice", "proj-a", "RUNNING", 1)
	queue := []slurm.Job{
		main,
		elastictest.GPUJob(101, "alice", "proj-a", "RUNNING", 1),
		elastictest.GPUJob(102, "alice", "proj-a", "PENDING", 1),
		elastictest.GPUJob(103, "bob", "proj-a", "RUNNING", 2),
		elastictest.GPUJob(104, "carol", "proj-b", "RUNNING", 4),
	}
	set := func(account, user string, f func(*slurm.AssociationLimits)) []slurm.AssociationLimits {
		tree := assocTree()
		for i := range tree {
			if tree[i].Account == account && tree[i].User == user {
				f(&tree[i])
			}
		}
		return tree
	}
	tests := []struct {
		name   string
		assocs []slurm.AssociationLimits
		want   int
		why    string
	}{
		{"no limit", assocTree(), unlimited, ""},
		{"user GrpTRES on GPUs: her running and pending jobs count", set("proj-a", "alice", func(a *slurm.AssociationLimits) { a.GrpTRES = "gres/gpu=5" }),
			2, "the association of user alice in account proj-a has GrpTRES gres/gpu=5, and its jobs hold or wait for 3"},
		{"user GrpTRES on the type", set("proj-a", "alice", func(a *slurm.AssociationLimits) { a.GrpTRES = "gres/gpu:a100=3" }),
			0, "GrpTRES gres/gpu:a100=3, and its jobs hold or wait for 3"},
		{"user GrpTRES on memory", set("proj-a", "alice", func(a *slurm.AssociationLimits) { a.GrpTRES = "mem=4500M" }),
			1, "GrpTRES mem=4500"},
		{"account GrpTRES counts every user of the account", set("proj-a", "", func(a *slurm.AssociationLimits) { a.GrpTRES = "gres/gpu=6" }),
			1, "account proj-a has GrpTRES gres/gpu=6, and its jobs hold or wait for 5"},
		{"a parent account's GrpTRES counts its sub-accounts' jobs", set("root", "", func(a *slurm.AssociationLimits) { a.GrpTRES = "gres/gpu=12" }),
			3, "account root has GrpTRES gres/gpu=12, and its jobs hold or wait for 9"},
		{"GrpJobs counts running jobs", set("proj-a", "", func(a *slurm.AssociationLimits) { a.GrpJobs = 4 }),
			1, "account proj-a has GrpJobs=4, and 3 of its jobs run"},
		{"GrpSubmitJobs counts pending jobs too", set("proj-a", "alice", func(a *slurm.AssociationLimits) { a.GrpSubmitJobs = 4 }),
			1, "has GrpSubmitJobs=4, and 3 of its jobs run or wait"},
		{"MaxJobs on the user", set("proj-a", "alice", func(a *slurm.AssociationLimits) { a.MaxJobs = 2 }),
			0, "the association of user alice in account proj-a has MaxJobs=2, and 2 of its jobs run"},
		{"MaxJobs inherited from the account", set("proj-a", "", func(a *slurm.AssociationLimits) { a.MaxJobs = 3 }),
			1, "the association of user alice in account proj-a has MaxJobs=3, and 2 of its jobs run"},
		{"MaxSubmitJobs", set("proj-a", "alice", func(a *slurm.AssociationLimits) { a.MaxSubmitJobs = 5 }),
			2, "has MaxSubmitJobs=5, and 3 of its jobs run or wait"},
		{"MaxTRES per job below the worker's GPUs", set("proj-a", "alice", func(a *slurm.AssociationLimits) { a.MaxTRESPerJob = "gres/gpu=0" }),
			0, "has MaxTRES gres/gpu=0 per job, and a worker asks for 1"},
		{"MaxTRES per job the worker fits in", set("proj-a", "alice", func(a *slurm.AssociationLimits) { a.MaxTRESPerJob = "gres/gpu=1" }),
			unlimited, ""},
		{"another user's limit is not hers", set("proj-a", "bob", func(a *slurm.AssociationLimits) { a.GrpTRES = "gres/gpu=2"; a.MaxJobs = 1 }),
			unlimited, ""},
		{"a user's limit on another partition is not hers", set("proj-a", "alice", func(a *slurm.AssociationLimits) { a.Partition = "v100"; a.GrpTRES = "gres/gpu=1" }),
			unlimited, ""},
		{"the tightest limit wins", set("proj-a", "alice", func(a *slurm.AssociationLimits) { a.GrpTRES = "gres/gpu=10"; a.MaxJobs = 3 }),
			1, "MaxJobs=3"},
	}
	// why is a limit in words, with the figures (the limit, what its jobs hold) each case is
	// about: no code carries them, so the words are checked.
	d := &Daemon{}
	shape := workerShape{tasks: 1, cpusPerTask: 1, memMB: 1000, gpus: 1}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			snap := &snapshot{jobs: map[uint32]slurm.Job{}, assocs: tc.assocs}
			for _, j := range queue {
				snap.jobs[j.ID] = j
			}
			n, why := d.associationRoom(main, snap, shape, "a100", []string{"a100"}, nil)
			if n != tc.want || !strings.Contains(why, tc.why) || (tc.why == "") != (why == "") {
				t.Fatalf("room %d (%q), want %d (%q)", n, why, tc.want, tc.why)
			}
		})
	}

	// The worker's QOS limits gres/gpu itself (a guarantee QOS does): Slurm skips the
	// association's gres/gpu limit for it, not its limit on another TRES.
	snap := &snapshot{jobs: map[uint32]slurm.Job{100: main, 101: queue[1]},
		assocs: set("proj-a", "alice", func(a *slurm.AssociationLimits) { a.GrpTRES = "cpu=4,gres/gpu=2" })}
	if n, why := d.associationRoom(main, snap, shape, "a100", []string{"a100"}, gpureq.TRES{"gres/gpu": 4, "gres/gpu:a100": 4}); n != 2 || !strings.Contains(why, "GrpTRES cpu=4") {
		t.Fatalf("beside a QOS limiting gres/gpu: room %d (%q), want 2 by the association's cpu limit", n, why)
	}
	if n, why := d.associationRoom(main, snap, shape, "a100", []string{"a100"}, gpureq.TRES{"cpu": 100}); n != 0 || !strings.Contains(why, "GrpTRES gres/gpu=2") {
		t.Fatalf("beside a QOS limiting only cpu: room %d (%q), want 0 by the association's gres/gpu limit", n, why)
	}

	snap = &snapshot{jobs: map[uint32]slurm.Job{100: main}, assocErr: errors.New("sacctmgr: Problem talking to the database")}
	if n, why := d.associationRoom(main, snap, shape, "a100", []string{"a100"}, nil); n != 0 || !strings.Contains(why, "Problem talking to the database") {
		t.Fatalf("unreadable limits: room %d (%q), want none", n, why)
	}
}

// Through the daemon: alice's association allows 2 GPUs; her job holds 1 (the main job), so
// growth stops at 2 workers and the status says which limit holds it. Below min, a worker
// the limit would keep pending is not submitted either.
func TestAssociationLimitHoldsGrowthAndBelowMinSaysWhy(t *testing.T) {
	h := newHarness(t, 1, 4)
	gpus := gpureq.TRES{"cpu": 1, "node": 1, "gres/gpu": 1, "gres/gpu:a100": 1}
	h.slurm.assocs = slices.Clone(assocTree())
	for i := range h.slurm.assocs {
		if h.slurm.assocs[i].User == "alice" {
			h.slurm.assocs[i].GrpTRES = "gres/gpu=2"
		}
	}
	runGPU := func(id uint32, name string) {
		h.slurm.run(id, name, h.uid, h.now)
		j := h.slurm.jobs[id]
		j.TRESAlloc, j.TRESReq = gpus, gpus
		h.slurm.jobs[id] = j
	}
	runGPU(mainID, "train")
	workers := []uint32{mainID}
	for range 40 {
		h.report(100*float64(len(workers)), workers...)
		h.cycle()
		if n := len(h.slurm.submits); n > len(workers)-1 {
			id := uint32(200 + n)
			runGPU(id, WorkerName(mainID))
			workers = append(workers, id)
		}
	}
	// The words are checked for the limit that holds the job, which no code carries.
	st := h.d.Status()[0]
	if len(workers) != 2 || st.Decision != "hold" || st.ReasonCode != string(policy.CodeNoCapacity) ||
		!strings.Contains(st.Reason, "(the association of user alice in account proj-a has GrpTRES gres/gpu=2, and its jobs hold or wait for 2)") {
		t.Fatalf("%d workers, status %s %q; want 2 and a hold naming the association's GrpTRES", len(workers), st.Decision, st.Reason)
	}

	below := newHarness(t, 3, 4)
	below.slurm.assocs = h.slurm.assocs
	below.slurm.jobs[mainID] = h.slurm.jobs[mainID]
	below.cycle()
	// Here too the words are checked for the limit that stops the rest.
	if d := below.decision(); len(below.slurm.submits) != 1 || d.Action != policy.Grow || d.Code != policy.CodeBelowTarget || d.Count != 1 ||
		!strings.Contains(d.Reason, "the association of user alice in account proj-a has GrpTRES gres/gpu=2") {
		t.Fatalf("below min: %d submitted, decision %+v; want 1 worker, as far as the limit allows", len(below.slurm.submits), d)
	}
	below.slurm.run(201, WorkerName(mainID), below.uid, below.now)
	w := below.slurm.jobs[201]
	w.TRESAlloc = gpus
	below.slurm.jobs[201] = w
	below.cycle()
	if d := below.decision(); len(below.slurm.submits) != 1 || d.Action != policy.Hold || d.Code != policy.CodeBelowTarget || !strings.Contains(d.Reason, "GrpTRES gres/gpu=2") {
		t.Fatalf("below min at the limit: %d submitted, decision %+v; want a hold naming the limit", len(below.slurm.submits), d)
	}
}
