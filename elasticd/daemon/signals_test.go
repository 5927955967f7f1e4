package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/auth"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/elasticd/api"
)

// fakeMunge stands in for munged: "cred:UID:HOST:PAYLOAD" decodes to that uid, encoding host
// and payload, once (munged refuses a replay).
type fakeMunge struct {
	mu      sync.Mutex
	used    map[string]bool
	decodes int // credentials decoded or refused: the unmunge runs munged would have made
}

func (m *fakeMunge) decode(_ context.Context, cred string) (slurm.MungeIdentity, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.decodes++
	if m.used[cred] {
		return slurm.MungeIdentity{}, errors.New("unmunge: exit 17: Replayed credential")
	}
	m.used[cred] = true
	parts := strings.SplitN(strings.TrimPrefix(cred, "cred:"), ":", 3)
	if len(parts) != 3 {
		return slurm.MungeIdentity{}, errors.New("unmunge: exit 6: Invalid credential format")
	}
	uid, err := strconv.ParseUint(parts[0], 10, 32)
	if err != nil {
		return slurm.MungeIdentity{}, err
	}
	return slurm.MungeIdentity{UID: uint32(uid), EncodeHost: parts[1], Payload: parts[2]}, nil
}

const slurmUID = 64030

func signalsHandler(h *harness) (http.Handler, *fakeMunge) {
	return signalsHandlerWith(h, AgentAuth{})
}

// signalsHandlerWith is signalsHandler with a's session settings.
func signalsHandlerWith(h *harness, a AgentAuth) (http.Handler, *fakeMunge) {
	m := &fakeMunge{used: map[string]bool{}}
	authn := auth.Munge{API: PersonAPI, Decode: m.decode,
		LookupUser: func(uid uint32) (string, error) {
			return map[uint32]string{1001: "alice", 1002: "bob", 1003: "carol"}[uid], nil
		},
		Bounds: auth.NewBounds(4, 4, time.Second, time.Second)}
	lookup := func(_ context.Context, host string) ([]string, error) {
		if host == "gpu-host-1" {
			return []string{"10.0.0.2"}, nil // the node's second address
		}
		return nil, fmt.Errorf("no such host %s", host)
	}
	a.Identity, a.UIDs, a.CheckOrigin = authn.Identity, []uint32{slurmUID}, true
	if a.LookupHost == nil {
		a.LookupHost = lookup
	}
	return h.d.Handler(Access{Callers: authn, Agents: &a}), m
}

func sampleAt(index int, at time.Time, reasons ...string) api.GPUSample {
	mhz, max := uint32(846), uint32(1410)
	return api.GPUSample{Index: index, Time: at, SMClockMHz: &mhz, MaxSMClockMHz: &max, ThrottleReasons: reasons}
}

// post sends rep with a credential "cred:UID:HOST:<payload of signedBody>" (signedBody nil:
// rep's own body; auth "": none at all).
func post(t *testing.T, h http.Handler, rep api.SignalReport, auth string, signedBody []byte) *httptest.ResponseRecorder {
	t.Helper()
	body, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	if signedBody == nil {
		signedBody = body
	}
	return postPayload(h, body, auth, api.SignalsPayload(signedBody))
}

// postMadeFor sends rep with a credential "cred:UID:HOST:<madeFor>": one made for something
// other than a signal report.
func postMadeFor(t *testing.T, h http.Handler, rep api.SignalReport, auth, madeFor string) *httptest.ResponseRecorder {
	t.Helper()
	body, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	return postPayload(h, body, auth, madeFor)
}

