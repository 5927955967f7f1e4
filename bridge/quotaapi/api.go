// Package quotaapi is quotad's read-only JSON API as its readers see it: the wire types of
// /api/v1 and a client. It lives in bridge/ so that quotactl, elasticd (which reads the lending
// limits' kept GPUs from it before it lends a worker) and the attacker's suite read quotad
// without importing quotad's packages; quotad/view serves it. docs/operations.md ("Read-only
// API") documents the paths and fields.
package quotaapi

import "time"

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

// AnyType is the gpu_type of requests that name no GPU type.
const AnyType = "any"
