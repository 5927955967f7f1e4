package reconcile_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/elasticd/elastictest"
	"github.com/slurmbridge/slurmbridge/elasticd/policy"
	"github.com/slurmbridge/slurmbridge/elasticd/reconcile"
)

const (
	main = 100
	a100 = policy.GPUType("a100")
)

var (
	t0 = elastictest.T0
	// settled is a moment just after six reports from t0: enough settled reports for the
	// policy's default window.
	settled = t0.Add(55 * time.Second)
)

// steady is six settled reports of the workers at rate samples/s each.
func steady(start time.Time, rate float64, workers ...uint32) []policy.Measurement {
	var rates []policy.WorkerRate
	for _, w := range workers {
		rates = append(rates, elastictest.Worker(w, a100, rate))
	}
	return elastictest.Measurements(start, 6, rates...)
}

func TestReconcile(t *testing.T) {
	tests := []struct {
		name  string
		state func(*reconcile.State)
		snap  func(*reconcile.Snapshot)
		// active are the job's running workers, main job first.
		active []uint32
		// action and code of the decision; no code: the last one stands.
		action policy.Action
		code   policy.Code
		// want is the plan less its decision.
		want reconcile.Plan
	}{
		{
			name:   "a pending worker holds; one pending past the timeout is cancelled",
			active: []uint32{main},
			snap: func(s *reconcile.Snapshot) {
				s.Pending = []reconcile.Pending{{ID: 201, Submit: settled.Add(-10 * time.Minute)}, {ID: 202, Submit: settled.Add(-time.Minute)}}
			},
			action: policy.Hold, code: reconcile.CodeWaitingForWorkers,
			want: reconcile.Plan{CancelPending: []uint32{201}},
		},
		{
			name:   "a pending worker already being stopped is not cancelled again",
			active: []uint32{main},
			state:  func(s *reconcile.State) { s.Stopping[201] = settled.Add(-time.Second) },
			snap: func(s *reconcile.Snapshot) {
				s.Pending = []reconcile.Pending{{ID: 201, Submit: settled.Add(-10 * time.Minute)}}
			},
			action: policy.Hold, code: reconcile.CodeWaitingForWorkers,
		},
		{
			name:   "a submitted worker not yet in the queue holds",
			active: []uint32{main},
			state:  func(s *reconcile.State) { s.Submitted = 1 },
			action: policy.Hold, code: reconcile.CodeWaitingForWorkers,
		},
		{
			name:   "a successor that has not reported holds its straggler in place",
			active: []uint32{main, 101, 102, 103},
			state:  func(s *reconcile.State) { s.Replacing[103] = 102 },
			snap:   func(s *reconcile.Snapshot) { s.Successors[103] = reconcile.Successor{Queued: true, Running: true} },
			action: policy.Hold, code: reconcile.CodeReplacing,
		},
		{
			name:   "a successor that has reported sends its straggler TERM",
			active: []uint32{main, 101, 102, 103},
			state:  func(s *reconcile.State) { s.Replacing[103] = 102 },
			snap: func(s *reconcile.Snapshot) {
				s.Successors[103] = reconcile.Successor{Queued: true, Running: true, Reported: true}
			},
			want: reconcile.Plan{Terminate: []uint32{102}, ForgetReplacing: []uint32{103}},
		},
		{
			name:   "a successor gone from the queue is forgotten, its straggler stays",
			active: []uint32{main, 101, 102},
			state:  func(s *reconcile.State) { s.Replacing[103] = 102 },
			want:   reconcile.Plan{ForgetReplacing: []uint32{103}},
		},
		{
			name:   "a straggler leaving first holds while it is in the queue",
			active: []uint32{main, 101},
			state: func(s *reconcile.State) {
				s.Leaving[102] = reconcile.Leave{Type: a100, Size: 3}
				s.Stopping[102] = settled
			},
			snap:   func(s *reconcile.Snapshot) { s.Queued[102] = true },
			action: policy.Hold, code: reconcile.CodeStragglerLeaving,
		},
		{
			name:   "a straggler that has left is succeeded by a worker of its type",
			active: []uint32{main, 101},
			state:  func(s *reconcile.State) { s.Leaving[102] = reconcile.Leave{Type: "v100", Size: 3} },
			want:   reconcile.Plan{Succeed: &reconcile.Succession{Straggler: 102, Type: "v100"}},
		},
		{
			name:   "a straggler's successor found back at the job's size is not submitted again",
			active: []uint32{main, 101, 103},
			state:  func(s *reconcile.State) { s.Leaving[102] = reconcile.Leave{Type: a100, Size: 3} },
			want:   reconcile.Plan{ForgetLeaving: []uint32{102}},
		},
		{
			name:   "a straggler's successor Slurm refuses is given up",
			active: []uint32{main, 101},
			state: func(s *reconcile.State) {
				s.Leaving[102] = reconcile.Leave{Type: a100, Size: 3}
				s.Refusals, s.Refused = 3, "sbatch: error: invalid account"
			},
			want: reconcile.Plan{ForgetLeaving: []uint32{102}},
		},
		{
			name:   "a straggler's successor Slurm refused fewer than MaxRefusals times is tried again",
			active: []uint32{main, 101},
			state: func(s *reconcile.State) {
				s.Leaving[102] = reconcile.Leave{Type: a100, Size: 3}
				s.Refusals, s.Refused = reconcile.MaxRefusals-1, "sbatch: error: invalid account"
			},
			want: reconcile.Plan{Succeed: &reconcile.Succession{Straggler: 102, Type: a100}},
		},
		{
			name:   "a worker stopping holds",
			active: []uint32{main},
			state:  func(s *reconcile.State) { s.Stopping[101] = settled },
			action: policy.Hold, code: reconcile.CodeWorkersStopping,
		},
		{
			name:   "refused workers hold the job",
			active: []uint32{main},
			state:  func(s *reconcile.State) { s.Refusals, s.Refused = 3, "sbatch: error: invalid account" },
			action: policy.Hold, code: reconcile.CodeWorkersRefused,
		},
		{
			name:   "refusals below MaxRefusals do not hold: the submission is tried again",
			active: []uint32{main},
			state: func(s *reconcile.State) {
				s.Bounds.MinWorkers = 2
				s.Refusals, s.Refused = reconcile.MaxRefusals-1, "sbatch: error: invalid account"
			},
			action: policy.Grow, code: policy.CodeBelowTarget,
			want: reconcile.Plan{Grow: &reconcile.Grow{Type: a100, Count: 1}},
		},
		{
			name:   "refusals past MaxRefusals hold the job, quoting the count",
			active: []uint32{main},
			state: func(s *reconcile.State) {
				s.Bounds.MinWorkers = 2
				s.Refusals, s.Refused = reconcile.MaxRefusals+1, "sbatch: error: Invalid generic resource (gres) specification"
			},
			action: policy.Hold, code: reconcile.CodeWorkersRefused,
		},
		{
			name:   "below the min grows to it at once, without a measurement",
			active: []uint32{main},
			state:  func(s *reconcile.State) { s.Bounds.MinWorkers = 3 },
			action: policy.Grow, code: policy.CodeBelowTarget,
			want: reconcile.Plan{Grow: &reconcile.Grow{Type: a100, Count: 2}},
		},
		{
			name:   "below a pinned size grows to it",
			active: []uint32{main, 101},
			state:  func(s *reconcile.State) { s.Bounds.Pin, s.PinnedBy = 4, "alice" },
			action: policy.Grow, code: policy.CodeBelowTarget,
			want: reconcile.Plan{Grow: &reconcile.Grow{Type: a100, Count: 2}},
		},
		{
			name:   "below the min adds only the workers the associations admit",
			active: []uint32{main},
			state:  func(s *reconcile.State) { s.Bounds.MinWorkers = 4 },
			snap:   func(s *reconcile.Snapshot) { s.MainTypeRoom = reconcile.Room{Workers: 1, Why: "GrpJobs=3"} },
			action: policy.Grow, code: policy.CodeBelowTarget,
			want: reconcile.Plan{Grow: &reconcile.Grow{Type: a100, Count: 1}},
		},
		{
			name:   "below the min holds when the associations admit no worker",
			active: []uint32{main},
			state:  func(s *reconcile.State) { s.Bounds.MinWorkers = 2 },
			snap:   func(s *reconcile.Snapshot) { s.MainTypeRoom = reconcile.Room{Workers: 0, Why: "GrpJobs=2"} },
			action: policy.Hold, code: policy.CodeBelowTarget,
		},
		{
			name:   "a measurement of other workers than the active ones holds",
			active: []uint32{main, 101},
			state:  func(s *reconcile.State) { s.History = steady(t0, 100, main) },
			action: policy.Hold, code: reconcile.CodeWaitingForReports,
		},
		{
			name:   "no measurement yet holds",
			active: []uint32{main},
			action: policy.Hold, code: reconcile.CodeWaitingForReports,
		},
		{
			name:   "a measured job grows as the policy says",
			active: []uint32{main},
			state:  func(s *reconcile.State) { s.History = steady(t0, 100, main) },
			action: policy.Grow, code: policy.CodeGrowth,
			want: reconcile.Plan{Grow: &reconcile.Grow{Type: a100, Count: 1}},
		},
		{
			name:   "a step that does not pay is undone on the worker it added",
			active: []uint32{main, 101},
			state: func(s *reconcile.State) {
				s.History = append(steady(t0.Add(-2*time.Minute), 100, main), steady(t0, 52.5, main, 101)...)
			},
			action: policy.Shrink, code: policy.CodeStepDoesNotPay,
			want: reconcile.Plan{Shrink: []uint32{101}},
		},
		{
			name:   "below the max a straggler's successor joins first",
			active: []uint32{main, 101, 102},
			state:  func(s *reconcile.State) { s.History = stragglerHistory() },
			action: policy.Replace, code: policy.CodeStraggler,
			want: reconcile.Plan{Replace: &reconcile.Replacement{Straggler: 102, Type: a100, Size: 3}},
		},
		{
			name:   "at the max a straggler leaves first",
			active: []uint32{main, 101, 102},
			state:  func(s *reconcile.State) { s.Bounds.MaxWorkers = 3; s.History = stragglerHistory() },
			action: policy.Replace, code: policy.CodeStragglerLeaves,
			want: reconcile.Plan{Replace: &reconcile.Replacement{Straggler: 102, Type: a100, LeaveFirst: true, Size: 3}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := elastictest.State(main, 1, 4, a100)
			if tc.state != nil {
				tc.state(&s)
			}
			snap := elastictest.Snapshot(a100, 4, tc.active...)
			if tc.snap != nil {
				tc.snap(&snap)
			}
			got := reconcile.Reconcile(s, snap, settled)
			switch {
			case tc.code == "" && got.Decision != nil:
				t.Errorf("decision %s %s (%s), want the last one to stand", got.Decision.Action, got.Decision.Code, got.Decision.Reason)
			case tc.code != "" && got.Decision == nil:
				t.Errorf("no decision, want %s %s", tc.action, tc.code)
			case got.Decision != nil && (got.Decision.Action != tc.action || got.Decision.Code != tc.code):
				t.Errorf("decision %s %s (%s), want %s %s", got.Decision.Action, got.Decision.Code, got.Decision.Reason, tc.action, tc.code)
			}
			got.Decision = nil
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("plan %+v, want %+v", got, tc.want)
			}
		})
	}
}

