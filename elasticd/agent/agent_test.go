package agent

import (
	"context"
	"crypto/ecdh"
	"crypto/hmac"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

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

// An agent against an elasticd without sessions (404 on the session path): each report carries a
// credential made for exactly its body, and elasticd's answer comes back.
func TestPostHTTPSignsTheBodyAndReadsTheAnswer(t *testing.T) {
	var got struct {
		auth string
		body []byte
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == api.SignalsSessionPath {
			http.NotFound(w, r)
			return
		}
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
	// The first credential was for the session elasticd does not set up.
	if len(payloads) != 2 || !strings.HasPrefix(payloads[0], "slurmbridge-elasticd-signals-session POST /v1/signals/session sha256=") ||
		payloads[1] != api.SignalsPayload(got.body) || got.auth != "MUNGE MUNGE:cred:" {
		t.Fatalf("payloads %q for body %s, Authorization %q", payloads, got.body, got.auth)
	}
	if !strings.HasPrefix(payloads[1], "slurmbridge-elasticd-signals POST /v1/signals sha256=") {
		t.Fatalf("payload %q", payloads[1])
	}
	if len(answer.Read) != 1 || answer.Read[0].JobID != 9 {
		t.Fatalf("answer %+v", answer)
	}
	// An elasticd from before answers (204) names nothing to read.
	old := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == api.SignalsSessionPath {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer old.Close()
	if answer, err := PostHTTP(old.Client(), old.URL, encode)(context.Background(), rep); err != nil || len(answer.Read) != 0 {
		t.Fatalf("204: %+v, %v", answer, err)
	}
	// elasticd's refusal comes back with its words, of a session or of a report.
	refuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "uid 1001 may not report GPU signals", http.StatusForbidden)
	}))
	defer refuse.Close()
	if _, err := PostHTTP(refuse.Client(), refuse.URL, encode)(context.Background(), rep); err == nil || !strings.Contains(err.Error(), "uid 1001 may not") {
		t.Fatalf("refused post: %v", err)
	}
}

// sessionStub is an elasticd with sessions, made of api's helpers: it checks each set-up's
// credential (the test's encode makes "cred:" + payload) and each report's MAC and sequence
// number, counts both, and can forget its sessions (a restart), refuse every session report, or
// set up none (a release before sessions).
type sessionStub struct {
	mu         sync.Mutex
	noSessions bool
	refuse     string // a 401's words for every session report
	ttl        int64
	keys       map[string][]byte
	seqs       map[string]uint64
	// setUps, mungeReports and sessionReports are the set-ups and reports taken.
	setUps, mungeReports, sessionReports int
	failures                             []string // what the stub refused that a right agent never sends
}

func (s *sessionStub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	body, _ := io.ReadAll(r.Body)
	authz := r.Header.Get("Authorization")
	switch {
	case r.URL.Path == api.SignalsSessionPath && s.noSessions:
		http.NotFound(w, r)
	case r.URL.Path == api.SignalsSessionPath:
		var req api.SessionRequest
		peer, err := ecdh.X25519().NewPublicKey(func() []byte { _ = json.Unmarshal(body, &req); return req.PublicKey }())
		if authz != "MUNGE cred:"+api.SessionPayload(body) || err != nil {
			s.failures = append(s.failures, "set-up "+authz)
			http.Error(w, "bad set-up", http.StatusUnauthorized)
			return
		}
		priv, _ := ecdh.X25519().GenerateKey(rand.Reader)
		shared, _ := priv.ECDH(peer)
		id := rand.Text()
		key, _ := api.SessionKey(shared, req.PublicKey, priv.PublicKey().Bytes(), id)
		s.keys[id] = key
		s.setUps++
		_ = json.NewEncoder(w).Encode(api.SessionAnswer{ID: id, PublicKey: priv.PublicKey().Bytes(), ExpiresInSeconds: s.ttl})
	case strings.HasPrefix(authz, "MUNGE "):
		if authz != "MUNGE cred:"+api.SignalsPayload(body) {
			s.failures = append(s.failures, "report "+authz)
		}
		s.mungeReports++
		_ = json.NewEncoder(w).Encode(api.SignalAnswer{})
	default:
		id, seq, mac, ok := api.ParseSessionAuthorization(authz)
		key := s.keys[id]
		switch {
		case !ok:
			s.failures = append(s.failures, "malformed "+authz)
			http.Error(w, "malformed", http.StatusUnauthorized)
		case key == nil:
			http.Error(w, "signal report refused: "+api.SessionUnknown, http.StatusUnauthorized)
		case s.refuse != "":
			http.Error(w, s.refuse, http.StatusUnauthorized)
		case !hmac.Equal(mac, api.ReportMAC(key, id, seq, body)) || seq <= s.seqs[id]:
			s.failures = append(s.failures, fmt.Sprintf("MAC or sequence %d after %d", seq, s.seqs[id]))
			http.Error(w, "bad MAC or sequence", http.StatusUnauthorized)
		default:
			s.seqs[id] = seq
			s.sessionReports++
			_ = json.NewEncoder(w).Encode(api.SignalAnswer{})
		}
	}
}

