package policy

import (
	"fmt"
	"strings"
)

// settled is what settleBorrowers hands on: the books with each pending borrower that stays
// counted as borrowed (its idle GPUs promised) or returned (counted in its guarantee), and the
// returns it planned.
type settled struct {
	atWorst
	books   *ledger // the counts before, and each borrower kept (borrowed) or returned (in use)
	returns []JobMove
	said    *journal // what settleBorrowers explained: each pending borrower
}

// settling is settleBorrowers' working state: its input and the returns planned so far.
type settling struct {
	c     *cycle
	in    atWorst
	books *ledger
	moves []JobMove
}

// settleBorrowers decides each pending job in the borrow QOS, task by task for an array
// record: back to its guaranteed QOS when that has room again or when it may no longer borrow,
// else it keeps its promised GPUs.
func settleBorrowers(c *cycle, in atWorst) settled {
	s := &settling{c: c, in: in, books: in.books.withOwnBooks()}
	log := newJournal(in.books.projectOfJob)
	for _, j := range in.borrowPending {
		if j.tasks() == 1 {
			code, text := s.settleTask(j, 0)
			log.say(j, code, "%s", text)
			continue
		}
		// One line per outcome, naming its tasks and the first task's reasons.
		var order []Code
		tasks, texts := map[Code][]uint32{}, map[Code]string{}
		for i := range j.tasks() {
			outcome, text := s.settleTask(j, i)
			if _, seen := tasks[outcome]; !seen {
				order, texts[outcome] = append(order, outcome), text
			}
			tasks[outcome] = append(tasks[outcome], j.ArrayTasks[i])
		}
		parts := make([]string, len(order))
		for i, o := range order {
			parts[i] = fmt.Sprintf("tasks %s: %s", taskList(tasks[o]), texts[o])
		}
		log.say(j, order[0], "(array %d, %d pending tasks in %s): %s", j.ArrayJobID, j.tasks(), j.QOS, strings.Join(parts, "; "))
	}
	return settled{atWorst: in, books: s.books, returns: s.moves, said: log}
}

// settleTask decides task i of a pending borrower and says how (outcome) and why (text).
func (s *settling) settleTask(j *Job, i int) (outcome Code, text string) {
	need := s.c.needs[j]
	p := s.books.projectOfJob[j]
	n := s.books.counts[p]
	if p != nil && s.books.isElastic(j) && j.Requeueable() {
		return s.settleWorker(j, i, p, need)
	}
	if why := j.notStartable(); why != "" {
		if p == nil {
			return CodeNoQuota, fmt.Sprintf("waits in %s (reason %s): %s, so no GPUs are promised to it; account %s has no quota, so quotad cannot return it", j.QOS, j.Reason, why, j.Account)
		}
		return s.returnJob(j, i, p, need, CodeReturnNotStartable, why+": a borrower must be ready to start, and this one would keep idle GPUs promised that nobody uses")
	}
	if p == nil {
		// It still takes lendable GPUs when it starts, so count it.
		pl, ok := s.books.place(j, need, nil, s.books.keptForOwners)
		s.books.charge(borrowCharge{gpus: resolved(pl, ok, need), from: placedOn(pl, ok)})
		if why := j.whyNotRequeueable(); why != "" {
			return CodeNoQuota, fmt.Sprintf("waits in %s, but account %s has no quota: quotad cannot return it; %s, so a reclaim would kill it once it runs", j.QOS, j.Account, why)
		}
		return CodeNoQuota, fmt.Sprintf("waits in %s, but account %s has no quota: quotad cannot return it", j.QOS, j.Account)
	}
	switch {
	case !j.Requeueable():
		return s.returnJob(j, i, p, need, CodeReturnNotRequeueable, j.whyNotRequeueable()+": a reclaim would kill it, so it must not borrow")
	case n.fits(need) && s.in.unaccountedText(p) == "":
		code, text := s.returnJob(j, i, p, need, CodeReturnGuaranteeRoom, fmt.Sprintf("%s is under quota again (%s), so it runs where it cannot be reclaimed", p.cfg.Account, n.quotaText(need)))
		n.use(need) // promised: the next returned job must not count the same room
		return code, text
	case s.c.backingOff(j):
		// Requeued by a claim: it would start again on lent GPUs as soon as some are idle.
		return s.returnJob(j, i, p, need, CodeReturnBackoff, s.c.backoffs[j.ID].text())
	}
	pl, ok := s.books.place(j, need, nil, s.books.keptForOwners)
	gpus := resolved(pl, ok, need)
	if over := s.books.limitProblems(p, gpus, sum(gpus), s.books.keptForOwners); len(over) > 0 {
		return s.returnJob(j, i, p, need, CodeReturnOverLimit, "it may no longer borrow: "+joinProblems(over))
	}
	s.books.charge(borrowCharge{by: p, gpus: gpus, from: placedOn(pl, ok)})
	over, promised, waits := fmt.Sprintf("%s is over its guarantee (%s)", p.cfg.Account, n.quotaText(need)), CodePromised, CodeLentWaitsForGPUs
	if why := s.in.unaccountedText(p); why != "" {
		over, promised, waits = "it is not returned: "+why, CodeUnaccounted, CodeUnaccounted
	}
	if ok {
		return promised, fmt.Sprintf("was lent and waits in %s to start: %s; %s idle in partition %s are promised to it", j.QOS, over, gpuList(gpus), pl.partition)
	}
	return waits, fmt.Sprintf("was lent and waits in %s for GPUs: %s; no idle GPUs it can use now", j.QOS, over)
}

