package capacity

import (
	"fmt"

	"github.com/slurmbridge/slurmbridge/bridge/pools"
	"github.com/slurmbridge/slurmbridge/bridge/quotaapi"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/elasticd/policy"
)

// QuotadAnswer is quotad's plan as borrowed workers need it: fresh, or why not, and every
// lending limit in it.
type QuotadAnswer struct {
	Fresh  bool
	Why    string
	Limits []LendLimit
}

// LendLimit is one project's lending limit on one GPU type.
type LendLimit struct {
	Account, GuarQOS, GPUType string
	// Never is the part of the guarantee never lent (the guarantee less the limit); KeptIdle
	// is what quotad's plan counted of it idle when it was made.
	Never, KeptIdle int
}

// AnswerOf is quotad's answer when it is whole and its plan fresh, else why not. A plan quotad
// itself calls stale counts GPUs that may have changed hands since: no daemon acts on it.
func AnswerOf(resp quotaapi.ProjectsResponse, err error) QuotadAnswer {
	switch plan := resp.Status.Plan; {
	case err != nil:
		return QuotadAnswer{Why: fmt.Sprintf("cannot read quotad's plan: %v", err)}
	case resp.Status.APIVersion != quotaapi.APIVersion:
		return QuotadAnswer{Why: fmt.Sprintf("quotad answers API version %q, not %s", resp.Status.APIVersion, quotaapi.APIVersion)}
	case plan == nil:
		return QuotadAnswer{Why: "quotad has no plan yet"}
	case plan.Stale:
		return QuotadAnswer{Why: fmt.Sprintf("quotad's plan is stale: its snapshot is %.0f s old", plan.SnapshotAgeSeconds)}
	}
	a := QuotadAnswer{Fresh: true}
	for _, p := range resp.Projects {
		for _, g := range p.GPUs {
			if g.LendLimit != nil {
				a.Limits = append(a.Limits, LendLimit{Account: p.Account, GuarQOS: p.GuaranteedQOS, GPUType: g.GPUType,
					Never: max(g.Guaranteed-*g.LendLimit, 0), KeptIdle: g.KeptIdle})
			}
		}
	}
	return a
}

// KeptNow is what the lending limits keep idle at the moment of this cycle's queue: of each
// limited guarantee, the part never lent less what the project's started jobs in its guarantee
// hold now, as quotad counts it (quotad/policy keptFor), but from elasticd's own snapshot. quotad's
// plan is a cycle older: when an owner's jobs have just ended, it still counts their GPUs in
// use, and a worker lent on them would take what the limit keeps. Requests of no type ("any")
// keep quotad's own count, which elasticd cannot place on a type.
func KeptNow(a QuotadAnswer, jobs map[uint32]slurm.Job) policy.Lending {
	if !a.Fresh {
		return policy.Lending{Why: a.Why}
	}
	l := policy.Lending{Fresh: true}
	for _, lim := range a.Limits {
		kept := lim.KeptIdle
		if lim.GPUType != quotaapi.AnyType {
			used := 0
			for _, j := range jobs {
				if j.Running() && pools.QOSKey(j.QOS) == pools.QOSKey(lim.GuarQOS) {
					used += int(j.TRESAlloc.GPUs(lim.GPUType))
				}
			}
			kept = max(lim.Never-used, 0)
		}
		if kept > 0 {
			l.Kept = append(l.Kept, policy.KeptIdle{Account: lim.Account, Type: lim.GPUType, GPUs: kept})
		}
	}
	return l
}
