package daemon

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/slurmbridge/slurmbridge/bridge/auth"
	"github.com/slurmbridge/slurmbridge/elasticd/api"
	"github.com/slurmbridge/slurmbridge/elasticd/policy"
	"github.com/slurmbridge/slurmbridge/elasticd/reconcile"
)

// restartDaemon replaces the harness's elasticd by a new one on the same state directory, as
// a restart of the service would.
func (h *harness) restartDaemon() {
	old := h.d
	h.d = New(old.cfg, h.slurm, zerolog.Nop(), NewMetrics(prometheus.NewRegistry()))
	h.d.now = func() time.Time { return h.now }
}

func TestStateSurvivesARestart(t *testing.T) {
	h := newHarness(t, 1, 4)
	h.cycle()
	h.report(100, mainID)
	h.cycle()
	h.report(100, mainID)
	h.cycle()
	h.report(100, mainID)
	h.cycle()
	h.slurm.run(201, WorkerName(mainID), h.uid, h.now)
	h.slurm.run(202, WorkerName(mainID), h.uid, h.now)
	j := h.d.jobs[mainID]
	j.stopping[202] = h.now
	j.pin = 2
	j.pinnedBy = "alice"
	h.cycle()
	history := len(j.history)
	if history == 0 {
		t.Fatal("setup: no measurement")
	}
	if st, err := os.Stat(h.dir.StateFile(mainID)); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("state file: %v, %v; want mode 0600", st, err)
	}

	h.restartDaemon()
	h.cycle()
	j = h.d.jobs[mainID]
	if j == nil || len(j.history) < history || j.pin != 2 || j.pinnedBy != "alice" {
		t.Fatalf("after restart: %+v", j)
	}
	if _, ok := j.stopping[202]; !ok {
		t.Fatalf("the worker being stopped was forgotten: %v", j.stopping)
	}
	// Its grace runs from the TERM before the restart, not from the restart.
	h.now = h.now.Add(10 * time.Second)
	h.cycle()
	if !slices.Contains(h.slurm.cancel, 202) {
		t.Fatalf("cancelled %v, want 202 after its grace", h.slurm.cancel)
	}
}

func TestCorruptStateIsSetAsideAndTheJobFollowedAfresh(t *testing.T) {
	for name, content := range map[string]string{
		"not JSON":      "{\"version\":1,\"job_id\":",
		"another job":   `{"version":1,"job_id":99,"main_start":"2027-01-15T08:00:00Z","declaration_recorded":1,"history":null}`,
		"unknown field": fmt.Sprintf(`{"version":1,"job_id":%d,"surprise":1}`, mainID),
		"pin too large": fmt.Sprintf(`{"version":1,"job_id":%d,"history":null,"pin":9}`, mainID),
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, 1, 4)
			if err := os.WriteFile(h.dir.StateFile(mainID), []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			h.cycle()
			if h.d.jobs[mainID] == nil || h.d.jobs[mainID].pin != 0 {
				t.Fatalf("job not followed afresh: %+v", h.d.jobs[mainID])
			}
			kept, err := os.ReadFile(h.dir.StateFile(mainID) + ".corrupt")
			if err != nil || string(kept) != content {
				t.Fatalf("the corrupt file was not kept aside: %q, %v", kept, err)
			}
			if _, err := os.Stat(h.dir.StateFile(mainID)); err != nil {
				t.Fatalf("no new state written: %v", err)
			}
		})
	}
}

// A requeued main job's workers are cancelled at once (the training restarts elsewhere); when it
// runs again, new workers get the rendezvous endpoint its new declaration records.
func TestRequeuedMainJobStopsItsWorkersAndNewOnesGetTheNewEndpoint(t *testing.T) {
	h := newHarness(t, 2, 4)
	h.cycle()
	h.slurm.run(201, WorkerName(mainID), h.uid, h.now)
	h.cycle()
	main := h.slurm.jobs[mainID]
	main.State = "PENDING"
	h.slurm.jobs[mainID] = main
	h.cycle()
	if !slices.Equal(h.slurm.cancel, []uint32{201}) {
		t.Fatalf("cancelled %v, want worker 201 of the requeued job", h.slurm.cancel)
	}
	delete(h.slurm.jobs, 201)
	delete(h.slurm.extras, 201)

	// It runs again; the plugin has not recorded the new declaration yet.
	h.now = h.now.Add(time.Minute)
	h.slurm.run(mainID, "train", h.uid, h.now)
	submits := len(h.slurm.submits)
	h.cycle()
	if len(h.slurm.submits) != submits || h.decision().Code != reconcile.CodeMainRestarted {
		t.Fatalf("submitted %d before the new declaration; decision %+v", len(h.slurm.submits)-submits, h.decision())
	}
	decl := fmt.Sprintf(`{"version":1,"job_id":%d,"uid":%d,"gid":%d,"min_workers":2,"max_workers":4,"gpus_per_worker":1,"rdzv_endpoint":"other-node:29500","pools":["a100"],"recorded":%d}`,
		mainID, h.uid, os.Getgid(), h.now.Unix())
	if err := os.WriteFile(filepath.Join(h.dir.JobDir(mainID), "declaration.json"), []byte(decl), 0o644); err != nil {
		t.Fatal(err)
	}
	h.cycle()
	if len(h.slurm.submits) != submits+1 || !slices.Contains(h.slurm.submits[submits].Env, "ELASTIC_RDZV_ENDPOINT=other-node:29500") {
		t.Fatalf("after the new declaration: %d submissions, env %v", len(h.slurm.submits)-submits, h.slurm.submits[len(h.slurm.submits)-1].Env)
	}
}

