package policy

import (
	"fmt"
	"github.com/slurmbridge/slurmbridge/bridge/pools"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"
)

// reclaimTerms says how a borrower of p loses its GPUs: by Slurm's preemption, never by
// quotad, and only while p holds more than its guarantee.
func (c *cycle) reclaimTerms(p *project) string {
	s := c.cfg.Settings
	return fmt.Sprintf("while %s holds more than its guarantee, a guaranteed job may reclaim these GPUs once the job has run %s: %s", p.cfg.Account, s.PreemptExemptTime, reclaimWindow(s.GraceTime))
}

// reclaimWindow says what Slurm does to a reclaimed borrower with the borrow QOS' GraceTime:
// with 0 it requeues the job at once, and the kill that ends the run sends SIGTERM first and
// SIGKILL after KillWait; with a grace time it signals the job and requeues it that much later
// (preempt.c, 22.05 to 26.05).
func reclaimWindow(grace time.Duration) string {
	if grace <= 0 {
		return "a reclaim requeues it at once: Slurm sends it SIGTERM, then SIGKILL after slurm.conf's KillWait"
	}
	return fmt.Sprintf("a reclaim sends it SIGTERM (or its --signal, where PreemptParameters=send_user_signal) and requeues it %s later", grace)
}

// reclaimOrder ranks the projects whose borrowers a claim may take: those holding more than
// their guarantee, borrowers running or promised counted, the furthest over per unit of weight
// first, then the one that used more in the fairness window. A project within its guarantee is
// left out, so no guaranteed QOS may preempt its borrow QOS.
func reclaimOrderOf(books *ledger) reclaimOrder {
	var over []*project
	for _, p := range books.projects {
		if books.counts[p].excess() > 0 {
			over = append(over, p)
		}
	}
	sort.SliceStable(over, func(a, b int) bool {
		x, y := over[a], over[b]
		ex, ey := float64(books.counts[x].excess())/x.weight, float64(books.counts[y].excess())/y.weight
		if ex != ey {
			return ex > ey
		}
		if ux, uy := x.usage/x.weight, y.usage/y.weight; ux != uy {
			return ux > uy
		}
		return x.cfg.Account < y.cfg.Account
	})
	o := reclaimOrder{claims: map[string]int64{}}
	for _, p := range over {
		o.reclaimable = append(o.reclaimable, p.cfg.Account)
	}
	for _, p := range books.projects {
		if n := books.counts[p]; n.claiming {
			o.claims[p.cfg.Account] = n.claimPriority
		}
	}
	o.former = map[string][]string{}
	for q, f := range books.former {
		o.former[q] = f.namedBy
	}
	return o
}

// excess is how many GPUs p holds beyond its guarantee, in-quota jobs and borrowers (running
// or promised) together: the typed overshoots summed, or the all-types one if larger.
func (pc *projectCounts) excess() int {
	types := map[string]bool{}
	for t := range pc.inUse {
		types[t] = true
	}
	for t := range pc.borrowed {
		types[t] = true
	}
	typed := 0
	for t := range types {
		if t != "" {
			typed += max(0, pc.inUse[t]+pc.borrowed[t]-pc.of.cfg.GPUs[t])
		}
	}
	return max(typed, pc.inUseTotal+pc.borrowedTotal-pc.of.cfg.Total(), 0)
}

