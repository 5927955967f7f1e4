package view

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/auth"
	"github.com/slurmbridge/slurmbridge/bridge/quotaapi"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/quotad/policy"
	"github.com/slurmbridge/slurmbridge/quotad/policy/policytest"
)

var t0 = policytest.T0

const table = `settings: {borrowSizeTiers: []}
lendLimits: {a100: 3}
projects:
  - account: proj-a
    gpus: {a100: 4}
    lendLimitByType: {a100: 2}
  - account: proj-b
    gpus: {a100: 4}
    borrowLimit: 2
    weight: 2
`

// scene: bob (proj-b) runs 4 a100 in his guarantee and has job 5 pending over quota; alice
// (proj-a) runs job 6 on one a100. 3 a100 are idle, so the plan lends job 5.
func scene(t *testing.T) (*policy.Config, *policy.Snapshot) {
	t.Helper()
	cfg, err := policy.ParseConfig([]byte(table))
	if err != nil {
		t.Fatal(err)
	}
	job := func(id uint32, account, user string) *policytest.JobWrapper {
		return policytest.MakeJob(id, account).User(user).GPU("a100", 1)
	}
	// Partition a100: two 4-a100 nodes, 3 of the 8 GPUs idle.
	snap := policytest.MakeSnapshot().
		Node(policytest.GPUNode("gpu1", "a100", 4, 0, 28, 100000, "a100")).
		Node(policytest.GPUNode("gpu2", "a100", 4, 3, 31, 120000, "a100")).
		Jobs(policytest.Jobs(1, 4, func(id uint32) *policytest.JobWrapper { return job(id, "proj-b", "bob").Running(time.Hour) })...).
		Jobs(job(5, "proj-b", "bob").Obj(), job(6, "proj-a", "alice").Running(time.Hour).Obj()).
		Obj()
	// QOS and accounts as quotad has synced them: each project borrows in its own QOS (and
	// its elastic workers in another), the lend limit caps each, proj-b's borrow limit caps
	// its own.
	borrowGPUs := map[string]int64{"proj-a": 3, "proj-b": 2}
	for _, a := range []string{"proj-a", "proj-b"} {
		guar, borrow, elastic := cfg.Settings.GuaranteedQOSName(a), cfg.Settings.BorrowQOSName(a), cfg.Settings.ElasticQOSName(a)
		snap.QOS = append(snap.QOS, policy.QOS{Name: guar, GrpTRES: map[string]int64{"gres/gpu": 4, "gres/gpu:a100": 4}},
			policy.QOS{Name: borrow, PreemptMode: "requeue", Priority: 5, GrpTRES: map[string]int64{"gres/gpu": borrowGPUs[a], "gres/gpu:a100": 3}},
			policy.QOS{Name: elastic, PreemptMode: "requeue", Priority: 2, GrpTRES: map[string]int64{"gres/gpu": borrowGPUs[a], "gres/gpu:a100": 3}})
		snap.Accounts = append(snap.Accounts, policy.Account{Name: a, QOS: []string{borrow, elastic, guar}, DefaultQOS: guar})
	}
	return cfg, snap
}

// clock is a settable now.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// planned is a view after one acting cycle at t0.
func planned(t *testing.T) (*View, *clock, *policy.Plan) {
	t.Helper()
	cfg, snap := scene(t)
	plan := policy.BuildPlan(cfg, snap, t0)
	if !plan.Acting || len(plan.Moves) != 1 || plan.Moves[0].JobID != 5 {
		t.Fatalf("scene does not lend job 5: acting %v moves %v notes %v qos %v accounts %v", plan.Acting, plan.Moves, plan.Notes, plan.QOS, plan.Accounts)
	}
	c := &clock{t: t0.Add(time.Second)}
	v := &View{Cluster: "testbed", Interval: 5 * time.Second, Now: c.now}
	v.Record(Cycle{Start: t0, Outcome: "acted", Plan: plan, Config: cfg, SnapshotAt: t0, LeaseHeld: true})
	return v, c, plan
}

