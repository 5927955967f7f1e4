package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/slurmbridge/slurmbridge/bridge/gpureq"
	"github.com/slurmbridge/slurmbridge/bridge/pools"
	"github.com/slurmbridge/slurmbridge/bridge/quotaapi"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/elasticd/api"
	"github.com/slurmbridge/slurmbridge/elasticd/policy"
	"github.com/slurmbridge/slurmbridge/elasticd/reconcile"
	"github.com/slurmbridge/slurmbridge/elasticd/registry"
)

// fakeSlurm is a queue the test edits between cycles; it records every action.
type fakeSlurm struct {
	jobs map[uint32]slurm.Job
	// extras are the fields only squeue --json gives (Name, UserID, ...), merged into the
	// job of the same id by Queue; a job without one has them zero.
	extras    map[uint32]slurm.Job
	queueErr  error
	onQueue   func() // runs while the queue is read, as events that happen meanwhile
	nextID    uint32
	submits   []SubmitRequest
	terminate []uint32
	cancel    []uint32
	qos       []slurm.QOS
	qosErr    error
	assocs    []slurm.Association
	assocErr  error
	submitErr error
	lent      map[uint32]string    // workers elasticd lent after their held submission, to their QOS
	heldJob   map[uint32]slurm.Job // what Job answers for an id instead of the submission (a forged id)
	lendErr   error
	attempts  int    // submissions tried, refused ones included
	script    string // the main job's batch script; "" a bare shebang
	// countUsed: the node's GPUs in use are its running jobs' (else all 4 are free always).
	countUsed bool
	// moreNodes are listed after a100-1.
	moreNodes []slurm.Node
}

func (f *fakeSlurm) Queue(context.Context) ([]slurm.Job, error) {
	if f.queueErr != nil {
		return nil, f.queueErr
	}
	if f.onQueue != nil {
		f.onQueue()
	}
	var jobs []slurm.Job
	for _, j := range f.jobs {
		jobs = append(jobs, withJSONFields(j, f.extras[j.ID]))
	}
	return jobs, nil
}

// withJSONFields is j with the fields only squeue --json gives taken from x.
func withJSONFields(j, x slurm.Job) slurm.Job {
	j.Name, j.UserID, j.GroupID, j.BatchHost, j.WorkDir, j.GresDetail = x.Name, x.UserID, x.GroupID, x.BatchHost, x.WorkDir, x.GresDetail
	j.TimeLimit, j.StdOut, j.Tasks, j.Features, j.Restarts = x.TimeLimit, x.StdOut, x.Tasks, x.Features, x.Restarts
	return j
}

func (f *fakeSlurm) Nodes(context.Context) ([]slurm.Node, error) {
	n := slurm.Node{Name: "a100-1", Partitions: []string{"a100"}, State: "mixed", CPUs: 8, MemoryMB: 32000, Address: "10.0.0.1", Hostname: "gpu-host-1",
		Gres: []gpureq.Gres{{Name: "gpu", Type: "a100", Count: 4}}}
	if f.countUsed {
		used := uint64(0)
		for _, j := range f.jobs {
			if j.Nodes == n.Name && j.State == "RUNNING" {
				used += j.TRESAlloc.GPUs("a100")
			}
		}
		n.GresUsed = []gpureq.Gres{{Name: "gpu", Type: "a100", Count: used}}
	}
	return append([]slurm.Node{n}, f.moreNodes...), nil
}

func (f *fakeSlurm) QOS(context.Context) ([]slurm.QOS, error) {
	return f.qos, f.qosErr
}

func (f *fakeSlurm) ClusterName(context.Context) (string, error) { return "testbed", nil }

func (f *fakeSlurm) Associations(_ context.Context, cluster string) ([]slurm.Association, error) {
	if cluster != "testbed" {
		return nil, fmt.Errorf("associations of cluster %q", cluster)
	}
	return f.assocs, f.assocErr
}

func (f *fakeSlurm) BatchScript(context.Context, uint32) ([]byte, error) {
	if f.script != "" {
		return []byte(f.script), nil
	}
	return []byte("#!/bin/sh\n"), nil
}

func (f *fakeSlurm) Submit(_ context.Context, req SubmitRequest) (uint32, error) {
	f.attempts++
	if f.submitErr != nil {
		return 0, f.submitErr
	}
	f.submits = append(f.submits, req)
	f.nextID++
	return f.nextID, nil
}

