package view

import (
	"sort"
	"time"

	"github.com/slurmbridge/slurmbridge/quotad/policy"
)

// APIVersion is the path prefix and the api_version field. Fields are only ever added within
// a version; a renamed or removed field means a new version.
const APIVersion = "v1"

// Status says how current the served plan is. Every response carries it, so numbers never
// travel without their age.
type Status struct {
	APIVersion  string    `json:"api_version"`
	Cluster     string    `json:"cluster"`
	GeneratedAt time.Time `json:"generated_at"`
	// Plan is nil until quotad has planned on a fresh snapshot once.
	Plan      *PlanStatus `json:"plan"`
	LastCycle *CycleInfo  `json:"last_cycle"`
	// LastSuccessfulCycleAt matches quotad_last_successful_cycle_timestamp_seconds.
	LastSuccessfulCycleAt *time.Time `json:"last_successful_cycle_at"`
	LeaseHeld             bool       `json:"lease_held"` // this quotad is the active one
	DryRun                bool       `json:"dry_run"`
	IntervalSeconds       float64    `json:"interval_seconds"`
}

// PlanStatus dates the served plan.
type PlanStatus struct {
	BuiltAt               time.Time `json:"built_at"`
	SnapshotTakenAt       time.Time `json:"snapshot_taken_at"`
	SnapshotAgeSeconds    float64   `json:"snapshot_age_seconds"`
	MaxSnapshotAgeSeconds float64   `json:"max_snapshot_age_seconds"`
	StaleAfter            time.Time `json:"stale_after"`
	// Stale: no fresh plan replaced this one when it was due; its numbers are history.
	Stale bool `json:"stale"`
}

// CycleInfo is the latest cycle, whatever its outcome.
type CycleInfo struct {
	At time.Time `json:"at"`
	// Outcome: acted, passive, dry_run, not_acting, fenced or error.
	Outcome string   `json:"outcome"`
	Notes   []string `json:"notes"`
}

// Project is one project's quota position and limits.
type Project struct {
	Account       string  `json:"account"`
	GuaranteedQOS string  `json:"guaranteed_qos"`
	Weight        float64 `json:"weight"`
	// UsageGPUSeconds is the fairness window's usage that breaks ties among borrowers.
	UsageGPUSeconds float64       `json:"usage_gpu_seconds"`
	Limits          ProjectLimits `json:"limits"`
	GPUs            []ProjectGPUs `json:"gpus"`
	// BackingOff counts its jobs a claim took back that wait out their reclaim backoff.
	BackingOff int    `json:"backing_off"`
	Summary    string `json:"summary"`
}

// ProjectLimits are the quota table's limits; null means none.
type ProjectLimits struct {
	TotalGPUs         *int           `json:"total_gpus"`
	BorrowLimit       *int           `json:"borrow_limit"`
	BorrowLimitByType map[string]int `json:"borrow_limit_by_type"`
	LendLimitByType   map[string]int `json:"lend_limit_by_type"`
	// ReclaimPriorityThreshold: its borrowers of at least this Slurm priority are reclaimed
	// only by claims of at least this priority.
	ReclaimPriorityThreshold *int64 `json:"reclaim_priority_threshold"`
}

// ProjectGPUs is one project's count of one GPU type ("any": requests of no type).
type ProjectGPUs struct {
	GPUType    string `json:"gpu_type"`
	Guaranteed int    `json:"guaranteed"`
	InUse      int    `json:"in_use"`     // held by started jobs in the guaranteed QOS
	Borrowed   int    `json:"borrowed"`   // held or promised in the borrow and elastic QOS
	Elastic    int    `json:"elastic"`    // the part of borrowed held or promised by elastic workers
	Lent       int    `json:"lent"`       // unused guarantee borrowers hold now
	Pending    int    `json:"pending"`    // requested by pending jobs in the guaranteed QOS
	LendLimit  *int   `json:"lend_limit"` // most of the guarantee others may borrow; null: no limit
	KeptIdle   int    `json:"kept_idle"`  // idle GPUs the lending limit keeps for the project's own jobs now
}