// fakeMunge stands in for munged: a credential "cred:UID:PAYLOAD" decodes to that uid and
// payload; anything else fails as unmunge does.
func fakeMunge(_ context.Context, cred string) (slurm.MungeIdentity, error) {
	rest, ok := strings.CutPrefix(cred, "cred:")
	if !ok {
		return slurm.MungeIdentity{}, errors.New("unmunge: exit 6: Invalid credential format")
	}
	uid, payload, _ := strings.Cut(rest, ":")
	n, err := strconv.ParseUint(uid, 10, 32)
	if err != nil {
		return slurm.MungeIdentity{}, err
	}
	return slurm.MungeIdentity{UID: uint32(n), Payload: payload}, nil
}

var users = map[uint32]string{1001: "alice", 1002: "bob", 1003: "carol"}

func testAuth(operators ...string) auth.Munge {
	return auth.Munge{
		API:    API,
		Decode: fakeMunge,
		LookupUser: func(uid uint32) (string, error) {
			if u, ok := users[uid]; ok {
				return u, nil
			}
			return "", fmt.Errorf("unknown uid %d", uid)
		},
		IsOperator: func(_ context.Context, user string) (bool, error) {
			for _, o := range operators {
				if o == user {
					return true, nil
				}
			}
			return false, nil
		},
		// Its own: the process's cache would carry one test's operators into the next.
		Bounds: auth.NewBounds(4, 4, time.Second, 5*time.Second),
	}
}

func cred(uid uint32, path string) string {
	return fmt.Sprintf("MUNGE cred:%d:%s", uid, quotaapi.CredentialPayload(http.MethodGet, path))
}

func get(t *testing.T, h http.Handler, method, path, authorization string) (int, []byte) {
	t.Helper()
	code, body, _ := getWithHeader(t, h, method, path, authorization)
	return code, body
}

func getWithHeader(t *testing.T, h http.Handler, method, path, authorization string) (int, []byte, http.Header) {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	body, _ := io.ReadAll(rec.Body)
	if ct := rec.Header().Get("Content-Type"); rec.Code != http.StatusMethodNotAllowed && ct != "application/json" {
		t.Errorf("%s %s: Content-Type %q", method, path, ct)
	}
	return rec.Code, body, rec.Header()
}

func decode[T any](t *testing.T, body []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	return v
}

