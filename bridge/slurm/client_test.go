package slurm

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/gpureq"
)

// The fixtures in testdata/ are real output of the testbed's Slurm 22.05.8:
//   - sinfo-22.05-testbed-idle.json, sinfo-22.05-testbed-busy.json: `sinfo --json`, idle and with
//     GPU jobs (the JSON node read, which tests of other packages replay through ParseNodes);
//     scontrol-nodes-22.05-testbed-idle.txt: the node read of the same idle moment. The idle
//     pair comes from the testbed in its 22.05 container (testbed/container.sh 22.05), whose
//     host is slurm-22-05, not vm
//   - squeue-22.05-testbed-mixed.json: `squeue --json` with completed, running and pending jobs
//   - squeue-22.05-testbed-held.json: `squeue --json` with two held jobs (one pending in the list
//     v100,a100-spot, one routed by the pools plugin), filtered down to those two
//   - sinfo-/squeue-22.05-slurmctld-unreachable.json: both commands with a slurm.conf whose
//     SlurmctldPort nobody listens on: exit status 0, an "errors" entry and no data
//
// The fixtures named by release (squeue-24.11-mixed.json, scontrol-nodes-26.05-busy.json...)
// come from testdata/capture/capture.sh; releases_test.go describes them.

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// replayRunner answers each command with a fixture, as the real one would print it.
type replayRunner struct {
	t       testing.TB
	outputs map[string][]byte // command line -> what it prints
	err     error             // returned with the output, as ExecRunner does
	calls   []string
}

func (r *replayRunner) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	line := strings.Join(append([]string{name}, args...), " ")
	r.calls = append(r.calls, line)
	out, ok := r.outputs[line]
	if !ok {
		r.t.Fatalf("unexpected command %q", line)
	}
	return out, r.err
}

var nodesCommand = "scontrol " + strings.Join(NodesArgs, " ")

func TestCommandFetcherRunsScontrolAndSqueue(t *testing.T) {
	r := &replayRunner{t: t, outputs: map[string][]byte{
		"sinfo --version": []byte("slurm 22.05.8\n"),
		nodesCommand:      fixture(t, "scontrol-nodes-22.05-busy.txt"),
		"squeue --json":   fixture(t, "squeue-22.05-testbed-mixed.json"),
	}}
	f := Client{Runner: r}
	nodes, err := f.Nodes(context.Background())
	if err != nil || len(nodes) != 2 {
		t.Fatalf("Nodes: %d nodes, %v; want 2", len(nodes), err)
	}
	jobs, err := f.Queue(context.Background(), QueueRead{Fields: AllFields})
	if err != nil || len(jobs) != 5 {
		t.Fatalf("Jobs: %d jobs, %v; want 5", len(jobs), err)
	}
	if want := []string{"sinfo --version", nodesCommand, "squeue --json"}; !slices.Equal(r.calls, want) {
		t.Fatalf("ran %q, want %q", r.calls, want)
	}
}

func TestSlurmErrorsAreErrorsEvenWithExitStatusZero(t *testing.T) {
	// Measured on 22.05.8: with slurmctld unreachable both commands exit 0 and print an empty
	// list beside the error. Taking the list would show an empty cluster. (scontrol's text
	// read exits 1 then: TestNodesRunsScontrolWithItsEnvironment.)
	nodes, err := ParseNodes(fixture(t, "sinfo-22.05-slurmctld-unreachable.json"))
	var respErr *ResponseError
	if !errors.As(err, &respErr) || nodes != nil || !strings.Contains(err.Error(), "Unspecified error") {
		t.Fatalf("sinfo --json: got %v, %v; want a ResponseError with Slurm's message and no nodes", nodes, err)
	}
	r := &replayRunner{t: t, outputs: map[string][]byte{
		"squeue --json": fixture(t, "squeue-22.05-slurmctld-unreachable.json"),
	}}
	jobs, err := Client{Runner: r}.Queue(context.Background(), QueueRead{Fields: AllFields})
	if !errors.As(err, &respErr) || jobs != nil {
		t.Fatalf("Jobs: got %v, %v; want a ResponseError and no jobs", jobs, err)
	}
	if msg := err.Error(); !strings.Contains(msg, "Failed while looking for jobs") || !strings.Contains(msg, "slurm_load_jobs") {
		t.Fatalf("Jobs error %q lacks Slurm's description and source", msg)
	}
}

