//go:build integration

package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/slurmbridge/slurmbridge/bridge/auth"
	"github.com/slurmbridge/slurmbridge/elasticd/agent"
	"github.com/slurmbridge/slurmbridge/elasticd/api"
)

// The attacker's suite for elasticd's API: alice, a plain user with a MUNGE credential of her
// own, against bob's elastic job, with elasticd's real handler, the testbed's munged and the
// rules elasticd run sets up (agents: root and SlurmUser, the credential's origin checked).

// attackAPI serves the in-process daemon's API as `elasticd run` does.
func attackAPI(ctx context.Context, t *testing.T, r *elasticRun) (*httptest.Server, string) {
	t.Helper()
	socket := mungeSocket(t, r)
	client := r.c.Slurm()
	conf, err := client.ShowConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	slurmUID, err := SlurmUserID(conf.Get("SlurmUser"))
	if err != nil {
		t.Fatal(err)
	}
	authn := auth.NewMunge(client, socket, client.UserIsOperator, PersonAPI)
	srv := httptest.NewServer(r.d.Handler(Access{Callers: authn,
		Agents: &AgentAuth{Identity: authn.Identity, UIDs: []uint32{slurmUID}, CheckOrigin: true}}))
	t.Cleanup(srv.Close)
	return srv, socket
}

func mungeSocket(t *testing.T, r *elasticRun) string {
	t.Helper()
	for _, kv := range r.c.Env() {
		if v, ok := strings.CutPrefix(kv, "SLURMBRIDGE_MUNGE_SOCKET="); ok {
			return v
		}
	}
	t.Fatal("the testbed names no munged socket (SLURMBRIDGE_MUNGE_SOCKET)")
	return ""
}

// credentialOf is a MUNGE credential for payload, made by user with the testbed's munged.
func credentialOf(ctx context.Context, t *testing.T, r *elasticRun, socket, username, payload string) string {
	t.Helper()
	client := r.c.Slurm()
	if username != "root" {
		var err error
		if client, err = r.c.SlurmAs(username, nil); err != nil {
			t.Fatal(err)
		}
	}
	cred, err := client.MungeEncode(ctx, socket, payload)
	if err != nil {
		t.Fatalf("munge as %s: %v", username, err)
	}
	return cred
}

// send makes one request; auth "" sends none.
func send(ctx context.Context, t *testing.T, method, url string, body []byte, auth string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", "MUNGE "+auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(data))
}