func TestProjectsAndTypesCarryTheNumbersAndLimits(t *testing.T) {
	v, _, _ := planned(t)
	h := Handler(v, testAuth())
	code, body := get(t, h, http.MethodGet, "/api/v1/projects", "")
	if code != http.StatusOK {
		t.Fatalf("projects: %d %s", code, body)
	}
	resp := decode[ProjectsResponse](t, body)
	if resp.Status.Plan == nil || resp.Status.Plan.Stale || resp.Status.Cluster != "testbed" || !resp.Status.LeaseHeld ||
		resp.Status.LastCycle == nil || resp.Status.LastCycle.Outcome != "acted" || resp.Status.LastSuccessfulCycleAt == nil {
		t.Errorf("status = %+v", resp.Status)
	}
	got := map[string]Project{}
	for _, p := range resp.Projects {
		got[p.Account] = p
	}
	b := got["proj-b"]
	// Job 5 counts as promised to the borrow QOS by this plan's lend, and still as pending in
	// the guaranteed QOS it is in at the snapshot.
	if len(b.GPUs) != 1 || b.GPUs[0] != (ProjectGPUs{GPUType: "a100", Guaranteed: 4, InUse: 4, Borrowed: 1, Lent: 0, Pending: 1}) {
		t.Errorf("proj-b gpus = %+v, want 4 in use and job 5's a100 borrowed", b.GPUs)
	}
	if b.Weight != 2 || b.GuaranteedQOS != "guar-proj-b" || b.Limits.BorrowLimit == nil || *b.Limits.BorrowLimit != 2 || b.Limits.TotalGPUs != nil || b.Summary == "" {
		t.Errorf("proj-b = %+v", b)
	}
	a := got["proj-a"]
	// proj-a lends at most 2 of its 4: of its 3 unused, it keeps 1 idle for its own jobs.
	if len(a.GPUs) != 1 || a.GPUs[0].LendLimit == nil || *a.GPUs[0].LendLimit != 2 {
		t.Fatalf("proj-a gpus = %+v, want its lending limit of 2", a.GPUs)
	}
	g := a.GPUs[0]
	g.LendLimit = nil
	if g != (ProjectGPUs{GPUType: "a100", Guaranteed: 4, InUse: 1, Lent: 1, KeptIdle: 1}) {
		t.Errorf("proj-a gpus = %+v, want 1 in use, 1 of its unused 3 lent and 1 kept idle", g)
	}
	if a.Limits.LendLimitByType["a100"] != 2 || LendLimit(a.GPUs[0]) != "2 (1 kept idle)" {
		t.Errorf("proj-a limits = %+v, page shows %q", a.Limits, LendLimit(a.GPUs[0]))
	}
	// The JSON names are the API: a page built on it breaks if they change.
	for _, field := range []string{`"api_version": "v1"`, `"snapshot_taken_at"`, `"max_snapshot_age_seconds": 15`, `"stale": false`, `"guaranteed_qos"`, `"in_use": 4`, `"borrow_limit": 2`, `"total_gpus": null`, `"lend_limit": 2`, `"kept_idle": 1`, `"lend_limit_by_type"`} {
		if !strings.Contains(string(body), field) {
			t.Errorf("projects JSON lacks %s:\n%s", field, body)
		}
	}

	code, body = get(t, h, http.MethodGet, "/api/v1/types", "")
	types := decode[TypesResponse](t, body)
	if code != http.StatusOK || len(types.Types) != 1 || types.Types[0].GPUType != "a100" || types.Types[0].Total != 8 || types.Types[0].Idle != 3 ||
		types.Types[0].Lent != 1 || types.Types[0].LendLimit == nil || *types.Types[0].LendLimit != 3 {
		t.Errorf("types: %d %+v", code, types.Types)
	}
	code, body = get(t, h, http.MethodGet, "/api/v1/projects/proj-a", "")
	if one := decode[ProjectResponse](t, body); code != http.StatusOK || one.Project.Account != "proj-a" {
		t.Errorf("projects/proj-a: %d %s", code, body)
	}
	if code, body = get(t, h, http.MethodGet, "/api/v1/projects/proj-zz", ""); code != http.StatusNotFound || !strings.Contains(decode[ErrorResponse](t, body).Error, " proj-zz ") {
		t.Errorf("unknown project: %d %s", code, body)
	}
}

func TestAPlanIsStaleOnceANewOneIsOverdue(t *testing.T) {
	v, c, _ := planned(t)
	h := Handler(v, testAuth())
	stale := func() bool {
		_, body := get(t, h, http.MethodGet, "/api/v1/status", "")
		return decode[StatusResponse](t, body).Status.Plan.Stale
	}
	// interval 5s + maxSnapshotAge 15s (the default).
	c.t = t0.Add(20 * time.Second)
	if stale() {
		t.Error("stale at 20s, while a due cycle may still bring a fresh plan")
	}
	c.t = t0.Add(20*time.Second + time.Millisecond)
	if !stale() {
		t.Error("not stale past interval + maxSnapshotAge")
	}
	// A cycle on an old snapshot plans nothing: the old numbers stay, still stale, and the
	// status says why.
	cfg, snap := scene(t)
	snap.TakenAt = t0.Add(-time.Minute)
	late := policy.BuildPlan(cfg, snap, c.t)
	v.Record(Cycle{Start: c.t, Outcome: "not_acting", Plan: late, Config: cfg, SnapshotAt: snap.TakenAt, LeaseHeld: true})
	code, body := get(t, h, http.MethodGet, "/api/v1/projects", "")
	resp := decode[ProjectsResponse](t, body)
	if code != http.StatusOK || !resp.Status.Plan.Stale || !resp.Status.Plan.BuiltAt.Equal(t0) || resp.Status.LastCycle.Outcome != "not_acting" ||
		len(resp.Status.LastCycle.Notes) != 1 || !strings.Contains(resp.Status.LastCycle.Notes[0], "maxSnapshotAge") {
		t.Errorf("after a not-acting cycle: %d %+v %+v", code, resp.Status.Plan, resp.Status.LastCycle)
	}
	if !resp.Status.LastSuccessfulCycleAt.Equal(t0) {
		t.Errorf("last successful cycle = %v, want the one at t0", resp.Status.LastSuccessfulCycleAt)
	}
	// A fresh plan makes it current again.
	cfg, snap = scene(t)
	snap.TakenAt = c.t
	v.Record(Cycle{Start: c.t, Outcome: "passive", Plan: policy.BuildPlan(cfg, snap, c.t), Config: cfg, SnapshotAt: c.t})
	if stale() {
		t.Error("stale right after a fresh plan")
	}
}

