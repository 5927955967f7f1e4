package actuate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/quotad/policy"
	"github.com/slurmbridge/slurmbridge/quotad/store"
)

// recordingRunner records the commands run, under a lock: a long list of moves may run
// scontrol side by side. delay is how long each run takes.
type recordingRunner struct {
	mu    sync.Mutex
	calls [][]string
	fail  func(argv []string) error
	delay time.Duration
}

func (r *recordingRunner) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	time.Sleep(r.delay)
	argv := append([]string{name}, args...)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, argv)
	if r.fail != nil {
		return nil, r.fail(argv)
	}
	return nil, nil
}

// auditLog keeps the audit rows, and counts the records they came in.
type auditLog struct {
	entries []store.Entry
	records int
}

func (a *auditLog) RecordAll(_ context.Context, entries []store.Entry) error {
	a.entries = append(a.entries, entries...)
	a.records++
	return nil
}

func TestApplyArgvAndAudit(t *testing.T) {
	plan := &policy.Plan{
		Acting: true,
		QOS: []policy.QOSChange{{
			Name: "borrow", Create: true,
			PreemptMode:       &policy.Change[string]{To: "requeue"},
			GraceTime:         &policy.Change[time.Duration]{To: 2 * time.Second},
			PreemptExemptTime: &policy.Change[time.Duration]{To: 90 * time.Second},
		}, {
			Name:    "guar-proj-a",
			GrpTRES: []policy.TRESChange{{Name: "gres/gpu", From: 2, To: 4}, {Name: "gres/gpu:v100", From: 1, To: policy.ClearLimit}},
			Preempt: &policy.Change[[]string]{From: nil, To: []string{"borrow"}},
		}},
		Accounts: []policy.AccountChange{{Account: "proj-a", QOS: &policy.Change[[]string]{From: []string{"normal"}, To: []string{"borrow", "guar-proj-a"}}, DefaultQOS: &policy.Change[string]{To: "guar-proj-a"}}},
		Users:    []policy.UserChange{{User: "bob", Account: "proj-b", From: []string{"guar-proj-b", "normal"}, Add: []string{"borrow-proj-b"}}},
		Moves: []policy.JobMove{
			{Kind: policy.Return, JobID: 41, Account: "proj-b", From: "borrow", To: "guar-proj-b"},
			{Kind: policy.Lend, JobID: 42, Account: "proj-b", From: "guar-proj-b", To: "borrow"},
			{Kind: policy.Lend, JobID: 50, ArrayJobID: 50, Task: 7, Account: "proj-b", From: "guar-proj-b", To: "borrow"},
			{Kind: policy.Lend, JobID: 43, Account: "proj-b", From: "guar-proj-b", To: "borrow"},
		},
	}
	r := &recordingRunner{}
	audit := &auditLog{}
	a := &Actuator{Slurm: slurm.Client{Runner: r, Release: slurm.Release{Year: 24, Month: 11}}, Audit: audit, Actor: "test", Cluster: "testbed", Log: zerolog.Nop()}
	res, err := a.Apply(context.Background(), plan)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		{"sacctmgr", "-i", "add", "qos", "borrow"},
		{"sacctmgr", "-i", "modify", "qos", "where", "name=borrow", "set", "preemptmode=requeue", "gracetime=2", "preemptexempttime=00:01:30"},
		{"sacctmgr", "-i", "modify", "qos", "where", "name=guar-proj-a", "set", "grptres=gres/gpu=4,gres/gpu:v100=-1", "preempt=borrow"},
		{"sacctmgr", "-i", "modify", "account", "where", "name=proj-a", "cluster=testbed", "set", "qos=borrow,guar-proj-a", "defaultqos=guar-proj-a"},
		{"sacctmgr", "-i", "modify", "user", "where", "name=bob", "account=proj-b", "cluster=testbed", "set", "qos+=borrow-proj-b"},
		// One run per target QOS, returns first; an array task is named so it splits off.
		{"scontrol", "update", "jobid=41", "qos=guar-proj-b"},
		{"scontrol", "update", "jobid=42,50_7,43", "qos=borrow"},
	}
	if len(r.calls) != len(want) {
		t.Fatalf("ran %d commands, want %d:\n%v", len(r.calls), len(want), r.calls)
	}
	for i := range want {
		if !slices.Equal(r.calls[i], want[i]) {
			t.Errorf("command %d = %q, want %q", i, r.calls[i], want[i])
		}
	}
	if res.QOS != 2 || res.Accounts != 1 || res.Users != 1 || res.Lends != 3 || res.Returns != 1 {
		t.Errorf("result = %+v", res)
	}
	// The new QOS's creation and its fields are two rows: a failed second run leaves the first.
	if len(audit.entries) != 9 {
		t.Fatalf("%d audit entries, want 9", len(audit.entries))
	}
	if e := audit.entries[0]; e.Subject != "qos borrow" || e.New != "created" {
		t.Errorf("creation audit entry = %+v", e)
	}
	if e := audit.entries[4]; e.Kind != store.KindAccount || e.Subject != userSubject(policy.UserChange{User: "bob", Account: "proj-b"}) ||
		e.Old != "qos=guar-proj-b,normal" || e.New != "qos=borrow-proj-b,guar-proj-b,normal" {
		t.Errorf("user audit entry = %+v", e)
	}
	if e := audit.entries[2]; e.Old != "grptres gres/gpu=2 grptres gres/gpu:v100=1 preempt=" || !strings.Contains(e.New, "gres/gpu:v100=none") {
		t.Errorf("QOS audit old %q new %q", e.Old, e.New)
	}
	if e := audit.entries[7]; e.Subject != "job 50_7" || e.Old != "qos=guar-proj-b" || e.New != "qos=borrow" || e.Actor != "test" {
		t.Errorf("move audit = %+v", e)
	}
	for _, c := range r.calls {
		for _, verb := range []string{"scancel", "requeue", "hold", "kill"} {
			if slices.Contains(c, verb) || c[0] == verb {
				t.Errorf("actuator ran %q", c)
			}
		}
	}
}

