package agent

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/elasticd/api"
)

type fakeReader struct {
	available bool
	asked     [][]int
}

func (r *fakeReader) Available() bool { return r.available }

func (r *fakeReader) Read(indices []int) ([]api.GPUSample, error) {
	r.asked = append(r.asked, indices)
	var out []api.GPUSample
	for _, i := range indices {
		out = append(out, api.GPUSample{Index: i})
	}
	return out, nil
}

// queue answers RunningOn as 22.05's squeue --json does: with every job, whatever the filter.
type queue struct {
	jobs   []slurm.Job
	extras map[uint32]slurm.JobExtra
	asked  *[][]string
}

func (q queue) RunningOn(_ context.Context, nodes []string) ([]slurm.Job, map[uint32]slurm.JobExtra, error) {
	if q.asked != nil {
		*q.asked = append(*q.asked, nodes)
	}
	return q.jobs, q.extras, nil
}

func TestAgentReadsOnlyTheGPUsOfItsNodesJobs(t *testing.T) {
	q := queue{
		jobs: []slurm.Job{
			{ID: 1, State: "RUNNING", NodeCount: 1, Nodes: "a100-1"},
			{ID: 2, State: "RUNNING", NodeCount: 1, Nodes: "a100-9"}, // another host's node
			{ID: 3, State: "PENDING"},
			{ID: 4, State: "RUNNING", NodeCount: 1, Nodes: "cpu-1"}, // no GPUs
		},
		extras: map[uint32]slurm.JobExtra{
			1: {GresDetail: []string{"gpu:a100:2(IDX:1-2)"}},
			2: {GresDetail: []string{"gpu:a100:1(IDX:0)"}},
			4: {GresDetail: []string{""}},
		},
	}
	var asked [][]string
	q.asked = &asked
	var posted []api.SignalReport
	post := func(_ context.Context, r api.SignalReport) error { posted = append(posted, r); return nil }
	r := &fakeReader{available: true}
	a := &Agent{Nodes: []string{"a100-1", "cpu-1"}, Slurm: q, Reader: r, Post: post, Log: zerolog.Nop()}
	if err := a.Cycle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(asked) != 1 || !slices.Equal(asked[0], []string{"a100-1", "cpu-1"}) {
		t.Fatalf("the queue was read for nodes %v, want the agent's own", asked)
	}
	if len(r.asked) != 1 || !slices.Equal(r.asked[0], []int{1, 2}) {
		t.Fatalf("NVML asked for %v, want only job 1's GPUs 1 and 2", r.asked)
	}
	if len(posted) != 1 || len(posted[0].Jobs) != 1 || posted[0].Jobs[0].JobID != 1 || len(posted[0].Jobs[0].Samples) != 2 {
		t.Fatalf("posted %+v", posted)
	}

	// Without NVML the agent neither reads nor posts (it said so once, at Open).
	r, posted = &fakeReader{}, nil
	a.Reader = r
	if err := a.Cycle(context.Background()); err != nil || len(r.asked) != 0 || len(posted) != 0 {
		t.Fatalf("without NVML: err %v, asked %v, posted %v", err, r.asked, posted)
	}
}

// A report carries a credential made for exactly its body.
func TestPostHTTPSignsTheBody(t *testing.T) {
	var got struct {
		auth string
		body []byte
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.auth = r.Header.Get("Authorization")
		got.body, _ = io.ReadAll(r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	var payloads []string
	encode := func(_ context.Context, payload string) (string, error) {
		payloads = append(payloads, payload)
		return "MUNGE:cred:", nil
	}
	rep := api.SignalReport{Node: "a100-1", Jobs: []api.JobSignals{{JobID: 7, Samples: []api.GPUSample{{Index: 1}}}}}
	if err := PostHTTP(srv.Client(), srv.URL, encode)(context.Background(), rep); err != nil {
		t.Fatal(err)
	}
	if len(payloads) != 1 || payloads[0] != api.SignalsPayload(got.body) || got.auth != "MUNGE MUNGE:cred:" {
		t.Fatalf("payloads %q for body %s, Authorization %q", payloads, got.body, got.auth)
	}
	if !strings.HasPrefix(payloads[0], "slurmbridge-elasticd-signals POST /v1/signals sha256=") {
		t.Fatalf("payload %q", payloads[0])
	}
	// elasticd's refusal comes back with its words.
	refuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "uid 1001 may not report GPU signals", http.StatusForbidden)
	}))
	defer refuse.Close()
	if err := PostHTTP(refuse.Client(), refuse.URL, encode)(context.Background(), rep); err == nil || !strings.Contains(err.Error(), "uid 1001 may not") {
		t.Fatalf("refused post: %v", err)
	}
}