func TestNoPlanYetAnswers503WithTheStatus(t *testing.T) {
	v := &View{Cluster: "testbed", Interval: 5 * time.Second}
	v.Record(Cycle{Start: t0, Outcome: "error", Err: errors.New("snapshot: slurmctld down")})
	h := Handler(v, testAuth())
	code, body := get(t, h, http.MethodGet, "/api/v1/status", "")
	st := decode[StatusResponse](t, body).Status
	if code != http.StatusOK || st.Plan != nil || st.LastCycle.Outcome != "error" || st.LastSuccessfulCycleAt != nil {
		t.Errorf("status: %d %s", code, body)
	}
	for _, path := range []string{"/api/v1/projects", "/api/v1/types"} {
		code, body := get(t, h, http.MethodGet, path, "")
		e := decode[ErrorResponse](t, body)
		if code != http.StatusServiceUnavailable || !strings.Contains(e.Error, "not planned") || e.Status == nil {
			t.Errorf("%s: %d %s", path, code, body)
		}
	}
	// An error's text stays in quotad's log: it may name database hosts and users.
	if strings.Contains(string(body), "slurmctld down") {
		t.Errorf("status passes a cycle error's text on: %s", body)
	}
}

func TestJobExplanationsGoToTheirOwnerRootAndOperators(t *testing.T) {
	v, _, plan := planned(t)
	want5, _ := plan.Explain(5)
	for _, tc := range []struct {
		name      string
		operators []string
		path      string
		auth      string
		code      int
		want      string
	}{
		{"no credential", nil, "/api/v1/jobs/5", "", 401, "private to their owners"},
		{"another scheme", nil, "/api/v1/jobs/5", "Bearer x", 401, "private to their owners"},
		{"a credential munged rejects", nil, "/api/v1/jobs/5", "MUNGE MUNGE:forged", 401, "does not decode"},
		{"a credential made for another job", nil, "/api/v1/jobs/5", cred(1002, "/api/v1/jobs/6"), 401, "made for"},
		{"an unknown uid", nil, "/api/v1/jobs/5", cred(4242, "/api/v1/jobs/5"), 401, "uid 4242"},
		{"bob reads his job", nil, "/api/v1/jobs/5", cred(1002, "/api/v1/jobs/5"), 200, want5},
		{"alice may not read bob's job", nil, "/api/v1/jobs/5", cred(1001, "/api/v1/jobs/5"), 403, "job 5 is not alice's"},
		{"root reads any job", nil, "/api/v1/jobs/5", cred(0, "/api/v1/jobs/5"), 200, want5},
		{"an operator reads any job", []string{"alice"}, "/api/v1/jobs/5", cred(1001, "/api/v1/jobs/5"), 200, want5},
		{"a job quotad does not know", nil, "/api/v1/jobs/999", cred(1002, "/api/v1/jobs/999"), 404, "job 999 is not a GPU job"},
		{"not a job id", nil, "/api/v1/jobs/x", cred(1002, "/api/v1/jobs/x"), 400, "want a number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body, header := getWithHeader(t, Handler(v, testAuth(tc.operators...)), http.MethodGet, tc.path, tc.auth)
			if code != tc.code || !strings.Contains(string(body), jsonText(tc.want)) {
				t.Fatalf("%d %s\nwant %d with %q", code, body, tc.code, tc.want)
			}
			if code == http.StatusUnauthorized && header.Get("WWW-Authenticate") != auth.Scheme {
				t.Errorf("401 with WWW-Authenticate %q, want %q", header.Get("WWW-Authenticate"), auth.Scheme)
			}
			if code == 200 {
				j := decode[JobResponse](t, body).Job
				if j.JobID != 5 || j.User != "bob" || j.Account != "proj-b" || j.Move == nil || *j.Move != (Move{Kind: "lend", FromQOS: "guar-proj-b", ToQOS: "borrow-proj-b"}) {
					t.Errorf("job = %+v", j)
				}
			}
		})
	}
	// The list holds the caller's jobs only.
	for uid, want := range map[uint32][]uint32{1001: {6}, 1002: {1, 2, 3, 4, 5}, 1003: {}, 0: {1, 2, 3, 4, 5, 6}} {
		code, body := get(t, Handler(v, testAuth()), http.MethodGet, "/api/v1/jobs", cred(uid, "/api/v1/jobs"))
		var ids []uint32
		for _, j := range decode[JobsResponse](t, body).Jobs {
			ids = append(ids, j.JobID)
		}
		if code != 200 || fmt.Sprint(ids) != fmt.Sprint(want) && !(len(ids) == 0 && len(want) == 0) {
			t.Errorf("jobs as uid %d: %d %v, want %v", uid, code, ids, want)
		}
	}
	if code, _ := get(t, Handler(v, nil), http.MethodGet, "/api/v1/jobs/5", cred(0, "/api/v1/jobs/5")); code != http.StatusForbidden {
		t.Errorf("without an authenticator: %d, want every job request refused", code)
	}
}