func TestApplyStopsOnSyncFailureAndSurvivesMoveFailure(t *testing.T) {
	r := &recordingRunner{fail: func(argv []string) error {
		if argv[0] == "sacctmgr" {
			return errors.New("sacctmgr: error: Problem talking to the database")
		}
		return nil
	}}
	plan := &policy.Plan{Acting: true,
		QOS:   []policy.QOSChange{{Name: "borrow", Create: true}},
		Moves: []policy.JobMove{{Kind: policy.Lend, JobID: 1, To: "borrow"}},
	}
	a := &Actuator{Slurm: slurm.Client{Runner: r, Release: slurm.Release{Year: 24, Month: 11}}, Log: zerolog.Nop()}
	if _, err := a.Apply(context.Background(), plan); err == nil {
		t.Fatal("no error from a failed sacctmgr")
	}
	if len(r.calls) != 1 {
		t.Errorf("went on after a failed QOS change: %v", r.calls)
	}

	// scontrol names the one job it could not move (as 22.05-26.05 do) and moves the others.
	r = &recordingRunner{fail: func(argv []string) error {
		if argv[0] == "scontrol" {
			return &slurm.CommandError{Command: "scontrol update", ExitCode: 1, Stderr: "Job is no longer pending execution for job 1\n"}
		}
		return nil
	}}
	plan = &policy.Plan{Acting: true, Moves: []policy.JobMove{{Kind: policy.Lend, JobID: 1, To: "borrow"}, {Kind: policy.Lend, JobID: 2, To: "borrow"}, {Kind: policy.Lend, JobID: 3, To: "borrow"}}}
	audit := &auditLog{}
	a = &Actuator{Slurm: slurm.Client{Runner: r, Release: slurm.Release{Year: 24, Month: 11}}, Audit: audit, Log: zerolog.Nop()}
	res, err := a.Apply(context.Background(), plan)
	if err == nil || res.Lends != 2 || len(r.calls) != 1 || len(res.MoveFailures) != 1 || !strings.Contains(res.MoveFailures[0], "job 1 ") {
		t.Errorf("a failed move must not stop the others: res %+v err %v calls %v", res, err, r.calls)
	}
	if len(audit.entries) != 2 || audit.entries[0].Subject != "job 2" || audit.entries[1].Subject != "job 3" {
		t.Errorf("audit %+v, want jobs 2 and 3 only", audit.entries)
	}

	// A run that fails without naming jobs leaves every job's move unknown: none is counted.
	r = &recordingRunner{fail: func(argv []string) error {
		if argv[0] == "scontrol" {
			return &slurm.CommandError{Command: "scontrol update", ExitCode: 1, Stderr: "slurm_update error: Unable to contact slurm controller (connect failure)\n"}
		}
		return nil
	}}
	a = &Actuator{Slurm: slurm.Client{Runner: r, Release: slurm.Release{Year: 24, Month: 11}}, Log: zerolog.Nop()}
	if res, err := a.Apply(context.Background(), plan); err == nil || res.Lends != 0 || len(res.MoveFailures) != 3 {
		t.Errorf("unexplained failure: res %+v err %v", res, err)
	}

	r = &recordingRunner{}
	if _, err := (&Actuator{Slurm: slurm.Client{Runner: r, Release: slurm.Release{Year: 24, Month: 11}}, Log: zerolog.Nop()}).Apply(context.Background(), &policy.Plan{Acting: false, Moves: plan.Moves}); err != nil || len(r.calls) != 0 {
		t.Errorf("a plan that does not act ran %v (err %v)", r.calls, err)
	}
}

