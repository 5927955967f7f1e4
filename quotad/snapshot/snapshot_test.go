package snapshot

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/bridge/slurm/slurmtest"
	"github.com/slurmbridge/slurmbridge/bridge/slurmdbd"
	"github.com/slurmbridge/slurmbridge/quotad/policy"
)

// fixtureFetcher replays sinfo --json captured on the testbed (22.05) with bob's 4 jobs in his
// guarantee, 2 borrowed and one --no-requeue job pending over quota; the queue is the same
// moment's squeue --json capture written as the fast read prints it (squeue-22.05-borrowing.txt,
// the unfinished jobs of squeue-22.05-borrowing.json; bridge/slurm checks the two forms agree on
// real captures of every release).
type fixtureFetcher struct {
	jobsErr     error
	throttleErr error
	throttles   map[uint32]int
	askedQOS    *[]string // the QOS the throttle read was asked for
	names       map[uint32]string
	namesErr    error
	qos         map[uint32]string // job id → the QOS it is in instead of the fixture's
	namesQOS    *[]string         // the QOS the name read was asked for
	// taskThrottles answers scontrol's per-array read; askedArrays records the arrays asked.
	taskThrottles map[uint32]int
	askedArrays   *[]uint32
	t             *testing.T
}

func (f fixtureFetcher) DecayedGPUUsage(context.Context) (map[string]float64, error) {
	return map[string]float64{"proj-a": 120}, nil
}

func (f fixtureFetcher) ArrayTaskThrottle(_ context.Context, arrayJobID uint32) (int, error) {
	if f.askedArrays != nil {
		*f.askedArrays = append(*f.askedArrays, arrayJobID)
	}
	n, ok := f.taskThrottles[arrayJobID]
	if !ok {
		return 0, errors.New("slurm_load_jobs error: Invalid job id specified")
	}
	return n, nil
}

// Queue answers the three reads quotad makes: the fast read from the capture, the throttle
// and the name reads from the fetcher's maps, noting the QOS each of these was asked for.
func (f fixtureFetcher) Queue(_ context.Context, r slurm.QueueRead) ([]slurm.Job, error) {
	var jobs []slurm.Job
	switch r.Fields {
	case slurm.SchedulingFields:
		return f.scheduling()
	case slurm.ThrottleFields:
		if f.askedQOS != nil {
			*f.askedQOS = r.QOS
		}
		for id, n := range f.throttles {
			jobs = append(jobs, slurm.Job{ArrayJobID: id, ArrayThrottle: n})
		}
		return jobs, f.throttleErr
	case slurm.NameFields:
		if f.namesQOS != nil {
			*f.namesQOS = r.QOS
		}
		for id, name := range f.names {
			jobs = append(jobs, slurm.Job{ID: id, Name: name})
		}
		return jobs, f.namesErr
	}
	f.t.Fatalf("quotad read the queue's fields %d", r.Fields)
	return nil, nil
}

func (f fixtureFetcher) Nodes(context.Context) ([]slurm.Node, error) {
	data, err := os.ReadFile("testdata/sinfo-22.05-borrowing.json")
	if err != nil {
		f.t.Fatal(err)
	}
	return slurm.ParseNodes(data)
}

func (f fixtureFetcher) SlurmRelease(context.Context) (slurm.Release, error) {
	return slurm.Release{Year: 22, Month: 5}, nil
}

func (f fixtureFetcher) scheduling() ([]slurm.Job, error) {
	if f.jobsErr != nil {
		return nil, f.jobsErr
	}
	data, err := os.ReadFile("testdata/squeue-22.05-borrowing.txt")
	if err != nil {
		f.t.Fatal(err)
	}
	jobs, err := slurm.ParseQueue(data, slurm.SchedulingFields)
	for i := range jobs {
		if q, ok := f.qos[jobs[i].ID]; ok {
			jobs[i].QOS = q
		}
	}
	return jobs, err
}

type fakeAccounting struct{ err error }

