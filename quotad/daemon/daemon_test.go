package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/slurmbridge/slurmbridge/bridge/slurmdbd"
	"github.com/slurmbridge/slurmbridge/quotad/actuate"
	"github.com/slurmbridge/slurmbridge/quotad/policy"
	"github.com/slurmbridge/slurmbridge/quotad/policy/policytest"
	"github.com/slurmbridge/slurmbridge/quotad/snapshot"
	"github.com/slurmbridge/slurmbridge/quotad/store"
	"github.com/slurmbridge/slurmbridge/quotad/view"
)

type fakeConfig struct{ cfg *policy.Config }

func (f fakeConfig) Load(context.Context) (*policy.Config, error) { return f.cfg, nil }

type fakeSnaps struct {
	snap *snapshot.Snapshot
	err  error
}

func (f fakeSnaps) TakeLoading(ctx context.Context, load func(context.Context) (*policy.Config, error)) (*policy.Config, *snapshot.Snapshot, error) {
	cfg, err := load(ctx)
	if err != nil {
		return nil, nil, &snapshot.ConfigError{Err: err}
	}
	return cfg, f.snap, f.err
}

type fakeLease struct {
	held   bool
	checks int
}

func (l *fakeLease) Ensure(context.Context) (bool, string, error) {
	l.checks++
	return l.held, "MariaDB connection 7", nil
}
func (l *fakeLease) Release(context.Context) {}
func (l *fakeLease) Check(context.Context) error {
	if !l.held {
		return ErrLeaseLost
	}
	return nil
}

type countingApplier struct{ plans int }

func (a *countingApplier) Apply(_ context.Context, p *policy.Plan) (actuate.Result, error) {
	a.plans++
	return actuate.Result{Lends: len(p.Moves), LendsByAccount: map[string]int{"proj-b": len(p.Moves)}}, nil
}

// overQuota: proj-b runs 4 in its guarantee and has one more pending over quota, 4 a100 idle.
func overQuota(now time.Time) *snapshot.Snapshot {
	running := func(id uint32) *policytest.JobWrapper {
		return policytest.MakeJob(id, "proj-b").GPU("a100", 1).Running(time.Minute)
	}
	snap := policytest.MakeSnapshot().TakenAt(now).
		Jobs(policytest.Jobs(1, 4, running)...).
		Jobs(policytest.MakeJob(5, "proj-b").GPU("a100", 1).Obj()).
		Node(policytest.GPUNode("a100-1", "a100", 4, 4, 8, 32000, "a100")).
		Node(policytest.GPUNode("a100-2", "a100", 4, 0, 4, 28000, "a100")).
		Obj()
	snap.QOS = []policy.QOS{{Name: "borrow-proj-b", PreemptMode: "requeue"}, {Name: "elastic-proj-b", PreemptMode: "requeue"},
		{Name: "guar-proj-b", GrpTRES: map[string]int64{"gres/gpu": 4, "gres/gpu:a100": 4}}}
	snap.Accounts = []policy.Account{{Name: "proj-b", QOS: []string{"borrow-proj-b", "elastic-proj-b", "guar-proj-b"}, DefaultQOS: "guar-proj-b"}}
	return &snapshot.Snapshot{Snapshot: snap}
}

func newTestDaemon(t *testing.T, snaps Snapshotter, lease *fakeLease, app *countingApplier) (*Daemon, *bytes.Buffer) {
	cfg, err := policy.ParseConfig([]byte("settings: {borrowSizeTiers: []}\nprojects:\n  - account: proj-b\n    gpus: {a100: 4}\n"))
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	now := time.Unix(1795341600, 0)
	return &Daemon{Config: fakeConfig{cfg}, Snapshots: snaps, Lease: lease, Apply: app, Metrics: NewMetrics(),
		Log: zerolog.New(&logs), Now: func() time.Time { return now }}, &logs
}