// Hundreds of lends in one cycle: their audit rows go in one record per chunk of moves (up to
// moveChunk jobs of one target QOS), not one commit per job, and a job that did not move has
// no row.
func TestApplyAuditsEachBatchOfMovesInOneRecord(t *testing.T) {
	r := &recordingRunner{fail: func(argv []string) error {
		// Only the run that holds job 7 names it (runs go side by side, 50 jobs or more each).
		holds7 := slices.ContainsFunc(argv, func(a string) bool {
			ids, ok := strings.CutPrefix(a, "jobid=")
			return ok && slices.Contains(strings.Split(ids, ","), "7")
		})
		if argv[0] == "scontrol" && holds7 {
			return &slurm.CommandError{Command: "scontrol update", ExitCode: 1, Stderr: "Job is no longer pending execution for job 7\n"}
		}
		return nil
	}}
	plan := &policy.Plan{Acting: true}
	for id := uint32(1); id <= 300; id++ {
		plan.Moves = append(plan.Moves, policy.JobMove{Kind: policy.Lend, JobID: id, From: "guar-a", To: "borrow"})
	}
	plan.Moves = append(plan.Moves, policy.JobMove{Kind: policy.Return, JobID: 400, From: "borrow", To: "guar-b"})
	audit := &auditLog{}
	a := &Actuator{Slurm: slurm.Client{Runner: r, Release: slurm.Release{Year: 24, Month: 11}}, Audit: audit, Actor: "quotad@test", Log: zerolog.Nop()}
	res, err := a.Apply(context.Background(), plan)
	if err == nil || res.Lends != 299 || res.Returns != 1 {
		t.Fatalf("%d lends, %d returns, %d failures (err %v); want 299 lends, 1 return and job 7's failure", res.Lends, res.Returns, len(res.MoveFailures), err)
	}
	if want := 300/moveChunk + 1; audit.records != want || len(audit.entries) != 300 {
		t.Fatalf("%d audit rows in %d records; want 300 rows (job 7's failed move has none) in %d records (one per chunk)", len(audit.entries), audit.records, want)
	}
	for _, e := range audit.entries {
		if e.Subject == "job 7" || e.Actor != "quotad@test" || e.At.IsZero() || e.Kind != store.KindMove {
			t.Errorf("audit row %+v", e)
		}
	}
	if res.Took.Moves <= 0 || res.Took.Commands < 0 || res.Took.Audit < 0 {
		t.Errorf("took %+v: the moves' time must be counted", res.Took)
	}
}

