package capacity

import (
	"errors"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/slurmbridge/slurmbridge/bridge/gpureq"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/elasticd/elastictest"
	"github.com/slurmbridge/slurmbridge/elasticd/policy"
)

// Of counts, per type the job grows by, the workers that could start now and names the limit
// that holds each type where one does. A reason is checked by a part of its words: the figures
// (a limit, what its jobs hold) are what the case is about, and no code carries them.
func TestOf(t *testing.T) {
	main := mainJob()
	aliceLimits := func(set func(*slurm.Association)) []slurm.Association {
		return elastictest.WithAssocLimits(elastictest.AssocTree(), "proj-a", "alice", set)
	}
	fourTasksOnTwoNodes := asking(t, main, "cpu=8,node=2,gres/gpu=2,gres/gpu:a100=2")
	fourTasksOnTwoNodes.NodeCount, fourTasksOnTwoNodes.Tasks = 2, 4
	// proj-a's guarantee is full and its elastic QOS leaves 3 a100 to borrow.
	guarFull := map[string]gpureq.TRES{"guar-proj-a": elastictest.MustTRES(t, "gres/gpu:a100=1"), "elastic-proj-a": elastictest.MustTRES(t, "gres/gpu:a100=3")}
	cases := map[string]struct {
		job     Job
		nodes   []slurm.Node
		queue   []slurm.Job // besides the main job
		qos     map[string]gpureq.TRES
		assocs  []slurm.Association
		lending *policy.Lending // nil: a fresh plan keeping nothing
		// assocErr: the associations could not be read.
		assocErr error
		want     map[policy.GPUType]int
		why      map[policy.GPUType]string // a part of each type's limit; no entry: no limit holds it
	}{
		"GPUs free by type": {
			job: jobOf(main, 1, "a100", "v100"),
			nodes: []slurm.Node{a100Node("a1").used("a100", 1, 1, 1000).obj(), a100Node("a2").obj(),
				makeNode("v1", "v100").gpus("v100", 2).obj()},
			want: map[policy.GPUType]int{"a100": 7, "v100": 2},
		},
		"a worker of 2 GPUs needs both free on one node": {
			job:   jobOf(main, 2, "a100"),
			nodes: []slurm.Node{a100Node("a1").used("a100", 1, 1, 1000).obj(), a100Node("a2").used("a100", 3, 3, 3000).obj()},
			want:  map[policy.GPUType]int{"a100": 1},
		},
		"too few free CPUs for the main job's request": {
			job:   jobOf(asking(t, main, "cpu=4,mem=1000M,node=1,gres/gpu=1,gres/gpu:a100=1"), 1, "a100"),
			nodes: []slurm.Node{a100Node("a1").used("", 0, 6, 0).obj()},
			want:  map[policy.GPUType]int{"a100": 0},
		},
		"too little free memory for the main job's request": {
			job:   jobOf(asking(t, main, "cpu=1,mem=16000M,node=1,gres/gpu=1,gres/gpu:a100=1"), 1, "a100"),
			nodes: []slurm.Node{a100Node("a1").used("", 0, 0, 20000).obj(), a100Node("a2").obj()},
			want:  map[policy.GPUType]int{"a100": 2},
		},
		"a request of 2 tasks per node takes their CPUs on each": {
			job:   jobOf(fourTasksOnTwoNodes, 1, "a100"),
			nodes: []slurm.Node{a100Node("a1").obj(), a100Node("a2").used("", 0, 5, 0).obj()},
			want:  map[policy.GPUType]int{"a100": 2},
		},
		"a drained node starts nothing": {
			job:   jobOf(main, 1, "a100"),
			nodes: []slurm.Node{a100Node("a1").state("idle", "DRAIN").obj()},
			want:  map[policy.GPUType]int{"a100": 0},
		},
		"a down node starts nothing": {
			job:   jobOf(main, 1, "a100"),
			nodes: []slurm.Node{a100Node("a1").state("down").obj(), a100Node("a2").state("idle", "NOT_RESPONDING").obj()},
			want:  map[policy.GPUType]int{"a100": 0},
		},
		"a reserved node starts only its reservation's jobs": {
			job:   jobOf(main, 1, "a100"),
			nodes: []slurm.Node{a100Node("a1").reservation("maint").obj(), a100Node("a2").state("idle", "RESERVED").obj()},
			want:  map[policy.GPUType]int{"a100": 0},
		},
		"a node backfill planned for a pending job": {
			job:   jobOf(main, 1, "a100"),
			nodes: []slurm.Node{a100Node("a1").state("idle", "PLANNED").obj(), a100Node("a2").used("a100", 3, 3, 3000).obj()},
			want:  map[policy.GPUType]int{"a100": 1},
		},
		"a node of another partition": {
			job:   jobOf(main, 1, "a100"),
			nodes: []slurm.Node{makeNode("b1", "big").gpus("a100", 4).obj()},
			want:  map[policy.GPUType]int{"a100": 0},
		},
		"any-type workers count every type's free GPUs": {
			job: Job{Main: main, GPUsPerWorker: 1, MainType: "gpu", Partitions: map[policy.GPUType][]string{"gpu": {"a100"}}},
			nodes: []slurm.Node{a100Node("a1").used("a100", 2, 2, 2000).obj(),
				makeNode("m1", "a100").gpus("v100", 1).gpus("", 1).obj()},
			want: map[policy.GPUType]int{"gpu": 4},
		},
		"any-type workers within a limit on every GPU": {
			job:    Job{Main: main, GPUsPerWorker: 1, MainType: "gpu", Partitions: map[policy.GPUType][]string{"gpu": {"a100"}}},
			nodes:  []slurm.Node{a100Node("a1").obj(), makeNode("v1", "a100").gpus("v100", 2).obj()},
			assocs: aliceLimits(func(a *slurm.Association) { a.GrpTRES = "gres/gpu=4" }),
			want:   map[policy.GPUType]int{"gpu": 3},
			why:    map[policy.GPUType]string{"gpu": "the association of user alice in account proj-a has GrpTRES gres/gpu=4, and its jobs hold or wait for 1"},
		},
		"the user's association GrpTRES on GPUs": {
			job:    jobOf(main, 1, "a100"),
			nodes:  []slurm.Node{a100Node("a1").obj()},
			queue:  []slurm.Job{elastictest.GPUJob(101, "alice", "proj-a", "PENDING", 1)},
			assocs: aliceLimits(func(a *slurm.Association) { a.GrpTRES = "gres/gpu=3" }),
			want:   map[policy.GPUType]int{"a100": 1},
			why:    map[policy.GPUType]string{"a100": "GrpTRES gres/gpu=3, and its jobs hold or wait for 2"},
		},
		"the account's GrpTRES counts its other users": {
			job:    jobOf(main, 1, "a100"),
			nodes:  []slurm.Node{a100Node("a1").obj()},
			queue:  []slurm.Job{elastictest.GPUJob(101, "bob", "proj-a", "RUNNING", 2)},
			assocs: elastictest.WithAssocLimits(elastictest.AssocTree(), "proj-a", "", func(a *slurm.Association) { a.GrpTRES = "gres/gpu=4" }),
			want:   map[policy.GPUType]int{"a100": 1},
			why:    map[policy.GPUType]string{"a100": "account proj-a has GrpTRES gres/gpu=4, and its jobs hold or wait for 3"},
		},
		"a limit looser than the free nodes holds nothing": {
			job:    jobOf(main, 1, "a100"),
			nodes:  []slurm.Node{a100Node("a1").used("a100", 3, 3, 3000).obj()},
			assocs: aliceLimits(func(a *slurm.Association) { a.GrpTRES = "gres/gpu=8" }),
			want:   map[policy.GPUType]int{"a100": 1},
		},
		"MaxTRES per job below the worker's GPUs": {
			job:    jobOf(main, 2, "a100"),
			nodes:  []slurm.Node{a100Node("a1").obj()},
			assocs: aliceLimits(func(a *slurm.Association) { a.MaxTRESPerJob = "gres/gpu=1" }),
			want:   map[policy.GPUType]int{"a100": 0},
			why:    map[policy.GPUType]string{"a100": "has MaxTRES gres/gpu=1 per job, and a worker asks for 2"},
		},
		"MaxJobs on the user": {
			job:    jobOf(main, 1, "a100"),
			nodes:  []slurm.Node{a100Node("a1").obj()},
			assocs: aliceLimits(func(a *slurm.Association) { a.MaxJobs = 3 }),
			want:   map[policy.GPUType]int{"a100": 2},
			why:    map[policy.GPUType]string{"a100": "has MaxJobs=3, and 1 of its jobs run"},
		},
		"associations unreadable: no worker": {
			job:      jobOf(main, 1, "a100"),
			nodes:    []slurm.Node{a100Node("a1").obj()},
			assocErr: errors.New("sacctmgr: Problem talking to the database"),
			want:     map[policy.GPUType]int{"a100": 0},
			why:      map[policy.GPUType]string{"a100": "association limits unreadable: sacctmgr: Problem talking to the database"},
		},
		"the guarantee's QOS limit holds it without a reason of its own": {
			job:   jobOf(main, 1, "a100"),
			nodes: []slurm.Node{a100Node("a1").obj()},
			qos:   map[string]gpureq.TRES{"guar-proj-a": elastictest.MustTRES(t, "gres/gpu:a100=3")},
			want:  map[policy.GPUType]int{"a100": 2},
		},
		"beyond the guarantee, workers borrow within the borrowing limit": {
			job:   jobOf(main, 1, "a100"),
			nodes: []slurm.Node{a100Node("a1").obj(), a100Node("a2").obj()},
			queue: []slurm.Job{elastictest.QOSJob(101, "borrow-proj-a", "RUNNING", elastictest.MustTRES(t, "gres/gpu:a100=1"))},
			qos:   guarFull,
			want:  map[policy.GPUType]int{"a100": 2},
		},
		"other projects' lending limits keep what a worker would borrow": {
			job:     jobOf(main, 1, "a100"),
			nodes:   []slurm.Node{a100Node("a1").obj()},
			qos:     guarFull,
			lending: &policy.Lending{Fresh: true, Kept: []policy.KeptIdle{{Account: "proj-b", Type: "a100", GPUs: 3}}},
			want:    map[policy.GPUType]int{"a100": 1},
			why:     map[policy.GPUType]string{"a100": "lending limits keep 3 idle a100 for their owners' own jobs (proj-b keeps 3), 4 of a100 free"},
		},
		"no fresh quotad plan: no worker borrows": {
			job:     jobOf(main, 1, "a100"),
			nodes:   []slurm.Node{a100Node("a1").obj()},
			qos:     guarFull,
			lending: &policy.Lending{Why: "quotad has no plan yet"},
			want:    map[policy.GPUType]int{"a100": 0},
			why:     map[policy.GPUType]string{"a100": "quotad has no plan yet: no worker borrows GPUs"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			snap := snapshotOf(tc.nodes, append([]slurm.Job{tc.job.Main}, tc.queue...)...)
			snap.QOS = tc.qos
			if tc.assocs != nil {
				snap.Assocs = tc.assocs
			}
			snap.AssocErr = tc.assocErr
			if tc.lending != nil {
				snap.Lending = *tc.lending
			}
			room := Of(snap, tc.job)
			workers, limits := room.Capacity()
			if !maps.Equal(workers, tc.want) {
				t.Errorf("workers %v, want %v", workers, tc.want)
			}
			for typ, why := range limits {
				if want := tc.why[typ]; want == "" || !strings.Contains(why, want) {
					t.Errorf("%s held by %q, want %q", typ, why, want)
				}
			}
			for typ, want := range tc.why {
				if _, ok := limits[typ]; !ok {
					t.Errorf("%s held by no limit, want %q", typ, want)
				}
			}
		})
	}
}