func TestCycleLendsWhenActive(t *testing.T) {
	now := time.Unix(1795341600, 0)
	app, lease := &countingApplier{}, &fakeLease{held: true}
	d, _ := newTestDaemon(t, fakeSnaps{snap: overQuota(now)}, lease, app)
	res, err := d.Cycle(context.Background())
	if err != nil || res.Outcome != "acted" || app.plans != 1 || len(res.Plan.Moves) != 1 || res.Plan.Moves[0].JobID != 5 {
		t.Fatalf("outcome %s err %v plans %d moves %v", res.Outcome, err, app.plans, res.Plan.Moves)
	}
	if lease.checks != 2 {
		t.Errorf("lease checked %d times, want before reading and again before acting", lease.checks)
	}
	if v := testutil.ToFloat64(d.Metrics.lends.WithLabelValues("proj-b")); v != 1 {
		t.Errorf("lends_total = %v", v)
	}
	if v := testutil.ToFloat64(d.Metrics.inUse.WithLabelValues("proj-b", "a100")); v != 4 {
		t.Errorf("in_use_gpus = %v", v)
	}
}

func TestCycleDoesNothingOnReadError(t *testing.T) {
	app := &countingApplier{}
	unreachable := errors.New("slurmctld (squeue): Unable to contact slurm controller")
	d, _ := newTestDaemon(t, fakeSnaps{err: unreachable}, &fakeLease{held: true}, app)
	res, err := d.Cycle(context.Background())
	if !errors.Is(err, unreachable) || app.plans != 0 || res.Outcome != "error" {
		t.Errorf("outcome %s err %v plans %d: want an error saying why and no action", res.Outcome, err, app.plans)
	}
}

func TestCyclePassiveWithoutLease(t *testing.T) {
	now := time.Unix(1795341600, 0)
	app := &countingApplier{}
	d, logs := newTestDaemon(t, fakeSnaps{snap: overQuota(now)}, &fakeLease{held: false}, app)
	for range 2 {
		res, err := d.Cycle(context.Background())
		if err != nil || res.Outcome != "passive" || app.plans != 0 {
			t.Fatalf("outcome %s err %v plans %d", res.Outcome, err, app.plans)
		}
	}
	if n := strings.Count(logs.String(), "staying passive"); n != 1 {
		t.Errorf("said it is passive %d times, want once: %s", n, logs.String())
	}
}

func TestCycleStaleSnapshotDoesNotAct(t *testing.T) {
	now := time.Unix(1795341600, 0)
	app := &countingApplier{}
	d, _ := newTestDaemon(t, fakeSnaps{snap: overQuota(now.Add(-time.Minute))}, &fakeLease{held: true}, app)
	res, err := d.Cycle(context.Background())
	if err != nil || res.Outcome != "not_acting" || app.plans != 0 {
		t.Errorf("outcome %s err %v plans %d", res.Outcome, err, app.plans)
	}
}

func TestDryRunPrintsAndNeedsNoLease(t *testing.T) {
	now := time.Unix(1795341600, 0)
	app, lease := &countingApplier{}, &fakeLease{held: false}
	d, _ := newTestDaemon(t, fakeSnaps{snap: overQuota(now)}, lease, app)
	var out bytes.Buffer
	d.DryRun, d.Out = true, &out
	if _, err := d.Cycle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if app.plans != 0 || lease.checks != 0 {
		t.Errorf("dry run applied %d plans, checked the lease %d times", app.plans, lease.checks)
	}
	if !strings.Contains(out.String(), "lend job 5 (proj-b, 1 a100): qos guar-proj-b->borrow-proj-b") {
		t.Errorf("dry-run output lacks the lend:\n%s", out.String())
	}
}

// fencedApplier does one lend, then finds the lease gone, as actuate.Actuator does when its
// fence check fails.
type fencedApplier struct{ plans int }

func (a *fencedApplier) Apply(context.Context, *policy.Plan) (actuate.Result, error) {
	a.plans++
	return actuate.Result{Lends: 1, LendsByAccount: map[string]int{"proj-b": 1}}, fmt.Errorf("stopped before lend job 6: %w: its connection failed", ErrLeaseLost)
}