// A lend of hundreds of tasks on 24.11 is hundreds of requests. Past the move budget the
// chunks not begun are left for a cycle on a fresh snapshot: neither done nor failed, nor
// audited. The first chunk always goes, so every cycle moves on. Each run here takes at least
// 50 ms, so with a 60 ms budget exactly one chunk can begin, however loaded the machine.
func TestApplyLeavesTheMovesPastItsBudget(t *testing.T) {
	plan := &policy.Plan{Acting: true, Moves: []policy.JobMove{{Kind: policy.Return, JobID: 900, From: "borrow", To: "guar-b"}}}
	for id := uint32(1); id <= 350; id++ {
		plan.Moves = append(plan.Moves, policy.JobMove{Kind: policy.Lend, JobID: id, From: "guar-a", To: "borrow"})
	}
	for _, tc := range []struct {
		budget             time.Duration
		returns, lends     int
		left, scontrolRuns int
	}{
		{budget: 60 * time.Millisecond, returns: 1, left: 350, scontrolRuns: 1},
		{budget: 0, returns: 1, lends: 350, scontrolRuns: 1 + 350/moveChunk},
		{budget: time.Hour, returns: 1, lends: 350, scontrolRuns: 1 + 350/moveChunk},
	} {
		r := &recordingRunner{delay: 50 * time.Millisecond}
		audit := &auditLog{}
		a := &Actuator{Slurm: slurm.Client{Runner: r, Release: slurm.Release{Year: 24, Month: 11}}, Audit: audit, Log: zerolog.Nop(), MoveBudget: tc.budget}
		res, err := a.Apply(context.Background(), plan)
		if err != nil {
			t.Fatalf("budget %s: %v", tc.budget, err)
		}
		runs := 0
		for _, c := range r.calls {
			if c[0] == "scontrol" && c[1] == "update" {
				runs++
			}
		}
		if res.Returns != tc.returns || res.Lends != tc.lends || res.MovesLeft != tc.left || res.Deferred != tc.left || len(res.MoveFailures) != 0 || runs != tc.scontrolRuns {
			t.Errorf("budget %s: %d returns, %d lends, %d left (%d deferred), %d failures, %d scontrol update runs; want %d, %d, %d, no failure, %d runs",
				tc.budget, res.Returns, res.Lends, res.MovesLeft, res.Deferred, len(res.MoveFailures), runs, tc.returns, tc.lends, tc.left, tc.scontrolRuns)
		}
		if len(audit.entries) != tc.returns+tc.lends {
			t.Errorf("budget %s: %d audit rows, want one per move made (%d)", tc.budget, len(audit.entries), tc.returns+tc.lends)
		}
	}
}

func TestApplyCountsSubAccountMovesForTheirProject(t *testing.T) {
	plan := &policy.Plan{Acting: true, Moves: []policy.JobMove{
		{Kind: policy.Lend, JobID: 1, Account: "team-a1", Project: "proj-a", To: "borrow"},
		{Kind: policy.Lend, JobID: 2, Account: "proj-a", Project: "proj-a", To: "borrow"},
		{Kind: policy.Return, JobID: 3, Account: "team-a1", Project: "proj-a", To: "guar-proj-a"},
	}}
	a := &Actuator{Slurm: slurm.Client{Runner: &recordingRunner{}, Release: slurm.Release{Year: 24, Month: 11}}, Log: zerolog.Nop()}
	res, err := a.Apply(context.Background(), plan)
	if err != nil {
		t.Fatal(err)
	}
	if res.LendsByAccount["proj-a"] != 2 || res.ReturnsByAccount["proj-a"] != 1 || len(res.LendsByAccount) != 1 {
		t.Errorf("lends %v returns %v, want both counted for proj-a", res.LendsByAccount, res.ReturnsByAccount)
	}
}