// A job's own pending workers are what growth is; another job waiting for the same GPUs takes
// them first, and a type nobody waits for has no growth room at all.
func TestOfLeavesWaitingJobsTheirGPUs(t *testing.T) {
	main := mainJob()
	waiting := elastictest.GPUJob(300, "bob", "proj-a", "PENDING", 2)
	waiting.StateReason = "Resources"
	own := elastictest.GPUJob(201, "alice", "proj-a", "PENDING", 1)
	own.StateReason = "Resources"
	nodes := []slurm.Node{a100Node("a1").obj(), makeNode("v1", "v100").gpus("v100", 2).obj()}

	job := jobOf(main, 1, "a100", "v100")
	job.Workers = []uint32{201}
	room := Of(snapshotOf(nodes, main, waiting, own), job)
	growth, why := room.Growth()
	// The figures growth yields by: 2 GPUs asked by the waiting jobs in a100, of its 4 free.
	if m := waitingAskFree.FindStringSubmatch(why["a100"]); !maps.Equal(growth, map[policy.GPUType]int{"a100": 2}) || m == nil || m[1] != "a100" || m[2] != "2" || m[3] != "4" {
		t.Fatalf("growth %v (%q), want 2 a100 left beside the 2 bob waits for, and no room on v100", growth, why)
	}
	if workers, _ := room.Capacity(); !maps.Equal(workers, map[policy.GPUType]int{"a100": 4, "v100": 2}) {
		t.Fatalf("workers %v: the waiting jobs are growth's to yield to, not the capacity's", workers)
	}
}