func TestCycleFencedMidApplyIsLoggedOnceAndCounted(t *testing.T) {
	now := time.Unix(1795341600, 0)
	lease := &fakeLease{held: true}
	cfg, err := policy.ParseConfig([]byte("settings: {borrowSizeTiers: []}\nprojects:\n  - account: proj-b\n    gpus: {a100: 4}\n"))
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	app := &fencedApplier{}
	d := &Daemon{Config: fakeConfig{cfg}, Snapshots: fakeSnaps{snap: overQuota(now)}, Lease: lease, Apply: app, Metrics: NewMetrics(),
		Log: zerolog.New(&logs), Now: func() time.Time { return now }}
	res, err := d.Cycle(context.Background())
	if !errors.Is(err, ErrLeaseLost) || res.Outcome != "fenced" {
		t.Fatalf("outcome %s err %v: want fenced with the lease error", res.Outcome, err)
	}
	if n := strings.Count(logs.String(), "lease lost mid-apply"); n != 1 {
		t.Errorf("logged the loss %d times, want once:\n%s", n, logs.String())
	}
	if v := testutil.ToFloat64(d.Metrics.fenced); v != 1 {
		t.Errorf("applies_fenced_total = %v", v)
	}
	if v := testutil.ToFloat64(d.Metrics.active); v != 0 {
		t.Errorf("lease_held = %v after the loss", v)
	}
	if v := testutil.ToFloat64(d.Metrics.cycles.WithLabelValues("fenced")); v != 1 {
		t.Errorf("cycles_total{result=fenced} = %v", v)
	}
	// The next cycle finds another quotad holds the lease and says so.
	lease.held = false
	if res, _ := d.Cycle(context.Background()); res.Outcome != "passive" || app.plans != 1 {
		t.Errorf("after the loss: outcome %s, %d applies", res.Outcome, app.plans)
	}
	if !strings.Contains(logs.String(), "staying passive") {
		t.Errorf("the next cycle does not say it is passive:\n%s", logs.String())
	}
}

func TestCycleFeedsTheView(t *testing.T) {
	now := time.Unix(1795341600, 0)
	d, _ := newTestDaemon(t, fakeSnaps{snap: overQuota(now)}, &fakeLease{held: true}, &countingApplier{})
	d.View = &view.View{Interval: time.Second, Now: func() time.Time { return now }}
	srv := httptest.NewServer(view.Handler(d.View, nil))
	defer srv.Close()
	client := &view.Client{BaseURL: srv.URL}
	if _, err := client.Projects(context.Background()); err == nil {
		t.Fatal("projects served before any cycle")
	}
	if _, err := d.Cycle(context.Background()); err != nil {
		t.Fatal(err)
	}
	resp, err := client.Projects(context.Background())
	if err != nil || len(resp.Projects) != 1 || resp.Projects[0].GPUs[0].InUse != 4 || !resp.Status.LeaseHeld ||
		resp.Status.LastCycle.Outcome != "acted" || resp.Status.Plan.Stale || !resp.Status.Plan.SnapshotTakenAt.Equal(now) {
		t.Fatalf("after an acting cycle: %+v, %v", resp, err)
	}
	// A failed snapshot leaves the last plan served and says the cycle failed.
	d.Snapshots = fakeSnaps{err: errors.New("slurmctld (squeue): Unable to contact slurm controller")}
	_, _ = d.Cycle(context.Background())
	resp, err = client.Projects(context.Background())
	if err != nil || len(resp.Projects) != 1 || resp.Status.LastCycle.Outcome != "error" {
		t.Fatalf("after a failed cycle: %+v, %v", resp.Status.LastCycle, err)
	}
}

func TestMoveActionReadsAnAuditedMoveBack(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		entry store.Entry
		want  view.Action
	}{
		{store.Entry{At: at, Kind: store.KindMove, Subject: "job 12", Old: "qos=guar-proj-b", New: "qos=borrow-proj-b",
			Detail: "lend job 12 (proj-b, 4 a100): qos guar-proj-b->borrow-proj-b: 4 a100 idle"},
			view.Action{At: at, Kind: "lend", Job: "12", Account: "proj-b", FromQOS: "guar-proj-b", ToQOS: "borrow-proj-b",
				Detail: "lend job 12 (proj-b, 4 a100): qos guar-proj-b->borrow-proj-b: 4 a100 idle"}},
		{store.Entry{At: at, Kind: store.KindMove, Subject: "job 30_4", Old: "qos=borrow-proj-c", New: "qos=guar-proj-c",
			Detail: "return job 30_4 (proj-c-sub, 1 any): qos borrow-proj-c->guar-proj-c: within quota"},
			view.Action{At: at, Kind: "return", Job: "30_4", Account: "proj-c-sub", FromQOS: "borrow-proj-c", ToQOS: "guar-proj-c",
				Detail: "return job 30_4 (proj-c-sub, 1 any): qos borrow-proj-c->guar-proj-c: within quota"}},
	} {
		if got := MoveAction(tc.entry); got != tc.want {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.entry.Detail, got, tc.want)
		}
	}
}

