package policy

import (
	"fmt"
	"strings"
)

// waitingForNodes are pending reasons of jobs that pass their limits and wait for GPUs: Slurm
// will start them, preempting borrowers if needed, so idle GPUs they can use are not lent.
var waitingForNodes = map[string]bool{"Resources": true, "Priority": true, "None": true, "": true}

// reserved is what reserveInQuota hands on: classify's lists, and books whose idle capacity
// no longer holds the GPUs kept for in-quota jobs (and whose projects count them as reserved).
type reserved struct {
	counted
	books *ledger  // classify's counts and the GPUs reserved, claims found
	said  *journal // what reserveInQuota explained: each in-quota pending job
}

// reserveInQuota keeps idle GPUs for pending jobs within their guarantee: lending them would
// only have Slurm preempt the borrower at once.
func reserveInQuota(c *cycle, in counted) reserved {
	books := in.books.withOwnBooks()
	log := newJournal(books.projectOfJob)
	for _, j := range in.inQuotaPending {
		p := books.projectOfJob[j]
		n := books.counts[p]
		need := c.needs[j]
		if why := j.notStartable(); why != "" {
			log.say(j, CodeNotStartable, "waits in %s (reason %s): %s, so no idle GPUs are kept for it", p.guarQOS, j.Reason, why)
			continue
		}
		if j.Reason == "JobArrayTaskLimit" && j.ArrayThrottle > 0 {
			log.say(j, CodeArrayThrottled, "waits in %s: its array runs at most %d tasks at once (--array=...%%%d) and %d run or were lent; Slurm starts the next task when one ends, so no idle GPUs are kept for it",
				p.guarQOS, j.ArrayThrottle, j.ArrayThrottle, books.arrayStarted[j.ArrayJobID])
			continue
		}
		base := fmt.Sprintf("waits in %s's guarantee (%s; reason %s): Slurm starts it when GPUs are free, preempting borrowers if it must", p.cfg.Account, n.quotaText(need), j.Reason)
		if !waitingForNodes[j.Reason] {
			log.say(j, CodeWaitsInQuota, "%s", base)
			continue
		}
		if !n.fitsReserved(need) {
			// Over its guarantee, but Slurm has not marked it QOSGrpGRES yet (it stopped at a
			// job before it): it cannot start in its QOS, so it keeps nothing.
			log.say(j, CodeOverQuotaUnmarked, "waits in %s with reason %s, but %s's guarantee has no room for it (%s, %s kept for jobs before it): no idle GPUs are kept for it; it can borrow once Slurm marks it %s", p.guarQOS, j.Reason, p.cfg.Account, n.quotaText(need), gpuList(n.reserved), strings.Join(c.cfg.Settings.Reasons(), " or "))
			continue
		}
		n.claiming, n.claimPriority = true, max(n.claimPriority, j.Priority)
		// Each task of an array record that fits the guarantee keeps its GPUs.
		kept, keptTasks, lastPart := map[string]int{}, 0, ""
		for i := range j.tasks() {
			if i > 0 && !n.fitsReserved(need) {
				break
			}
			n.reserve(need)
			pl, ok := books.place(j, need, nil, books.keptForOwners)
			if !ok {
				break
			}
			books.nodes.take(pl)
			addAll(kept, pl.gpus)
			keptTasks, lastPart = keptTasks+1, pl.partition
		}
		switch {
		case keptTasks == 0:
			log.say(j, CodeWaitsInQuota, "%s", base)
		case j.tasks() == 1:
			log.say(j, CodeWaitsInQuota, "%s; %s idle in partition %s are kept for it, not lent", base, gpuList(kept), lastPart)
		default:
			log.say(j, CodeWaitsInQuota, "%s; %s idle are kept for %d of its %d pending tasks, not lent", base, gpuList(kept), keptTasks, j.tasks())
		}
	}
	return reserved{counted: in, books: books, said: log}
}