func TestFailedCommandKeepsBothItsErrorAndSlurms(t *testing.T) {
	cmdErr := &CommandError{Command: "squeue --json", ExitCode: 1, Err: errors.New("exit status 1")}
	r := &replayRunner{t: t, err: cmdErr, outputs: map[string][]byte{"squeue --json": fixture(t, "squeue-22.05-slurmctld-unreachable.json")}}
	_, err := Client{Runner: r}.Queue(context.Background(), QueueRead{Fields: AllFields})
	var got *CommandError
	if !errors.As(err, &got) || !strings.Contains(err.Error(), "Failed while looking for jobs") {
		t.Fatalf("got %v; want Slurm's message wrapping the CommandError", err)
	}

	// The node read's failure is the command's own error, whatever it printed.
	r = &replayRunner{t: t, err: cmdErr, outputs: map[string][]byte{nodesCommand: []byte("scontrol: fatal: Unable to establish controller machine\n")}}
	if _, err := (Client{Runner: r, Release: Release{22, 5}}).Nodes(context.Background()); err != cmdErr {
		t.Fatalf("got %v, want the CommandError itself", err)
	}
}

func TestParseRejectsAnswersWithoutData(t *testing.T) {
	for _, tc := range []struct {
		name  string
		parse func([]byte) error
		in    string
		want  string
	}{
		{"nodes missing", parseNodesErr, `{"meta": {}, "errors": []}`, `no "nodes" array`},
		{"jobs missing", parseJobsErr, `{"errors": [], "nodes": []}`, `no "jobs" array`},
		{"truncated", parseJobsErr, `{"errors": [], "jobs": [{"job_id": 1`, "reading squeue JSON"},
		{"number object without number", parseJobsErr, `{"jobs": [{"job_id": 1, "job_state": ["PENDING"], "priority": {"set": true}}]}`, "lacks set or number"},
		{"number as string", parseJobsErr, `{"jobs": [{"job_id": 1, "job_state": "PENDING", "priority": "5"}]}`, "not a number"},
		{"fractional number", parseJobsErr, `{"jobs": [{"job_id": 1, "job_state": "PENDING", "priority": 1.5}]}`, "not an integer"},
		{"negative count", parseJobsErr, `{"jobs": [{"job_id": 1, "job_state": "PENDING", "node_count": {"set": true, "infinite": false, "number": -1}}]}`, "node_count"},
		{"no job_state", parseJobsErr, `{"jobs": [{"job_id": 1}]}`, "job 1: no job_state"},
		{"job_state object", parseJobsErr, `{"jobs": [{"job_id": 1, "job_state": {"x": 1}}]}`, "neither a string nor an array"},
		{"bad tres", parseJobsErr, `{"jobs": [{"job_id": 7, "job_state": "PENDING", "tres_req_str": "cpu"}]}`, "job 7: tres_req_str"},
		{"bad gres", parseNodesErr, `{"nodes": [{"name": "n1", "state": "idle", "gres": "gpu:a100:x"}]}`, "node n1: gres"},
		{"nameless node", parseNodesErr, `{"nodes": [{"cpus": 8}]}`, "no name"},
		{"node state only flags", parseNodesErr, `{"nodes": [{"name": "n1", "state": ["DRAIN"]}]}`, "no base state"},
		{"sinfo of 23.02 on", parseNodesErr, `{"sinfo": [{"nodes": {"nodes": ["n1"]}}], "errors": []}`, "read scontrol show nodes --json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.parse([]byte(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func parseNodesErr(b []byte) error { _, err := ParseNodes(b); return err }
func parseJobsErr(b []byte) error  { _, err := ParseQueue(b, AllFields); return err }

func TestParseJSONReadsEveryField(t *testing.T) {
	jobs, err := ParseQueue(fixture(t, "squeue-22.05-testbed-mixed.json"), AllFields)
	if err != nil {
		t.Fatal(err)
	}
	j := jobs[3] // carol's --gres=gpu:3 job in a100-spot: typed in alloc, untyped in req
	if j.ID != 4 || j.User != "carol" || j.Account != "proj-c" || j.Partition != "a100-spot" || j.QOS != "normal" ||
		j.State != "RUNNING" || j.StateReason != "None" || !j.Requeue || j.NodeCount != 1 || j.Nodes != "a100-spot-1" ||
		j.Priority != 11000 || j.TRESPerNode != "gres:gpu:3" || j.TRESPerJob != "" {
		t.Fatalf("job 4 read as %+v", j)
	}
	if !j.Submit.Equal(time.Unix(1795340225, 0)) || !j.Start.Equal(time.Unix(1795340225, 0)) {
		t.Fatalf("job 4 times: submit %v start %v", j.Submit, j.Start)
	}
	if j.TRESReq.GPUs("") != 3 || j.TRESReq.GPUs("a100") != 0 || j.TRESAlloc.GPUs("a100") != 3 || j.TRESAlloc["mem"] != 1000 {
		t.Fatalf("job 4 TRES: req %v alloc %v", j.TRESReq, j.TRESAlloc)
	}
	if !j.Running() || j.Pending() {
		t.Fatal("job 4 is running")
	}
	gpus, err := j.GPURequest()
	if err != nil || gpus.Sum(gpureq.PerNode) != 3 {
		t.Fatalf("job 4 GPU request %v, %v", gpus, err)
	}

	pending := jobs[4] // waits for two whole a100 nodes
	if !pending.Pending() || pending.Running() || pending.StateReason != "Resources" || len(pending.TRESAlloc) != 0 ||
		pending.Nodes != "" || pending.NodeCount != 2 || pending.TRESReq.GPUs("a100") != 8 {
		t.Fatalf("pending job read as %+v", pending)
	}
	if done := jobs[0]; done.Pending() || done.Running() {
		t.Fatalf("completed job counted: %+v", done)
	}

	held, err := ParseQueue(fixture(t, "squeue-22.05-testbed-held.json"), AllFields)
	if err != nil || len(held) != 2 {
		t.Fatalf("held fixture: %d jobs, %v", len(held), err)
	}
	if got := held[0].Partitions(); !held[0].Pending() || held[0].StateReason != "JobHeldUser" || !slices.Equal(got, []string{"v100", "a100-spot"}) {
		t.Fatalf("held multi-partition job read as %+v, partitions %q", held[0], got)
	}
	if !held[0].Start.IsZero() {
		t.Fatalf("start_time 0 read as %v, want the zero time", held[0].Start)
	}
}

func TestJobStates(t *testing.T) {
	for state, want := range map[string][2]bool{ // pending, running
		"PENDING": {true, false}, "REQUEUE_HOLD": {true, false}, "REQUEUED": {true, false},
		"RUNNING": {false, true}, "COMPLETING": {false, true}, "CONFIGURING": {false, true},
		"SUSPENDED": {false, false}, "COMPLETED": {false, false}, "CANCELLED": {false, false},
	} {
		j := Job{State: state}
		if j.Pending() != want[0] || j.Running() != want[1] {
			t.Errorf("%s: pending %v running %v, want %v", state, j.Pending(), j.Running(), want)
		}
	}
}

func TestSlurmctldOnDiskReadsTheBinarysVersion(t *testing.T) {
	for _, tc := range []struct{ out, want, err string }{
		{"slurm 26.05.5\n", "26.05.5", ""},
		{"slurm-wlm 24.11.5\n", "24.11.5", ""},
		{"Usage: slurmctld [OPTIONS]\n", "", "not a Slurm version"},
	} {
		r := &replayRunner{t: t, outputs: map[string][]byte{"slurmctld -V": []byte(tc.out)}}
		got, err := Client{Runner: r}.SlurmctldOnDisk(context.Background())
		if got != tc.want || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("slurmctld -V printing %q: %q, %v; want %q, error containing %q", tc.out, got, err, tc.want, tc.err)
		}
	}
}
