package daemon

import (
	"context"
	"fmt"

	"github.com/slurmbridge/slurmbridge/bridge/pools"
	"github.com/slurmbridge/slurmbridge/bridge/quotaapi"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/elasticd/policy"
)

// Quotad is what elasticd reads of quotad's read-only API (bridge/quotaapi.Client): the
// projects of its last plan, with each project's lending limit and the idle GPUs it keeps for
// the project's own jobs. quotad keeps those idle in its own lending; elasticd lends its
// workers itself, so it counts them too before it lends one.
type Quotad interface {
	Projects(ctx context.Context) (quotaapi.ProjectsResponse, error)
}

// quotadAnswer is quotad's plan as borrowed workers need it: fresh, or why not, and every
// lending limit in it.
type quotadAnswer struct {
	fresh  bool
	why    string
	limits []lendLimit
}

// lendLimit is one project's lending limit on one GPU type.
type lendLimit struct {
	account, guarQOS, gpuType string
	// never is the part of the guarantee never lent (the guarantee less the limit); keptIdle
	// is what quotad's plan counted of it idle when it was made.
	never, keptIdle int
}

// readQuotad reads quotad's plan, or says why it cannot be counted this cycle; a change of
// that reason is logged once.
func (d *Daemon) readQuotad(ctx context.Context) quotadAnswer {
	var a quotadAnswer
	if d.cfg.Quotad == nil {
		a = quotadAnswer{why: "no quotad to read the lending limits from"}
	} else {
		resp, err := d.cfg.Quotad.Projects(ctx)
		a = answerOf(resp, err)
	}
	if a.why != d.lendingWhy {
		if a.why != "" {
			d.log.Warn().Str("why", a.why).Msg("cannot count the lending limits' kept GPUs; no worker borrows until quotad's plan is read fresh")
		} else {
			d.log.Info().Msg("quotad's plan read again; workers may borrow")
		}
		d.lendingWhy = a.why
	}
	return a
}

// answerOf is quotad's answer when it is whole and its plan fresh, else why not. A plan quotad
// itself calls stale counts GPUs that may have changed hands since: no daemon acts on it.
func answerOf(resp quotaapi.ProjectsResponse, err error) quotadAnswer {
	switch plan := resp.Status.Plan; {
	case err != nil:
		return quotadAnswer{why: fmt.Sprintf("cannot read quotad's plan: %v", err)}
	case resp.Status.APIVersion != quotaapi.APIVersion:
		return quotadAnswer{why: fmt.Sprintf("quotad answers API version %q, not %s", resp.Status.APIVersion, quotaapi.APIVersion)}
	case plan == nil:
		return quotadAnswer{why: "quotad has no plan yet"}
	case plan.Stale:
		return quotadAnswer{why: fmt.Sprintf("quotad's plan is stale: its snapshot is %.0f s old", plan.SnapshotAgeSeconds)}
	}
	a := quotadAnswer{fresh: true}
	for _, p := range resp.Projects {
		for _, g := range p.GPUs {
			if g.LendLimit != nil {
				a.limits = append(a.limits, lendLimit{account: p.Account, guarQOS: p.GuaranteedQOS, gpuType: g.GPUType,
					never: max(g.Guaranteed-*g.LendLimit, 0), keptIdle: g.KeptIdle})
			}
		}
	}
	return a
}

// keptNow is what the lending limits keep idle at the moment of this cycle's queue: of each
// limited guarantee, the part never lent less what the project's started jobs in its guarantee
// hold now, as quotad counts it (quotad/policy keptFor), but from elasticd's own snapshot. quotad's
// plan is a cycle older: when an owner's jobs have just ended, it still counts their GPUs in
// use, and a worker lent on them would take what the limit keeps. Requests of no type ("any")
// keep quotad's own count, which elasticd cannot place on a type.
func keptNow(a quotadAnswer, jobs map[uint32]slurm.Job) policy.Lending {
	if !a.fresh {
		return policy.Lending{Why: a.why}
	}
	l := policy.Lending{Fresh: true}
	for _, lim := range a.limits {
		kept := lim.keptIdle
		if lim.gpuType != quotaapi.AnyType {
			used := 0
			for _, j := range jobs {
				if j.Running() && pools.QOSKey(j.QOS) == pools.QOSKey(lim.guarQOS) {
					used += int(j.TRESAlloc.GPUs(lim.gpuType))
				}
			}
			kept = max(lim.never-used, 0)
		}
		if kept > 0 {
			l.Kept = append(l.Kept, policy.KeptIdle{Account: lim.account, Type: lim.gpuType, GPUs: kept})
		}
	}
	return l
}