// A job holds on Slurm's refusals from the MaxRefusals-th in a row on, and only then.
func TestHoldsOnRefusals(t *testing.T) {
	for _, tc := range []struct {
		refusals int
		holds    bool
	}{
		{refusals: 0, holds: false},
		{refusals: 1, holds: false},
		{refusals: 2, holds: false},
		{refusals: 3, holds: true},
		{refusals: 4, holds: true},
	} {
		if got := reconcile.HoldsOnRefusals(tc.refusals); got != tc.holds {
			t.Errorf("HoldsOnRefusals(%d) = %v, want %v", tc.refusals, got, tc.holds)
		}
	}
}

// The hold on refusals quotes their count and Slurm's last answer, which no code carries: the
// words are checked for them.
func TestRefusalHoldQuotesSlurm(t *testing.T) {
	s := elastictest.State(main, 2, 4, a100)
	s.Refusals, s.Refused = reconcile.MaxRefusals+1, "sbatch: error: Invalid generic resource (gres) specification"
	got := reconcile.Reconcile(s, elastictest.Snapshot(a100, 4, main), settled)
	want := "Slurm refused 4 worker submissions in a row: sbatch: error: Invalid generic resource (gres) specification"
	if d := got.Decision; d == nil || d.Code != reconcile.CodeWorkersRefused || !strings.Contains(d.Reason, want) {
		t.Fatalf("decision %+v, want %s saying %q", d, reconcile.CodeWorkersRefused, want)
	}
}

