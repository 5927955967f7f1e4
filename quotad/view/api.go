package view

import (
	"sort"

	"github.com/slurmbridge/slurmbridge/bridge/quotaapi"
	"github.com/slurmbridge/slurmbridge/quotad/policy"
)

// The API's wire types are bridge/quotaapi's, where its readers (quotactl, elasticd) find them
// without importing quotad; view serves them.
const APIVersion = quotaapi.APIVersion

type (
	Status           = quotaapi.Status
	PlanStatus       = quotaapi.PlanStatus
	CycleInfo        = quotaapi.CycleInfo
	Project          = quotaapi.Project
	ProjectLimits    = quotaapi.ProjectLimits
	ProjectGPUs      = quotaapi.ProjectGPUs
	GPUType          = quotaapi.GPUType
	Job              = quotaapi.Job
	Move             = quotaapi.Move
	StatusResponse   = quotaapi.StatusResponse
	ProjectsResponse = quotaapi.ProjectsResponse
	ProjectResponse  = quotaapi.ProjectResponse
	TypesResponse    = quotaapi.TypesResponse
	JobsResponse     = quotaapi.JobsResponse
	JobResponse      = quotaapi.JobResponse
	ErrorResponse    = quotaapi.ErrorResponse
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
		return quotaapi.AnyType
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
