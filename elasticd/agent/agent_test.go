package agent

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"

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

// elasticdStub records the reports and answers each with the next of its answers.
type elasticdStub struct {
	answers []api.SignalAnswer
	posted  []api.SignalReport
}

func (e *elasticdStub) post(_ context.Context, r api.SignalReport) (api.SignalAnswer, error) {
	e.posted = append(e.posted, r)
	if len(e.answers) == 0 {
		return api.SignalAnswer{}, nil
	}
	a := e.answers[0]
	e.answers = e.answers[1:]
	return a, nil
}

// The agent reads the GPUs elasticd's last answer named, and nothing else: its first report is
// empty; with nothing to read it reports only every IdleEvery cycles.
func TestAgentReadsTheGPUsElasticdNames(t *testing.T) {
	e := &elasticdStub{answers: []api.SignalAnswer{
		{Read: []api.JobGPUs{{JobID: 1, GPUs: []int{1, 2}}}},
		{}, // job 1 ended
	}}
	r := &fakeReader{available: true}
	a := &Agent{Nodes: []string{"a100-1", "cpu-1"}, Reader: r, Post: e.post, IdleEvery: 3, Log: zerolog.Nop()}
	cycle := func() {
		t.Helper()
		if err := a.Cycle(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	cycle()
	if len(e.posted) != 1 || e.posted[0].Node != "a100-1,cpu-1" || len(e.posted[0].Jobs) != 0 || len(r.asked) != 0 {
		t.Fatalf("first cycle: posted %+v, NVML asked %v; want one empty report for both nodes", e.posted, r.asked)
	}
	cycle()
	if len(r.asked) != 1 || !slices.Equal(r.asked[0], []int{1, 2}) {
		t.Fatalf("NVML asked for %v, want job 1's GPUs 1 and 2", r.asked)
	}
	if len(e.posted) != 2 || len(e.posted[1].Jobs) != 1 || e.posted[1].Jobs[0].JobID != 1 || len(e.posted[1].Jobs[0].Samples) != 2 {
		t.Fatalf("second report %+v", e.posted[1:])
	}
	// Nothing to read: the next two cycles are quiet, the third reports (empty).
	cycle()
	cycle()
	if len(e.posted) != 2 {
		t.Fatalf("%d reports with nothing to read, want none before the IdleEvery-th cycle", len(e.posted)-2)
	}
	cycle()
	if len(e.posted) != 3 || len(e.posted[2].Jobs) != 0 || len(r.asked) != 1 {
		t.Fatalf("the idle report: %+v, NVML asked %v", e.posted[2:], r.asked)
	}

	// Without NVML the agent neither reads nor posts (it said so once, at Open).
	r, e.posted = &fakeReader{}, nil
	a.Reader = r
	if err := a.Cycle(context.Background()); err != nil || len(r.asked) != 0 || len(e.posted) != 0 {
		t.Fatalf("without NVML: err %v, asked %v, posted %v", err, r.asked, e.posted)
	}
}

// Whoever answers, the agent reads at most 64 GPUs, each once, with indices a node can have.
func TestAgentBoundsWhatAnAnswerNames(t *testing.T) {
	var many []api.JobGPUs
	for i := range 200 {
		many = append(many, api.JobGPUs{JobID: uint32(i), GPUs: []int{i, -1, 1 << 20}})
	}
	got := bounded(append([]api.JobGPUs{{JobID: 7, GPUs: []int{3, 3, 5}}}, many...))
	total := 0
	for _, j := range got {
		total += len(j.GPUs)
		for _, i := range j.GPUs {
			if i < 0 || i >= maxGPUIndex {
				t.Fatalf("index %d kept", i)
			}
		}
	}
	if len(got) > maxGPUIndex || total > maxGPUIndex || !slices.Equal(got[0].GPUs, []int{3, 5}) {
		t.Fatalf("bounded to %d jobs, %d GPUs, first %+v", len(got), total, got[0])
	}
}

// A report carries a credential made for exactly its body, and elasticd's answer comes back.
func TestPostHTTPSignsTheBodyAndReadsTheAnswer(t *testing.T) {
	var got struct {
		auth string
		body []byte
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.auth = r.Header.Get("Authorization")
		got.body, _ = io.ReadAll(r.Body)
		_ = json.NewEncoder(w).Encode(api.SignalAnswer{Read: []api.JobGPUs{{JobID: 9, GPUs: []int{0}}}})
	}))
	defer srv.Close()
	var payloads []string
	encode := func(_ context.Context, payload string) (string, error) {
		payloads = append(payloads, payload)
		return "MUNGE:cred:", nil
	}
	rep := api.SignalReport{Node: "a100-1", Jobs: []api.JobSignals{{JobID: 7, Samples: []api.GPUSample{{Index: 1}}}}}
	answer, err := PostHTTP(srv.Client(), srv.URL, encode)(context.Background(), rep)
	if err != nil {
		t.Fatal(err)
	}
	if len(payloads) != 1 || payloads[0] != api.SignalsPayload(got.body) || got.auth != "MUNGE MUNGE:cred:" {
		t.Fatalf("payloads %q for body %s, Authorization %q", payloads, got.body, got.auth)
	}
	if !strings.HasPrefix(payloads[0], "slurmbridge-elasticd-signals POST /v1/signals sha256=") {
		t.Fatalf("payload %q", payloads[0])
	}
	if len(answer.Read) != 1 || answer.Read[0].JobID != 9 {
		t.Fatalf("answer %+v", answer)
	}
	// An elasticd from before answers (204) names nothing to read.
	old := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer old.Close()
	if answer, err := PostHTTP(old.Client(), old.URL, encode)(context.Background(), rep); err != nil || len(answer.Read) != 0 {
		t.Fatalf("204: %+v, %v", answer, err)
	}
	// elasticd's refusal comes back with its words.
	refuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "uid 1001 may not report GPU signals", http.StatusForbidden)
	}))
	defer refuse.Close()
	if _, err := PostHTTP(refuse.Client(), refuse.URL, encode)(context.Background(), rep); err == nil || !strings.Contains(err.Error(), "uid 1001 may not") {
		t.Fatalf("refused post: %v", err)
	}
}
