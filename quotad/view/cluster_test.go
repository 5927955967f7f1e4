package view

import (
	"html/template"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/gpureq"
	"github.com/slurmbridge/slurmbridge/bridge/pools"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/quotad/policy"
	"github.com/slurmbridge/slurmbridge/quotad/policy/policytest"
)

const poolsYAML = `default_cpu_pool: cpu
default_gpu_pool: a100
pools:
  - name: cpu
    price_per_cpu_hour: 0.05
    node: {cpus: 8, memory_mb: 32000}
  - name: a100
    gpu_type: a100
    price_per_gpu_hour: 3.0
    node: {gpus: 4, cpus: 8, memory_mb: 32000}
  - name: a100-spot
    gpu_type: a100
    price_per_gpu_hour: 1.2
    spot: true
    node: {gpus: 4, cpus: 8, memory_mb: 32000}
`

func poolsConfig(t *testing.T) *pools.Config {
	t.Helper()
	cfg, err := pools.Parse([]byte(poolsYAML), "pools.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func gres(t *testing.T, s string) []gpureq.Gres {
	t.Helper()
	if s == "" {
		return nil
	}
	g, err := gpureq.ParseNodeGres(s)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func node(t *testing.T, name, part, state, conf, used string, flags ...string) slurm.Node {
	return slurm.Node{Name: name, Partitions: strings.Split(part, ","), State: state, StateFlags: flags, CPUs: 8, MemoryMB: 32000,
		Gres: gres(t, conf), GresUsed: gres(t, used)}
}

func TestPoolCountsNodesGPUsAndJobsPerPool(t *testing.T) {
	cfg := poolsConfig(t)
	nodes := []slurm.Node{
		node(t, "cpu1", "cpu", "idle", "", ""),
		node(t, "cpu2", "cpu", "down", "", ""),
		node(t, "gpu1", "a100", "allocated", "gpu:a100:4", "gpu:a100:4(IDX:0-3)"),
		node(t, "gpu2", "a100", "mixed", "gpu:a100:4", "gpu:a100:1(IDX:0)"),
		// Drained with one GPU still held: counted running, never free.
		node(t, "spot1", "a100-spot", "mixed", "gpu:a100:4", "gpu:a100:1(IDX:0)", "DRAIN"),
	}
	job := func(id uint32, state policy.JobState, parts string, perNode, nodes int, tasks ...uint32) policy.Job {
		return policy.Job{ID: id, State: state, Partitions: strings.Split(parts, ","), Nodes: nodes,
			GPUsPerNode: map[string]int{"a100": perNode}, ArrayTasks: tasks}
	}
	jobs := []policy.Job{
		job(1, policy.StateRunning, "a100", 4, 1),
		job(2, policy.StateRunning, "a100", 1, 1),
		job(3, policy.StateRunning, "a100-spot", 1, 1),
		job(4, policy.StatePending, "a100", 2, 2), // 4 GPUs
		// An array record with three pending tasks of one GPU each, listing both a100 pools.
		job(5, policy.StatePending, "a100-spot,a100", 1, 1, 7, 8, 9),
		{ID: 6, State: policy.StatePending, Partitions: []string{"cpu"}},
		{ID: 7, State: policy.StatePending, Partitions: []string{"a100"}, GPUsPerJob: map[string]int{"": 2}, GPUsPerNode: map[string]int{"": 2}},
	}
	got := PoolCounts(cfg, nodes, jobs)
	want := []Pool{
		{Name: "cpu", Partition: "cpu", PricePerCPUHour: 0.05, Nodes: PoolNodes{Up: 1, Down: 1}, Jobs: PoolJobs{Pending: 1}},
		{Name: "a100", Partition: "a100", GPUType: "a100", PricePerGPUHour: 3, Nodes: PoolNodes{Up: 2},
			GPUs: PoolGPUs{Total: 8, Running: 5, Pending: 4 + 3 + 2, Free: 3}, Jobs: PoolJobs{Running: 2, Pending: 1 + 3 + 1}},
		{Name: "a100-spot", Partition: "a100-spot", GPUType: "a100", PricePerGPUHour: 1.2, Spot: true, Nodes: PoolNodes{Down: 1},
			GPUs: PoolGPUs{Total: 4, Running: 1, Pending: 3}, Jobs: PoolJobs{Running: 1, Pending: 3}},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d pools, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("pool %s:\n got %+v\nwant %+v", want[i].Name, got[i], want[i])
		}
	}
	if got := PoolCounts(nil, nodes, jobs); got == nil || len(got) != 0 {
		t.Errorf("no pools file: %v, want an empty list", got)
	}
}

// plannedWithPools is planned's view with pools and actions recorded.
func plannedWithPools(t *testing.T) *View {
	t.Helper()
	v, _, plan := planned(t)
	cfg, _ := scene(t)
	nodes := []slurm.Node{
		node(t, "gpu1", "a100", "allocated", "gpu:a100:4", "gpu:a100:4(IDX:0-3)"),
		node(t, "gpu2", "a100", "mixed", "gpu:a100:4", "gpu:a100:1(IDX:0)"),
	}
	_, snap := scene(t)
	v.Record(Cycle{Start: t0, Outcome: "acted", Plan: plan, Config: cfg, SnapshotAt: t0, LeaseHeld: true,
		Nodes: nodes, Jobs: snap.Jobs, Pools: poolsConfig(t),
		Actions: []Action{
			{At: t0, Kind: "lend", Job: "5", Account: "proj-b", FromQOS: "guar-proj-b", ToQOS: "borrow-proj-b"},
			{At: t0.Add(-time.Minute), Kind: "reclaim", Job: "3", Account: "proj-b"},
		}})
	return v
}

func TestClusterJSONHasPoolsProjectsTypesAndActions(t *testing.T) {
	v := plannedWithPools(t)
	h := Handler(v, nil) // the cluster needs no authentication
	code, body := get(t, h, http.MethodGet, ClusterPath, "")
	if code != http.StatusOK {
		t.Fatalf("%d %s", code, body)
	}
	c := decode[ClusterResponse](t, body)
	if len(c.Pools) != 3 || c.Pools[1].Name != "a100" || c.Pools[1].GPUs != (PoolGPUs{Total: 8, Running: 5, Pending: 1, Free: 3}) {
		t.Errorf("pools %+v", c.Pools)
	}
	if len(c.Projects) != 2 || c.Projects[0].Account == "" || len(c.Types) != 1 || c.Types[0].Idle != 3 {
		t.Errorf("projects %+v types %+v", c.Projects, c.Types)
	}
	if len(c.RecentActions) != 2 || c.RecentActions[0].Kind != "lend" || c.PoolsError != "" {
		t.Errorf("actions %+v, pools error %q", c.RecentActions, c.PoolsError)
	}
	// Nothing of a job's owner travels in the open answer.
	for _, secret := range []string{"bob", "alice", "QOSGrpGRES"} {
		if strings.Contains(string(body), secret) {
			t.Errorf("the cluster answer names %q", secret)
		}
	}
}

func TestAPoolsFileThatCannotBeReadIsSaidNotHidden(t *testing.T) {
	v, _, plan := planned(t)
	cfg, _ := scene(t)
	why := errString("open /etc/slurm/pools.yaml: " + syscall.ENOENT.Error())
	v.Record(Cycle{Start: t0, Outcome: "acted", Plan: plan, Config: cfg, SnapshotAt: t0, PoolsErr: why})
	c := v.clusterData(v.read())
	if len(c.Pools) != 0 || !strings.HasSuffix(c.PoolsError, ": "+why.Error()) {
		t.Errorf("pools %+v error %q", c.Pools, c.PoolsError)
	}
	page := render(t, Handler(v, nil), "/cluster")
	if !strings.Contains(page, template.HTMLEscapeString(why.Error())) {
		t.Error("the page hides why it has no pools")
	}
}

type errString string

func (e errString) Error() string { return string(e) }

func render(t *testing.T, h http.Handler, path string) string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	if ct := rec.Header().Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("%s: Content-Type %q", path, ct)
	}
	if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("%s: CSP %q", path, csp)
	}
	return rec.Body.String()
}