// postPayload posts body to the signals endpoint, with the credential auth made for payload (auth
// "": no Authorization header).
func postPayload(h http.Handler, body []byte, auth, payload string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, api.SignalsPath, bytes.NewReader(body))
	if auth != "" {
		req.Header.Set("Authorization", "MUNGE "+auth+":"+payload)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// Every refused report changes nothing: no sample of the followed main job is stored.
func TestForgedSignalReportsAreRefused(t *testing.T) {
	h := newHarness(t, 1, 2)
	h.cycle()
	hd, _ := signalsHandler(h)
	rep := api.SignalReport{Node: "a100-1", Jobs: []api.JobSignals{{JobID: mainID, Samples: []api.GPUSample{sampleAt(0, h.now, "hw_thermal_slowdown")}}}}
	other := api.SignalReport{Node: "a100-1", Jobs: []api.JobSignals{{JobID: mainID, Samples: []api.GPUSample{sampleAt(1, h.now)}}}}
	otherBody, _ := json.Marshal(other)
	// A person's credential for the same request: made for the API, not for a signal report.
	personRequest := api.RequestPayload(http.MethodPost, api.SignalsPath)
	for _, tc := range []struct {
		name       string
		rep        api.SignalReport
		auth       string
		signedBody []byte
		// madeFor is what the credential was made for, where it is not the report's signals
		// payload (of signedBody, or of its own body).
		madeFor string
		code    int
		want    string
	}{
		{"no credential", rep, "", nil, "", http.StatusUnauthorized, "Authorization: MUNGE"},
		{"a user's credential", rep, "cred:1001:10.0.0.1", nil, "", http.StatusForbidden, "uid 1001 may not report GPU signals"},
		{"a credential over another body", rep, "cred:0:10.0.0.1", otherBody, "", http.StatusUnauthorized, "was made for"},
		{"a credential of a person's request", rep, "cred:0:10.0.0.1", nil, personRequest, http.StatusUnauthorized, "made for \"" + personRequest + "\", not for"},
		{"encoded on another host", rep, "cred:0:10.0.0.9", nil, "", http.StatusForbidden, "encoded on 10.0.0.9, which is not node a100-1's"},
		{"a node elasticd does not know", api.SignalReport{Node: "a100-7", Jobs: rep.Jobs}, "cred:0:10.0.0.1", nil, "", http.StatusForbidden, "a100-7 is not among"},
		{"no node", api.SignalReport{Jobs: rep.Jobs}, "cred:0:10.0.0.1", nil, "", http.StatusBadRequest, "names no node"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rec *httptest.ResponseRecorder
			if tc.madeFor != "" {
				rec = postMadeFor(t, hd, tc.rep, tc.auth, tc.madeFor)
			} else {
				rec = post(t, hd, tc.rep, tc.auth, tc.signedBody)
			}
			if rec.Code != tc.code || !strings.Contains(rec.Body.String(), tc.want) {
				t.Fatalf("answered %d %q, want %d with %q", rec.Code, rec.Body, tc.code, tc.want)
			}
			if n := h.d.signalCount(); n != 0 {
				t.Fatalf("%d samples stored after a refused report", n)
			}
		})
	}
	// The same report from the node's agent (SlurmUser, encoded on the node's NodeHostname's
	// address) is taken; its credential replayed is refused.
	auth := "cred:" + strconv.Itoa(slurmUID) + ":10.0.0.2"
	if rec := post(t, hd, rep, auth, nil); rec.Code != http.StatusOK || h.d.signalCount() != 1 {
		t.Fatalf("the agent's report: %d %s, %d samples", rec.Code, rec.Body, h.d.signalCount())
	}
	if rec := post(t, hd, other, auth, nil); rec.Code != http.StatusOK {
		t.Fatalf("a second report with a fresh credential: %d %s", rec.Code, rec.Body)
	}
	if rec := post(t, hd, other, auth, nil); rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Body.String(), "Replayed") {
		t.Fatalf("a replayed credential: %d %s", rec.Code, rec.Body)
	}
}