// Once a straggler that left first has its successor submitted, the job holds and says which
// worker joins in whose place.
func TestSuccessionJoined(t *testing.T) {
	for _, tc := range []struct {
		s         reconcile.Succession
		successor uint32
		reason    string
	}{
		{s: reconcile.Succession{Straggler: 102, Type: a100}, successor: 205, reason: "straggler 102 has left; its successor 205 joins"},
		{s: reconcile.Succession{Straggler: 7, Type: "v100"}, successor: 8, reason: "straggler 7 has left; its successor 8 joins"},
	} {
		got := tc.s.Joined(tc.successor)
		if want := (policy.Decision{Action: policy.Hold, Code: reconcile.CodeReplacing, Reason: tc.reason}); !reflect.DeepEqual(got, want) {
			t.Errorf("%+v.Joined(%d) = %+v, want %+v", tc.s, tc.successor, got, want)
		}
	}
}

// stragglerHistory is a job of three workers whose last, 102, runs at half its peers' rate.
func stragglerHistory() []policy.Measurement {
	return elastictest.Measurements(t0, 6,
		elastictest.Worker(main, a100, 100), elastictest.Worker(101, a100, 100), elastictest.Worker(102, a100, 50))
}

// Reconcile reads nothing but its arguments: the same state and snapshot give the same plan.
func TestReconcileIsDeterministic(t *testing.T) {
	s := elastictest.State(main, 1, 4, a100)
	s.Replacing[104], s.Replacing[103] = 101, 102
	snap := elastictest.Snapshot(a100, 4, main, 101, 102, 103, 104)
	snap.Successors[103] = reconcile.Successor{Queued: true, Running: true, Reported: true}
	snap.Successors[104] = reconcile.Successor{Queued: true, Running: true, Reported: true}
	want := reconcile.Plan{Terminate: []uint32{102, 101}, ForgetReplacing: []uint32{103, 104}}
	for range 20 {
		if got := reconcile.Reconcile(s, snap, settled); !reflect.DeepEqual(got, want) {
			t.Fatalf("plan %+v, want %+v", got, want)
		}
	}
}

// A job below its target grows by reconcile's rule alone, within what the associations admit of
// the main job's type, whatever the nodes have free (its workers wait in the queue for them):
// policy.Decide's own rule, which would hold the job for the nodes, is never reached from here.
func TestBelowTargetGrowsWithinTheAssociationsAlone(t *testing.T) {
	s := elastictest.State(main, 1, 4, a100)
	s.Bounds.Pin, s.PinnedBy = 3, "alice"
	s.History = steady(t0, 100, main)
	got := reconcile.Reconcile(s, elastictest.Snapshot(a100, 0, main), settled)
	if d := got.Decision; got.Grow == nil || *got.Grow != (reconcile.Grow{Type: a100, Count: 2}) || d == nil || d.Code != policy.CodeBelowTarget {
		t.Fatalf("plan %+v (decision %+v), want growth by 2 to the pin though no a100 is free", got, d)
	}
}
