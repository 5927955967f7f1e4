// Package view is quotad's read-only HTTP API: the last plan's project, type and job positions
// as JSON, beside /metrics, for quotactl list/explain run by ordinary users and for cluster
// pages. Nothing in it changes state, and no response holds a secret. docs/operations.md
// ("Read-only API") documents the paths and fields.
package view

import (
	"sync"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/pools"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/quotad/policy"
)

// View holds what the API serves. quotad records every cycle; handlers read.
type View struct {
	Cluster  string
	Interval time.Duration // time between cycles
	DryRun   bool
	Now      func() time.Time

	mu    sync.RWMutex
	state state
}

// state is one consistent set of facts: a handler copies it under the lock.
type state struct {
	plan          *policy.Plan   // the last plan built from a fresh snapshot; nil before one
	cfg           *policy.Config // the quota table that plan was built from
	planAt        time.Time      // start of the cycle that built it
	snapshotAt    time.Time
	maxAge        time.Duration
	lastCycleAt   time.Time
	lastOutcome   string
	lastNotes     []string
	lastSuccessAt time.Time
	leaseHeld     bool
	// The cluster page's pools, counted from the snapshot of the served plan, and quotad's
	// latest actions.
	pools      []Pool
	poolsErr   string
	actions    []Action
	actionsErr string
}

// Cycle is what one quotad cycle tells the view.
type Cycle struct {
	Start      time.Time
	Outcome    string // as daemon.CycleResult.Outcome
	Err        error
	Plan       *policy.Plan   // nil when the cycle failed before planning
	Config     *policy.Config // the quota table it read
	SnapshotAt time.Time
	LeaseHeld  bool
	// For the cluster page: the snapshot's nodes and jobs (nil when the cycle failed before
	// one), pools.yaml (nil with PoolsErr when it could not be read), and the latest actions,
	// newest first (nil with ActionsErr when they could not be read).
	Nodes      []slurm.Node
	Jobs       []policy.Job
	Pools      *pools.Config
	PoolsErr   error
	Actions    []Action
	ActionsErr error
}

// Succeeded matches quotad_last_successful_cycle_timestamp_seconds: a fresh snapshot was
// planned and the cycle did what it should (applied, stayed passive, or printed a dry run).
func (c Cycle) Succeeded() bool {
	return c.Err == nil && c.Plan != nil && c.Plan.Acting
}

// Record takes one cycle's outcome. A plan that does not act (stale snapshot, invalid table)
// has no positions, so the previous plan stays served, and grows stale.
func (v *View) Record(c Cycle) {
	v.mu.Lock()
	defer v.mu.Unlock()
	s := &v.state
	s.lastCycleAt, s.lastOutcome, s.leaseHeld = c.Start, c.Outcome, c.LeaseHeld
	s.lastNotes = nil
	if c.Plan != nil {
		s.lastNotes = append([]string(nil), c.Plan.Notes...)
	}
	if c.Plan != nil && c.Plan.Acting && c.Config != nil {
		s.plan, s.cfg, s.planAt, s.snapshotAt = c.Plan, c.Config, c.Start, c.SnapshotAt
		s.maxAge = c.Config.Settings.SnapshotMaxAge()
		s.pools, s.poolsErr = PoolCounts(c.Pools, c.Nodes, c.Jobs), ""
		if c.PoolsErr != nil {
			s.poolsErr = "pools.yaml: " + c.PoolsErr.Error()
		}
	}
	if c.Actions != nil || c.ActionsErr != nil {
		s.actions, s.actionsErr = c.Actions, ""
		if c.ActionsErr != nil {
			s.actionsErr = c.ActionsErr.Error()
		}
	}
	if c.Succeeded() {
		s.lastSuccessAt = c.Start
	}
}

func (v *View) now() time.Time {
	if v.Now != nil {
		return v.Now()
	}
	return time.Now()
}

func (v *View) read() state {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.state
}

// staleAfter is when a plan stops being current: its snapshot is older than maxSnapshotAge
// past the moment the next cycle should have replaced it. Between two cycles the last plan is
// the newest there is; once a due cycle brought no fresh one (quotad stopped, Slurm or the
// database unreachable), it is stale.
func staleAfter(snapshotAt time.Time, interval, maxAge time.Duration) time.Time {
	return snapshotAt.Add(interval + maxAge)
}