func TestThePageShowsTheJSONsNumbers(t *testing.T) {
	v := plannedWithPools(t)
	h := Handler(v, nil)
	for _, path := range []string{"/", "/cluster"} {
		page := render(t, h, path)
		for _, want := range []string{
			`<span data-field="gpus_running">5</span> running, <span data-field="gpus_pending">1</span> pending, <span data-field="gpus_free">3</span> free of <span data-field="gpus_total">8</span>`,
			`<span data-field="nodes_up">2</span> up, <span data-field="nodes_down">0</span> down`,
			`spot (may be taken back)`, `3.00 per GPU-hour`,
			`data-project="proj-b" data-gpu-type="a100"`,
			`aria-label="a100: 5 of 8 GPUs running, 3 free, 0 on nodes that are down"`,
			`<td>lend</td><td>5</td><td>proj-b</td>`,
			`href="api/v1/cluster"`,
		} {
			if !strings.Contains(page, want) {
				t.Errorf("%s lacks %s", path, want)
			}
		}
		// The page loads nothing from anywhere: no src= or href= to another host or path.
		if m := regexp.MustCompile(`(src|href)="(https?:)?//`).FindString(page); m != "" {
			t.Errorf("%s loads an external asset: %s", path, m)
		}
		if strings.Contains(page, "STALE") {
			t.Errorf("%s: a current plan shown as stale", path)
		}
	}
}

