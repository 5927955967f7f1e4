// Package reconcile decides what elasticd does with one elastic job in one cycle, from what it
// remembers of the job (State) and what the cycle saw (Snapshot): hold while workers are on
// their way in or out, finish a straggler's replacement, grow at once to the declared min or a
// pinned size (within the association limits), hold until every worker of the current size
// has reported, and otherwise ask elasticd/policy. It reads no clock, runs no command and
// touches no file: elasticd/daemon gathers the snapshot and carries out the Plan.
package reconcile

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/slurmbridge/slurmbridge/elasticd/policy"
)

// Unlimited is a room no limit bounds.
const Unlimited = policy.Unlimited

// MaxRefusals is how many worker submissions in a row Slurm may refuse before the job holds:
// a request Slurm refuses once it refuses every cycle, and submitting it again and again
// only fills the log.
const MaxRefusals = 3

// HoldsOnRefusals says whether refusals, the worker submissions Slurm refused in a row, make
// the job hold at its size (until it is resubmitted or elasticd restarts); below MaxRefusals
// the submission is tried again next cycle.
func HoldsOnRefusals(refusals int) bool {
	return refusals >= MaxRefusals
}

// Room is how many more workers a limit admits (Unlimited: none applies) and, when one does,
// which limit and why.
type Room struct {
	Workers int
	Why     string
}

// Leave is a straggler that leaves before its successor joins: the successor's GPU type and
// the job's size, straggler included, that the successor restores. elasticd saves it in the
// job's state file.
type Leave struct {
	Type policy.GPUType `json:"type"`
	Size int            `json:"size"`
}

// State is what elasticd remembers of the job between cycles, and its settings for the job.
type State struct {
	ID uint32
	// Bounds are the job's declared bounds, its max lowered by its max global batch, and the
	// size pinned (Bounds.Pin) by PinnedBy.
	Bounds   policy.Bounds
	PinnedBy string
	// Settings are the policy's, with the job's own --elastic-value.
	Settings policy.Settings
	// PendingTimeout: a worker still pending after this is cancelled.
	PendingTimeout time.Duration
	History        []policy.Measurement
	// Submitted counts workers sbatch accepted and not yet seen running.
	Submitted int
	// Stopping are workers sent TERM or cancelled, with when.
	Stopping map[uint32]time.Time
	// Replacing maps a successor to the straggler it replaces.
	Replacing map[uint32]uint32
	// Leaving are stragglers sent TERM before their successors are submitted.
	Leaving map[uint32]Leave
	// Refusals counts worker submissions Slurm refused in a row; Refused is its last answer.
	// At MaxRefusals the job holds with that answer as its reason.
	Refusals int
	Refused  string
}

// Snapshot is what one cycle saw of the job.
type Snapshot struct {
	// MainType is the main job's GPU type: below the min, workers are of it.
	MainType policy.GPUType
	// Active are the running workers not being stopped, main job included, by job id.
	Active []uint32
	// Allocated counts the active workers per GPU type.
	Allocated map[policy.GPUType]int
	// Pending are the job's workers waiting in the queue.
	Pending []Pending
	// Successors are the states of the successors in State.Replacing, by job id.
	Successors map[uint32]Successor
	// Queued are the stragglers of State.Leaving still running or pending.
	Queued map[uint32]bool
	// Signals are the agents' latest NVML samples of the active workers' GPUs.
	Signals []policy.GPUSignal
	// Capacity is, per GPU type, how many workers could start now; CapacityLimit names the
	// association limit that holds a type back, where one does.
	Capacity      map[policy.GPUType]int
	CapacityLimit map[policy.GPUType]string
	// GrowthCapacity and GrowthLimit: the room growth beyond the min leaves to the jobs
	// waiting for the same GPUs (no entry: none waits).
	GrowthCapacity map[policy.GPUType]int
	GrowthLimit    map[policy.GPUType]string
	// MainTypeRoom is what the associations admit of workers of MainType.
	MainTypeRoom Room
}

// Pending is a worker waiting in the queue since Submit.
type Pending struct {
	ID     uint32
	Submit time.Time
}

// Successor is a straggler's successor as the queue shows it.
type Successor struct {
	// Queued: it runs or waits; Running: it runs; Reported: it has reported since it started.
	Queued, Running, Reported bool
}

// Plan is what elasticd does with the job this cycle. Each list is in job id order.
type Plan struct {
	// Decision is the job's decision; nil when the last one stands (a finished replacement,
	// a forgotten straggler, a successor whose submission decides the reason).
	Decision *policy.Decision
	// CancelPending are workers pending past the timeout.
	CancelPending []uint32
	// Grow submits Count workers of Type.
	Grow *Grow
	// Shrink sends TERM to these workers.
	Shrink []uint32
	// Terminate sends TERM to stragglers whose successors have joined.
	Terminate []uint32
	// ForgetReplacing drops these successors from State.Replacing: joined, or gone.
	ForgetReplacing []uint32
	// ForgetLeaving drops these stragglers from State.Leaving: the job is back at its size,
	// or Slurm refuses its workers.
	ForgetLeaving []uint32
	// Replace replaces a straggler.
	Replace *Replacement
	// Succeed submits the successor of a straggler that has left.
	Succeed *Succession
	// Ignored says why a worker the policy named was left alone.
	Ignored []string
}