// A job quotad cannot read raises the unreadable-jobs gauge and is logged once, with its id and
// the text that failed, however many cycles it stays; the cycle still lends.
func TestUnreadableJobIsCountedLoggedOnceAndStopsNothing(t *testing.T) {
	now := time.Unix(1795341600, 0)
	snap := overQuota(now)
	snap.Unreadable = []policy.UnreadableJob{{ID: 77, Account: "other", User: "mallory", QOS: "normal", State: policy.StatePending,
		Problem: `GPU request tres_per_node "gres/gpu:a100:x"`}}
	app, lease := &countingApplier{}, &fakeLease{held: true}
	d, logs := newTestDaemon(t, fakeSnaps{snap: snap}, lease, app)
	for cycle := range 2 {
		res, err := d.Cycle(context.Background())
		if err != nil || res.Outcome != "acted" || len(res.Plan.Moves) != 1 || res.Plan.Moves[0].JobID != 5 {
			t.Fatalf("cycle %d: outcome %s err %v moves %v, want job 5 lent", cycle, res.Outcome, err, res.Plan.Moves)
		}
		if v := testutil.ToFloat64(d.Metrics.unreadable); v != 1 {
			t.Errorf("cycle %d: unreadable_jobs = %v, want 1", cycle, v)
		}
	}
	if n := strings.Count(logs.String(), `"job":77`); n != 1 || !strings.Contains(logs.String(), `gres/gpu:a100:x`) {
		t.Errorf("job 77 logged %d times (want once, with its text):\n%s", n, logs.String())
	}
	d.Snapshots = fakeSnaps{snap: overQuota(now)}
	if _, err := d.Cycle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if v := testutil.ToFloat64(d.Metrics.unreadable); v != 0 {
		t.Errorf("unreadable_jobs = %v after the job left, want 0", v)
	}
}

// preemptionRows is slurmdbd's job table of preempted runs, read as PreemptedRuns reads it,
// and the runs around them, as Runs reads them.
type preemptionRows struct {
	rows   []slurmdbd.PreemptedRun
	sinces []int64
	runs   []policy.Run
}

func (p *preemptionRows) PreemptedRuns(_ context.Context, since time.Time) ([]slurmdbd.PreemptedRun, error) {
	p.sinces = append(p.sinces, since.Unix())
	var out []slurmdbd.PreemptedRun
	for _, r := range p.rows {
		if r.End > since.Unix() {
			out = append(out, r)
		}
	}
	return out, nil
}

func (p *preemptionRows) Runs(_ context.Context, from, to time.Time) ([]policy.Run, error) {
	var out []policy.Run
	for _, r := range p.runs {
		if !r.Started.After(to) && (r.Ended.IsZero() || !r.Ended.Before(from)) {
			out = append(out, r)
		}
	}
	return out, nil
}

// Each reclaim is counted once; the reads start ever later (the newest seen, less the lag for
// slurmdbd's late records) and what is remembered of them stays small, however long quotad runs.
func TestReclaimsAreCountedOnceAndTheirMemoryStaysSmall(t *testing.T) {
	start := time.Unix(1_800_000_000, 0)
	now := start
	rows := &preemptionRows{}
	cfg := policytest.MakeConfig().Project("proj-b", policytest.GPUs("a100", 4)).Obj()
	d := &Daemon{Preemptions: rows, Metrics: NewMetrics(), Log: zerolog.Nop(), Now: func() time.Time { return now }}
	for i := range 100 {
		now = start.Add(time.Duration(i) * time.Minute)
		rows.rows = append(rows.rows, slurmdbd.PreemptedRun{JobID: uint32(1000 + i), Account: "proj-b", QOS: "borrow-proj-b", End: now.Unix() - 30},
			slurmdbd.PreemptedRun{JobID: uint32(5000 + i), Account: "other", QOS: "site-scavenger", End: now.Unix() - 30})
		d.observeReclaims(context.Background(), cfg)
		d.observeReclaims(context.Background(), cfg) // the same rows again: not counted twice
	}
	if v := testutil.ToFloat64(d.Metrics.reclaims.WithLabelValues("proj-b")); v != 99 {
		t.Errorf("%v reclaims counted, want 99 (the first ended before quotad started)", v)
	}
	if n := len(d.reclaimsSeen); n > int(reclaimLag/time.Minute)+2 {
		t.Errorf("%d reclaims remembered after 100, want about the last %s's", n, reclaimLag)
	}
	if last := rows.sinces[len(rows.sinces)-1]; last < now.Add(-reclaimLag-time.Minute).Unix() {
		t.Errorf("the last read started at %d, %s before the newest reclaim: the reads do not move on", last, time.Unix(now.Unix()-last, 0).Sub(time.Unix(0, 0)))
	}
}