// GPUType is the cluster-wide position of one GPU type.
type GPUType struct {
	GPUType   string `json:"gpu_type"`
	Total     int    `json:"total"`
	Idle      int    `json:"idle"`
	Lent      int    `json:"lent"`
	LendLimit *int   `json:"lend_limit"` // null: no limit
}

// Job is one pending or running GPU job's explanation.
type Job struct {
	JobID       uint32 `json:"job_id"`
	Account     string `json:"account"`
	User        string `json:"user"`
	State       string `json:"state"` // Slurm's: PENDING, RUNNING, ...
	Code        string `json:"code"`  // the explanation's kind (policy.Code): stable, for scripts
	Explanation string `json:"explanation"`
	// Move is what this plan does with the job; null: nothing.
	Move *Move `json:"move"`
}

// Move is a planned QOS change of a pending job.
type Move struct {
	Kind    string `json:"kind"` // lend or return
	FromQOS string `json:"from_qos"`
	ToQOS   string `json:"to_qos"`
}

// Response bodies: each carries the status.
type (
	StatusResponse struct {
		Status Status `json:"status"`
	}
	ProjectsResponse struct {
		Status   Status    `json:"status"`
		Projects []Project `json:"projects"`
	}
	ProjectResponse struct {
		Status  Status  `json:"status"`
		Project Project `json:"project"`
	}
	TypesResponse struct {
		Status Status    `json:"status"`
		Types  []GPUType `json:"gpu_types"`
	}
	JobsResponse struct {
		Status Status `json:"status"`
		Jobs   []Job  `json:"jobs"`
	}
	JobResponse struct {
		Status Status `json:"status"`
		Job    Job    `json:"job"`
	}
	// ErrorResponse is the body of every 4xx and 5xx.
	ErrorResponse struct {
		Error  string  `json:"error"`
		Status *Status `json:"status,omitempty"`
	}
)

func (v *View) status(s state) Status {
	now := v.now()
	st := Status{APIVersion: APIVersion, Cluster: v.Cluster, GeneratedAt: now, LeaseHeld: s.leaseHeld,
		DryRun: v.DryRun, IntervalSeconds: v.Interval.Seconds()}
	if s.plan != nil {
		after := staleAfter(s.snapshotAt, v.Interval, s.maxAge)
		st.Plan = &PlanStatus{BuiltAt: s.planAt, SnapshotTakenAt: s.snapshotAt, SnapshotAgeSeconds: now.Sub(s.snapshotAt).Seconds(),
			MaxSnapshotAgeSeconds: s.maxAge.Seconds(), StaleAfter: after, Stale: now.After(after)}
	}
	if !s.lastCycleAt.IsZero() {
		notes := s.lastNotes
		if notes == nil {
			notes = []string{}
		}
		st.LastCycle = &CycleInfo{At: s.lastCycleAt, Outcome: s.lastOutcome, Notes: notes}
	}
	if !s.lastSuccessAt.IsZero() {
		t := s.lastSuccessAt
		st.LastSuccessfulCycleAt = &t
	}
	return st
}

// Projects turns a plan and its quota table into the API's projects, in the plan's order.
func Projects(plan *policy.Plan, cfg *policy.Config) []Project {
	out := []Project{}
	for _, ps := range plan.Projects {
		p := Project{Account: ps.Account, GuaranteedQOS: ps.GuaranteedQOS, Weight: ps.Weight, UsageGPUSeconds: ps.Usage,
			Summary: ps.Summary, GPUs: []ProjectGPUs{}, BackingOff: ps.BackingOff}
		if pc, ok := cfg.Project(ps.Account); ok {
			p.Limits = ProjectLimits{TotalGPUs: copyPtr(pc.TotalGPUs), BorrowLimit: copyPtr(pc.BorrowLimit), BorrowLimitByType: copyMap(pc.BorrowLimitByType), LendLimitByType: copyMap(pc.LendLimitByType), ReclaimPriorityThreshold: copyPtr(pc.ReclaimPriorityThreshold)}
		}
		for _, row := range ps.ByType {
			p.GPUs = append(p.GPUs, ProjectGPUs{GPUType: TypeLabel(row.Type), Guaranteed: row.Guaranteed, InUse: row.InUse,
				Borrowed: row.Borrowed, Elastic: row.Elastic, Lent: LentFrom(plan, row), Pending: row.Pending, KeptIdle: row.KeptIdle})
			if row.LendLimit >= 0 {
				p.GPUs[len(p.GPUs)-1].LendLimit = copyPtr(&row.LendLimit)
			}
		}
		out = append(out, p)
	}
	return out
}