func (a fakeAccounting) TRESNames(context.Context) (map[uint32]string, error) {
	return map[uint32]string{1: "cpu", 1001: "gres/gpu", 1002: "gres/gpu:a100", 1003: "gres/gpu:v100"}, a.err
}
func (fakeAccounting) QOS(context.Context, map[uint32]string) ([]policy.QOS, error) { return nil, nil }
func (fakeAccounting) Associations(context.Context) ([]policy.Account, []policy.UserAssociation, error) {
	return nil, nil, nil
}
func (fakeAccounting) Reclaims(context.Context, time.Time) ([]policy.Reclaim, error) {
	return nil, nil
}

func (fakeAccounting) Usage(context.Context, uint32, time.Time, time.Time) (map[string]float64, error) {
	return map[string]float64{"proj-b": 10}, nil
}

func TestTakeFromFixtures(t *testing.T) {
	t0 := time.Unix(1795341600, 0)
	calls := 0
	b := &Builder{Live: fixtureFetcher{t: t}, Accounting: fakeAccounting{}, Now: func() time.Time { calls++; return t0.Add(time.Duration(calls) * time.Second) }}
	snap, err := b.Take(context.Background(), testConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	if !snap.WholeArrays {
		t.Error("a 22.05 snapshot does not ask for whole arrays")
	}
	if !snap.TakenAt.Equal(t0.Add(time.Second)) {
		t.Errorf("TakenAt = %v, want the first read's start %v", snap.TakenAt, t0.Add(time.Second))
	}
	byQOS := map[string]int{}
	var noRequeue *policy.Job
	for i, j := range snap.Jobs {
		byQOS[j.QOS+"/"+string(j.State)]++
		if !j.Requeue {
			noRequeue = &snap.Jobs[i]
		}
		if j.GPUsPerNode["a100"] != 1 {
			t.Errorf("job %d: GPUsPerNode = %v, want a100:1", j.ID, j.GPUsPerNode)
		}
	}
	want := map[string]int{"guar-proj-b/RUNNING": 4, "borrow/RUNNING": 2, "guar-proj-b/PENDING": 1}
	for k, n := range want {
		if byQOS[k] != n {
			t.Errorf("%s: %d jobs, want %d (all: %v)", k, byQOS[k], n, byQOS)
		}
	}
	if noRequeue == nil || noRequeue.Reason != "QOSGrpGRES" || noRequeue.State != policy.StatePending {
		t.Fatalf("the --no-requeue job is missing or wrong: %+v", noRequeue)
	}
	idle := map[string]int{}
	for _, n := range snap.Nodes {
		for _, part := range n.Partitions {
			for ty, c := range n.IdleGPUs {
				idle[part+"/"+ty] += c
			}
		}
	}
	if idle["a100/a100"] != 2 || idle["a100-spot/a100"] != 4 || idle["v100/v100"] != 8 {
		t.Errorf("idle GPUs = %v, want a100/a100 2, a100-spot/a100 4, v100/v100 8", idle)
	}
	// The policy never lends the --no-requeue job, and explains it.
	cfg, err := policy.ParseConfig([]byte("projects:\n  - account: proj-b\n    gpus: {a100: 4}\n"))
	if err != nil {
		t.Fatal(err)
	}
	plan := policy.BuildPlan(cfg, snap.Snapshot, snap.TakenAt)
	for _, m := range plan.Moves {
		if m.JobID == noRequeue.ID && m.Kind == policy.Lend {
			t.Errorf("plan lends the --no-requeue job: %s", m)
		}
	}
	if x, _ := plan.Explanation(noRequeue.ID); x.Code != policy.CodeNotRequeueable {
		t.Errorf("explain of the --no-requeue job = %s %q, want %s", x.Code, x.Text, policy.CodeNotRequeueable)
	}
}

func TestTakeFailsOnAnySourceError(t *testing.T) {
	for name, b := range map[string]*Builder{
		"database":  {Live: fixtureFetcher{t: t}, Accounting: fakeAccounting{err: errors.New("connection refused")}},
		"squeue":    {Live: fixtureFetcher{t: t, jobsErr: errors.New("slurm_load_jobs: Unable to contact slurm controller")}, Accounting: fakeAccounting{}},
		"throttles": {Live: fixtureFetcher{t: t, throttleErr: errors.New("squeue: error: Invalid qos")}, Accounting: fakeAccounting{}},
		"names":     {Live: fixtureFetcher{t: t, namesErr: errors.New("squeue: error: Invalid qos"), qos: map[uint32]string{13: "elastic-proj-b"}}, Accounting: fakeAccounting{}},
	} {
		snap, err := b.Take(context.Background(), testConfig(t))
		if err == nil || snap != nil {
			t.Errorf("%s failing: snapshot %v, err %v; want no snapshot and an error", name, snap, err)
		}
	}
}

func TestConvertJobPerTaskUsesTRESReq(t *testing.T) {
	j := slurm.Job{ID: 7, State: "PENDING", TRESPerTask: "gres:gpu:a100:1", TRESReq: map[string]uint64{"gres/gpu": 4, "gres/gpu:a100": 4}}
	pj, ok, err := ConvertJob(&j)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if pj.GPUsPerJob["a100"] != 4 || len(pj.GPUsPerNode) != 0 {
		t.Errorf("per-task job: GPUsPerJob %v GPUsPerNode %v, want a100:4 for the job", pj.GPUsPerJob, pj.GPUsPerNode)
	}
	j.State = "COMPLETED"
	if _, ok, _ := ConvertJob(&j); ok {
		t.Error("a completed job is kept")
	}
}

// A pending array record keeps its tasks: the policy counts each as a job.
func TestConvertJobKeepsArrayTasks(t *testing.T) {
	j := slurm.Job{ID: 10, State: "PENDING", TRESPerNode: "gres/gpu:a100:1", ArrayJobID: 10, ArrayTasks: []uint32{1, 4, 7}}
	pj, ok, err := ConvertJob(&j)
	if err != nil || !ok || pj.ArrayJobID != 10 || len(pj.ArrayTasks) != 3 || pj.GPUsPerNode["a100"] != 1 {
		t.Fatalf("%+v %v %v", pj, ok, err)
	}
}

// The 24.11 capture of jobs Slurm can and cannot requeue, through ConvertJob: only sbatch jobs
// with Requeue=1 are Requeueable; salloc keeps Requeue=1 but is no batch job.
func TestConvertJobKeepsBatchFlagAndRequeue(t *testing.T) {
	jobs, err := slurm.ParseQueue(slurmtest.Fixture(t, "squeue-24.11-requeue.json"), slurm.AllFields)
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint32]bool{10: true, 11: false, 12: true, 13: false, 14: false, 15: false, 16: true}
	for i := range jobs {
		pj, ok, err := ConvertJob(&jobs[i])
		if err != nil || !ok {
			t.Fatalf("job %d: %v %v", jobs[i].ID, ok, err)
		}
		if pj.Batch != jobs[i].Batch || pj.Requeue != jobs[i].Requeue || pj.Requeueable() != want[pj.ID] {
			t.Errorf("job %d: batch %v requeue %v requeueable %v, want requeueable %v", pj.ID, pj.Batch, pj.Requeue, pj.Requeueable(), want[pj.ID])
		}
	}
}