// Grow is Count more workers of Type.
type Grow struct {
	Type  policy.GPUType
	Count int
}

// Replacement is a straggler to replace by a worker of Type. Below the job's max its successor
// joins first; at the max (LeaveFirst) the straggler leaves first and the job's Size,
// straggler included, is what its successor restores.
type Replacement struct {
	Straggler  uint32
	Type       policy.GPUType
	LeaveFirst bool
	Size       int
}

// Succession is the successor of a straggler that has left, of Type.
type Succession struct {
	Straggler uint32
	Type      policy.GPUType
}

// Joined is the job's decision once Slurm has taken the straggler's successor (job id
// successor): it holds while the successor joins the rendezvous the straggler left.
func (s Succession) Joined(successor uint32) policy.Decision {
	return policy.Decision{Action: policy.Hold, Code: CodeReplacing, Reason: fmt.Sprintf("straggler %d has left; its successor %d joins", s.Straggler, successor)}
}

// Reconcile decides the job's plan at now. The rules, first that applies:
//   - workers pending: cancel those pending past the timeout, and hold;
//   - workers submitted but not yet in the queue: hold;
//   - a straggler being replaced: TERM it once its successor runs and has reported;
//   - a straggler leaving first: hold while it is in the queue, then submit its successor;
//   - workers stopping: hold;
//   - Slurm refused the job's workers: hold;
//   - below the min or the pinned size: grow at once to it, as far as the associations admit;
//   - the last measurement is not of the active workers: hold;
//   - otherwise policy.Decide, and grow, shrink or replace as it says.
func Reconcile(s State, snap Snapshot, now time.Time) Plan {
	switch {
	case len(snap.Pending) > 0:
		return waitForPending(s, snap, now)
	case s.Submitted > 0:
		return hold(CodeWaitingForWorkers, "waiting for submitted workers to appear in the queue")
	case len(s.Replacing) > 0:
		return completeReplacements(s, snap)
	case len(s.Leaving) > 0:
		return succeedLeavers(s, snap)
	case len(s.Stopping) > 0:
		return hold(CodeWorkersStopping, fmt.Sprintf("waiting for %d worker(s) to stop", len(s.Stopping)))
	case HoldsOnRefusals(s.Refusals):
		return hold(CodeWorkersRefused, fmt.Sprintf("Slurm refused %d worker submissions in a row: %s", s.Refusals, s.Refused))
	}
	if p, below := growToTarget(s, snap); below {
		return p
	}
	if n := len(s.History); n == 0 || !maps.Equal(s.History[n-1].Allocated, snap.Allocated) || !ofWorkers(s.History[n-1], snap.Active) {
		// The last measurement is of another size, or of workers since replaced: deciding on
		// it would repeat the last action (grow again before the new worker has even
		// reported, replace a straggler that has left).
		return hold(CodeWaitingForReports, fmt.Sprintf("waiting for every worker of %d to report", len(snap.Active)))
	}
	return decide(s, snap, now)
}

func hold(code policy.Code, reason string) Plan {
	return Plan{Decision: &policy.Decision{Action: policy.Hold, Code: code, Reason: reason}}
}

// The kinds of hold a cycle makes before it asks the policy (policy.Code's other values).
const (
	CodeWaitingForWorkers policy.Code = "waiting-for-workers" // workers submitted, not yet in the queue or pending there
	CodeWorkersStopping   policy.Code = "workers-stopping"    // workers sent TERM or cancelled, not yet gone
	CodeWaitingForReports policy.Code = "waiting-for-reports" // the last measurement is not of every active worker
	CodeWorkersRefused    policy.Code = "workers-refused"     // Slurm refused MaxRefusals submissions in a row
	CodeReplacing         policy.Code = "replacing"           // a straggler's successor is joining
	CodeStragglerLeaving  policy.Code = "straggler-leaving"   // a straggler leaving first is still in the queue; its successor waits
	CodeMainNotRunning    policy.Code = "main-not-running"    // the main job was requeued or is not running
	CodeMainRestarted     policy.Code = "main-restarted"      // waiting for the restarted main job's new declaration
)

// waitForPending cancels the workers pending past the timeout (the capacity they were counted
// on went elsewhere) and holds until the others start.
func waitForPending(s State, snap Snapshot, now time.Time) Plan {
	ids := make([]uint32, 0, len(snap.Pending))
	var stale []uint32
	for _, w := range snap.Pending {
		ids = append(ids, w.ID)
		if _, stopping := s.Stopping[w.ID]; stopping || w.Submit.IsZero() || now.Sub(w.Submit) < s.PendingTimeout {
			continue
		}
		stale = append(stale, w.ID)
	}
	p := hold(CodeWaitingForWorkers, fmt.Sprintf("waiting for worker job(s) %v to start", ids))
	p.CancelPending = stale
	return p
}

