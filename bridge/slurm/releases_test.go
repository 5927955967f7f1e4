package slurm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/slurmbridge/slurmbridge/bridge/gpureq"
)

// The fixtures named by release (22.05, 24.11, 25.05, 25.11, 26.05) are real output of one
// scenario that testdata/capture/capture.sh plays on each release's packages (Debian's, or
// SchedMD's built from source): two nodes n1, n2 with
// four a100 GPUs each in partitions cpu and a100, and these jobs of alice:
//
//	1 held       -H -p cpu                     pending, JobHeldUser
//	2 gres-a100  -p a100 --gres=gpu:a100:1     running on n1, GPU 0
//	3 gpus2      -p a100 --gpus=2              running on n1, GPUs 1-2
//	4 cpu4       -p cpu -c 4 -t 30             running on n1
//	5 two-parts  -p cpu,a100 --begin=now+1hour pending, BeginTime
//	6 array      --array=0-3%2 -c 2            tasks 2-3 pending (JobArrayTaskLimit)
//	8, 9         array tasks 0 and 1           running on n1 and n2
//	7 too-big    -p a100 -N 2 --gres=gpu:a100:4 pending, Resources
//
// Every release must decode to the same facts; only the raw strings may differ.

var releases = []struct {
	name    string
	release Release
	nodes   string // the command that lists nodes: the same on every release
}{
	{"22.05", Release{22, 5}, nodesCommand},
	{"24.11", Release{24, 11}, nodesCommand},
	{"25.05", Release{25, 5}, nodesCommand},
	{"25.11", Release{25, 11}, nodesCommand},
	{"26.05", Release{26, 5}, nodesCommand},
}

// replayRelease answers the fetcher's commands with one release's captured output.
func replayRelease(t *testing.T, rel string, state string) *replayRunner {
	squeue := "squeue-" + rel + "-mixed.json"
	if state == "idle" {
		squeue = "squeue-" + rel + "-idle.json"
	}
	return &replayRunner{t: t, outputs: map[string][]byte{
		"sinfo --version": fixture(t, "version-"+rel+".txt"),
		nodesCommand:      fixture(t, "scontrol-nodes-"+rel+"-"+state+".txt"),
		"squeue --json":   fixture(t, squeue),
	}}
}

type jobFacts struct {
	partitions []string
	state      string // StateName
	pending    bool
	running    bool
	reason     string
	nodeCount  uint32
	nodes      string
}

var wantJobs = map[uint32]jobFacts{
	1: {[]string{"cpu"}, "PENDING", true, false, "JobHeldUser", 1, ""},
	2: {[]string{"a100"}, "RUNNING", false, true, "None", 1, "n1"},
	3: {[]string{"a100"}, "RUNNING", false, true, "None", 1, "n1"},
	4: {[]string{"cpu"}, "RUNNING", false, true, "None", 1, "n1"},
	5: {[]string{"cpu", "a100"}, "PENDING", true, false, "BeginTime", 1, ""},
	6: {[]string{"cpu"}, "PENDING", true, false, "JobArrayTaskLimit", 1, ""},
	7: {[]string{"a100"}, "PENDING", true, false, "Resources", 2, ""},
	8: {[]string{"cpu"}, "RUNNING", false, true, "None", 1, "n1"},
	9: {[]string{"cpu"}, "RUNNING", false, true, "None", 1, "n2"},
}

// wantGPUs is each GPU job's request after gpureq, whichever spelling the release printed.
var wantGPUs = map[uint32]struct {
	scope gpureq.Scope
	typ   string
	n     uint64
	idx   []int // GPU indices on its node while running
}{
	2: {gpureq.PerNode, "a100", 1, []int{0}},
	3: {gpureq.PerJob, "", 2, []int{1, 2}},
	7: {gpureq.PerNode, "a100", 4, nil},
}