// auditTrail is the audit trail as the store keeps it.
type auditTrail struct{ entries []store.Entry }

func (a *auditTrail) History(context.Context, string, int) ([]store.Entry, error) { return nil, nil }
func (a *auditTrail) Record(_ context.Context, e store.Entry) error {
	a.entries = append(a.entries, e)
	return nil
}

// A reclaim is audited once its claimant has started: who claimed, who lost what, whether
// that was the fewest GPUs; a reclaim with no claimant waits ClaimWindow, then is audited
// without one. Each is written once.
func TestReclaimsAreAuditedOnce(t *testing.T) {
	now := time.Unix(1_800_000_000, 0).UTC()
	cfg := policytest.MakeConfig().Project("proj-a", policytest.GPUs("a100", 4)).Project("proj-b", policytest.GPUs("a100", 4)).Obj()
	rows := &preemptionRows{}
	trail := &auditTrail{}
	d := &Daemon{Preemptions: rows, Metrics: NewMetrics(), Audit: trail, Log: zerolog.Nop(), Now: func() time.Time { return now }}
	nodes := []policy.Node{policytest.GPUNode("a100-2", "a100", 4, 0, 8, 1000, "a100")}
	d.observeReclaims(context.Background(), cfg) // quotad starts

	end := now.Add(time.Second)
	rows.rows = []slurmdbd.PreemptedRun{
		{JobID: 2, Account: "proj-b", QOS: "borrow-proj-b", Start: end.Add(-time.Minute).Unix(), End: end.Unix()},
		{JobID: 4, Account: "proj-b", QOS: "borrow-proj-b", Start: end.Add(-time.Minute).Unix(), End: end.Unix()},
	}
	rows.runs = []policy.Run{
		{JobID: 2, Account: "proj-b", QOS: "borrow-proj-b", GPUs: 3, Nodes: []string{"a100-2"}, Started: end.Add(-time.Minute), Ended: end, Preempted: true},
		{JobID: 3, Account: "proj-b", QOS: "borrow-proj-b", GPUs: 1, Nodes: []string{"a100-2"}, Started: end.Add(-time.Minute)},
		{JobID: 4, Account: "proj-b", QOS: "borrow-proj-b", GPUs: 2, Nodes: []string{"a100-3"}, Started: end.Add(-time.Minute), Ended: end, Preempted: true},
	}
	now = end.Add(time.Second)
	d.observeReclaims(context.Background(), cfg)
	d.auditReclaims(context.Background(), cfg, &policy.Snapshot{Nodes: nodes})
	if len(trail.entries) != 0 {
		t.Fatalf("audited before any claimant started or ClaimWindow passed: %+v", trail.entries)
	}
	rows.runs = append(rows.runs, policy.Run{JobID: 9, Account: "proj-a", QOS: "guar-proj-a", GPUs: 1, Nodes: []string{"a100-2"}, Started: end.Add(2 * time.Second)})
	now = end.Add(3 * time.Second)
	for range 2 {
		d.observeReclaims(context.Background(), cfg)
		d.auditReclaims(context.Background(), cfg, &policy.Snapshot{Nodes: nodes})
	}
	if len(trail.entries) != 1 {
		t.Fatalf("%d audit rows, want 1 (job 2's claim): %+v", len(trail.entries), trail.entries)
	}
	e := trail.entries[0]
	if e.Kind != store.KindReclaim || e.Subject != "job 9" || e.Old != "job 2" || e.New != "not minimal" || !strings.Contains(e.Detail, "not minimal: 3 GPU(s) requeued where 1 would do (job(s) [3])") {
		t.Errorf("audit row %+v", e)
	}
	now = end.Add(policy.ClaimWindow + 2*time.Second) // job 4's claim never started
	d.observeReclaims(context.Background(), cfg)
	d.auditReclaims(context.Background(), cfg, &policy.Snapshot{Nodes: nodes})
	if len(trail.entries) != 2 || trail.entries[1].Kind != store.KindReclaim || trail.entries[1].Subject != "unknown claim" || trail.entries[1].New != "no claimant" || len(d.unaudited) != 0 {
		t.Errorf("after ClaimWindow: %+v, %d unaudited", trail.entries, len(d.unaudited))
	}
	if len(d.reclaims) != 2 || !strings.Contains(d.reclaims[0].Detail, "not minimal") {
		t.Errorf("the page's reclaims %+v", d.reclaims)
	}
}