// completeReplacements stops each straggler once its successor runs and has reported, and
// forgets successors that left the queue.
func completeReplacements(s State, snap Snapshot) Plan {
	var p Plan
	for _, next := range slices.Sorted(maps.Keys(s.Replacing)) {
		old, w := s.Replacing[next], snap.Successors[next]
		switch {
		case !w.Queued:
			p.ForgetReplacing = append(p.ForgetReplacing, next)
		case !w.Running || !w.Reported:
			p.Decision = hold(CodeReplacing, fmt.Sprintf("worker %d joins before straggler %d leaves", next, old)).Decision
		default:
			p.Terminate = append(p.Terminate, old)
			p.ForgetReplacing = append(p.ForgetReplacing, next)
		}
	}
	return p
}

// succeedLeavers submits the successor of a straggler that left first once it is out of the
// queue: torchrun's rendezvous then has room for it. A successor already there (elasticd
// restarted after submitting it, before saving that) is not submitted again: the job is back
// at its size.
func succeedLeavers(s State, snap Snapshot) Plan {
	olds := slices.Sorted(maps.Keys(s.Leaving))
	for _, old := range olds {
		if snap.Queued[old] {
			return hold(CodeStragglerLeaving, fmt.Sprintf("straggler %d leaves before its successor joins (the rendezvous is at its max)", old))
		}
	}
	var p Plan
	for _, old := range olds {
		l := s.Leaving[old]
		if len(snap.Active) >= l.Size || HoldsOnRefusals(s.Refusals) {
			p.ForgetLeaving = append(p.ForgetLeaving, old)
			continue
		}
		p.Succeed = &Succession{Straggler: old, Type: l.Type}
		break
	}
	return p
}

// growToTarget grows a job below its declared min, or below its pinned size, at once, by
// workers of the main job's type as far as the associations admit (policy.GrowToTarget).
func growToTarget(s State, snap Snapshot) (Plan, bool) {
	room := policy.TypeRoom{Type: snap.MainType, Workers: snap.MainTypeRoom.Workers, Why: snap.MainTypeRoom.Why}
	dec, below := policy.GrowToTarget(s.Bounds, s.PinnedBy, len(snap.Active), []policy.TypeRoom{room})
	if !below {
		return Plan{}, false
	}
	p := Plan{Decision: &dec}
	if dec.Action == policy.Grow {
		p.Grow = &Grow{Type: dec.Type, Count: dec.Count}
	}
	return p, true
}

// ofWorkers: m measured exactly the active workers.
func ofWorkers(m policy.Measurement, active []uint32) bool {
	if len(m.Workers) != len(active) {
		return false
	}
	for _, w := range active {
		id := workerName(w)
		if !slices.ContainsFunc(m.Workers, func(r policy.WorkerRate) bool { return r.Worker == id }) {
			return false
		}
	}
	return true
}

// decide asks the policy and turns its decision into actions. The main job is never shrunk or
// replaced: it hosts the rendezvous. A job below its target never gets here: a cycle grows it
// in growToTarget alone, within Snapshot.MainTypeRoom, and policy.Decide's own rule for such a
// job is for callers without reconcile (the simulator).
func decide(s State, snap Snapshot, now time.Time) Plan {
	id := workerName(s.ID)
	dec := policy.Decide(policy.Input{
		Now:            now,
		Job:            policy.Job{ID: id, Elastic: true, Bounds: s.Bounds},
		History:        s.History,
		Signals:        snap.Signals,
		Main:           id,
		Capacity:       snap.Capacity,
		CapacityLimit:  snap.CapacityLimit,
		GrowthCapacity: snap.GrowthCapacity,
		GrowthLimit:    snap.GrowthLimit,
		Settings:       s.Settings,
	})
	p := Plan{Decision: &dec}
	switch dec.Action {
	case policy.Grow:
		p.Grow = &Grow{Type: dec.Type, Count: dec.Count}
	case policy.Shrink:
		for _, name := range dec.Workers {
			w, ok := activeWorker(s, snap, name)
			if !ok {
				p.Ignored = append(p.Ignored, fmt.Sprintf("shrink names the main job or an unknown worker %s; left alone", name))
				continue
			}
			p.Shrink = append(p.Shrink, w)
		}
	case policy.Replace:
		w, ok := activeWorker(s, snap, dec.Workers[0])
		if !ok {
			p.Ignored = append(p.Ignored, fmt.Sprintf("straggler %s is the main job or unknown; elasticd never touches the main job", dec.Workers[0]))
			break
		}
		p.Replace = &Replacement{Straggler: w, Type: dec.Type, LeaveFirst: dec.LeaveFirst, Size: len(snap.Active)}
	}
	return p
}

// activeWorker is the active worker the policy names, never the main job.
func activeWorker(s State, snap Snapshot, name string) (uint32, bool) {
	id, err := strconv.ParseUint(name, 10, 32)
	if err != nil || uint32(id) == s.ID || !slices.Contains(snap.Active, uint32(id)) {
		return 0, false
	}
	return uint32(id), true
}

// workerName is how the policy and the reports name a job: its id.
func workerName(id uint32) string {
	return strconv.FormatUint(uint64(id), 10)
}