// Types turns a plan's type statuses into the API's.
func Types(plan *policy.Plan) []GPUType {
	out := []GPUType{}
	for _, t := range plan.Types {
		g := GPUType{GPUType: t.Type, Total: t.Total, Idle: t.Idle, Lent: t.Lent}
		if t.LendLimit >= 0 {
			n := t.LendLimit
			g.LendLimit = &n
		}
		out = append(out, g)
	}
	return out
}

// Jobs turns a plan's explanations into the API's, sorted by job id, with each job's move.
func Jobs(plan *policy.Plan) []Job {
	moves := map[uint32]policy.JobMove{}
	for _, m := range plan.Moves {
		moves[m.JobID] = m
	}
	out := make([]Job, 0, len(plan.Jobs))
	for _, x := range plan.Jobs {
		var move *policy.JobMove
		if m, ok := moves[x.JobID]; ok {
			move = &m
		}
		out = append(out, jobOf(x, move))
	}
	sort.Slice(out, func(a, b int) bool { return out[a].JobID < out[b].JobID })
	return out
}

// PlanJob is the API's view of one job of a plan: its explanation and its move, if any.
func PlanJob(plan *policy.Plan, id uint32) (Job, bool) {
	x, ok := plan.Explanation(id)
	if !ok {
		return Job{}, false
	}
	var move *policy.JobMove
	for i := range plan.Moves { // the last, as Jobs does
		if plan.Moves[i].JobID == id {
			move = &plan.Moves[i]
		}
	}
	return jobOf(x, move), true
}

// PlanJobID is the id of the plan's record for a job ParseJobName read: the job itself, or the
// record that stands for the array task (its own, or its array's pending one); ok is false when
// the plan has none.
func PlanJobID(plan *policy.Plan, job, task uint32, isTask bool) (id uint32, ok bool) {
	if isTask {
		x, ok := plan.TaskExplanation(job, task)
		return x.JobID, ok
	}
	_, ok = plan.Explanation(job)
	return job, ok
}

func jobOf(x policy.JobExplanation, m *policy.JobMove) Job {
	j := Job{JobID: x.JobID, Account: x.Account, User: x.User, State: string(x.State), Code: string(x.Code), Explanation: x.Text}
	if m != nil {
		j.Move = &Move{Kind: string(m.Kind), FromQOS: m.From, ToQOS: m.To}
	}
	return j
}

// TypeLabel names the type of untyped requests "any", as the metrics do.
func TypeLabel(t string) string {
	if t == "" {
		return "any"
	}
	return t
}

// LentFrom is how many of a project's unused guaranteed GPUs of a type borrowers hold now: its
// unused guarantee, capped by what all borrowers hold of that type. Each borrow QOS is the
// borrowing project's and a loan names no lender, so this is what the project would reclaim by
// submitting, not a per-loan ledger.
func LentFrom(plan *policy.Plan, row policy.ProjectTypeStatus) int {
	unused := row.Guaranteed - row.InUse
	if unused <= 0 || row.Type == "" {
		return 0
	}
	for _, t := range plan.Types {
		if t.Type == row.Type {
			return min(unused, t.Lent)
		}
	}
	return 0
}

func copyPtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func copyMap(m map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range m {
		out[k] = v
	}
	return out
}