// The answer to a report names the GPUs the followed jobs hold on the report's nodes, as the
// last cycle read them (gres_detail), and nothing of jobs not followed: the agent reads those
// and asks Slurm nothing.
func TestSignalsAnswerNamesTheFollowedJobsGPUsOnTheNode(t *testing.T) {
	h := newHarness(t, 1, 2)
	extra := h.slurm.extras[mainID]
	extra.GresDetail = []string{"gpu:a100:2(IDX:1-2)"}
	h.slurm.extras[mainID] = extra
	h.slurm.run(300, "someone-else", 1002, h.now) // running on a100-1 too, not followed
	other := h.slurm.extras[300]
	other.GresDetail = []string{"gpu:a100:1(IDX:0)"}
	h.slurm.extras[300] = other
	hd, _ := signalsHandler(h)
	auth := "cred:0:10.0.0.1"
	answer := func(node string) api.SignalAnswer {
		t.Helper()
		rec := post(t, hd, api.SignalReport{Node: node}, auth, nil)
		var a api.SignalAnswer
		if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &a) != nil {
			t.Fatalf("report from %s: %d %s", node, rec.Code, rec.Body)
		}
		return a
	}
	h.cycle()
	a := answer("a100-1")
	if len(a.Read) != 1 || a.Read[0].JobID != mainID || !slices.Equal(a.Read[0].GPUs, []int{1, 2}) {
		t.Fatalf("answer to a100-1: %+v, want job %d's GPUs 1 and 2 only", a, mainID)
	}
}

// A job's samples are kept only from the node elasticd saw it running on.
func TestSignalsOfAJobOnAnotherNodeAreNotKept(t *testing.T) {
	h := newHarness(t, 1, 2)
	h.cycle()
	out := h.d.AddSignals(api.SignalReport{Node: "a100-2", Jobs: []api.JobSignals{{JobID: mainID, Samples: []api.GPUSample{sampleAt(0, h.now)}}}})
	if out.kept != 0 || len(out.refused) != 1 || !strings.Contains(out.refused[0], "running on a100-1") || h.d.signalCount() != 0 {
		t.Fatalf("report from a100-2 for a job on a100-1: %+v, %d stored", out, h.d.signalCount())
	}
	out = h.d.AddSignals(api.SignalReport{Node: "a100-2,a100-1", Jobs: []api.JobSignals{{JobID: mainID, Samples: []api.GPUSample{sampleAt(0, h.now)}}}})
	if out.kept != 1 || h.d.signalCount() != 1 {
		t.Fatalf("report from the job's node: %+v", out)
	}
}

// Samples out of range are dropped: a GPU index outside [0, 64), a time older than the stale
// window or further ahead than the clock skew, more than 64 samples of a job; a time a little
// ahead is taken as now.
func TestSignalSamplesAreClamped(t *testing.T) {
	h := newHarness(t, 1, 2)
	h.cycle()
	stale := h.d.cfg.Settings.StaleAfter
	samples := []api.GPUSample{
		sampleAt(-1, h.now), sampleAt(MaxGPUIndex, h.now), sampleAt(1<<30, h.now),
		sampleAt(1, h.now.Add(-stale-time.Second)), sampleAt(2, h.now.Add(SignalClockSkew+time.Second)),
		sampleAt(3, h.now.Add(SignalClockSkew/2)), sampleAt(4, h.now.Add(-stale/2)),
	}
	out := h.d.AddSignals(api.SignalReport{Node: "a100-1", Jobs: []api.JobSignals{{JobID: mainID, Samples: samples}}})
	if out.kept != 2 || out.dropped != 5 {
		t.Fatalf("kept %d dropped %d, want 2 and 5", out.kept, out.dropped)
	}
	h.d.mu.Lock()
	got := h.d.signals[mainID]
	h.d.mu.Unlock()
	if len(got) != 2 || !got[3].Time.Equal(h.now) || !got[4].Time.Equal(h.now.Add(-stale/2)) {
		t.Fatalf("stored %+v; want GPU 3 at now (it was a little ahead) and GPU 4 as sent", got)
	}
	var many []api.GPUSample
	for i := range 3 * MaxGPUIndex {
		many = append(many, sampleAt(i%MaxGPUIndex, h.now))
	}
	if out := h.d.AddSignals(api.SignalReport{Node: "a100-1", Jobs: []api.JobSignals{{JobID: mainID, Samples: many}}}); out.kept != MaxGPUIndex {
		t.Fatalf("a report of %d samples of one job: kept %d, want %d", len(many), out.kept, MaxGPUIndex)
	}
}