// jsonText is s as it appears inside a JSON string.
func jsonText(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

func TestTheAPIChangesNothing(t *testing.T) {
	v, _, _ := planned(t)
	h := Handler(v, testAuth())
	for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		for _, path := range []string{"/api/v1/status", "/api/v1/projects", "/api/v1/projects/proj-a", "/api/v1/types", "/api/v1/jobs", "/api/v1/jobs/5"} {
			if code, _ := get(t, h, method, path, cred(0, path)); code != http.StatusMethodNotAllowed {
				t.Errorf("%s %s: %d, want 405", method, path, code)
			}
		}
	}
	if code, body := get(t, h, http.MethodGet, "/api/v1/nothing", ""); code != http.StatusNotFound || !strings.Contains(string(body), "operations.md") {
		t.Errorf("unknown path: %d %s", code, body)
	}
}

func TestClientReadsTheAPIWithACredentialForJobsOnly(t *testing.T) {
	v, _, plan := planned(t)
	srv := httptest.NewServer(Handler(v, testAuth()))
	defer srv.Close()
	var payloads []string
	c := &Client{BaseURL: srv.URL, Credential: func(_ context.Context, payload string) (string, error) {
		payloads = append(payloads, payload)
		return "cred:1002:" + payload, nil // bob
	}}
	ctx := context.Background()
	projects, err := c.Projects(ctx)
	if err != nil || len(projects.Projects) != 2 || projects.Status.Plan == nil {
		t.Fatalf("Projects = %+v, %v", projects, err)
	}
	if len(payloads) != 0 {
		t.Errorf("made credentials %q for public data", payloads)
	}
	job, err := c.Job(ctx, "5")
	want, _ := plan.Explain(5)
	if err != nil || job.Job.Explanation != want {
		t.Fatalf("Job(5) = %+v, %v", job, err)
	}
	if len(payloads) != 1 || payloads[0] != "slurmbridge-quotad-api GET /api/v1/jobs/5" {
		t.Errorf("credential payloads = %q", payloads)
	}
	_, err = c.Job(ctx, "6") // alice's
	var apiErr *quotaapi.APIError
	if !errors.As(err, &apiErr) || apiErr.Code != 403 || !strings.Contains(err.Error(), "not bob's") {
		t.Errorf("Job(6) as bob: %v", err)
	}
	if _, err := c.Job(ctx, "999"); !quotaapi.IsNotFound(err) {
		t.Errorf("Job(999): %v, want a 404", err)
	}
	if _, err := (&Client{BaseURL: "http://127.0.0.1:1"}).Projects(ctx); err == nil || !strings.Contains(err.Error(), "SLURMBRIDGE_QUOTAD_URL") {
		t.Errorf("no quotad: %v, want the address and where it comes from", err)
	}
}