// submitAs submits body as username's elastic main job on one a100 GPU, followed and cleaned
// up like submitMain's.
func (r *elasticRun) submitAs(ctx context.Context, t *testing.T, username, body string) (string, uint32) {
	t.Helper()
	script := filepath.Join(r.work, username+"-job.sh")
	if err := os.WriteFile(script, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	id, err := r.c.Submit(ctx, username, "-p", "a100", "--gres=gpu:a100:1", "--output="+filepath.Join(r.work, username+"-%j.out"), script)
	if err != nil {
		t.Fatal(err)
	}
	return id, r.follow(t, id)
}

// drained are the nodes that are not up now (down, drained, failing).
func drained(ctx context.Context, t *testing.T, r *elasticRun) []string {
	t.Helper()
	nodes, err := r.c.Slurm().Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range nodes {
		if !n.Up() {
			out = append(out, n.Name)
		}
	}
	slices.Sort(out)
	return out
}

// alice posts throttle samples for bob's running elastic job and its workers, as the
// unauthenticated request any host could send, with her own credential over the exact body,
// and with her credential made for another body: each is refused with a clear answer, nothing
// is stored, and bob's job is neither flagged nor touched. A report from root's credential (what
// a node agent run as root sends) for an unthrottled sample of the job, from the node it runs
// on, is then taken: the refusals are the rules', not a closed door. Then the real agent
// reports in a session, and alice's replay of its report, her report in its session, in a
// session of her own making and her own set-up are refused.
func TestAttackAliceForgesThrottleSignalsForBobsJob(t *testing.T) {
	r := newElasticRun(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	offset := r.c.CtldLogSize(t)
	downBefore := drained(ctx, t, r)
	srv, socket := attackAPI(ctx, t, r)
	bobID, bob := r.submitAs(ctx, t, "bob", synthetic(t, "1:2:1", "--interval 0.5 --curve 1:100,2:190"))
	st := r.cycleUntil(ctx, t, bob, func(st *api.JobStatus) bool { return len(st.Workers) > 0 })
	node, err := r.c.Nodes(ctx, bobID)
	if err != nil || node == "" {
		t.Fatalf("bob's job's node: %q, %v", node, err)
	}
	targets := []uint32{bob}
	for _, w := range st.Workers {
		if id, err := strconv.ParseUint(w.Worker, 10, 32); err == nil && uint32(id) != bob {
			targets = append(targets, uint32(id))
		}
	}
	forged := api.SignalReport{Node: node}
	for _, id := range targets {
		var samples []api.GPUSample
		for i := range 4 {
			mhz, maxMHz := uint32(300), uint32(1410)
			samples = append(samples, api.GPUSample{Index: i, Time: time.Now(), SMClockMHz: &mhz, MaxSMClockMHz: &maxMHz,
				ThrottleReasons: []string{"hw_thermal_slowdown", "hw_slowdown"}})
		}
		forged.Jobs = append(forged.Jobs, api.JobSignals{JobID: id, Samples: samples})
	}
	body, err := json.Marshal(forged)
	if err != nil {
		t.Fatal(err)
	}
	url := srv.URL + api.SignalsPath
	for _, tc := range []struct {
		name, auth string
		code       int
		want       string
	}{
		{"no credential", "", http.StatusUnauthorized, "signal reports come from elasticd's node agents"},
		{"alice's credential over the body", credentialOf(ctx, t, r, socket, "alice", api.SignalsPayload(body)), http.StatusForbidden, "may not report GPU signals"},
		{"alice's credential over another body", credentialOf(ctx, t, r, socket, "alice", api.SignalsPayload([]byte(`{"node":"x","jobs":[]}`))), http.StatusUnauthorized, "was made for"},
		{"alice's credential for a person's request", credentialOf(ctx, t, r, socket, "alice", api.RequestPayload(http.MethodPost, api.SignalsPath)), http.StatusUnauthorized, "was made for"},
		{"a forged credential", "MUNGE:AAAAforged:", http.StatusUnauthorized, "does not decode"},
	} {
		code, answer := send(ctx, t, http.MethodPost, url, body, tc.auth)
		t.Logf("%s: %d %s", tc.name, code, answer)
		if code != tc.code || !strings.Contains(answer, tc.want) {
			t.Errorf("%s: answered %d %q, want %d with %q", tc.name, code, answer, tc.code, tc.want)
		}
	}
	// Root's credential replayed (read off the wire): refused the second time.
	harmless, _ := json.Marshal(api.SignalReport{Node: node})
	rootCred := credentialOf(ctx, t, r, socket, "root", api.SignalsPayload(harmless))
	code, answer := send(ctx, t, http.MethodPost, url, harmless, rootCred)
	if code != http.StatusOK {
		t.Fatalf("root's first report: %d %s", code, answer)
	}
	// The answer tells the node's agent which GPUs to read: bob's job's, as slurmd assigned them.
	var toRead api.SignalAnswer
	if err := json.Unmarshal([]byte(answer), &toRead); err != nil || !slices.ContainsFunc(toRead.Read, func(j api.JobGPUs) bool { return j.JobID == bob && len(j.GPUs) == 1 }) {
		t.Errorf("the answer to a report from %s: %s (%v), want bob's job %d and its one GPU", node, answer, err, bob)
	}
	if code, answer := send(ctx, t, http.MethodPost, url, harmless, rootCred); code != http.StatusUnauthorized || !strings.Contains(answer, auth.ErrUndecodable.Error()) {
		t.Errorf("root's credential replayed: %d %q, want 401", code, answer)
	}

	for range 5 {
		if err := r.d.Cycle(ctx); err != nil {
			t.Logf("cycle: %v", err)
		}
		time.Sleep(time.Second)
	}
	r.d.mu.Lock()
	for _, id := range targets {
		if n := len(r.d.signals[id]); n != 0 {
			t.Errorf("job %d has %d GPU samples after refused reports", id, n)
		}
	}
	r.d.mu.Unlock()
	st = jobStatus(r.d, bob)
	if st == nil || len(st.Flags) > 0 || len(st.Replacements) > 0 || len(st.Leaving) > 0 || st.Decision == "replace" {
		t.Fatalf("bob's job after alice's reports: %+v", st)
	}
	if state, err := r.c.JobState(ctx, bobID); err != nil || state != "RUNNING" {
		t.Fatalf("bob's main job %s: %s, %v", bobID, state, err)
	}
	for _, id := range targets[1:] {
		if state, err := r.c.JobState(ctx, strconv.FormatUint(uint64(id), 10)); err != nil || state != "RUNNING" {
			t.Errorf("bob's worker %d: %s, %v", id, state, err)
		}
	}
	if after := drained(ctx, t, r); !slices.Equal(after, downBefore) {
		t.Errorf("nodes down or drained: %v, before %v", after, downBefore)
	}
	r.c.AssertNoneKilled(t, offset)

	// The agent's way in: the node agent itself, its session set up with root's credential
	// encoded on the job's node's host, NVML standing in. Its first report is empty and learns bob's job's GPUs
	// from the answer (gres_detail as slurmctld gave it); its second carries their samples,
	// which are taken. It asks Slurm nothing.
	root := r.c.Slurm()
	encode := func(ctx context.Context, payload string) (string, error) {
		return root.MungeEncode(ctx, socket, payload)
	}
	gpus := &standInGPUs{}
	wire := &sniffer{base: srv.Client().Transport}
	a := &agent.Agent{Nodes: []string{node}, Reader: gpus, Post: agent.PostHTTP(&http.Client{Transport: wire}, srv.URL, encode), Log: zerolog.Nop()}
	for range 2 {
		if err := a.Cycle(ctx); err != nil {
			t.Fatalf("the agent's cycle: %v", err)
		}
	}
	// bob's job and any worker of his on the same node: a read per job, one GPU each.
	read := 0
	for _, g := range gpus.read {
		read += len(g)
	}
	if len(gpus.read) == 0 || read != len(gpus.read) {
		t.Fatalf("the agent read GPUs %v, want the followed jobs' on %s, one GPU each", gpus.read, node)
	}
	if n := r.d.signalCount(); n != read {
		t.Fatalf("%d samples stored after the agent's report of %d GPUs", n, read)
	}

	// The agent reported in a session (one credential for both reports). alice, who sniffed
	// the wire, replays its last report, signs her throttle report in its session with a key of
	// her own, sends it in a session that does not exist, and tries to set up a session of
	// her own: each is refused, and no throttled sample is stored.
	if wire.setUps != 1 || wire.lastAuthz == "" || !strings.HasPrefix(wire.lastAuthz, api.SessionScheme+" ") {
		t.Fatalf("the agent's exchanges: %d set-ups, last report's Authorization %q; want one session", wire.setUps, wire.lastAuthz)
	}
	sid, seq, _, _ := api.ParseSessionAuthorization(wire.lastAuthz)
	aliceSetUp, _ := json.Marshal(api.SessionRequest{Node: node, PublicKey: make([]byte, 32)})
	for _, tc := range []struct {
		name, path, authz string
		body              []byte
		code              int
		want              string
	}{
		{"the agent's last report replayed", api.SignalsPath, wire.lastAuthz, wire.lastBody, http.StatusUnauthorized, "replayed or reordered"},
		{"alice's report in the agent's session, her own key", api.SignalsPath,
			api.SessionAuthorization(sid, seq+1, api.ReportMAC([]byte("alice's guess"), sid, seq+1, body)), body, http.StatusUnauthorized, "MAC does not verify"},
		{"alice's report in a session that does not exist", api.SignalsPath,
			api.SessionAuthorization("ALICESSESSION", 1, api.ReportMAC([]byte("alice's guess"), "ALICESSESSION", 1, body)), body, http.StatusUnauthorized, api.SessionUnknown},
		{"alice sets up a session", api.SignalsSessionPath,
			"MUNGE " + credentialOf(ctx, t, r, socket, "alice", api.SessionPayload(aliceSetUp)), aliceSetUp, http.StatusForbidden, "may not report GPU signals"},
	} {
		code, answer := sendAuthz(ctx, t, srv.URL+tc.path, tc.body, tc.authz)
		t.Logf("%s: %d %s", tc.name, code, answer)
		if code != tc.code || !strings.Contains(answer, tc.want) {
			t.Errorf("%s: answered %d %q, want %d with %q", tc.name, code, answer, tc.code, tc.want)
		}
	}
	r.d.mu.Lock()
	for id, byGPU := range r.d.signals {
		for _, g := range byGPU {
			if g.ThermalOrPowerThrottled {
				t.Errorf("job %d holds a throttled sample after alice's reports: %+v", id, g)
			}
		}
	}
	r.d.mu.Unlock()
}

// sniffer is the wire as anyone on it sees it: the agent's session set-ups counted, its last
// report kept.
type sniffer struct {
	base      http.RoundTripper
	setUps    int
	lastAuthz string
	lastBody  []byte
}

func (s *sniffer) RoundTrip(req *http.Request) (*http.Response, error) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	switch req.URL.Path {
	case api.SignalsSessionPath:
		s.setUps++
	case api.SignalsPath:
		s.lastAuthz, s.lastBody = req.Header.Get("Authorization"), body
	}
	return s.base.RoundTrip(req)
}

// sendAuthz posts body to url with the Authorization header authz.
func sendAuthz(ctx context.Context, t *testing.T, url string, body []byte, authz string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", authz)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(data))
}

// standInGPUs stands in for NVML on a host without GPUs: healthy samples of the GPUs asked for.
type standInGPUs struct{ read [][]int }

func (g *standInGPUs) Available() bool { return true }

func (g *standInGPUs) Read(indices []int) ([]api.GPUSample, error) {
	g.read = append(g.read, slices.Clone(indices))
	mhz := uint32(1410)
	var out []api.GPUSample
	for _, i := range indices {
		out = append(out, api.GPUSample{Index: i, Time: time.Now(), SMClockMHz: &mhz, MaxSMClockMHz: &mhz})
	}
	return out, nil
}

// GET /v1/status: refused without a credential, with how to send one; alice's credential shows
// alice's job and not bob's (nor his rendezvous endpoint); root's shows both.
func TestAttackAliceReadsTheStatusOfBobsJob(t *testing.T) {
	r := newElasticRun(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srv, socket := attackAPI(ctx, t, r)
	_, alice := r.submitAs(ctx, t, "alice", synthetic(t, "1:1:1", "--interval 0.5 --curve 1:100"))
	_, bob := r.submitAs(ctx, t, "bob", synthetic(t, "1:1:1", "--interval 0.5 --curve 1:100"))
	r.cycleUntil(ctx, t, alice, func(*api.JobStatus) bool { return jobStatus(r.d, bob) != nil })
	bobStatus := jobStatus(r.d, bob)

	url := srv.URL + api.StatusPath
	code, answer := send(ctx, t, http.MethodGet, url, nil, "")
	if code != http.StatusUnauthorized || !strings.Contains(answer, "Authorization: MUNGE") || !strings.Contains(answer, "elasticd status") {
		t.Fatalf("status without a credential: %d %q, want 401 saying how to authenticate", code, answer)
	}
	if strings.Contains(answer, strconv.FormatUint(uint64(bob), 10)) {
		t.Fatalf("the refusal names bob's job: %s", answer)
	}
	read := func(username string) ([]api.JobStatus, string) {
		code, answer := send(ctx, t, http.MethodGet, url, nil, credentialOf(ctx, t, r, socket, username, api.RequestPayload(http.MethodGet, api.StatusPath)))
		if code != http.StatusOK {
			t.Fatalf("status as %s: %d %s", username, code, answer)
		}
		var jobs []api.JobStatus
		if err := json.Unmarshal([]byte(answer), &jobs); err != nil {
			t.Fatal(err)
		}
		return jobs, answer
	}
	jobs, answer := read("alice")
	if len(jobs) != 1 || jobs[0].JobID != alice || jobs[0].User != "alice" {
		t.Fatalf("alice's status: %+v, want her job %d alone", jobs, alice)
	}
	if bobStatus.RdzvEndpoint != "" && strings.Contains(answer, bobStatus.RdzvEndpoint) && bobStatus.RdzvEndpoint != jobs[0].RdzvEndpoint {
		t.Fatalf("alice's status shows bob's rendezvous %s", bobStatus.RdzvEndpoint)
	}
	jobs, _ = read("root")
	var ids []uint32
	for _, j := range jobs {
		ids = append(ids, j.JobID)
	}
	if !slices.Contains(ids, alice) || !slices.Contains(ids, bob) {
		t.Fatalf("root's status: jobs %v, want %d and %d", ids, alice, bob)
	}
}