// countingFence holds for the first `held` checks, then reports the lease lost.
type countingFence struct{ held, checks int }

var errLost = errors.New("lease lost")

func (f *countingFence) Check(context.Context) error {
	f.checks++
	if f.checks > f.held {
		return errLost
	}
	return nil
}

// Each action is fenced: a QOS change, and each scontrol run of moves (one per target QOS).
func TestApplyStopsAtTheFirstFailedFenceCheck(t *testing.T) {
	plan := &policy.Plan{
		Acting: true,
		QOS:    []policy.QOSChange{{Name: "guar-proj-a", Priority: &policy.Change[int]{From: 0, To: 10}}},
		Moves: []policy.JobMove{
			{Kind: policy.Return, JobID: 40, Account: "proj-b", From: "borrow", To: "guar-proj-b"},
			{Kind: policy.Lend, JobID: 41, Account: "proj-b", From: "guar-proj-b", To: "borrow"},
			{Kind: policy.Lend, JobID: 42, Account: "proj-b", From: "guar-proj-b", To: "borrow"},
		},
	}
	for _, tc := range []struct {
		name                   string
		held                   int
		wantCalls              int // Slurm commands run before the stop
		wantLends, wantReturns int
		wantAudit              int
	}{
		{"lost before anything", 0, 0, 0, 0, 0},
		{"lost after the QOS change", 1, 1, 0, 0, 1},
		{"lost after the first batch of moves", 2, 2, 0, 1, 2},
		{"held throughout", 3, 3, 2, 1, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &recordingRunner{}
			audit := &auditLog{}
			fence := &countingFence{held: tc.held}
			a := &Actuator{Slurm: slurm.Client{Runner: r, Release: slurm.Release{Year: 24, Month: 11}}, Audit: audit, Log: zerolog.Nop(), Fence: fence}
			res, err := a.Apply(context.Background(), plan)
			if len(r.calls) != tc.wantCalls || res.Lends != tc.wantLends || res.Returns != tc.wantReturns || len(audit.entries) != tc.wantAudit {
				t.Fatalf("ran %d commands (%v), %d lends, %d returns, %d audit rows; want %d, %d, %d, %d", len(r.calls), r.calls, res.Lends, res.Returns, len(audit.entries), tc.wantCalls, tc.wantLends, tc.wantReturns, tc.wantAudit)
			}
			if tc.held < 3 {
				if !errors.Is(err, errLost) || !strings.Contains(err.Error(), "stopped before") {
					t.Errorf("err = %v, want the fence's error saying what was not done", err)
				}
				if fence.checks != tc.held+1 {
					t.Errorf("fence checked %d times, want it to stop at the first failure (%d)", fence.checks, tc.held+1)
				}
			} else if err != nil || fence.checks != 3 {
				t.Errorf("err %v, %d checks; want none and one check per action", err, fence.checks)
			}
		})
	}
}

func TestApplyStepDelayWaitsBetweenActionsOnly(t *testing.T) {
	plan := &policy.Plan{Acting: true, Moves: []policy.JobMove{
		{Kind: policy.Return, JobID: 41, From: "borrow", To: "guar-proj-b"},
		{Kind: policy.Lend, JobID: 42, From: "guar-proj-b", To: "borrow"},
	}}
	a := &Actuator{Slurm: slurm.Client{Runner: &recordingRunner{}, Release: slurm.Release{Year: 24, Month: 11}}, Log: zerolog.Nop(), StepDelay: 200 * time.Millisecond}
	start := time.Now()
	if _, err := a.Apply(context.Background(), plan); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 200*time.Millisecond || took >= 400*time.Millisecond {
		t.Errorf("two actions took %s with a 200ms step delay: want one delay, between them", took)
	}
}