// Job is a submitted worker as slurmctld lists it right after sbatch: pending, for its begin
// time when it was submitted with one, named and owned as submitted; heldJob overrides it.
func (f *fakeSlurm) Job(_ context.Context, id uint32) (slurm.Job, error) {
	if j, ok := f.heldJob[id]; ok {
		return j, nil
	}
	i := int(id) - 201
	if i < 0 || i >= len(f.submits) {
		return slurm.Job{}, fmt.Errorf("slurmctld lists no job %d", id)
	}
	r := f.submits[i]
	j := slurm.Job{ID: id, Name: r.Options.JobName, User: "alice", QOS: r.Options.QOS, State: "PENDING", StateReason: "Priority"}
	if slices.ContainsFunc(r.Options.Args, func(a string) bool { return strings.HasPrefix(a, "--begin=") }) {
		j.StateReason = "BeginTime"
	}
	return j, nil
}

func (f *fakeSlurm) Lend(_ context.Context, id uint32, qos string) error {
	if f.lendErr != nil {
		return f.lendErr
	}
	if f.lent == nil {
		f.lent = map[uint32]string{}
	}
	f.lent[id] = qos
	return nil
}

func (f *fakeSlurm) Terminate(_ context.Context, id uint32) error {
	f.terminate = append(f.terminate, id)
	return nil
}

func (f *fakeSlurm) Cancel(_ context.Context, id uint32) error {
	f.cancel = append(f.cancel, id)
	return nil
}

// run puts a job in the queue as running on a100-1.
func (f *fakeSlurm) run(id uint32, name string, uid uint32, start time.Time) {
	f.jobs[id] = slurm.Job{ID: id, User: "alice", Account: "proj-a", Partition: "a100", State: "RUNNING", NodeCount: 1, Nodes: "a100-1", Start: start}
	f.extras[id] = slurm.Job{ID: id, UserID: uid, Name: name, WorkDir: "/tmp", StdOut: "/tmp/out/main.out"}
}

type harness struct {
	t      *testing.T
	dir    registry.Dir
	slurm  *fakeSlurm
	quotad *fakeQuotad
	d      *Daemon
	now    time.Time
	uid    uint32
}

// fakeQuotad answers quotad's projects: a fresh plan with projects (no lending limit keeps a
// GPU unless a test says so), or none (noPlan), a stale one, or err.
type fakeQuotad struct {
	projects []quotaapi.Project
	noPlan   bool
	stale    bool
	err      error
}

func (f *fakeQuotad) Projects(context.Context) (quotaapi.ProjectsResponse, error) {
	if f.err != nil {
		return quotaapi.ProjectsResponse{}, f.err
	}
	st := quotaapi.Status{APIVersion: quotaapi.APIVersion}
	if !f.noPlan {
		st.Plan = &quotaapi.PlanStatus{SnapshotAgeSeconds: 3, MaxSnapshotAgeSeconds: 60}
		if f.stale {
			st.Plan.SnapshotAgeSeconds = 95
		}
		st.Plan.Stale = f.stale
	}
	return quotaapi.ProjectsResponse{Status: st, Projects: f.projects}, nil
}

const mainID = 100

func newHarness(t *testing.T, min, max int) *harness {
	t.Helper()
	return newHarnessValued(t, min, max, 0)
}