func TestMaxBatchLowersTheMaxAndReachesTheContract(t *testing.T) {
	h := newHarness(t, 2, 8)
	decl := fmt.Sprintf(`{"version":1,"job_id":%d,"uid":%d,"gid":%d,"min_workers":2,"max_workers":8,"gpus_per_worker":1,"rdzv_endpoint":"host:29500","pools":["a100"],"max_batch":96,"batch_per_device":32,"recorded":1}`,
		mainID, h.uid, os.Getgid())
	if err := os.WriteFile(filepath.Join(h.dir.JobDir(mainID), "declaration.json"), []byte(decl), 0o644); err != nil {
		t.Fatal(err)
	}
	h.cycle()
	env := h.slurm.submits[0].Env
	for _, want := range []string{"ELASTIC_MAX=3", "ELASTIC_NNODES=2:3", "ELASTIC_MAX_BATCH=96", "ELASTIC_BATCH_PER_DEVICE=32"} {
		if !slices.Contains(env, want) {
			t.Errorf("worker environment %v lacks %s", env, want)
		}
	}
	// MaxReason is words alone, checked for the figure it must give: the max global batch.
	if b := h.d.bounds(h.d.jobs[mainID]); b.MaxWorkers != 3 || maxGlobalBatchIn(b.MaxReason) != 96 {
		t.Fatalf("bounds %+v", b)
	}
}

type fakeAuth struct{ caller auth.Caller }

func (f fakeAuth) Caller(r *http.Request) (auth.Caller, error) {
	if f.caller.User == "" {
		return auth.Caller{}, fmt.Errorf("%w: no credential", auth.ErrUnauthenticated)
	}
	return f.caller, nil
}

func TestOnlyTheOwnerOrRootPins(t *testing.T) {
	h := newHarness(t, 1, 4)
	h.cycle()
	for _, tc := range []struct {
		caller auth.Caller
		method string
		path   string
		code   int
		pin    int
	}{
		{auth.Caller{}, http.MethodPut, api.PinPath(mainID, 2), http.StatusUnauthorized, 0},
		{auth.Caller{User: "bob"}, http.MethodPut, api.PinPath(mainID, 2), http.StatusForbidden, 0},
		{auth.Caller{User: "alice"}, http.MethodPut, api.PinPath(mainID, 5), http.StatusBadRequest, 0},
		{auth.Caller{User: "alice"}, http.MethodPut, api.PinPath(7, 2), http.StatusNotFound, 0},
		{auth.Caller{User: "alice"}, http.MethodPut, "/v1/jobs/" + fmt.Sprint(mainID) + "/pin/0", http.StatusBadRequest, 0},
		{auth.Caller{User: "alice"}, http.MethodPut, api.PinPath(mainID, 2), http.StatusNoContent, 2},
		{auth.Caller{User: "root", SeesAll: true}, http.MethodPut, api.PinPath(mainID, 3), http.StatusNoContent, 3},
		{auth.Caller{User: "bob"}, http.MethodDelete, api.PinPath(mainID, 0), http.StatusForbidden, 3},
		{auth.Caller{User: "alice"}, http.MethodDelete, api.PinPath(mainID, 0), http.StatusNoContent, 0},
	} {
		rec := httptest.NewRecorder()
		h.d.Handler(Access{Callers: fakeAuth{tc.caller}}).ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
		if rec.Code != tc.code || h.d.jobs[mainID].pin != tc.pin {
			t.Errorf("%s %s as %q: %d %s, pin %d; want %d, pin %d", tc.method, tc.path, tc.caller.User, rec.Code,
				strings.TrimSpace(rec.Body.String()), h.d.jobs[mainID].pin, tc.code, tc.pin)
		}
	}
	// A pin is saved at once.
	if err := h.d.Pin(mainID, 2, auth.Caller{User: "alice"}); err != nil {
		t.Fatal(err)
	}
	h.restartDaemon()
	h.cycle()
	if h.d.jobs[mainID].pin != 2 {
		t.Fatalf("pin after restart: %d", h.d.jobs[mainID].pin)
	}
	if d := h.decision(); d.Action != policy.Grow || d.Code != policy.CodeBelowTarget || h.d.jobs[mainID].pinnedBy != "alice" {
		t.Fatalf("decision after restart: %+v, want growth to the pin", d)
	}
	if err := h.d.Pin(99, 2, auth.Caller{User: "alice"}); !errors.Is(err, errNotFollowed) {
		t.Fatalf("pin of an unknown job: %v", err)
	}
}

var maxGlobalBatchRE = regexp.MustCompile(`global batch (\d+)`)

// maxGlobalBatchIn is the max global batch a reason gives, -1 when it gives none.
func maxGlobalBatchIn(reason string) int {
	m := maxGlobalBatchRE.FindStringSubmatch(reason)
	if m == nil {
		return -1
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		return -1
	}
	return n
}
