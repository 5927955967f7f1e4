package capacity

import (
	"errors"
	"strings"
	"testing"

	"github.com/slurmbridge/slurmbridge/bridge/gpureq"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/elasticd/elastictest"
)

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
	set := func(account, user string, f func(*slurm.Association)) []slurm.Association {
		return elastictest.WithAssocLimits(elastictest.AssocTree(), account, user, f)
	}
	tests := []struct {
		name   string
		assocs []slurm.Association
		want   int
		why    string
	}{
		{"no limit", elastictest.AssocTree(), Unlimited, ""},
		{"user GrpTRES on GPUs: her running and pending jobs count", set("proj-a", "alice", func(a *slurm.Association) { a.GrpTRES = "gres/gpu=5" }),
			2, "the association of user alice in account proj-a has GrpTRES gres/gpu=5, and its jobs hold or wait for 3"},
		{"user GrpTRES on the type", set("proj-a", "alice", func(a *slurm.Association) { a.GrpTRES = "gres/gpu:a100=3" }),
			0, "GrpTRES gres/gpu:a100=3, and its jobs hold or wait for 3"},
		{"user GrpTRES on memory", set("proj-a", "alice", func(a *slurm.Association) { a.GrpTRES = "mem=4500M" }),
			1, "GrpTRES mem=4500"},
		{"account GrpTRES counts every user of the account", set("proj-a", "", func(a *slurm.Association) { a.GrpTRES = "gres/gpu=6" }),
			1, "account proj-a has GrpTRES gres/gpu=6, and its jobs hold or wait for 5"},
		{"a parent account's GrpTRES counts its sub-accounts' jobs", set("root", "", func(a *slurm.Association) { a.GrpTRES = "gres/gpu=12" }),
			3, "account root has GrpTRES gres/gpu=12, and its jobs hold or wait for 9"},
		{"GrpJobs counts running jobs", set("proj-a", "", func(a *slurm.Association) { a.GrpJobs = 4 }),
			1, "account proj-a has GrpJobs=4, and 3 of its jobs run"},
		{"GrpSubmitJobs counts pending jobs too", set("proj-a", "alice", func(a *slurm.Association) { a.GrpSubmitJobs = 4 }),
			1, "has GrpSubmitJobs=4, and 3 of its jobs run or wait"},
		{"MaxJobs on the user", set("proj-a", "alice", func(a *slurm.Association) { a.MaxJobs = 2 }),
			0, "the association of user alice in account proj-a has MaxJobs=2, and 2 of its jobs run"},
		{"MaxJobs inherited from the account", set("proj-a", "", func(a *slurm.Association) { a.MaxJobs = 3 }),
			1, "the association of user alice in account proj-a has MaxJobs=3, and 2 of its jobs run"},
		{"MaxSubmitJobs", set("proj-a", "alice", func(a *slurm.Association) { a.MaxSubmitJobs = 5 }),
			2, "has MaxSubmitJobs=5, and 3 of its jobs run or wait"},
		{"MaxTRES per job below the worker's GPUs", set("proj-a", "alice", func(a *slurm.Association) { a.MaxTRESPerJob = "gres/gpu=0" }),
			0, "has MaxTRES gres/gpu=0 per job, and a worker asks for 1"},
		{"MaxTRES per job the worker fits in", set("proj-a", "alice", func(a *slurm.Association) { a.MaxTRESPerJob = "gres/gpu=1" }),
			Unlimited, ""},
		{"another user's limit is not hers", set("proj-a", "bob", func(a *slurm.Association) { a.GrpTRES = "gres/gpu=2"; a.MaxJobs = 1 }),
			Unlimited, ""},
		{"a user's limit on another partition is not hers", set("proj-a", "alice", func(a *slurm.Association) { a.Partition = "v100"; a.GrpTRES = "gres/gpu=1" }),
			Unlimited, ""},
		{"the tightest limit wins", set("proj-a", "alice", func(a *slurm.Association) { a.GrpTRES = "gres/gpu=10"; a.MaxJobs = 3 }),
			1, "MaxJobs=3"},
	}
	// why is a limit in words, with the figures (the limit, what its jobs hold) each case is
	// about: no code carries them, so the words are checked.
	shape := Shape{Tasks: 1, CPUsPerTask: 1, MemMB: 1000, GPUs: 1}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			snap := &Snapshot{Jobs: map[uint32]slurm.Job{}, Assocs: tc.assocs}
			for _, j := range queue {
				snap.Jobs[j.ID] = j
			}
			n, why := associationRoom(snap, main, shape, "a100", []string{"a100"}, nil)
			if n != tc.want || !strings.Contains(why, tc.why) || (tc.why == "") != (why == "") {
				t.Fatalf("room %d (%q), want %d (%q)", n, why, tc.want, tc.why)
			}
		})
	}

	// The worker's QOS limits gres/gpu itself (a guarantee QOS does): Slurm skips the
	// association's gres/gpu limit for it, not its limit on another TRES.
	snap := &Snapshot{Jobs: map[uint32]slurm.Job{100: main, 101: queue[1]},
		Assocs: set("proj-a", "alice", func(a *slurm.Association) { a.GrpTRES = "cpu=4,gres/gpu=2" })}
	if n, why := associationRoom(snap, main, shape, "a100", []string{"a100"}, gpureq.TRES{"gres/gpu": 4, "gres/gpu:a100": 4}); n != 2 || !strings.Contains(why, "GrpTRES cpu=4") {
		t.Fatalf("beside a QOS limiting gres/gpu: room %d (%q), want 2 by the association's cpu limit", n, why)
	}
	if n, why := associationRoom(snap, main, shape, "a100", []string{"a100"}, gpureq.TRES{"cpu": 100}); n != 0 || !strings.Contains(why, "GrpTRES gres/gpu=2") {
		t.Fatalf("beside a QOS limiting only cpu: room %d (%q), want 0 by the association's gres/gpu limit", n, why)
	}

	unreadable := errors.New("sacctmgr: Problem talking to the database")
	snap = &Snapshot{Jobs: map[uint32]slurm.Job{100: main}, AssocErr: unreadable}
	if n, why := associationRoom(snap, main, shape, "a100", []string{"a100"}, nil); n != 0 || !strings.Contains(why, unreadable.Error()) {
		t.Fatalf("unreadable limits: room %d (%q), want none", n, why)
	}
}
