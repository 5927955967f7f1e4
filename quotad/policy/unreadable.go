package policy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/slurmbridge/slurmbridge/bridge/pools"
)

// An unreadable job (a GPU request or TRES quotad cannot parse: a spelling a user found or a
// release prints that we do not know) counts at its worst, and the cycle goes on for every
// other job. Its worst is the most Slurm's own limits let it hold or take:
//
//   - It is never moved: quotad does not lend, return or explain GPUs for a job it cannot count.
//   - Pending in a project's guaranteed QOS, it may start on as many idle GPUs of each type as
//     the project's guarantee still has room for (the QOS' GrpTRES stops it there): that many
//     idle GPUs are kept back, not lent.
//   - Pending in a project's borrow or elastic QOS, it may start on as many idle GPUs as the
//     project may still borrow and the cluster may still lend (the QOS' GrpTRES is set to those
//     limits): that many are kept back, all idle GPUs of a type without a limit.
//   - Holding GPUs, it holds them already: sinfo's idle counts leave them out. What is unknown
//     is how many its project holds, in its guarantee or borrowed.
//   - In every case its project's counts are lower bounds from then on, so the project is
//     "unaccounted": none of its jobs is lent (its borrowing limits and fair share cannot be
//     checked), and none of its borrowers is returned on guarantee room it may not have. A
//     return because a borrower cannot start or is not requeueable, or because the project is
//     over a borrowing limit even by the lower bound, still happens. Reclaim ranks projects by
//     what they are known to hold: a guess must never make a project's borrowers preemptible.
//   - Holding GPUs in a borrow or elastic QOS where the table sets lending limits, it makes the
//     cluster's lent count a lower bound: nothing is lent this cycle.
//   - A job outside every project's account and QOS is not quotad's, readable or not.
//
// So the worst a user gets from an unreadable job is their own project's lending stopped and
// their own guarantee's room (or borrowing room) kept idle; they cannot stop lending elsewhere.

// atWorst is what countUnreadable hands on: the books with the idle GPUs unreadable jobs may
// take kept back, the projects whose counts are lower bounds from then on (each with its first
// unreadable job), and, when set, why nothing is lent this cycle.
type atWorst struct {
	reserved
	books       *ledger // reserve's books, less the idle GPUs kept back
	unaccounted map[*project]uint32
	noLends     string
	said        *journal // what countUnreadable explained: each unreadable job
}

// countUnreadable applies the rule above, after reserveInQuota: the GPUs kept back come after
// those of the readable in-quota jobs, which start first.
func countUnreadable(c *cycle, in reserved) atWorst {
	books := in.books.withOwnBooks()
	out := atWorst{reserved: in, books: books, unaccounted: map[*project]uint32{}, said: newJournal(books.projectOfJob)}
	log := out.said
	keptBack := map[*project]bool{}
	for i := range c.snap.Unreadable {
		u, j := &c.snap.Unreadable[i], &c.unreadable[i]
		p := books.projectOfJob[j]
		qos := pools.QOSKey(u.QOS)
		managed := p != nil && (qos == p.guarQOS || books.lenderOf(qos) != nil)
		if !managed {
			log.say(j, CodeUnreadableUnmanaged, "cannot be read (%s); it is in no project's QOS, so quotad would not manage it anyway", u.Problem)
			continue
		}
		if _, known := out.unaccounted[p]; !known {
			out.unaccounted[p] = u.ID
		}
		what := ""
		switch {
		case u.State.holdsGPUs() && books.lenderOf(qos) != nil && len(c.cfg.LendLimits) > 0:
			if out.noLends == "" {
				out.noLends = fmt.Sprintf("job %d holds borrowed GPUs quotad cannot count, so the lending limits cannot be checked", u.ID)
			}
			what = "it holds borrowed GPUs quotad cannot count: nothing is lent this cycle"
		case u.State.holdsGPUs():
			what = "it holds GPUs quotad cannot count (its nodes' idle GPUs are still known)"
		case keptBack[p] && qos == p.guarQOS:
			what = fmt.Sprintf("it may start on what is left of %s's guarantee, kept back already", p.cfg.Account)
		case qos == p.guarQOS:
			keptBack[p] = true
			n := books.counts[p]
			kept := books.keepBack(func(t string) int { return n.guaranteeRoom(t) - n.reserved[t] }, p.cfg.Total()-n.inUseTotal-sum(n.reserved))
			what = fmt.Sprintf("it may start on what is left of %s's guarantee: %s idle kept back, not lent", p.cfg.Account, gpuList(kept))
		default:
			kept := books.keepBack(func(t string) int { return min(books.borrowRoom(p, t), books.lendRoom(t, books.keptForOwners)) }, books.borrowRoom(p, ""))
			what = fmt.Sprintf("it may start on as many GPUs as %s may still borrow: %s idle kept back, not lent", p.cfg.Account, gpuList(kept))
		}
		log.say(j, CodeUnreadable, "cannot be read (%s); counted at its worst: %s; no job of %s is lent or returned on its guarantee room while it is unaccounted", u.Problem, what, p.cfg.Account)
	}
	return out
}

// keepBack takes up to room(t) idle GPUs of each type, and at most total in all, off the
// lendable nodes, and returns what it took.
func (l *ledger) keepBack(room func(t string) int, total int) map[string]int {
	kept := map[string]int{}
	for _, t := range l.c.types {
		if t == "" {
			continue
		}
		n := min(room(t), total-sum(kept))
		if n > 0 {
			if got := l.nodes.holdBack(t, n); got > 0 {
				kept[t] = got
			}
		}
	}
	return kept
}

// holdBack removes up to n idle GPUs of type t from the nodes, by name, and returns how many.
func (in *idleNodes) holdBack(t string, n int) int {
	taken := 0
	for _, r := range in.all {
		c := min(r.free.GPUs[t], n-taken)
		if c <= 0 {
			continue
		}
		r.free.GPUs[t] -= c
		in.free[t] -= c
		for _, part := range r.parts {
			in.idle[part][t] -= c
		}
		if taken += c; taken == n {
			break
		}
	}
	return taken
}

// unaccountedText says why a project's jobs are not lent or returned on its counts, or "".
func (a atWorst) unaccountedText(p *project) string {
	id, ok := a.unaccounted[p]
	if !ok {
		return ""
	}
	return fmt.Sprintf("%s has a job quotad cannot read (job %d), so what it holds is not known", p.cfg.Account, id)
}

// unreadableNotes names each job the snapshot could not read and the rule that counts it.
func unreadableNotes(jobs []UnreadableJob) []string {
	out := make([]string, 0, len(jobs))
	for _, j := range jobs {
		out = append(out, fmt.Sprintf("job %d (account %s, QOS %s, %s) cannot be read (%s): counted at its worst, and its project is neither lent to nor returned on its counts", j.ID, j.Account, j.QOS, strings.ToLower(string(j.State)), j.Problem))
	}
	slices.Sort(out)
	return out
}
