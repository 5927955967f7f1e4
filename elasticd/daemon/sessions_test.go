package daemon

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/elasticd/agent"
	"github.com/slurmbridge/slurmbridge/elasticd/api"
)

// testSession is an agent's side of a session, made by hand (the agent's own is HTTPPoster).
type testSession struct {
	id  string
	key []byte
}

// setUpSession posts a set-up with the credential "cred:UID:HOST" (auth) made for madeFor
// ("": the set-up's own payload) and derives the key from the answer.
func setUpSession(t *testing.T, h http.Handler, auth, madeFor string, publicKey []byte) (testSession, *httptest.ResponseRecorder) {
	t.Helper()
	priv, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if publicKey == nil {
		publicKey = priv.PublicKey().Bytes()
	}
	body, _ := json.Marshal(api.SessionRequest{Node: "a100-1", PublicKey: publicKey})
	if madeFor == "" {
		madeFor = api.SessionPayload(body)
	}
	req := httptest.NewRequest(http.MethodPost, api.SignalsSessionPath, bytes.NewReader(body))
	req.Header.Set("Authorization", "MUNGE "+auth+":"+madeFor)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		return testSession{}, rec
	}
	var a api.SessionAnswer
	if err := json.Unmarshal(rec.Body.Bytes(), &a); err != nil {
		t.Fatal(err)
	}
	peer, err := ecdh.X25519().NewPublicKey(a.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	shared, err := priv.ECDH(peer)
	if err != nil {
		t.Fatal(err)
	}
	key, err := api.SessionKey(shared, publicKey, a.PublicKey, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if a.ExpiresInSeconds <= 0 {
		t.Fatalf("session answer %+v", a)
	}
	return testSession{id: a.ID, key: key}, rec
}

// postInSession posts rep in s with seq; tamper, if any, changes the MAC.
func postInSession(h http.Handler, s testSession, seq uint64, rep api.SignalReport, tamper func([]byte)) *httptest.ResponseRecorder {
	body, _ := json.Marshal(rep)
	mac := api.ReportMAC(s.key, s.id, seq, body)
	if tamper != nil {
		tamper(mac)
	}
	req := httptest.NewRequest(http.MethodPost, api.SignalsPath, bytes.NewReader(body))
	req.Header.Set("Authorization", api.SessionAuthorization(s.id, seq, mac))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// A session is set up only with a credential of root or the agents' user made for exactly its
// request, and its reports are taken only with a good MAC, a sequence number above the last,
// from a session elasticd holds, and for nodes of the host whose munged made the set-up's
// credential. A refused report stores nothing; no report in a session costs a decode.
func TestSignalSessions(t *testing.T) {
	otherBody, _ := json.Marshal(api.SessionRequest{Node: "a100-1", PublicKey: make([]byte, 32)})
	for _, tc := range []struct {
		name string
		// the set-up: its credential "cred:UID:HOST", what it was made for ("": the set-up's
		// payload), its public key (nil: a fresh one), and the answer wanted
		setUp, madeFor string
		publicKey      []byte
		setUpCode      int
		setUpWant      string
		// the reports: the node they name (""; a100-1), their sequence numbers, and, for the
		// last: a MAC tampered with, another session id, the clock moved first
		node    string
		seqs    []uint64
		tamper  func([]byte)
		id      string
		advance time.Duration
		// the last report's answer, and the samples stored after all of them
		code   int
		want   string
		stored int
	}{
		{name: "root's session, a good report", setUp: "cred:0:10.0.0.1", seqs: []uint64{1}, code: http.StatusOK, stored: 1},
		{name: "the agents' user, from the NodeHostname's address", setUp: "cred:" + strconv.Itoa(slurmUID) + ":10.0.0.2", seqs: []uint64{1, 2, 7}, code: http.StatusOK, stored: 1},
		{name: "a replayed sequence number", setUp: "cred:0:10.0.0.1", seqs: []uint64{1, 2, 2}, code: http.StatusUnauthorized, want: "not above the session's last, 2", stored: 1},
		{name: "an older sequence number", setUp: "cred:0:10.0.0.1", seqs: []uint64{5, 3}, code: http.StatusUnauthorized, want: "replayed or reordered", stored: 1},
		{name: "a bad MAC", setUp: "cred:0:10.0.0.1", seqs: []uint64{1}, tamper: func(m []byte) { m[0] ^= 1 }, code: http.StatusUnauthorized, want: "MAC does not verify"},
		{name: "an unknown session", setUp: "cred:0:10.0.0.1", seqs: []uint64{1}, id: "NOSUCHSESSIONIDXXXXXXXXXXX", code: http.StatusUnauthorized, want: api.SessionUnknown},
		{name: "an expired session", setUp: "cred:0:10.0.0.1", seqs: []uint64{1}, advance: DefaultSessionTTL, code: http.StatusUnauthorized, want: api.SessionUnknown},
		{name: "a session of node a100-1 naming a100-2", setUp: "cred:0:10.0.0.1", node: "a100-2", seqs: []uint64{1}, code: http.StatusForbidden, want: "encoded on 10.0.0.1, which is not node a100-2's"},
		{name: "a session of node a100-1 naming both", setUp: "cred:0:10.0.0.1", node: "a100-1,a100-2", seqs: []uint64{1}, code: http.StatusForbidden, want: "not node a100-2's"},
		{name: "a session of node a100-2 for a100-1's job", setUp: "cred:0:10.0.0.3", node: "a100-1", seqs: []uint64{1}, code: http.StatusForbidden, want: "encoded on 10.0.0.3, which is not node a100-1's"},
		{name: "a user's credential sets up none", setUp: "cred:1001:10.0.0.1", setUpCode: http.StatusForbidden, setUpWant: "uid 1001 may not report GPU signals"},
		{name: "a credential over another key sets up none", setUp: "cred:0:10.0.0.1", madeFor: api.SessionPayload(otherBody), setUpCode: http.StatusUnauthorized, setUpWant: "was made for"},
		{name: "a report's credential sets up none", setUp: "cred:0:10.0.0.1", madeFor: api.SignalsPayload(otherBody), setUpCode: http.StatusUnauthorized, setUpWant: "was made for"},
		{name: "a key that is no X25519 key", setUp: "cred:0:10.0.0.1", publicKey: []byte("short"), setUpCode: http.StatusBadRequest, setUpWant: "public key"},
		{name: "a low-order key", setUp: "cred:0:10.0.0.1", publicKey: make([]byte, 32), setUpCode: http.StatusBadRequest, setUpWant: "public key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 1, 2)
			h.slurm.moreNodes = []slurm.Node{{Name: "a100-2", Partitions: []string{"a100"}, State: "idle", Address: "10.0.0.3"}}
			h.cycle()
			hd, m := signalsHandler(h)
			s, rec := setUpSession(t, hd, tc.setUp, tc.madeFor, tc.publicKey)
			if tc.setUpCode == 0 {
				tc.setUpCode = http.StatusOK
			}
			if rec.Code != tc.setUpCode || !strings.Contains(rec.Body.String(), tc.setUpWant) {
				t.Fatalf("set-up: %d %s, want %d with %q", rec.Code, rec.Body, tc.setUpCode, tc.setUpWant)
			}
			if m.decodes != 1 {
				t.Fatalf("the set-up cost %d decodes, want 1", m.decodes)
			}
			for i, seq := range tc.seqs {
				node := tc.node
				if node == "" {
					node = "a100-1"
				}
				rep := api.SignalReport{Node: node, Jobs: []api.JobSignals{{JobID: mainID, Samples: []api.GPUSample{sampleAt(0, h.now, "hw_thermal_slowdown")}}}}
				var tamper func([]byte)
				sess := s
				if last := i == len(tc.seqs)-1; last {
					tamper = tc.tamper
					if tc.id != "" {
						sess.id = tc.id
					}
					h.now = h.now.Add(tc.advance)
					rep.Jobs[0].Samples[0].Time = h.now
				}
				rec := postInSession(hd, sess, seq, rep, tamper)
				if i < len(tc.seqs)-1 {
					if rec.Code != http.StatusOK {
						t.Fatalf("report %d: %d %s", i, rec.Code, rec.Body)
					}
					continue
				}
				if rec.Code != tc.code || !strings.Contains(rec.Body.String(), tc.want) {
					t.Fatalf("report %d: %d %s, want %d with %q", i, rec.Code, rec.Body, tc.code, tc.want)
				}
				if rec.Code == http.StatusUnauthorized && rec.Header().Get("WWW-Authenticate") != api.SessionScheme {
					t.Fatalf("a refused session report without WWW-Authenticate: Session")
				}
			}
			if n := h.d.signalCount(); n != tc.stored {
				t.Fatalf("%d samples stored, want %d", n, tc.stored)
			}
			if m.decodes != 1 {
				t.Fatalf("%d decodes for a set-up and %d reports, want 1", m.decodes, len(tc.seqs))
			}
		})
	}
}

// Sessions are bounded: at the bound a set-up evicts the oldest, whose agent is told to set up
// again; the others go on.
func TestSessionsAtTheirBoundEvictTheOldest(t *testing.T) {
	h := newHarness(t, 1, 2)
	h.cycle()
	hd, _ := signalsHandlerWith(h, AgentAuth{MaxSessions: 3})
	var sessions []testSession
	for range 5 {
		s, rec := setUpSession(t, hd, "cred:0:10.0.0.1", "", nil)
		if rec.Code != http.StatusOK {
			t.Fatalf("set-up: %d %s", rec.Code, rec.Body)
		}
		sessions = append(sessions, s)
	}
	rep := api.SignalReport{Node: "a100-1"}
	for i, s := range sessions {
		rec := postInSession(hd, s, 1, rep, nil)
		evicted := i < 2
		if evicted && (rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Body.String(), api.SessionUnknown)) ||
			!evicted && rec.Code != http.StatusOK {
			t.Errorf("session %d (evicted %v): %d %s", i, evicted, rec.Code, rec.Body)
		}
	}
}

