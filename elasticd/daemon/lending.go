package daemon

import (
	"context"

	"github.com/slurmbridge/slurmbridge/bridge/quotaapi"
	"github.com/slurmbridge/slurmbridge/elasticd/capacity"
)

// Quotad is what elasticd reads of quotad's read-only API (bridge/quotaapi.Client): the
// projects of its last plan, with each project's lending limit and the idle GPUs it keeps for
// the project's own jobs. quotad keeps those idle in its own lending; elasticd lends its
// workers itself, so it counts them too before it lends one.
type Quotad interface {
	Projects(ctx context.Context) (quotaapi.ProjectsResponse, error)
}

// readQuotad reads quotad's plan, or says why it cannot be counted this cycle; a change of
// that reason is logged once.
func (d *Daemon) readQuotad(ctx context.Context) capacity.QuotadAnswer {
	var a capacity.QuotadAnswer
	if d.cfg.Quotad == nil {
		a = capacity.QuotadAnswer{Why: "no quotad to read the lending limits from"}
	} else {
		resp, err := d.cfg.Quotad.Projects(ctx)
		a = capacity.AnswerOf(resp, err)
	}
	if a.Why != d.lendingWhy {
		if a.Why != "" {
			d.log.Warn().Str("why", a.Why).Msg("cannot count the lending limits' kept GPUs; no worker borrows until quotad's plan is read fresh")
		} else {
			d.log.Info().Msg("quotad's plan read again; workers may borrow")
		}
		d.lendingWhy = a.Why
	}
	return a
}