// A lend that changes the reclaim order gives every guaranteed QOS the same new Preempt list:
// one sacctmgr run names them all. New QOS are created in one run; changes whose values differ
// (each borrow QOS's own priority) keep a run each. Every QOS is still audited on its own.
func TestApplyRunsIdenticalQOSChangesTogether(t *testing.T) {
	preempt := &policy.Change[[]string]{From: []string{"borrow-proj-c"}, To: []string{"borrow-proj-b", "borrow-proj-c"}}
	plan := &policy.Plan{Acting: true, QOS: []policy.QOSChange{
		{Name: "borrow-proj-d", Create: true, Band: "proj-d", Priority: &policy.Change[int]{To: 9}},
		{Name: "elastic-proj-d", Create: true, Band: "proj-d", Priority: &policy.Change[int]{To: 3}},
		{Name: "borrow-proj-b", Band: "proj-b", Priority: &policy.Change[int]{From: 7, To: 8}},
		{Name: "guar-proj-a", Preempt: preempt},
		{Name: "guar-proj-b", Preempt: preempt},
		{Name: "guar-proj-d", Create: true},
		{Name: "guar-proj-c", Preempt: preempt},
	}}
	r := &recordingRunner{}
	audit := &auditLog{}
	a := &Actuator{Slurm: slurm.Client{Runner: r, Release: slurm.Release{Year: 24, Month: 11}}, Audit: audit, Log: zerolog.Nop()}
	res, err := a.Apply(context.Background(), plan)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		{"sacctmgr", "-i", "add", "qos", "borrow-proj-d,elastic-proj-d,guar-proj-d"},
		{"sacctmgr", "-i", "modify", "qos", "where", "name=borrow-proj-d", "set", "priority=9"},
		{"sacctmgr", "-i", "modify", "qos", "where", "name=elastic-proj-d", "set", "priority=3"},
		{"sacctmgr", "-i", "modify", "qos", "where", "name=guar-proj-a,guar-proj-b,guar-proj-c", "set", "preempt=borrow-proj-b,borrow-proj-c"},
		// A band of the reclaim order comes after the structure (who may be reclaimed).
		{"sacctmgr", "-i", "modify", "qos", "where", "name=borrow-proj-b", "set", "priority=8"},
	}
	if !slices.EqualFunc(r.calls, want, slices.Equal[[]string]) {
		t.Errorf("runs:\n%q\nwant:\n%q", r.calls, want)
	}
	if res.QOS != 7 || len(audit.entries) != 9 {
		t.Errorf("%d QOS counted, %d audited; want 7 QOS, and 9 rows (two created with fields: a row each for both)", res.QOS, len(audit.entries))
	}
	for _, e := range audit.entries {
		if strings.Contains(e.Subject, ",") {
			t.Errorf("audit row %q names more than one QOS", e.Subject)
		}
	}
}

// More structure commands than MaxCommands: the first ones run, in the plan's order, and the
// rest and every move wait for the next cycle (moves rest on QOS that match the table).
func TestApplyBoundsCommandsAndDefersMoves(t *testing.T) {
	plan := &policy.Plan{Acting: true,
		QOS: []policy.QOSChange{
			{Name: "borrow-proj-a", GrpTRES: []policy.TRESChange{{Name: "gres/gpu", From: 1, To: 2}}},
			{Name: "borrow-proj-b", GrpTRES: []policy.TRESChange{{Name: "gres/gpu", From: 2, To: 3}}},
		},
		Accounts: []policy.AccountChange{
			{Account: "proj-a", DefaultQOS: &policy.Change[string]{To: "guar-proj-a"}},
			{Account: "proj-b", DefaultQOS: &policy.Change[string]{To: "guar-proj-b"}},
		},
		Moves: []policy.JobMove{{Kind: policy.Lend, JobID: 42, Account: "proj-b", From: "guar-proj-b", To: "borrow-proj-b"}},
	}
	r := &recordingRunner{}
	a := &Actuator{Slurm: slurm.Client{Runner: r, Release: slurm.Release{Year: 24, Month: 11}}, Log: zerolog.Nop(), MaxCommands: 3}
	res, err := a.Apply(context.Background(), plan)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.calls) != 3 || !slices.Contains(r.calls[2], "name=proj-a") || res.QOS != 2 || res.Accounts != 1 || res.Lends != 0 || res.Deferred != 2 {
		t.Errorf("bound 3: ran %q, result %+v; want 2 QOS and proj-a run, proj-b and the move deferred", r.calls, res)
	}
	// Within the bound everything runs.
	r = &recordingRunner{}
	a.Slurm.Runner, a.MaxCommands = r, 4
	if res, err := a.Apply(context.Background(), plan); err != nil || len(r.calls) != 5 || res.Lends != 1 || res.Deferred != 0 {
		t.Errorf("bound 4: ran %q, result %+v, err %v", r.calls, res, err)
	}
}