func testConfig(t *testing.T) *policy.Config {
	t.Helper()
	cfg, err := policy.ParseConfig([]byte(`
projects:
  - account: proj-a
    gpus: {a100: 4}
  - account: proj-b
    gpus: {a100: 4}
`))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// The throttle read asks for the guaranteed QOS only (a lent task, in a borrow QOS, would fold
// into its array's line and hide the throttle), and every record of a throttled array gets it.
func TestTakeReadsArrayThrottlesOfGuaranteedQOS(t *testing.T) {
	var asked []string
	const arrayJob = 500
	live := arrayFetcher{fixtureFetcher{t: t, askedQOS: &asked, throttles: map[uint32]int{arrayJob: 2}}}
	b := &Builder{Live: live, Accounting: fakeAccounting{}}
	snap, err := b.Take(context.Background(), testConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"guar-proj-a", "guar-proj-b"}; !slices.Equal(asked, want) {
		t.Errorf("throttle read asked for %v, want %v", asked, want)
	}
	for _, j := range snap.Jobs {
		if want := map[bool]int{true: 2, false: 0}[j.ArrayJobID == arrayJob]; j.ArrayThrottle != want {
			t.Errorf("job %d (array %d): throttle %d, want %d", j.ID, j.ArrayJobID, j.ArrayThrottle, want)
		}
	}
}

// arrayFetcher adds to the captured queue a pending array record of bob's, tasks 0-2.
type arrayFetcher struct{ fixtureFetcher }

func (f arrayFetcher) Queue(ctx context.Context, r slurm.QueueRead) ([]slurm.Job, error) {
	jobs, err := f.fixtureFetcher.Queue(ctx, r)
	if r.Fields != slurm.SchedulingFields {
		return jobs, err
	}
	return append(jobs, slurm.Job{ID: 500, ArrayJobID: 500, ArrayTasks: []uint32{0, 1, 2}, User: "bob", Account: "proj-b", QOS: "guar-proj-b",
		Partition: "a100", State: "PENDING", Batch: true, Requeue: true, NodeCount: 1, TRESPerNode: "gres:gpu:a100:1"}), err
}

// splitFetcher is arrayFetcher with task 3 of array 500 split off into its own pending record
// in guar-proj-b (a task returned from the borrow QOS), and array 600 with task 1 split off and
// its throttle still in the throttle read's line.
type splitFetcher struct{ fixtureFetcher }

func (f splitFetcher) Queue(ctx context.Context, r slurm.QueueRead) ([]slurm.Job, error) {
	jobs, err := arrayFetcher(f).Queue(ctx, r)
	if r.Fields != slurm.SchedulingFields {
		return jobs, err
	}
	task := func(id, array, task uint32) slurm.Job {
		return slurm.Job{ID: id, ArrayJobID: array, ArrayTasks: []uint32{task}, User: "bob", Account: "proj-b", QOS: "guar-proj-b",
			Partition: "a100", State: "PENDING", Batch: true, Requeue: true, NodeCount: 1, TRESPerNode: "gres:gpu:a100:1"}
	}
	return append(jobs, task(504, 500, 3), task(602, 600, 1), task(603, 600, 2)), err
}

// squeue folds a pending task split off into the guaranteed QOS back into its array's line
// without the "%N": the throttle of such an array is read from scontrol, once, and only where
// the throttle read did not give it.
func TestTakeReadsThrottleOfArraysWithSplitTasks(t *testing.T) {
	var arrays []uint32
	live := splitFetcher{fixtureFetcher{t: t, throttles: map[uint32]int{600: 3}, taskThrottles: map[uint32]int{500: 2}, askedArrays: &arrays}}
	snap, err := (&Builder{Live: live, Accounting: fakeAccounting{}}).Take(context.Background(), testConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(arrays, []uint32{500}) {
		t.Errorf("scontrol asked for arrays %v, want [500]", arrays)
	}
	for _, j := range snap.Jobs {
		want := map[uint32]int{500: 2, 600: 3}[j.ArrayJobID]
		if j.ArrayThrottle != want {
			t.Errorf("job %d (array %d): throttle %d, want %d", j.ID, j.ArrayJobID, j.ArrayThrottle, want)
		}
	}

	// The same builder's next cycles take what scontrol said for a while, then ask again.
	now := time.Unix(1_800_000_000, 0)
	b := &Builder{Live: live, Accounting: fakeAccounting{}, Now: func() time.Time { return now }}
	arrays = nil
	for _, after := range []time.Duration{0, 5 * time.Second, throttleReadFor - time.Second, throttleReadFor} {
		now = time.Unix(1_800_000_000, 0).Add(after)
		if _, err := b.Take(context.Background(), testConfig(t)); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(arrays, []uint32{500, 500}) {
		t.Errorf("over %s of cycles scontrol was asked for arrays %v, want 500 at the start and once the read was %s old", throttleReadFor, arrays, throttleReadFor)
	}

	// An array that cannot be read fails the snapshot: its throttle is unknown.
	live.taskThrottles = nil
	var unread *ArrayThrottleError
	if _, err := (&Builder{Live: live, Accounting: fakeAccounting{}}).Take(context.Background(), testConfig(t)); !errors.As(err, &unread) || unread.ArrayJobID != 500 {
		t.Errorf("Take with an unreadable array: %v", err)
	}
}

// Elastic workers are told by name, read only where the queue has jobs in an elastic QOS and
// only for those QOS: a name like elasticd's workers' gives the main job; any other name, or
// none, gives nothing.
func TestTakeReadsElasticWorkersNames(t *testing.T) {
	var asked []string
	live := fixtureFetcher{t: t, namesQOS: &asked, names: map[uint32]string{13: "elastic-worker-14", 15: "elastic-worker-x"}}
	if _, err := (&Builder{Live: live, Accounting: fakeAccounting{}}).Take(context.Background(), testConfig(t)); err != nil {
		t.Fatal(err)
	}
	if asked != nil {
		t.Fatalf("names read for QOS %q although no job is in an elastic QOS", asked)
	}
	live.qos = map[uint32]string{13: "elastic-proj-b", 15: "Elastic-Proj-B"}
	snap, err := (&Builder{Live: live, Accounting: fakeAccounting{}}).Take(context.Background(), testConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"elastic-proj-b"}; !slices.Equal(asked, want) {
		t.Fatalf("names read for QOS %q, want %q", asked, want)
	}
	for _, j := range snap.Jobs {
		want := uint32(0)
		if j.ID == 13 {
			want = 14
		}
		if j.ElasticMain != want {
			t.Errorf("job %d: ElasticMain %d, want %d", j.ID, j.ElasticMain, want)
		}
	}
}

// markedAccounting counts the reads of TRES, QOS and associations, under a change mark the
// test moves.
type markedAccounting struct {
	fakeAccounting
	mark              slurmdbd.ChangeMark
	markErr           error
	tres, qos, assocs int
}

func (a *markedAccounting) ChangeMark(context.Context) (slurmdbd.ChangeMark, error) {
	return a.mark, a.markErr
}
func (a *markedAccounting) TRESNames(ctx context.Context) (map[uint32]string, error) {
	a.tres++
	return a.fakeAccounting.TRESNames(ctx)
}
func (a *markedAccounting) QOS(context.Context, map[uint32]string) ([]policy.QOS, error) {
	a.qos++
	return []policy.QOS{{Name: "guar-proj-b"}}, nil
}
func (a *markedAccounting) Associations(context.Context) ([]policy.Account, []policy.UserAssociation, error) {
	a.assocs++
	return []policy.Account{{Name: "proj-b"}}, nil, nil
}

// TRES, QOS and associations are read again only when slurmdbd's change mark moves, or the
// last read is a minute old; a mark that cannot be read fails the snapshot; an Accounting with
// no mark is read every time.
func TestStructureIsReadAgainOnlyWhenTheMarkMoves(t *testing.T) {
	now := time.Unix(1795341600, 0)
	acc := &markedAccounting{mark: slurmdbd.ChangeMark{Txn: 10, QOSRows: 3}}
	b := &Builder{Live: fixtureFetcher{t: t}, Accounting: acc, Now: func() time.Time { return now }}
	take := func(what string, wantReads int) {
		t.Helper()
		snap, err := b.Take(context.Background(), testConfig(t))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if acc.tres != wantReads || acc.qos != wantReads || acc.assocs != wantReads {
			t.Errorf("%s: TRES read %d times, QOS %d, associations %d; want %d each", what, acc.tres, acc.qos, acc.assocs, wantReads)
		}
		if len(snap.QOS) != 1 || len(snap.Accounts) != 1 || snap.TRES[1001] != "gres/gpu" {
			t.Errorf("%s: snapshot QOS %v accounts %v TRES %v", what, snap.QOS, snap.Accounts, snap.TRES)
		}
		snap.QOS[0].Name = "changed by a reader" // a snapshot's lists are its own
	}
	take("first", 1)
	take("mark unmoved", 1)
	acc.mark.Txn++ // sacctmgr modify qos, say
	take("a transaction", 2)
	now = now.Add(30 * time.Second)
	take("30 s on", 2)
	now = now.Add(31 * time.Second)
	take("61 s on", 3)
	now = now.Add(-time.Hour) // the clock went back: read again
	take("clock back", 4)
	acc.markErr = errors.New("Lost connection to MySQL server")
	if _, err := b.Take(context.Background(), testConfig(t)); err == nil || !strings.Contains(err.Error(), "Lost connection") {
		t.Errorf("a mark that cannot be read: err %v, want the snapshot failed", err)
	}

	plain := &countingPlain{}
	b = &Builder{Live: fixtureFetcher{t: t}, Accounting: plain, Now: func() time.Time { return now }}
	for range 2 {
		if _, err := b.Take(context.Background(), testConfig(t)); err != nil {
			t.Fatal(err)
		}
	}
	if plain.tres != 2 {
		t.Errorf("an Accounting without a mark: TRES read %d times in 2 snapshots, want 2", plain.tres)
	}
}

// countingPlain has no change mark.
type countingPlain struct {
	fakeAccounting
	tres int
}

func (a *countingPlain) TRESNames(ctx context.Context) (map[uint32]string, error) {
	a.tres++
	return a.fakeAccounting.TRESNames(ctx)
}

// signallingFetcher says when the queue read has begun.
type signallingFetcher struct {
	fixtureFetcher
	queueStarted chan struct{}
	once         *sync.Once
}

func (f signallingFetcher) Queue(ctx context.Context, r slurm.QueueRead) ([]slurm.Job, error) {
	if r.Fields == slurm.SchedulingFields {
		f.once.Do(func() { close(f.queueStarted) })
	}
	return f.fixtureFetcher.Queue(ctx, r)
}

// The quota table loads beside the queue read, not before it: a load that waits for the
// queue read to begin completes (one before it would wait for ever). A table that cannot be
// loaded fails the snapshot with a ConfigError.
func TestTheQuotaTableLoadsBesideTheQueueRead(t *testing.T) {
	f := signallingFetcher{fixtureFetcher: fixtureFetcher{t: t}, queueStarted: make(chan struct{}), once: &sync.Once{}}
	b := &Builder{Live: f, Accounting: fakeAccounting{}}
	want := testConfig(t)
	cfg, snap, err := b.TakeLoading(context.Background(), func(ctx context.Context) (*policy.Config, error) {
		select {
		case <-f.queueStarted:
			return want, nil
		case <-time.After(10 * time.Second):
			return nil, errors.New("the queue read did not begin while the table loaded")
		}
	})
	if err != nil || cfg != want || snap == nil || len(snap.Jobs) == 0 {
		t.Fatalf("cfg %p (want %p), snapshot %v, err %v", cfg, want, snap != nil, err)
	}
	missing := errors.New("Table 'slurmbridge.quota_projects' doesn't exist")
	_, _, err = b.TakeLoading(context.Background(), func(context.Context) (*policy.Config, error) {
		return nil, missing
	})
	var ce *ConfigError
	if !errors.As(err, &ce) || !errors.Is(ce.Err, missing) {
		t.Errorf("a table that cannot be loaded: err %v, want a ConfigError saying so", err)
	}
}