// A session's report checks the nodes it names once, then again when the nodes' addresses
// change: a host that is no longer the node's is refused.
func TestSessionOriginIsCheckedAgainWhenAddressesChange(t *testing.T) {
	h := newHarness(t, 1, 2)
	h.cycle()
	lookups := 0
	hd, _ := signalsHandlerWith(h, AgentAuth{LookupHost: func(_ context.Context, host string) ([]string, error) {
		lookups++
		if host == "gpu-host-1" {
			return []string{"10.0.0.2"}, nil
		}
		return nil, fmt.Errorf("no such host %s", host)
	}})
	s, _ := setUpSession(t, hd, "cred:0:10.0.0.2", "", nil) // gpu-host-1's address: a name to resolve
	rep := api.SignalReport{Node: "a100-1"}
	for seq := uint64(1); seq <= 3; seq++ {
		if rec := postInSession(hd, s, seq, rep, nil); rec.Code != http.StatusOK {
			t.Fatalf("report %d: %d %s", seq, rec.Code, rec.Body)
		}
	}
	if lookups != 1 {
		t.Fatalf("%d host name lookups for 3 reports of one session, want 1", lookups)
	}
	// a100-1 moves to another host: the session's next report is checked again, and refused.
	h.d.notePlacement(nil, []slurm.Node{{Name: "a100-1", Address: "10.0.0.1", Hostname: "10.0.0.1"}})
	if rec := postInSession(hd, s, 4, rep, nil); rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "encoded on 10.0.0.2") {
		t.Fatalf("after the node moved: %d %s", rec.Code, rec.Body)
	}
}

