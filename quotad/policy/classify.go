package policy

import (
	"slices"

	"github.com/slurmbridge/slurmbridge/bridge/pools"
)

// counted is what classify hands on: the books with what every GPU job holds or wants counted,
// and the pending jobs sorted into the lists the later steps work on (each project's over-quota
// candidates among them).
type counted struct {
	books          *ledger // with classify's counts: what GPU jobs hold and want
	inQuotaPending []*Job  // pending in a guaranteed QOS, not (yet) marked over quota
	borrowPending  []*Job  // pending in a borrow or elastic QOS
	borrowRunning  []*Job  // holding GPUs in a borrow or elastic QOS
	// strays are pending in a QOS that is not their project's and that their association no
	// longer allows (submitted before quotad gave the account its QOS): adopt moves them.
	strays []*Job
	// arrayRecords counts, per array, its pending records in a guaranteed QOS: more than one
	// when tasks were split off (returned from the borrow QOS, or updated alone).
	arrayRecords map[uint32]int
	// candidates are each project's over-quota pending jobs, in serving order: lend's input.
	candidates map[*project][]*Job
	said       *journal // what classify explained: jobs it leaves alone, guaranteed ones running
}

// classify counts what every GPU job holds or wants and sorts pending jobs into the lists the
// later steps work on.
func classify(c *cycle, books *ledger) counted {
	books = books.withOwnBooks()
	out := counted{books: books, arrayRecords: map[uint32]int{}, candidates: map[*project][]*Job{}, said: newJournal(books.projectOfJob)}
	log := out.said
	for _, n := range books.formerNotes {
		log.note(n)
	}
	for i := range c.snap.Jobs {
		j := &c.snap.Jobs[i]
		if j.ArrayThrottle > 0 && (j.State.holdsGPUs() || (j.State == StatePending && books.lenderOf(pools.QOSKey(j.QOS)) != nil)) {
			books.arrayStarted[j.ArrayJobID] += j.tasks()
		}
		need := c.needs[j]
		p := books.projectOfJob[j]
		qos := pools.QOSKey(j.QOS)
		borrowing := books.lenderOf(qos) != nil
		if len(need) == 0 {
			// Quotas are about GPUs only; a CPU job left in a QOS its account no longer allows
			// is adopted all the same, or it waits for ever.
			if j.State == StatePending && p != nil && qos != p.guarQOS && !borrowing && !books.isElastic(j) && c.strayQOS(j) {
				out.strays = append(out.strays, j)
			}
			continue
		}
		switch {
		case j.State.holdsGPUs():
			held := j.held()
			switch {
			case borrowing || books.former[qos] != nil:
				books.charge(borrowCharge{by: p, gpus: held, elastic: books.isElastic(j)})
				out.borrowRunning = append(out.borrowRunning, j)
			case p != nil && qos == p.guarQOS:
				books.counts[p].use(held)
				log.say(j, CodeInQuota, "runs within %s's guarantee in %s (%s): it is never reclaimed", p.cfg.Account, p.guarQOS, gpuList(held))
			case p == nil:
				log.say(j, CodeNoQuota, "runs in account %s, which has no quota and is under no project: quotad does not manage it", j.Account)
			default:
				log.say(j, CodeOtherQOS, "runs in QOS %s, not in %s's guaranteed QOS %s: quotad does not manage it, and the account's QOS list is being restricted to %s, %s and %s", j.QOS, p.cfg.Account, p.guarQOS, p.guarQOS, p.borrowQOS, p.elasticQOS)
			}
		case j.State == StatePending:
			switch {
			case borrowing:
				out.borrowPending = append(out.borrowPending, j)
			case p != nil && qos == p.guarQOS:
				if j.ArrayJobID != 0 {
					out.arrayRecords[j.ArrayJobID]++
				}
				addAll(books.counts[p].pending, scaled(need, j.tasks()))
				if c.reasons[j.Reason] {
					out.candidates[p] = append(out.candidates[p], j)
				} else {
					out.inQuotaPending = append(out.inQuotaPending, j)
				}
			case p == nil:
				log.say(j, CodeNoQuota, "waits in account %s, which has no quota and is under no project: quotad does not manage it", j.Account)
			case c.strayQOS(j):
				out.strays = append(out.strays, j)
			default:
				log.say(j, CodeOtherQOS, "waits in QOS %s, not in %s's guaranteed QOS %s: quotad does not move it", j.QOS, p.cfg.Account, p.guarQOS)
			}
		}
	}
	jobOrder(out.strays)
	jobOrder(out.inQuotaPending)
	jobOrder(out.borrowPending)
	for _, jobs := range out.candidates {
		jobOrder(jobs)
	}
	return out
}

// strayQOS says whether a job of a project, in none of its project's QOS, waits in a QOS its
// association no longer allows. Once quotad has synced (moves wait for that: strayQOS is false
// before), the account's list holds only its project's QOS; a user with a QOS list of their own
// in the account keeps the site's QOS there, which quotad leaves alone.
func (c *cycle) strayQOS(j *Job) bool {
	return c.holdMoves == "" && !c.userAllows(j)
}

// userAllows says whether j's user has a QOS list of their own in j's account that names j's
// QOS: quotad leaves such a list's other QOS to the site.
func (c *cycle) userAllows(j *Job) bool {
	qos := pools.QOSKey(j.QOS)
	for _, u := range c.snap.Users {
		if u.User == j.User && u.Account == j.Account && slices.ContainsFunc(u.QOS, func(q string) bool { return pools.QOSKey(q) == qos }) {
			return true
		}
	}
	return false
}
