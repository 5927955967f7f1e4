package reconcile

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/slurmbridge/slurmbridge/elasticd/policy"
)

// Run is the main job as a cycle saw it, against the run elasticd follows.
type Run struct {
	// Running is false for a main job back in the queue (requeued); State names its state.
	Running bool
	State   string
	// Start is when its current run started; Followed when the run elasticd follows did.
	Start, Followed time.Time
	// Declaration is the declaration in the job's directory now (nil: none readable), and
	// Declared the one elasticd follows.
	Declaration *Declared
	Declared    Declared
	// Workers are the job's workers running or pending and not being stopped.
	Workers []Worker
}

// Declared is what tells one run's declaration from another's: its owner and when the plugin
// recorded it (Unix seconds).
type Declared struct {
	UID      uint32
	Recorded int64
}

// Worker is a worker job and when it started (when it was submitted, while it is pending).
type Worker struct {
	ID    uint32
	Since time.Time
}

// RunPlan is what elasticd does about the main job's run before anything else this cycle.
type RunPlan struct {
	// Decision is the job's decision when it holds here.
	Decision *policy.Decision
	// Stop cancels these workers at once (no grace: their run is over), for StopWhy.
	Stop    []uint32
	StopWhy string
	// ForgetRun forgets the run's measurements and its leaving stragglers: its workers are
	// gone with it, and the next run grows afresh.
	ForgetRun bool
	// NewRun takes the new declaration and forgets the earlier run: its measurements, and the
	// workers submitted, replacing or leaving for it.
	NewRun bool
	// GoOn: the cycle goes on to Reconcile.
	GoOn bool
}

// FollowRun decides about the main job's run:
//   - requeued (preempted, or by hand): the training restarts from its checkpoint, maybe on
//     another node with another rendezvous, so the run's workers are stopped (the plugin's job
//     epilog has cancelled them already where it runs), its reports forgotten, and the job
//     holds;
//   - started again since elasticd last saw it run (maybe while elasticd was down): the plugin
//     records the declaration again as the batch step starts, with the new node's rendezvous
//     endpoint. Until then the job holds; then the earlier run's workers are stopped, its
//     measurements forgotten, and new workers get the new declaration.
func FollowRun(r Run) RunPlan {
	if !r.Running {
		p := RunPlan{Decision: &policy.Decision{Action: policy.Hold, Code: CodeMainNotRunning, Reason: "main job is not running (" + r.State + ")"},
			StopWhy: "main job requeued", ForgetRun: true}
		for _, w := range r.Workers {
			p.Stop = append(p.Stop, w.ID)
		}
		return p
	}
	if r.Start.Equal(r.Followed) {
		return RunPlan{GoOn: true}
	}
	if d := r.Declaration; d == nil || d.UID != r.Declared.UID || (d.Recorded == r.Declared.Recorded && d.Recorded < r.Start.Unix()) {
		return RunPlan{Decision: &policy.Decision{Action: policy.Hold, Code: CodeMainRestarted, Reason: fmt.Sprintf("main job restarted at %s; waiting for its new declaration (rendezvous endpoint)",
			r.Start.UTC().Format(time.RFC3339))}}
	}
	p := RunPlan{StopWhy: "worker of the main job's earlier run", NewRun: true, GoOn: true}
	for _, w := range r.Workers {
		if w.Since.Before(r.Start) {
			p.Stop = append(p.Stop, w.ID)
		}
	}
	return p
}

// Stop is a worker being stopped as the queue shows it: Queued while it runs or waits,
// Completing while Slurm ends it.
type Stop struct {
	Queued, Completing bool
}

// FinishStops decides about the workers being stopped (sent TERM, or cancelled, at the times
// in stopping; queue has those still in the queue): those gone are forgotten, and those still
// there, not completing, a grace after their TERM are cancelled, again each grace.
func FinishStops(stopping map[uint32]time.Time, queue map[uint32]Stop, grace time.Duration, now time.Time) (cancel, forget []uint32) {
	for _, id := range slices.Sorted(maps.Keys(stopping)) {
		switch w := queue[id]; {
		case !w.Queued:
			forget = append(forget, id)
		case now.Sub(stopping[id]) >= grace && !w.Completing:
			cancel = append(cancel, id)
		}
	}
	return cancel, forget
}

// Queued is one of the job's workers in the queue.
type Queued struct {
	ID               uint32
	Running, Pending bool
	// Restarts counts Slurm's requeues of it.
	Restarts uint32
}

// Sorted are the job's workers as a cycle sorts them.
type Sorted struct {
	// Running and Pending are in the queue's order.
	Running, Pending []uint32
	// Reclaimed are workers Slurm requeued, which happens when guaranteed work reclaims the
	// GPUs they borrowed: the job has shrunk, and they are cancelled rather than rejoin at
	// some random later time (the job grows again when the policy says so).
	Reclaimed []uint32
	// Started are submitted workers now running; Vanished submitted ones sbatch accepted
	// that are still not in the queue a minute later, gone before they ran (purged after
	// failing). Both are no longer waited for.
	Started, Vanished []uint32
}

// SortWorkers sorts the job's workers in the queue: stopping and submitted are the workers
// being stopped and submitted, with when; seen says which submitted ones are in the queue.
func SortWorkers(queue []Queued, stopping, submitted map[uint32]time.Time, seen map[uint32]bool, now time.Time) Sorted {
	var s Sorted
	for _, w := range queue {
		switch {
		case w.Running:
			s.Running = append(s.Running, w.ID)
			if _, ok := submitted[w.ID]; ok {
				s.Started = append(s.Started, w.ID)
			}
		case w.Pending:
			if _, ok := stopping[w.ID]; !ok && w.Restarts > 0 {
				s.Reclaimed = append(s.Reclaimed, w.ID)
				continue
			}
			s.Pending = append(s.Pending, w.ID)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(submitted)) {
		if !seen[id] && now.Sub(submitted[id]) > time.Minute {
			s.Vanished = append(s.Vanished, id)
		}
	}
	return s
}