func TestEveryReleaseDecodesTheSameQueue(t *testing.T) {
	for _, rel := range releases {
		t.Run(rel.name, func(t *testing.T) {
			jobs, err := NewClient(replayRelease(t, rel.name, "busy")).Queue(context.Background(), QueueRead{Fields: AllFields})
			if err != nil {
				t.Fatal(err)
			}
			got := map[uint32]Job{}
			for _, j := range jobs {
				got[j.ID] = j
			}
			if ids := slices.Sorted(maps.Keys(got)); !slices.Equal(ids, slices.Sorted(maps.Keys(wantJobs))) {
				t.Fatalf("job ids %v", ids)
			}
			for id, want := range wantJobs {
				j := got[id]
				have := jobFacts{j.Partitions(), j.StateName(), j.Pending(), j.Running(), j.StateReason, j.NodeCount, j.Nodes}
				if !slices.Equal(have.partitions, want.partitions) || have.state != want.state || have.pending != want.pending ||
					have.running != want.running || have.reason != want.reason || have.nodeCount != want.nodeCount || have.nodes != want.nodes {
					t.Errorf("job %d: %+v, want %+v", id, have, want)
				}
				if j.User != "alice" || j.Submit.IsZero() || j.Running() == j.Start.IsZero() && id != 5 {
					t.Errorf("job %d: user %q submit %v start %v", id, j.User, j.Submit, j.Start)
				}
				if j.Running() != (len(j.TRESAlloc) > 0) || j.TRESReq["cpu"] == 0 {
					t.Errorf("job %d: tres_req %v tres_alloc %v", id, j.TRESReq, j.TRESAlloc)
				}

				x := got[id]
				if x.ID != id || x.UserID == 0 || x.UserID != x.GroupID || x.WorkDir != "/tmp" || filepath.Dir(x.StdOut) != "/tmp" {
					t.Errorf("job %d extras %+v", id, x)
				}
				if wantHost := want.nodes; x.BatchHost != wantHost {
					t.Errorf("job %d batch host %q, want %q", id, x.BatchHost, wantHost)
				}
				if wantLimit := map[bool]uint32{true: 30}[id == 4]; x.TimeLimit != wantLimit {
					t.Errorf("job %d time limit %d, want %d", id, x.TimeLimit, wantLimit)
				}
			}
			// Array 6 (sbatch --array=0-3%2): two tasks running, 2 and 3 pending in its record.
			var array []string
			for _, id := range slices.Sorted(maps.Keys(got)) {
				if j := got[id]; j.ArrayJobID == 6 {
					array = append(array, fmt.Sprintf("%s%v", j.StateName(), j.ArrayTasks))
				}
			}
			if !slices.Equal(array, []string{"RUNNING[]", "RUNNING[]", "PENDING[2 3]"}) && !slices.Equal(array, []string{"PENDING[2 3]", "RUNNING[]", "RUNNING[]"}) {
				t.Errorf("array 6 read as %v, want two running tasks and a pending record of tasks 2 and 3", array)
			}
			for id, want := range wantGPUs {
				j := got[id]
				req, err := j.GPURequest()
				if err != nil || len(req.GPUs) != 1 || req.GPUs[0].Scope != want.scope || req.GPUs[0].Type != want.typ || req.GPUs[0].N != want.n {
					t.Errorf("job %d GPU request %+v, %v; want %v", id, req, err, want)
				}
				var idx []int
				for _, d := range j.GresDetail {
					i, err := GPUIndices(d)
					if err != nil {
						t.Fatal(err)
					}
					idx = append(idx, i...)
				}
				if !slices.Equal(idx, want.idx) {
					t.Errorf("job %d GPU indices %v (gres_detail %q), want %v", id, idx, j.GresDetail, want.idx)
				}
			}
		})
	}
}