// 10^5 distinct GPU indices and job ids, from the right node and agent, leave the map at
// most 64 samples for each followed job: the main job here.
func TestSignalsMapIsBounded(t *testing.T) {
	h := newHarness(t, 1, 2)
	h.cycle()
	hd, _ := signalsHandler(h)
	const n = 100_000
	const perReport = 5_000 // a report's body stays under the 1 MiB limit
	for start := 0; start < n; start += perReport {
		rep := api.SignalReport{Node: "a100-1"}
		for i := start; i < start+perReport; i++ {
			rep.Jobs = append(rep.Jobs,
				api.JobSignals{JobID: uint32(1000 + i), Samples: []api.GPUSample{{Index: i, Time: h.now}}},
				api.JobSignals{JobID: mainID, Samples: []api.GPUSample{{Index: i, Time: h.now}}})
		}
		if rec := post(t, hd, rep, "cred:0:10.0.0.1", nil); rec.Code != http.StatusOK {
			t.Fatalf("report %d: %d %s", start/perReport, rec.Code, rec.Body)
		}
	}
	h.d.mu.Lock()
	jobs, total := len(h.d.signals), 0
	for _, byGPU := range h.d.signals {
		total += len(byGPU)
	}
	h.d.mu.Unlock()
	if jobs != 1 || total > MaxGPUIndex {
		t.Fatalf("signals map holds %d jobs and %d samples after 10^5 distinct indices and jobs, want 1 job and at most %d", jobs, total, MaxGPUIndex)
	}
}

// GET /v1/status needs a credential and shows a user their own jobs only; root sees all.
func TestStatusShowsCallersTheirOwnJobs(t *testing.T) {
	h := newHarness(t, 1, 2) // alice's job (the harness's fake queue names her)
	h.cycle()
	hd, _ := signalsHandler(h)
	get := func(auth string) (int, string, []api.JobStatus) {
		req := httptest.NewRequest(http.MethodGet, api.StatusPath, nil)
		if auth != "" {
			req.Header.Set("Authorization", "MUNGE "+auth+":"+api.RequestPayload(http.MethodGet, api.StatusPath))
		}
		rec := httptest.NewRecorder()
		hd.ServeHTTP(rec, req)
		var jobs []api.JobStatus
		if rec.Code == http.StatusOK {
			if err := json.Unmarshal(rec.Body.Bytes(), &jobs); err != nil {
				t.Fatal(err)
			}
		}
		return rec.Code, rec.Body.String(), jobs
	}
	if code, body, _ := get(""); code != http.StatusUnauthorized || !strings.Contains(body, "elasticd status") || !strings.Contains(body, "Authorization: MUNGE") {
		t.Fatalf("without a credential: %d %s", code, body)
	}
	if code, _, jobs := get("cred:1001:10.0.0.1"); code != http.StatusOK || len(jobs) != 1 || jobs[0].User != "alice" {
		t.Fatalf("alice: %d %+v", code, jobs)
	}
	if code, body, jobs := get("cred:1002:10.0.0.1"); code != http.StatusOK || len(jobs) != 0 || strings.Contains(body, "host:29500") {
		t.Fatalf("bob: %d %s", code, body)
	}
	if code, _, jobs := get("cred:0:10.0.0.1"); code != http.StatusOK || len(jobs) != 1 {
		t.Fatalf("root: %d %+v", code, jobs)
	}
}

func TestSlurmUserIDReadsScontrolsSlurmUser(t *testing.T) {
	if uid, err := SlurmUserID("slurm(64030)"); err != nil || uid != 64030 {
		t.Fatalf("slurm(64030): %d, %v", uid, err)
	}
	if uid, err := SlurmUserID("root"); err != nil || uid != 0 {
		t.Fatalf("root: %d, %v", uid, err)
	}
	for _, bad := range []string{"", "(x)", "no-such-user-here(x)"} {
		if _, err := SlurmUserID(bad); err == nil {
			t.Errorf("%q read as a uid", bad)
		}
	}
}