// Past the bound, the reclaim order's bands wait, each whole, and moves and Preempt lists do
// not: 45 projects' priorities move, a project goes over its guarantee (every guaranteed QOS's
// Preempt list) and a job returns. With bound 40 the Preempt lists and the return are done,
// then whole bands while they fit; no band is cut, and the rest wait.
func TestApplyWritesPreemptListsAndMovesBeforeTheBandsPastTheBound(t *testing.T) {
	var changes []policy.QOSChange
	for p := range 15 { // 15 bands of 3: tiers g1, g2 and the borrow QOS
		acct := fmt.Sprintf("team%02d", p)
		for i, q := range []string{"borrow-" + acct + "-g1", "borrow-" + acct + "-g2", "borrow-" + acct} {
			changes = append(changes, policy.QOSChange{Name: q, Band: acct, Priority: &policy.Change[int]{From: 100 + 3*p + i, To: 200 + 3*p + i}})
		}
	}
	preempt := &policy.Change[[]string]{To: []string{"borrow-team00"}}
	for p := range 3 {
		changes = append(changes, policy.QOSChange{Name: fmt.Sprintf("guar-team%02d", p), Preempt: preempt})
	}
	plan := &policy.Plan{Acting: true, QOS: changes,
		Moves: []policy.JobMove{{Kind: policy.Return, JobID: 7, Account: "team01", From: "borrow-team01", To: "guar-team01"}}}
	r := &recordingRunner{}
	a := &Actuator{Slurm: slurm.Client{Runner: r, Release: slurm.Release{Year: 24, Month: 11}}, Log: zerolog.Nop(), MaxCommands: 40}
	res, err := a.Apply(context.Background(), plan)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.calls[0]; !slices.Contains(got, "name=guar-team00,guar-team01,guar-team02") {
		t.Errorf("first run %q, want the Preempt lists", got)
	}
	if last := r.calls[len(r.calls)-1]; last[0] != "scontrol" {
		t.Errorf("last run %q, want the return", last)
	}
	// 1 Preempt run, then 13 whole bands (39 runs) fit in 40; 2 bands (6 runs) wait.
	if len(r.calls) != 1+39+1 || res.Returns != 1 || res.Deferred != 6 {
		t.Errorf("%d runs, result %+v; want 41 runs, the return, 6 deferred", len(r.calls), res)
	}
	for _, c := range r.calls[1:40] {
		if !strings.Contains(strings.Join(c, " "), "priority=") {
			t.Errorf("run %q among the bands", c)
		}
	}
	// A bound smaller than one band still writes one band a cycle.
	r = &recordingRunner{}
	a.Slurm.Runner, a.MaxCommands = r, 2
	if res, err := a.Apply(context.Background(), plan); err != nil || len(r.calls) != 1+3+1 || res.Deferred != 14*3 {
		t.Errorf("bound 2: %d runs (%q), result %+v, err %v", len(r.calls), r.calls, res, err)
	}
}