// newHarnessValued declares the job with --elastic-value=value (none when 0). The a100 pool
// costs 3 per GPU-hour.
func newHarnessValued(t *testing.T, min, max int, value float64) *harness {
	t.Helper()
	uid := uint32(os.Getuid())
	h := &harness{t: t, dir: registry.Dir(t.TempDir()), uid: uid, now: time.Unix(1_800_000_000, 0),
		slurm: &fakeSlurm{jobs: map[uint32]slurm.Job{}, extras: map[uint32]slurm.Job{}, nextID: 200}, quotad: &fakeQuotad{}}
	if err := os.MkdirAll(h.dir.ReportDir(mainID), 0o755); err != nil {
		t.Fatal(err)
	}
	valued := ""
	if value > 0 {
		valued = fmt.Sprintf(`"value_per_million_samples":%f,`, value)
	}
	decl := fmt.Sprintf(`{"version":1,"job_id":%d,"uid":%d,"gid":%d,"min_workers":%d,"max_workers":%d,"gpus_per_worker":1,"rdzv_endpoint":"host:29500","pools":["a100"],%s"recorded":1}`,
		mainID, uid, os.Getgid(), min, max, valued)
	if err := os.WriteFile(filepath.Join(h.dir.JobDir(mainID), "declaration.json"), []byte(decl), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := pools.Parse([]byte("pools:\n  - name: a100\n    gpu_type: a100\n    price_per_gpu_hour: 3\n    node: {gpus: 4, cpus: 8, memory_mb: 32000}\n"), "test")
	if err != nil {
		t.Fatal(err)
	}
	h.d = New(Config{Dir: h.dir, Pools: cfg, DeclarationOwner: uid, Grace: 10 * time.Second, Quotad: h.quotad,
		Settings: policy.Settings{MinSamples: 2, SettleTime: time.Second, StaleAfter: 10 * time.Second}},
		h.slurm, zerolog.Nop(), NewMetrics(prometheus.NewRegistry()))
	h.d.now = func() time.Time { return h.now }
	h.slurm.run(mainID, "train", uid, h.now)
	return h
}

// report appends one line per worker: the job's total rate split evenly.
func (h *harness) report(total float64, workers ...uint32) {
	h.t.Helper()
	for _, w := range workers {
		line := fmt.Sprintf(`{"time": %d, "worker": "%d", "samples_per_sec": %g}`+"\n", h.now.Unix(), w, total/float64(len(workers)))
		f, err := os.OpenFile(filepath.Join(h.dir.ReportDir(mainID), fmt.Sprintf("%d.jsonl", w)), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			h.t.Fatal(err)
		}
		f.WriteString(line)
		f.Close()
	}
}

// cycle advances the clock and runs one cycle.
func (h *harness) cycle() {
	h.t.Helper()
	h.now = h.now.Add(2 * time.Second)
	if err := h.d.Cycle(context.Background()); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) decision() policy.Decision {
	return h.d.jobs[mainID].last
}

func TestBelowMinSubmitsWorkersAsTheOwnerWithTheContract(t *testing.T) {
	h := newHarness(t, 2, 4)
	h.cycle()
	if len(h.slurm.submits) != 1 {
		t.Fatalf("%d submissions, want 1 to reach min 2 (decision %+v)", len(h.slurm.submits), h.decision())
	}
	req := h.slurm.submits[0]
	for _, want := range []string{"--job-name=elastic-worker-100", "--account=proj-a", "--partition=a100", "--gpus-per-node=a100:1", "--requeue", "--chdir=/tmp", "--output=/tmp/out/%x-%j.out"} {
		if !slices.Contains(req.Options.Argv(), want) {
			t.Errorf("sbatch args %q lack %s", req.Options.Argv(), want)
		}
	}
	for _, want := range []string{"ELASTIC_ROLE=worker", "ELASTIC_JOB_ID=100", "ELASTIC_NNODES=2:4", "ELASTIC_RDZV_ENDPOINT=host:29500"} {
		if !slices.Contains(req.Env, want) {
			t.Errorf("worker env %q lacks %s", req.Env, want)
		}
	}
	if req.UID != h.uid || string(req.Script) != "#!/bin/sh\n" {
		t.Fatalf("submitted as uid %d with script %q", req.UID, req.Script)
	}
	h.cycle() // the worker is not in the queue yet: no second submission
	if len(h.slurm.submits) != 1 {
		t.Fatalf("submitted again before the first worker appeared: %d", len(h.slurm.submits))
	}
}

// The job reports 100, 190, 200 samples/s at 1, 2, 3 workers: the knee is 2.
func TestGrowsWhileStepsPayThenShrinksGracefully(t *testing.T) {
	h := newHarness(t, 1, 4)
	workers := h.growUntilTerminate(map[int]float64{1: 100, 2: 190, 3: 200})
	// 1 → 2 pays (s = 0.9), 2 → 3 does not (s = 0.11): the third worker is told to go.
	if len(h.slurm.submits) != 2 || !slices.Equal(h.slurm.terminate, []uint32{202}) {
		t.Fatalf("submits %d, terminated %v; want 2 grows and TERM to worker 202 (decision %+v)", len(h.slurm.submits), h.slurm.terminate, h.decision())
	}
	if h.decision().Action != policy.Shrink || h.decision().Code != policy.CodeStepDoesNotPay {
		t.Fatalf("decision %+v", h.decision())
	}
	// Within the grace period nothing more; after it, a plain cancel; never the main job.
	workers = workers[:2]
	h.report(190, workers...)
	h.cycle()
	if len(h.slurm.cancel) != 0 {
		t.Fatalf("cancelled %v within the grace period", h.slurm.cancel)
	}
	for range 5 {
		h.report(190, workers...)
		h.cycle()
	}
	if !slices.Equal(h.slurm.cancel, []uint32{202}) || slices.Contains(h.slurm.terminate, mainID) {
		t.Fatalf("cancelled %v, terminated %v; want only 202", h.slurm.cancel, h.slurm.terminate)
	}
	delete(h.slurm.jobs, 202)
	h.report(190, workers...)
	h.cycle()
	h.report(190, workers...)
	h.cycle()
	if d := h.decision(); d.Action != policy.Hold {
		t.Fatalf("after the shrink: %+v, want hold at the knee", d)
	}
}

func TestUnreadableQueueDoesNothing(t *testing.T) {
	h := newHarness(t, 2, 4)
	h.slurm.queueErr = errors.New("slurmctld down")
	if err := h.d.Cycle(context.Background()); err == nil {
		t.Fatal("want the queue error")
	}
	if len(h.slurm.submits)+len(h.slurm.terminate)+len(h.slurm.cancel) != 0 {
		t.Fatal("acted on a cycle without a queue")
	}
}

func TestJobWithoutDeclarationOrOfAnotherUserIsLeftAlone(t *testing.T) {
	h := newHarness(t, 2, 4)
	h.slurm.extras[mainID] = slurm.Job{ID: mainID, UserID: h.uid + 1}
	h.cycle()
	h.slurm.run(101, "plain", h.uid, h.now) // running, no directory
	h.cycle()
	if len(h.slurm.submits) != 0 || len(h.d.jobs) != 0 {
		t.Fatalf("acted on a job whose declaration is not its owner's: %d submissions", len(h.slurm.submits))
	}
}

// A job that starts, and so registers, while elasticd reads the queue is not in that queue:
// its directory is not a leftover of an ended job and must survive the cycle.
func TestJobRegisteredDuringTheQueueReadKeepsItsDeclaration(t *testing.T) {
	h := newHarness(t, 2, 4)
	const late = 150
	h.slurm.onQueue = func() {
		if err := os.MkdirAll(h.dir.JobDir(late), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(h.dir.JobDir(late), "declaration.json"), []byte(`{"version":1}`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h.cycle()
	if _, err := os.Stat(filepath.Join(h.dir.JobDir(late), "declaration.json")); err != nil {
		t.Fatalf("declaration of a job that registered during the queue read: %v", err)
	}
}

func TestFinishedMainJobEndsItsWorkers(t *testing.T) {
	h := newHarness(t, 2, 4)
	h.cycle()
	h.slurm.run(201, WorkerName(mainID), h.uid, h.now)
	h.slurm.run(300, WorkerName(mainID), h.uid+1, h.now) // another user's job with the same name
	h.cycle()
	delete(h.slurm.jobs, mainID)
	delete(h.slurm.extras, mainID)
	h.cycle()
	if !slices.Equal(h.slurm.cancel, []uint32{201}) {
		t.Fatalf("cancelled %v, want only the job's own worker 201", h.slurm.cancel)
	}
	delete(h.slurm.jobs, 201)
	delete(h.slurm.extras, 201)
	h.cycle()
	if _, err := os.Stat(h.dir.JobDir(mainID)); !os.IsNotExist(err) {
		t.Fatalf("job directory left behind: %v", err)
	}
}

// growUntilTerminate feeds the job's rates (by worker count) until elasticd tells a worker to
// go or 40 cycles pass, starting every worker it submits, and returns the job's ids (main first).
func (h *harness) growUntilTerminate(rates map[int]float64) []uint32 {
	workers := []uint32{mainID}
	for range 40 {
		h.report(rates[len(workers)], workers...)
		h.cycle()
		for range h.slurm.submits[len(workers)-1:] {
			id := uint32(200 + len(workers))
			h.slurm.run(id, WorkerName(mainID), h.uid, h.now)
			workers = append(workers, id)
		}
		if len(h.slurm.terminate) > 0 {
			return workers
		}
	}
	return workers
}

// The job's own --elastic-value decides whether a step that scales well is worth its GPUs. One
// a100 costs 3 an hour; 1 -> 2 workers adds 90 samples/s (s = 0.9): 0.324 million samples an
// hour, and at most 100 samples/s (0.36 million) if it scaled linearly.
func TestElasticValueWeighsTheGainAgainstThePrice(t *testing.T) {
	rates := map[int]float64{1: 100, 2: 190, 3: 200}

	// 20 per million: the step is worth 6.48 an hour; growth stops where efficiency does.
	rich := newHarnessValued(t, 1, 4, 20)
	rich.growUntilTerminate(rates)
	if len(rich.slurm.submits) != 2 || !slices.Equal(rich.slurm.terminate, []uint32{202}) {
		t.Fatalf("value 20: submits %d, terminated %v; want the knee at 2 (decision %+v)", len(rich.slurm.submits), rich.slurm.terminate, rich.decision())
	}

	// 9 per million: a linear step would be worth 3.24, so 2 is probed; measured it is worth
	// 2.92, less than the worker costs: back to one, and the reason says why.
	marginal := newHarnessValued(t, 1, 4, 9)
	marginal.growUntilTerminate(rates)
	if len(marginal.slurm.submits) != 1 || !slices.Equal(marginal.slurm.terminate, []uint32{201}) {
		t.Fatalf("value 9: submits %d, terminated %v; want the probe of 2 undone (decision %+v)", len(marginal.slurm.submits), marginal.slurm.terminate, marginal.decision())
	}
	if st := marginal.d.Status(); len(st) != 1 || st[0].ValuePerMillionSamples != 9 {
		t.Fatalf("status %+v, want the job's value 9", st)
	}
	// The words are checked for the worth and the cost, the figures this test is about.
	if d := marginal.decision(); d.Action != policy.Shrink || d.Code != policy.CodeStepNotWorthCost ||
		!strings.Contains(d.Reason, "worth $2.92/h") || !strings.Contains(d.Reason, "cost $3.00/h") {
		t.Fatalf("value 9: decision %+v, want a shrink that names the worth and the cost", d)
	}

	// 5 per million: even a linear step is worth only 1.80: no probe at all.
	poor := newHarnessValued(t, 1, 4, 5)
	poor.growUntilTerminate(rates)
	if len(poor.slurm.submits) != 0 {
		t.Fatalf("value 5: %d submissions, want none", len(poor.slurm.submits))
	}
	if d := poor.decision(); d.Action != policy.Hold || d.Code != policy.CodeNotWorthCost || !slices.Equal(dollarsPerHour.FindAllString(d.Reason, -1), []string{"$1.80/h", "$3.00/h"}) {
		t.Fatalf("value 5: decision %+v, want a hold that names the worth and the cost", d)
	}
}

// reportCompute appends one line per worker with the same samples/s for all (synchronous
// training) and each worker's compute seconds per step.
// slowWorkerCyclesUntil runs up to 12 cycles in which worker 150 computes 300 ms per step and
// the main job 100 ms, all at the same samples/s, and stops once done says so.
func (h *harness) slowWorkerCyclesUntil(done func() bool) {
	h.t.Helper()
	for range 12 {
		h.reportCompute(100, map[uint32]float64{mainID: 0.100, 150: 0.300})
		h.cycle()
		if done() {
			return
		}
	}
}

func (h *harness) reportCompute(samples float64, compute map[uint32]float64) {
	h.t.Helper()
	for w, c := range compute {
		line := fmt.Sprintf(`{"time": %d, "worker": "%d", "samples_per_sec": %g, "compute_s": %g}`+"\n", h.now.Unix(), w, samples, c)
		f, err := os.OpenFile(filepath.Join(h.dir.ReportDir(mainID), fmt.Sprintf("%d.jsonl", w)), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			h.t.Fatal(err)
		}
		f.WriteString(line)
		f.Close()
	}
}

// The main job computes three times longer per step than its peer: elasticd never replaces
// the main job, so the job holds, says why in its status and logs it once, however many
// cycles pass; once the main job is as fast as the rest again, the job goes on.
func TestSlowMainJobHoldsAndSaysSoOnce(t *testing.T) {
	h := newHarness(t, 2, 2)
	var logged strings.Builder
	h.d.log = zerolog.New(&logged)
	h.slurm.run(150, WorkerName(mainID), h.uid, h.now)
	for range 12 {
		h.reportCompute(100, map[uint32]float64{mainID: 0.300, 150: 0.100})
		h.cycle()
	}
	d := h.decision()
	if d.Action != policy.Hold || d.Code != policy.CodeMainStraggler || !d.MainStraggler {
		t.Fatalf("decision %+v, want a hold naming the main job", d)
	}
	if len(h.slurm.submits) != 0 || len(h.slurm.terminate) != 0 || len(h.slurm.cancel) != 0 {
		t.Fatalf("submits %d, terminated %v, cancelled %v: a slow main job must not start replacements", len(h.slurm.submits), h.slurm.terminate, h.slurm.cancel)
	}
	st := h.d.Status()
	if len(st) != 1 || st[0].Decision != "hold" || st[0].ReasonCode != string(policy.CodeMainStraggler) ||
		len(st[0].Workers) != 2 || st[0].Workers[0].ComputeSecondsPerStep != 0.3 {
		t.Fatalf("status %+v", st)
	}
	if n := strings.Count(logged.String(), `"code":"main-straggler"`); n != 1 {
		t.Fatalf("the slow main job was logged %d times, want once:\n%s", n, logged.String())
	}
	if !strings.Contains(logged.String(), `"level":"warn"`) {
		t.Errorf("the hold was not logged as a warning:\n%s", logged.String())
	}
	for range 6 {
		h.reportCompute(100, map[uint32]float64{mainID: 0.100, 150: 0.100})
		h.cycle()
	}
	if d := h.decision(); d.MainStraggler || d.Code == policy.CodeMainStraggler || d.Code == policy.CodeStraggler {
		t.Fatalf("after the main job recovered: %+v", d)
	}
}

// A worker that computes longest per step, while all report the same samples/s, is replaced.
func TestSlowWorkerBySynchronousComputeTimeIsReplaced(t *testing.T) {
	h := newHarness(t, 2, 3)
	h.slurm.run(150, WorkerName(mainID), h.uid, h.now)
	h.slowWorkerCyclesUntil(func() bool { return len(h.slurm.submits) > 0 })
	if d := h.decision(); d.Action != policy.Replace || d.Code != policy.CodeStraggler || !slices.Equal(d.Workers, []string{"150"}) {
		t.Fatalf("decision %+v, want replace 150", d)
	}
	if len(h.slurm.submits) != 1 {
		t.Fatalf("%d submissions, want the successor", len(h.slurm.submits))
	}
}

// Below the max the successor joins first and the straggler leaves once it has reported.
func TestBelowMaxTheSuccessorJoinsBeforeTheStragglerLeaves(t *testing.T) {
	h := newHarness(t, 2, 3)
	h.slurm.run(150, WorkerName(mainID), h.uid, h.now)
	h.slowWorkerCyclesUntil(func() bool { return len(h.slurm.submits) > 0 })
	if len(h.slurm.submits) != 1 || len(h.slurm.terminate) != 0 {
		t.Fatalf("submits %d, terminated %v; want the successor first (decision %+v)", len(h.slurm.submits), h.slurm.terminate, h.decision())
	}
	h.slurm.run(201, WorkerName(mainID), h.uid, h.now) // the successor
	h.reportCompute(100, map[uint32]float64{mainID: 0.100, 150: 0.300, 201: 0.100})
	h.cycle()
	if !slices.Equal(h.slurm.terminate, []uint32{150}) {
		t.Fatalf("terminated %v once the successor reported, want 150", h.slurm.terminate)
	}
}

// The node agent's NVML samples reach the policy: in synchronous training both workers report
// the same samples/s (and no compute time), but worker 150's GPU is held at 60% of its clock
// for a thermal reason while the main job's runs at full clock: 150 is replaced.
func TestThrottledGPUFromTheAgentReplacesItsWorker(t *testing.T) {
	h := newHarness(t, 2, 2)
	h.slurm.run(150, WorkerName(mainID), h.uid, h.now)
	sample := func(mhz uint32, reasons ...string) api.GPUSample {
		max := uint32(1410)
		return api.GPUSample{Index: 0, Time: h.now, SMClockMHz: &mhz, MaxSMClockMHz: &max, ThrottleReasons: reasons}
	}
	for range 12 {
		h.report(200, mainID, 150)
		h.cycle()
		h.d.AddSignals(api.SignalReport{Node: "a100-1", Jobs: []api.JobSignals{
			{JobID: mainID, Samples: []api.GPUSample{sample(1410)}},
			{JobID: 150, Samples: []api.GPUSample{sample(846, "hw_thermal_slowdown")}},
		}})
		if len(h.slurm.submits) > 0 || len(h.slurm.terminate) > 0 {
			break
		}
	}
	d := h.decision()
	if d.Action != policy.Replace || d.Code != policy.CodeStragglerLeaves || !slices.Equal(d.Workers, []string{"150"}) { // at its max of 2
		t.Fatalf("decision %+v, want replace 150 for its throttled GPU", d)
	}
}

// The agent's samples of two GPUs that a dense job runs at their power limit, as H200s do
// (1440 of 1980 MHz, sw_power_cap alone): no worker is flagged for it; one that also names a
// thermal slowdown is.
func TestPowerCappedGPUsFromTheAgentAreNotFlagged(t *testing.T) {
	h := newHarness(t, 2, 2)
	h.slurm.run(150, WorkerName(mainID), h.uid, h.now)
	sample := func(reasons ...string) api.GPUSample {
		mhz, max := uint32(1440), uint32(1980)
		return api.GPUSample{Index: 0, Time: h.now, SMClockMHz: &mhz, MaxSMClockMHz: &max, ThrottleReasons: reasons}
	}
	for range 6 {
		h.report(200, mainID, 150)
		h.d.AddSignals(api.SignalReport{Node: "a100-1", Jobs: []api.JobSignals{
			{JobID: mainID, Samples: []api.GPUSample{sample("sw_power_cap")}},
			{JobID: 150, Samples: []api.GPUSample{sample("sw_power_cap", "hw_thermal_slowdown")}},
		}})
		h.cycle()
	}
	flags := map[string]string{}
	for _, f := range h.decision().Flags {
		flags[f.Worker] += f.Reason
	}
	if _, ok := flags["100"]; ok || !strings.Contains(flags["150"], "hw_thermal_slowdown") {
		t.Fatalf("flags %v; want 150's thermal slowdown alone, not the main job's power cap", flags)
	}
}

// At the job's max (2:2, the main job and worker 150) torchrun's rendezvous admits no successor
// beside the straggler: 150 gets TERM first, and its successor is submitted only once 150 has
// left the queue; a restart of elasticd in between forgets nothing, and nothing is submitted
// twice.
func TestAtMaxTheStragglerLeavesBeforeItsSuccessorJoins(t *testing.T) {
	h := newHarness(t, 1, 2)
	h.slurm.run(150, WorkerName(mainID), h.uid, h.now)
	h.slowWorkerCyclesUntil(func() bool { return len(h.slurm.submits) > 0 || len(h.slurm.terminate) > 0 })
	if d := h.decision(); d.Action != policy.Replace || d.Code != policy.CodeStragglerLeaves || !d.LeaveFirst {
		t.Fatalf("decision %+v, want a replacement that leaves first", d)
	}
	if len(h.slurm.submits) != 0 || !slices.Equal(h.slurm.terminate, []uint32{150}) {
		t.Fatalf("submits %d, terminated %v; want the straggler's TERM first and no successor yet", len(h.slurm.submits), h.slurm.terminate)
	}
	h.reportCompute(100, map[uint32]float64{mainID: 0.100, 150: 0.300})
	h.cycle()
	st := h.d.Status()
	if len(h.slurm.submits) != 0 || st[0].ReasonCode != string(reconcile.CodeStragglerLeaving) ||
		!slices.Equal(st[0].Leaving, []string{"150 leaves before its a100 successor joins"}) {
		t.Fatalf("submits %d, status %+v; want a hold while 150 leaves", len(h.slurm.submits), st[0])
	}

	// elasticd restarts while the straggler leaves: it still waits, and cancels it after its
	// grace from the TERM before the restart.
	h.restartDaemon()
	h.cycle()
	if len(h.slurm.submits) != 0 || len(h.d.jobs[mainID].leaving) != 1 {
		t.Fatalf("after a restart: submits %d, leaving %v", len(h.slurm.submits), h.d.jobs[mainID].leaving)
	}
	h.now = h.now.Add(10 * time.Second)
	h.cycle()
	if !slices.Equal(h.slurm.cancel, []uint32{150}) || len(h.slurm.submits) != 0 {
		t.Fatalf("cancelled %v, submits %d; want 150 cancelled after its grace, still no successor", h.slurm.cancel, len(h.slurm.submits))
	}

	// Gone from the queue: the successor is submitted, once.
	before, err := os.ReadFile(h.dir.StateFile(mainID))
	if err != nil {
		t.Fatal(err)
	}
	delete(h.slurm.jobs, 150)
	delete(h.slurm.extras, 150)
	h.cycle()
	if len(h.slurm.submits) != 1 || !slices.Contains(h.slurm.submits[0].Options.Argv(), "--gpus-per-node=a100:1") {
		t.Fatalf("%d submissions once the straggler left, want its a100 successor", len(h.slurm.submits))
	}
	h.cycle()
	if len(h.slurm.submits) != 1 || len(h.d.jobs[mainID].leaving) != 0 {
		t.Fatalf("submitted again (%d) or still leaving %v", len(h.slurm.submits), h.d.jobs[mainID].leaving)
	}

	// An elasticd that submitted the successor and stopped before saving so restarts with the
	// straggler still leaving: the successor in the queue brings the job back to its size, and
	// nothing more is submitted.
	if err := os.WriteFile(h.dir.StateFile(mainID), before, 0o600); err != nil {
		t.Fatal(err)
	}
	h.restartDaemon()
	h.slurm.run(201, WorkerName(mainID), h.uid, h.now)
	h.cycle()
	h.cycle()
	if len(h.slurm.submits) != 1 || len(h.d.jobs[mainID].leaving) != 0 {
		t.Fatalf("after a restart with the successor running: submits %d, leaving %v", len(h.slurm.submits), h.d.jobs[mainID].leaving)
	}
}

// A successor Slurm refuses is tried reconcile.MaxRefusals times, then the job holds: no loop.
func TestRefusedSuccessorHoldsTheJob(t *testing.T) {
	h := newHarness(t, 1, 2)
	h.slurm.run(150, WorkerName(mainID), h.uid, h.now)
	h.slowWorkerCyclesUntil(func() bool { return len(h.slurm.terminate) > 0 })
	delete(h.slurm.jobs, 150)
	delete(h.slurm.extras, 150)
	h.slurm.submitErr = errors.New("sbatch: error: Batch job submission failed: Invalid account")
	for range 10 {
		h.cycle()
	}
	// The words are checked for Slurm's answer, which the hold passes on and no code carries.
	if d := h.decision(); h.slurm.attempts != reconcile.MaxRefusals || d.Action != policy.Hold || d.Code != reconcile.CodeWorkersRefused || !strings.Contains(d.Reason, "Invalid account") {
		t.Fatalf("%d attempts, decision %+v; want %d, then a hold with Slurm's answer", h.slurm.attempts, h.decision(), reconcile.MaxRefusals)
	}
}

// Growth beyond MIN yields to jobs waiting for the pool's GPUs, whoever they belong to: here
// bob's over-quota array, which quotad would lend the idle GPUs to. An allocation over quota
// (salloc: quotad never lends it) or a held job waits for no GPUs, and then the job grows.
func TestGrowthYieldsToWaitingJobs(t *testing.T) {
	h := newHarness(t, 1, 4)
	h.slurm.jobs[300] = slurm.Job{ID: 300, User: "bob", Account: "proj-b", Partition: "a100-spot,a100", State: "PENDING",
		StateReason: "QOSGrpGRES", Batch: true, Requeue: true, TRESReq: gpureq.TRES{"gres/gpu": 1}, ArrayJobID: 300, ArrayTasks: []uint32{1, 2, 3, 4}}
	h.slurm.jobs[301] = slurm.Job{ID: 301, User: "carol", Account: "proj-c", Partition: "a100", State: "PENDING",
		StateReason: "QOSGrpGRES", Batch: false, Requeue: true, TRESReq: gpureq.TRES{"gres/gpu": 4}}
	for range 5 {
		h.report(100, mainID)
		h.cycle()
	}
	// The words are checked for the GPUs asked for, 4: bob's tasks, not carol's allocation.
	if d := h.decision(); len(h.slurm.submits) != 0 || d.Code != policy.CodeYieldsToWaiting || !strings.Contains(d.Reason, "ask for 4 GPUs, 4 of a100 free") {
		t.Fatalf("%d workers submitted, decision %+v; want none while bob's 4 tasks wait for the 4 free a100s", len(h.slurm.submits), d)
	}
	held := h.slurm.jobs[300]
	held.StateReason = "JobHeldUser"
	h.slurm.jobs[300] = held
	for range 5 {
		h.report(100, mainID)
		h.cycle()
	}
	if len(h.slurm.submits) != 1 {
		t.Fatalf("%d workers submitted once bob's job is held, want 1 (decision %+v)", len(h.slurm.submits), h.decision())
	}
}

// With no elastic job registered or followed, a cycle reads nothing of Slurm: on a site's
// queue the whole-queue read is what a cycle costs.
func TestIdleCycleReadsNoQueue(t *testing.T) {
	f := &fakeSlurm{jobs: map[uint32]slurm.Job{}, extras: map[uint32]slurm.Job{}, queueErr: errors.New("the queue was read")}
	d := New(Config{Dir: registry.Dir(t.TempDir())}, f, zerolog.Nop(), NewMetrics(prometheus.NewRegistry()))
	if err := d.Cycle(context.Background()); err != nil {
		t.Fatalf("an idle cycle: %v", err)
	}
}

// dollarsPerHour finds the worth and the cost a reason gives.
var dollarsPerHour = regexp.MustCompile(`\$\d+\.\d\d/h`)