// The main job's type is counted once, also when the job grows by other types: below its min
// the job grows by it as far as the associations admit, whatever the nodes have free.
func TestOfCountsTheMainTypesAssociationRoom(t *testing.T) {
	main := mainJob()
	snap := snapshotOf([]slurm.Node{makeNode("v1", "v100").gpus("v100", 4).obj()}, main)
	snap.Assocs = elastictest.WithAssocLimits(elastictest.AssocTree(), "proj-a", "alice", func(a *slurm.Association) { a.MaxJobs = 3 })
	room := Of(snap, jobOf(main, 1, "v100"))
	if workers, _ := room.Capacity(); !maps.Equal(workers, map[policy.GPUType]int{"v100": 2}) {
		t.Fatalf("workers %v, want 2 v100 (MaxJobs)", workers)
	}
	if r := room.ByType["a100"]; r.Assoc != 2 || !strings.Contains(r.AssocWhy, "MaxJobs=3") {
		t.Fatalf("main type a100: associations admit %d (%q), want 2 by MaxJobs", r.Assoc, r.AssocWhy)
	}
	if r := Of(snapshotOf(nil, main), jobOf(main, 1)).ByType["a100"]; r.Assoc != Unlimited || r.AssocWhy != "" {
		t.Fatalf("no association limit: %d (%q), want unlimited", r.Assoc, r.AssocWhy)
	}
}