func TestEveryReleaseDecodesTheSameNodes(t *testing.T) {
	type nodeFacts struct {
		state           string
		cpus, allocCPUs int
		mem, allocMem   uint64
		gpus, allocGPUs uint64
	}
	for _, rel := range releases {
		for state, want := range map[string]map[string]nodeFacts{
			"idle": {"n1": {"idle", 8, 0, 4000, 0, 4, 0}, "n2": {"idle", 8, 0, 4000, 0, 4, 0}},
			"busy": {"n1": {"allocated", 8, 8, 4000, 800, 4, 3}, "n2": {"mixed", 8, 2, 4000, 200, 4, 0}},
		} {
			t.Run(rel.name+"/"+state, func(t *testing.T) {
				r := replayRelease(t, rel.name, state)
				f := NewClient(r)
				nodes, err := f.Nodes(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if _, err := f.Nodes(context.Background()); err != nil {
					t.Fatal(err)
				}
				// The release is learned once (it says whether nodes name their reservation), then
				// scontrol lists the nodes.
				if want := []string{"sinfo --version", rel.nodes, rel.nodes}; !slices.Equal(r.calls, want) {
					t.Fatalf("ran %q, want %q", r.calls, want)
				}
				if len(nodes) != len(want) {
					t.Fatalf("%d nodes, want %d", len(nodes), len(want))
				}
				for _, n := range nodes {
					have := nodeFacts{n.State, n.CPUs, n.AllocCPUs, n.MemoryMB, n.AllocMemoryMB, n.GPUs(), n.AllocGPUs()}
					if have != want[n.Name] || len(n.StateFlags) != 0 || !n.Up() ||
						!slices.Equal(n.Partitions, []string{"cpu", "a100"}) || n.TRES["cpu"] != 8 || n.Gres[0].Type != "a100" {
						t.Errorf("node %s: %+v flags %v partitions %v tres %v, want %+v", n.Name, have, n.StateFlags, n.Partitions, n.TRES, want[n.Name])
					}
					// elasticd checks a node agent's credential came from the node's host.
					if n.Address != "127.0.0.1" || n.Hostname != "localhost" {
						t.Errorf("node %s: NodeAddr %q NodeHostname %q, want 127.0.0.1 and localhost", n.Name, n.Address, n.Hostname)
					}
				}
			})
		}
	}
}

func TestEveryReleaseDecodesAnEmptyQueue(t *testing.T) {
	for _, rel := range releases {
		jobs, err := ParseQueue(fixture(t, "squeue-"+rel.name+"-idle.json"), AllFields)
		if err != nil || jobs == nil || len(jobs) != 0 {
			t.Errorf("%s: %v, %v; want an empty, non-nil list", rel.name, jobs, err)
		}
		got, err := ParseVersion(string(fixture(t, "version-"+rel.name+".txt")))
		if err != nil || got != rel.release {
			t.Errorf("%s: version file reads as %v, %v", rel.name, got, err)
		}
	}
}

func TestSinfoOfLaterReleasesPointsAtScontrol(t *testing.T) {
	// From 23.02, sinfo --json aggregates per partition; reading nodes from it would be wrong.
	for _, rel := range []string{"24.11", "26.05"} {
		for _, state := range []string{"idle", "busy"} {
			_, err := ParseNodes(fixture(t, "sinfo-"+rel+"-"+state+".json"))
			if !errors.Is(err, ErrSinfoJSONHasNoNodes) {
				t.Errorf("%s %s: got %v", rel, state, err)
			}
		}
	}
}

func TestJobStateArraysReadAs22Names(t *testing.T) {
	for _, tc := range []struct {
		state     string // job_state as JSON
		base      string
		flags     []string
		name      string
		pend, run bool
	}{
		{`"RUNNING"`, "RUNNING", nil, "RUNNING", false, true},
		{`"COMPLETING"`, "", []string{"COMPLETING"}, "COMPLETING", false, true}, // 22.05 hides the base
		{`"REQUEUE_HOLD"`, "", []string{"REQUEUE_HOLD"}, "REQUEUE_HOLD", true, false},
		{`["PENDING"]`, "PENDING", nil, "PENDING", true, false},
		{`["COMPLETED","COMPLETING"]`, "COMPLETED", []string{"COMPLETING"}, "COMPLETING", false, true},
		{`["PENDING","REQUEUE_HOLD"]`, "PENDING", []string{"REQUEUE_HOLD"}, "REQUEUE_HOLD", true, false},
		{`["RUNNING","CONFIGURING","POWER_UP_NODE"]`, "RUNNING", []string{"CONFIGURING", "POWER_UP_NODE"}, "CONFIGURING", false, true},
		{`["RUNNING","POWER_UP_NODE"]`, "RUNNING", []string{"POWER_UP_NODE"}, "RUNNING", false, true},
		{`["SUSPENDED"]`, "SUSPENDED", nil, "SUSPENDED", false, false},
		{`["CANCELLED"]`, "CANCELLED", nil, "CANCELLED", false, false},
	} {
		jobs, err := ParseQueue([]byte(`{"jobs": [{"job_id": 1, "requeue": true, "batch_flag": true, "job_state": `+tc.state+`}]}`), AllFields)
		if err != nil {
			t.Fatalf("%s: %v", tc.state, err)
		}
		j := jobs[0]
		if j.State != tc.base || !slices.Equal(j.StateFlags, tc.flags) || j.StateName() != tc.name || j.Pending() != tc.pend || j.Running() != tc.run {
			t.Errorf("%s: base %q flags %v name %q pending %v running %v; want %q %v %q %v %v",
				tc.state, j.State, j.StateFlags, j.StateName(), j.Pending(), j.Running(), tc.base, tc.flags, tc.name, tc.pend, tc.run)
		}
	}
}

func TestNodeStateArrays(t *testing.T) {
	for _, tc := range []struct {
		json  string // state and state_flags as JSON members
		base  string
		flags []string
		up    bool
	}{
		{`"state": "idle", "state_flags": ["DRAIN"]`, "idle", []string{"DRAIN"}, false},
		{`"state": ["IDLE", "DRAIN"]`, "idle", []string{"DRAIN"}, false},
		{`"state": ["MIXED", "COMPLETING"]`, "mixed", []string{"COMPLETING"}, true},
		{`"state": ["IDLE", "NOT_RESPONDING"]`, "idle", []string{"NOT_RESPONDING"}, false},
		{`"state": ["DOWN"]`, "down", nil, false},
	} {
		nodes, err := ParseNodes([]byte(`{"nodes": [{"name": "n1", ` + tc.json + `, "cpus": {"set": true, "infinite": false, "number": 8}}]}`))
		if err != nil {
			t.Fatalf("%s: %v", tc.json, err)
		}
		n := nodes[0]
		if n.State != tc.base || !slices.Equal(n.StateFlags, tc.flags) || n.Up() != tc.up || n.CPUs != 8 {
			t.Errorf("%s: %q %v up %v cpus %d; want %q %v up %v", tc.json, n.State, n.StateFlags, n.Up(), n.CPUs, tc.base, tc.flags, tc.up)
		}
	}
}

// squeue-REL-requeue.json (capture/capture.sh) holds jobs Slurm can and cannot requeue. Slurm
// requeues only batch jobs with Requeue=1: an salloc keeps Requeue=1 and has batch_flag false,
// so the requeue flag alone does not tell. Without --requeue or --no-requeue the flag is
// slurm.conf's JobRequeue at submission.
func TestEveryReleaseReadsBatchFlagAndEffectiveRequeue(t *testing.T) {
	want := map[string]struct{ batch, requeue bool }{
		"requeue-on":          {true, true},
		"requeue-off":         {true, false}, // --no-requeue
		"requeue-default-on":  {true, true},  // JobRequeue=1
		"salloc":              {false, true},
		"srun":                {false, false},
		"requeue-default-off": {true, false}, // JobRequeue=0
		"requeue-on-jr0":      {true, true},  // --requeue under JobRequeue=0
	}
	for _, rel := range releases {
		jobs, err := ParseQueue(fixture(t, "squeue-"+rel.name+"-requeue.json"), AllFields)
		if err != nil {
			t.Fatalf("%s: %v", rel.name, err)
		}
		seen := 0
		for _, j := range jobs {
			name := jobNames(t, rel.name)[j.ID]
			w, ok := want[name]
			if !ok {
				continue
			}
			// 25.11 (captured on 25.11.7) gives an srun allocation the requeue flag, as every
			// release gives salloc's; it is still no batch job, so neither is requeued.
			if name == "srun" && rel.release == (Release{25, 11}) {
				w.requeue = true
			}
			seen++
			if j.Batch != w.batch || j.Requeue != w.requeue {
				t.Errorf("%s: job %d (%s): batch %v requeue %v, want %v %v", rel.name, j.ID, name, j.Batch, j.Requeue, w.batch, w.requeue)
			}
		}
		if seen != len(want) {
			t.Errorf("%s: %d of the %d captured jobs found", rel.name, seen, len(want))
		}
	}
}

// jobNames reads the job names of a release's requeue capture straight from its JSON, apart
// from the reader under test.
func jobNames(t *testing.T, rel string) map[uint32]string {
	t.Helper()
	var resp struct {
		Jobs []struct {
			ID   uint32 `json:"job_id"`
			Name string `json:"name"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(fixture(t, "squeue-"+rel+"-requeue.json"), &resp); err != nil {
		t.Fatal(err)
	}
	names := map[uint32]string{}
	for _, j := range resp.Jobs {
		names[j.ID] = j.Name
	}
	return names
}

// Every capture names the release that printed it, so that a fixture of one release is never
// read as another's.
func TestEveryFixtureNamesItsRelease(t *testing.T) {
	entries, err := os.ReadDir("testdata")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			continue // capture scripts and fuzz corpora
		}
		named := false
		for _, rel := range releases {
			named = named || strings.Contains(e.Name(), "-"+rel.name+"-") || strings.Contains(e.Name(), "-"+rel.name+".")
		}
		if !named {
			t.Errorf("testdata/%s names none of the releases", e.Name())
		}
	}
}