// Reports of many sessions at once, a cycle running beside them, and one report replayed by
// several senders at once: under -race a session or signal touched outside its lock fails
// this test, and only one of the racing copies is taken.
func TestSessionReportsConcurrently(t *testing.T) {
	h := newHarness(t, 1, 2)
	h.cycle()
	hd, m := signalsHandler(h)
	const agents, reports = 8, 25
	var sessions []testSession
	for range agents {
		s, rec := setUpSession(t, hd, "cred:0:10.0.0.1", "", nil)
		if rec.Code != http.StatusOK {
			t.Fatalf("set-up: %d %s", rec.Code, rec.Body)
		}
		sessions = append(sessions, s)
	}
	var wg sync.WaitGroup
	var stop atomic.Bool
	wg.Add(1)
	go func() { // cycles beside the reports (the clock stays: the handlers read it)
		defer wg.Done()
		for !stop.Load() {
			if err := h.d.Cycle(context.Background()); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	var reportsWG sync.WaitGroup
	for _, s := range sessions {
		reportsWG.Add(1)
		go func() {
			defer reportsWG.Done()
			for seq := uint64(1); seq <= reports; seq++ {
				rep := api.SignalReport{Node: "a100-1", Jobs: []api.JobSignals{{JobID: mainID, Samples: []api.GPUSample{sampleAt(int(seq%4), h.now)}}}}
				if rec := postInSession(hd, s, seq, rep, nil); rec.Code != http.StatusOK {
					t.Errorf("report %d: %d %s", seq, rec.Code, rec.Body)
					return
				}
			}
		}()
	}
	// One report of another session, sent by 8 at once: one is taken.
	racer, rec := setUpSession(t, hd, "cred:0:10.0.0.1", "", nil)
	if rec.Code != http.StatusOK {
		t.Fatalf("set-up: %d %s", rec.Code, rec.Body)
	}
	var taken atomic.Int32
	for range 8 {
		reportsWG.Add(1)
		go func() {
			defer reportsWG.Done()
			if rec := postInSession(hd, racer, 1, api.SignalReport{Node: "a100-1"}, nil); rec.Code == http.StatusOK {
				taken.Add(1)
			}
		}()
	}
	reportsWG.Wait()
	stop.Store(true)
	wg.Wait()
	if taken.Load() != 1 {
		t.Fatalf("%d copies of one report taken, want 1", taken.Load())
	}
	if m.decodes != agents+1 {
		t.Fatalf("%d decodes for %d sessions of %d reports, want %d", m.decodes, agents+1, reports, agents+1)
	}
}

// handlerTransport serves an http.Client's requests with a handler, in process.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}

// withoutSessions is h as an elasticd before sessions answers: 404 on the session path.
func withoutSessions(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == api.SignalsSessionPath {
			http.NotFound(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// N real agents (HTTPPoster) reporting M intervals cost elasticd N decodes, not N × M; against
// an elasticd without sessions they fall back to a credential per report, N × M, and every
// report is still taken either way.
func TestAgentsCostADecodePerSessionNotPerReport(t *testing.T) {
	const agents, intervals = 20, 30
	for _, tc := range []struct {
		name     string
		sessions bool
		decodes  int
	}{
		{"sessions", true, agents},
		{"an elasticd without sessions", false, agents * intervals},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 1, 2)
			h.cycle()
			hd, m := signalsHandler(h)
			if !tc.sessions {
				hd = withoutSessions(hd)
			}
			client := &http.Client{Transport: handlerTransport{hd}}
			var posters []*agent.HTTPPoster
			encode := func(_ context.Context, payload string) (string, error) { return "cred:0:10.0.0.1:" + payload, nil }
			for range agents {
				posters = append(posters, &agent.HTTPPoster{Client: client, BaseURL: "http://elasticd", Encode: encode, Log: zerolog.Nop(),
					Now: func() time.Time { return h.now }})
			}
			for iv := range intervals {
				for i, p := range posters {
					// Each agent's report its own (a GPU index of its own): the fake munged, as the
					// real one, refuses a credential it decoded before.
					rep := api.SignalReport{Node: "a100-1", Jobs: []api.JobSignals{{JobID: mainID, Samples: []api.GPUSample{sampleAt(i, h.now)}}}}
					if _, err := p.Post(context.Background(), rep); err != nil {
						t.Fatalf("interval %d, agent %d: %v", iv, i, err)
					}
				}
				h.now = h.now.Add(10 * time.Second)
			}
			if m.decodes != tc.decodes {
				t.Fatalf("%d agents × %d intervals: %d decodes, want %d", agents, intervals, m.decodes, tc.decodes)
			}
		})
	}
}

// A report's node list is bounded before any origin check: its own node named a hundred
// thousand times (which the session would have kept, and checked once per copy) and more
// distinct nodes than a host runs are refused; a duplicate is read once.
func TestReportNodeListsAreBounded(t *testing.T) {
	h := newHarness(t, 1, 2)
	h.cycle()
	lookups := 0
	hd, _ := signalsHandlerWith(h, AgentAuth{LookupHost: func(_ context.Context, host string) ([]string, error) {
		lookups++
		return []string{"10.0.0.2"}, nil
	}})
	s, _ := setUpSession(t, hd, "cred:0:10.0.0.2", "", nil)
	for i, c := range []struct {
		node string
		want int
	}{
		{strings.Repeat("a100-1,", 100_000), http.StatusBadRequest},
		{manyNodes(MaxReportNodes) + "a100-1", http.StatusBadRequest},
		{"a100-1, a100-1,a100-1", http.StatusOK},
	} {
		rec := postInSession(hd, s, uint64(i+1), api.SignalReport{Node: c.node}, nil)
		if rec.Code != c.want {
			t.Errorf("node list of %d bytes: %d %s, want %d", len(c.node), rec.Code, rec.Body, c.want)
		}
	}
	if lookups != 1 {
		t.Errorf("%d host name lookups, want 1 (the accepted report's one node)", lookups)
	}
}

// manyNodes names n distinct nodes, each followed by a comma.
func manyNodes(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "n%d,", i)
	}
	return b.String()
}