// Workers are placed in turn: the guarantee while it has room, then borrowed in the elastic
// QOS (submitted in the guarantee, then lent), then the guarantee again to wait there. Each call
// places from the room as the snapshot left it.
func TestPlace(t *testing.T) {
	main := mainJob()
	snap := snapshotOf([]slurm.Node{a100Node("a1").obj(), a100Node("a2").obj()}, main)
	snap.QOS = map[string]gpureq.TRES{"guar-proj-a": elastictest.MustTRES(t, "gres/gpu:a100=2"), "elastic-proj-a": elastictest.MustTRES(t, "gres/gpu:a100=1")}
	room := Of(snap, jobOf(main, 1, "a100"))
	guar := Placement{QOS: "guar-proj-a", GuarQOS: "guar-proj-a"}
	borrowed := Placement{QOS: "elastic-proj-a", Borrowed: true, GuarQOS: "guar-proj-a"}
	want := []Placement{guar, borrowed, guar}
	for range 2 {
		if got := room.Place("a100", 3); !slices.Equal(got, want) {
			t.Fatalf("placed %+v, want %+v", got, want)
		}
	}
	// A type no pool of the job has is placed in the main job's QOS (and refused at submission).
	if got := room.Place("h100", 1); !slices.Equal(got, []Placement{guar}) {
		t.Fatalf("an uncounted type placed %+v", got)
	}
	// Without the QOS limits every worker asks for the main job's QOS, as the main job did.
	snap = snapshotOf(nil, main)
	if got := Of(snap, jobOf(main, 1, "a100")).Place("a100", 2); !slices.Equal(got, []Placement{guar, guar}) {
		t.Fatalf("limits unknown: placed %+v", got)
	}
}

// waitingAskFree reads a growth limit's figures: the partitions, the GPUs the jobs waiting there
// ask for and those free.
var waitingAskFree = regexp.MustCompile(`in (\S+) ask for (\d+) GPUs, (\d+) of`)