// explainRunning says for each started borrower whether, by whom and in which order it can be
// reclaimed now, and returns what it said.
func explainRunning(c *cycle, in lent, order reclaimOrder) *journal {
	books := in.books
	log := newJournal(books.projectOfJob)
	// Who could reclaim a type: the projects with unused guarantee of it, found once.
	reclaimers := map[string][]string{}
	for _, t := range append([]string{""}, c.types...) {
		for _, p := range books.projects {
			if books.counts[p].guaranteeRoom(t) > 0 {
				reclaimers[t] = append(reclaimers[t], p.cfg.Account)
			}
		}
	}
	rank := map[string]int{}
	for i, acct := range order.reclaimable {
		rank[acct] = i
	}
	for _, j := range in.borrowRunning {
		held := j.held()
		p := books.projectOfJob[j]
		if p == nil {
			log.say(j, CodeNoQuota, "runs in %s (%s), but account %s has no quota: quotad does not manage it", j.QOS, gpuList(held), j.Account)
			continue
		}
		n := books.counts[p]
		if f := books.former[pools.QOSKey(j.QOS)]; f != nil {
			explainFormer(c, j, n, f, log)
			continue
		}
		i, reclaimable := rank[p.cfg.Account]
		subject := fmt.Sprintf("runs borrowed in %s (%s)", j.QOS, gpuList(held))
		if books.isElastic(j) {
			subject = fmt.Sprintf("is an %s on borrowed GPUs in %s (%s)", c.workerOf(j), j.QOS, gpuList(held))
		}
		if !reclaimable {
			text := fmt.Sprintf("%s: %s holds %s, borrowers counted, which is within its guarantee, so no claim may reclaim it (quotad re-checks this every cycle)", subject, p.cfg.Account, n.holdingText())
			if books.isElastic(j) && j.Requeueable() {
				text += "; should the project go over its guarantee, elastic workers are the first borrowers reclaimed, and elasticd counts a reclaim as a shrink"
			}
			if why := j.whyNotRequeueable(); why != "" {
				text += fmt.Sprintf("; should its project go over its guarantee, a reclaim would KILL it, not requeue it: %s", why)
				log.note(fmt.Sprintf("job %d (%s) runs in %s but Slurm cannot requeue it (%s): a reclaim would kill it", j.ID, j.Account, j.QOS, why))
			}
			log.say(j, CodeNotReclaimable, "%s", text)
			continue
		}
		var by []string
		for _, t := range slices.Sorted(maps.Keys(held)) {
			by = append(by, reclaimers[t]...)
		}
		slices.Sort(by)
		by = slices.Compact(by)
		who := "no project has unused guarantee of its GPU type now, so nobody would reclaim it"
		if len(by) > 0 {
			who = "it may be reclaimed by pending guaranteed jobs of " + strings.Join(by, ", ") + " (unused guarantee of its type)"
		}
		if t := p.cfg.ReclaimPriorityThreshold; t != nil && pools.QOSKey(j.QOS) == c.cfg.Settings.ProtectedBorrowQOSName(p.cfg.Account) {
			var open []string
			for _, acct := range slices.Sorted(maps.Keys(order.claims)) {
				if order.claims[acct] >= *t && acct != p.cfg.Account {
					open = append(open, acct)
				}
			}
			waiting := "no such claim waits now"
			if len(open) > 0 {
				waiting = strings.Join(open, ", ") + " has one waiting now"
			}
			who = fmt.Sprintf("it is protected by %s's reclaim priority threshold %d: only a claim of Slurm priority %d or more may reclaim it, and %s", p.cfg.Account, *t, *t, waiting)
		}
		exempt := j.StartTime.Add(c.cfg.Settings.PreemptExemptTime)
		when := "its PreemptExemptTime has passed"
		if c.now.Before(exempt) {
			when = fmt.Sprintf("it is exempt from reclaim until %s (PreemptExemptTime %s)", exempt.UTC().Format(time.RFC3339), c.cfg.Settings.PreemptExemptTime)
		}
		loses := fmt.Sprintf("%s holds %s, %d GPU(s) beyond its guarantee: %s of %d over-quota projects to lose borrowers", p.cfg.Account, n.holdingText(), n.excess(), ordinal(i+1), len(order.reclaimable))
		if !j.Requeueable() {
			// It got here without quotad (a user's own update, or flags changed after a lend).
			log.say(j, CodeReclaimWouldKill, "%s: %s; %s; %s; a reclaim would KILL it, not requeue it: %s. quotad cannot move a running job out of %s", subject, loses, when, who, j.whyNotRequeueable(), j.QOS)
			log.note(fmt.Sprintf("job %d (%s) runs in %s but Slurm cannot requeue it (%s): a reclaim would kill it", j.ID, j.Account, j.QOS, j.whyNotRequeueable()))
			continue
		}
		if books.isElastic(j) {
			log.say(j, CodeReclaimable, "%s: %s, and elastic workers are reclaimed first, before any other borrower (%s has the lowest QOS priority), since losing one costs a job a transition, not its progress; %s; %s; %s, and elasticd counts that as a shrink: it ends the requeued worker and the job runs on without it", subject, loses, j.QOS, when, who, reclaimWindow(c.cfg.Settings.GraceTime))
			continue
		}
		log.say(j, CodeReclaimable, "%s: %s; %s; %s; %s (it is a batch job with Requeue=1), so it runs again later. %s", subject, loses, when, who, reclaimWindow(c.cfg.Settings.GraceTime), workSurvives)
	}
	return log
}

// workSurvives tells a borrower how its work outlives a reclaim, and what it must do for it.
const workSurvives = "To keep its work: save a checkpoint on SIGTERM or every few minutes (after SIGTERM a job has slurm.conf's KillWait " +
	"before SIGKILL, and is requeued even if it exits); the rerun starts the script again with SLURM_RESTART_COUNT set, so resume from the checkpoint; " +
	"and its output file is appended to, not truncated (slurmbridge sets a job's --open-mode to append unless it chose one)"