// The agent sets up a session once and signs each report in it; it renews the session before it
// expires, sets up a new one at once (and resends) when elasticd no longer holds it, and signs
// each report with MUNGE against an elasticd without sessions, asking again for one later.
func TestPosterSessions(t *testing.T) {
	type step struct {
		after   time.Duration        // the clock moves this much first
		change  func(s *sessionStub) // elasticd changes first
		wantErr string               // "": the report is taken
	}
	forget := func(s *sessionStub) { clear(s.keys) }
	upgrade := func(s *sessionStub) { s.noSessions = false }
	repeat := func(n int, st step) []step { return slices.Repeat([]step{st}, n) }
	for _, tc := range []struct {
		name       string
		noSessions bool
		steps      []step
		// set-ups and reports elasticd took, and the credentials the agent made
		setUps, mungeReports, sessionReports, encodes int
	}{
		{name: "one set-up, then a MAC per report", steps: repeat(6, step{after: 10 * time.Second}),
			setUps: 1, sessionReports: 6, encodes: 1},
		{name: "renewed before it expires", steps: []step{{}, {after: 70 * time.Second}, {after: 20 * time.Second}, {after: 10 * time.Second}},
			setUps: 2, sessionReports: 4, encodes: 2},
		{name: "elasticd restarted: a new session, the report resent once", steps: []step{{}, {}, {change: forget}, {}},
			setUps: 2, sessionReports: 4, encodes: 2},
		{name: "a session report refused: the error, and the next report sets up anew",
			steps:  []step{{}, {change: func(s *sessionStub) { s.refuse = "the report's MAC does not verify" }, wantErr: "MAC does not verify"}, {change: func(s *sessionStub) { s.refuse = "" }}},
			setUps: 2, sessionReports: 2, encodes: 2},
		{name: "an elasticd without sessions: MUNGE per report, a session once it has them", noSessions: true,
			steps:  append(repeat(3, step{after: 10 * time.Second}), step{after: legacyRetry, change: upgrade}, step{}, step{}),
			setUps: 1, mungeReports: 3, sessionReports: 3, encodes: 1 + 3 + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stub := &sessionStub{noSessions: tc.noSessions, ttl: 100, keys: map[string][]byte{}, seqs: map[string]uint64{}}
			srv := httptest.NewServer(stub)
			defer srv.Close()
			encodes := 0
			now := time.Unix(1_800_000_000, 0)
			p := &HTTPPoster{Client: srv.Client(), BaseURL: srv.URL, Log: zerolog.Nop(), Now: func() time.Time { return now },
				Encode: func(_ context.Context, payload string) (string, error) { encodes++; return "cred:" + payload, nil }}
			for i, st := range tc.steps {
				now = now.Add(st.after)
				if st.change != nil {
					stub.mu.Lock()
					st.change(stub)
					stub.mu.Unlock()
				}
				_, err := p.Post(context.Background(), api.SignalReport{Node: "a100-1", Jobs: []api.JobSignals{{JobID: uint32(i)}}})
				if (err != nil) != (st.wantErr != "") || err != nil && !strings.Contains(err.Error(), st.wantErr) {
					t.Fatalf("report %d: %v, want error %q", i, err, st.wantErr)
				}
			}
			if stub.setUps != tc.setUps || stub.mungeReports != tc.mungeReports || stub.sessionReports != tc.sessionReports || encodes != tc.encodes || len(stub.failures) > 0 {
				t.Fatalf("set-ups %d, MUNGE reports %d, session reports %d, credentials %d, refused %q; want %d, %d, %d, %d, none",
					stub.setUps, stub.mungeReports, stub.sessionReports, encodes, stub.failures, tc.setUps, tc.mungeReports, tc.sessionReports, tc.encodes)
			}
		})
	}
}