// settleWorker decides a pending elastic worker Slurm can requeue. Workers are elasticd's: it
// submitted this one beyond the guarantee's room, ends it when Slurm requeues it (a reclaim is
// a shrink) and when it waits too long, so quotad moves it only back into the guarantee when
// that has room again (where nothing can reclaim it), never into a borrow QOS. Else it counts
// as borrowed and keeps idle GPUs promised, within the project's borrowing limits or not:
// Slurm starts it whenever the elastic QOS' own limit allows, and counting it too much only
// lends a little less.
func (s *settling) settleWorker(j *Job, i int, p *project, need map[string]int) (outcome Code, text string) {
	who := s.c.workerOf(j)
	n := s.books.counts[p]
	if why := j.notStartable(); why != "" {
		return CodeNotStartable, fmt.Sprintf("is an %s and waits in %s (reason %s): %s, so no GPUs are promised to it; elasticd ends a worker Slurm requeued (the job shrinks) and one that waits too long", who, j.QOS, j.Reason, why)
	}
	if n.fits(need) && s.in.unaccountedText(p) == "" {
		code, text := s.returnJob(j, i, p, need, CodeElasticWorkerReturned, fmt.Sprintf("it is an %s and %s's guarantee has room again (%s), so it runs where it cannot be reclaimed", who, p.cfg.Account, n.quotaText(need)))
		n.use(need)
		return code, text
	}
	pl, ok := s.books.place(j, need, nil, s.books.keptForOwners)
	gpus := resolved(pl, ok, need)
	over := s.books.limitProblems(p, gpus, sum(gpus), s.books.keptForOwners)
	s.books.charge(borrowCharge{by: p, gpus: gpus, from: placedOn(pl, ok), elastic: true})
	text = fmt.Sprintf("is an %s on borrowed GPUs and waits in %s to start: %s is over its guarantee (%s)", who, j.QOS, p.cfg.Account, n.quotaText(need))
	if ok {
		text += fmt.Sprintf("; %s idle in partition %s are promised to it", gpuList(gpus), pl.partition)
	}
	if len(over) > 0 {
		text += "; " + joinProblems(over) + ", but quotad leaves workers to elasticd and Slurm starts it within the elastic QOS' own limit"
	}
	return CodeElasticWorker, text + "; elastic workers are the first borrowers reclaimed"
}

// returnJob plans the move of task i of j back to its guaranteed QOS and says so, with code
// as the move's kind; while moves are held it only says so (CodeMovesHeld).
func (s *settling) returnJob(j *Job, i int, p *project, need map[string]int, code Code, why string) (Code, string) {
	if s.c.holdMoves != "" {
		return CodeMovesHeld, fmt.Sprintf("waits in %s and will return to %s: %s; not this cycle: %s", j.QOS, p.guarQOS, why, s.c.holdMoves)
	}
	arrayJob, task := j.target(i)
	s.moves = append(s.moves, JobMove{Kind: Return, JobID: j.ID, ArrayJobID: arrayJob, Task: task, Account: j.Account, Project: p.cfg.Account, From: j.QOS, To: p.guarQOS, GPUs: need, Code: code, Reason: why})
	return code, fmt.Sprintf("returns from %s to %s: %s", j.QOS, p.guarQOS, why)
}