// leavingApplier leaves moves past a budget: the first applies leave some, then none.
type leavingApplier struct {
	left  []int  // MovesLeft of each apply in turn; past its end, 0
	fail  []bool // whether each apply in turn had a failed move
	plans int
}

func (a *leavingApplier) Apply(_ context.Context, p *policy.Plan) (actuate.Result, error) {
	res := actuate.Result{LendsByAccount: map[string]int{}}
	var err error
	if a.plans < len(a.left) {
		res.MovesLeft = a.left[a.plans]
	}
	if a.plans < len(a.fail) && a.fail[a.plans] {
		err = fmt.Errorf("%w: 1 of 50: lend job 7: Job is no longer pending execution", actuate.ErrMovesFailed)
	}
	a.plans++
	return res, err
}

// A cycle whose moves reached their budget is followed at once by another, on a fresh
// snapshot, until none is left or MaxFollowUps more have run; one that left none is alone.
func TestMovesLeftByTheBudgetGetFollowUpCyclesAtOnce(t *testing.T) {
	now := time.Unix(1795341600, 0)
	cfg, err := policy.ParseConfig([]byte("settings: {borrowSizeTiers: []}\nprojects:\n  - account: proj-b\n    gpus: {a100: 4}\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		left    []int
		fail    []bool
		plans   int
		wantErr bool
	}{
		{left: nil, plans: 1},
		{left: []int{300, 150}, plans: 3},
		{left: slices.Repeat([]int{100}, 50), plans: MaxFollowUps + 1},
		// A job that started since the snapshot fails its move: the rest still follow, and
		// the failure is returned at the end.
		{left: []int{300, 150}, fail: []bool{true}, plans: 3, wantErr: true},
	} {
		app := &leavingApplier{left: tc.left, fail: tc.fail}
		snaps := &countingSnaps{snap: overQuota(now)}
		var logs bytes.Buffer
		d := &Daemon{Config: fakeConfig{cfg}, Snapshots: snaps, Lease: &fakeLease{held: true}, Apply: app, Metrics: NewMetrics(),
			Log: zerolog.New(&logs), Now: func() time.Time { return now }}
		res, err := d.CycleAndFollowUps(context.Background(), time.Minute)
		if (err != nil) != tc.wantErr || (err != nil && !errors.Is(err, actuate.ErrMovesFailed)) {
			t.Errorf("left %v, failed %v: err %v", tc.left, tc.fail, err)
		}
		if res.Outcome != "acted" || app.plans != tc.plans || snaps.takes != tc.plans {
			t.Errorf("left %v: outcome %s err %v, %d applies on %d snapshots; want %d of each", tc.left, res.Outcome, err, app.plans, snaps.takes, tc.plans)
		}
		if tc.plans == MaxFollowUps+1 && !loggedMovesLeft(logs.String(), tc.left[tc.plans-1], MaxFollowUps+1) {
			t.Errorf("the bound on follow-ups is not logged with the %d moves left:\n%s", tc.left[tc.plans-1], logs.String())
		}
	}
}

// countingSnaps counts the snapshots taken.
type countingSnaps struct {
	snap  *snapshot.Snapshot
	takes int
}

func (f *countingSnaps) TakeLoading(ctx context.Context, load func(context.Context) (*policy.Config, error)) (*policy.Config, *snapshot.Snapshot, error) {
	f.takes++
	cfg, err := load(ctx)
	return cfg, f.snap, err
}

// loggedMovesLeft says whether logs (zerolog's JSON lines) hold the line that gives up on moves
// left after cycles, with those figures.
func loggedMovesLeft(logs string, moves, cycles int) bool {
	for line := range strings.Lines(logs) {
		var fields struct {
			Moves  *int `json:"moves"`
			Cycles *int `json:"cycles"`
		}
		if json.Unmarshal([]byte(line), &fields) == nil && fields.Moves != nil && fields.Cycles != nil &&
			*fields.Moves == moves && *fields.Cycles == cycles {
			return true
		}
	}
	return false
}