func TestTheInlineStyleAndScriptMatchTheirHashes(t *testing.T) {
	page := render(t, Handler(plannedWithPools(t), nil), "/")
	if !strings.Contains(page, "<style>"+pageCSS+"</style>") || !strings.Contains(page, "<script>"+pageJS+"</script>") {
		t.Error("the template changed the inline style or script: the CSP hashes would not match them")
	}
}

func TestAStalePlanIsShownStale(t *testing.T) {
	v := plannedWithPools(t)
	c := &clock{t: t0.Add(time.Hour)}
	v.Now = c.now
	page := render(t, Handler(v, nil), "/cluster")
	if !strings.Contains(page, `class="stale" role="alert">STALE`) {
		t.Error("an hour-old plan is not marked stale")
	}
}

func TestTheJobSearchNeverShowsAnExplanation(t *testing.T) {
	v := plannedWithPools(t)
	h := Handler(v, nil)
	for q, want := range map[string]string{
		"5":    "quotactl explain 5",
		"999":  "Job 999 is not a GPU job",
		"abc":  "is not a job id",
		"%20":  "", // blank: no answer
		"6%0A": "quotactl explain 6",
	} {
		page := render(t, h, "/cluster?job="+q)
		if want == "" {
			if strings.Contains(page, `id="job-answer"`) {
				t.Errorf("job=%q: an answer to nothing", q)
			}
			continue
		}
		if !strings.Contains(page, want) {
			t.Errorf("job=%q: page lacks %q", q, want)
		}
		if strings.Contains(page, "bob") || strings.Contains(page, "alice") || strings.Contains(page, "QOSGrpGRES") {
			t.Errorf("job=%q: the page shows a job's owner or explanation", q)
		}
	}
}

func TestBeforeAPlanThePageSaysSo(t *testing.T) {
	v := &View{Cluster: "testbed", Interval: 5 * time.Second}
	rec := httptest.NewRecorder()
	Handler(v, nil).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	// The page's status line, shown only while there is no plan.
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), `<p class="warn" role="status">`) {
		t.Errorf("%d %s", rec.Code, rec.Body.String())
	}
	if code, _ := get(t, Handler(v, nil), http.MethodGet, ClusterPath, ""); code != http.StatusServiceUnavailable {
		t.Errorf("JSON before a plan: %d", code)
	}
}

func TestThePageChangesNothing(t *testing.T) {
	h := Handler(plannedWithPools(t), nil)
	for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
		for _, path := range []string{"/", "/cluster", ClusterPath} {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
			if rec.Code != http.StatusMethodNotAllowed {
				t.Errorf("%s %s: %d, want 405", method, path, rec.Code)
			}
		}
	}
}

// BenchmarkClusterPage renders the page and its JSON with 5000 jobs queued: bob's one-a100 jobs
// pending over quota beside the scene's. The page draws pools and projects, never the jobs, so
// its cost does not grow with the queue; the job search looks one job up.
func BenchmarkClusterPage(b *testing.B) {
	t := &testing.T{}
	cfg, snap := scene(t)
	for id := uint32(100); len(snap.Jobs) < 5000; id++ {
		snap.Jobs = append(snap.Jobs, policytest.MakeJob(id, "proj-b").User("bob").GPU("a100", 1).Obj())
	}
	plan := policy.BuildPlan(cfg, snap, t0)
	v := &View{Cluster: "testbed", Interval: 5 * time.Second, Now: func() time.Time { return t0.Add(time.Second) }}
	nodes := []slurm.Node{
		{Name: "gpu1", Partitions: []string{"a100"}, State: "allocated", Gres: []gpureq.Gres{{Name: "gpu", Type: "a100", Count: 4}}},
		{Name: "gpu2", Partitions: []string{"a100"}, State: "mixed", Gres: []gpureq.Gres{{Name: "gpu", Type: "a100", Count: 4}}},
	}
	v.Record(Cycle{Start: t0, Outcome: "acted", Plan: plan, Config: cfg, SnapshotAt: t0, Nodes: nodes, Jobs: snap.Jobs, Pools: mustPools()})
	h := Handler(v, nil)
	for _, path := range []string{"/cluster", ClusterPath, "/cluster?job=4999"} {
		b.Run(path, func(b *testing.B) {
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
				if rec.Code != http.StatusOK {
					b.Fatal(rec.Code)
				}
			}
		})
	}
}

func mustPools() *pools.Config {
	cfg, err := pools.Parse([]byte(poolsYAML), "pools.yaml")
	if err != nil {
		panic(err)
	}
	return cfg
}
