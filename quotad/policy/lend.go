package policy

import (
	"fmt"
	"math"
	"strings"
)

// arrayLends collects the lend decisions on one array record's tasks, for its explanation.
type arrayLends struct {
	lent     []uint32
	lentWhy  string // the first lent task's explanation
	waitWhy  string // why the tasks not lent wait; "" when every task was lent
	waitCode Code   // the kind of waitWhy: what stops the first of them
}

// lent is what lend hands on: the books with every lend counted, and the lends it planned.
type lent struct {
	settled
	books *ledger // the counts before, and every lend borrowed and lent
	lends []JobMove
	said  *journal // what lend explained: each over-quota pending job
}

// lending is lend's working state: its input, each project's queue of candidates, the lends
// planned so far and what it says of each array record.
type lending struct {
	c      *cycle
	in     settled
	books  *ledger
	log    *journal
	queues []*lendQueue // one per project, in the books' order
	kept   keptIdle     // keptForOwners, counted once per type for all of lend
	arrays map[*Job]*arrayLends
	moves  []JobMove
}

// lendQueue is one project's over-quota pending jobs as lend serves them, and where it stands.
type lendQueue struct {
	p          *project
	candidates []*Job // those that may borrow, in serving order
	next       int    // candidates[:next] are decided
	nextTask   int    // and of candidates[next], its first nextTask array tasks
	// head is where candidates[next] would borrow, while headKnown; headAny marks an
	// untyped request, whose type choice any lend may change.
	head               placement
	headKnown, headAny bool
}

// lend serves over-quota pending jobs from the idle GPUs that remain: each round, among the
// projects whose next job can borrow, the one furthest below its weighted fair share of the
// lendable GPUs goes first.
func lend(c *cycle, in settled) lent {
	log := newJournal(in.books.projectOfJob)
	lg := &lending{c: c, in: in, books: in.books.withOwnBooks(), log: log, arrays: map[*Job]*arrayLends{}}
	keptMemo := map[string]int{}
	lg.kept = func(t string) int {
		kept, ok := keptMemo[t]
		if !ok {
			kept = lg.books.keptForOwners(t)
			keptMemo[t] = kept
		}
		return kept
	}
	for _, p := range lg.books.projects {
		n := lg.books.counts[p]
		var kept []*Job
		for _, j := range in.candidates[p] {
			need := c.needs[j]
			switch {
			case j.notStartable() != "":
				lg.log.say(j, CodeNotStartable, "waits in %s (reason %s): %s, so it is not lent", p.guarQOS, j.Reason, j.notStartable())
			case in.unaccountedText(p) != "":
				log.say(j, CodeUnaccounted, "waits: it is not lent: %s", in.unaccountedText(p))
			case n.fits(need):
				lg.log.say(j, CodeGuaranteeHasRoom, "waits with reason %s, but %s's guarantee has room (%s): Slurm should start it in %s; not lent", j.Reason, p.cfg.Account, n.quotaText(need), p.guarQOS)
			case !j.Requeueable():
				lg.log.say(j, CodeNotRequeueable, "waits for %s's guarantee in %s: %s; it is never lent: %s, and a borrower's GPUs may be reclaimed, which would kill it. To borrow idle GPUs, submit it with sbatch --requeue", p.cfg.Account, p.guarQOS, n.quotaUsage(need), j.whyNotRequeueable())
			case c.backingOff(j):
				lg.log.say(j, CodeReclaimBackoff, "waits for %s's guarantee in %s: %s; %s", p.cfg.Account, p.guarQOS, n.quotaUsage(need), c.backoffs[j.ID].text())
			case c.holdMoves != "":
				log.say(j, CodeMovesHeld, "waits: %s; %s", n.quotaUsage(need), c.holdMoves)
			case in.noLends != "":
				log.say(j, CodeNoLends, "waits: nothing is lent this cycle: %s", in.noLends)
			default:
				kept = append(kept, j)
			}
		}
		lg.queues = append(lg.queues, &lendQueue{p: p, candidates: kept})
	}
	share := lg.books.fairShares(lg.queues, lg.kept)
	var whole *lendQueue // lending an array whole: its other tasks go next, before any other job
	for {
		var bestQ *lendQueue
		var bestPl placement
		var bestDeficit float64
		for _, q := range lg.queues {
			if whole != nil && q != whole {
				continue
			}
			pl, ok := lg.head(q)
			if !ok {
				continue
			}
			d := share.deficit(lg.books.counts[q.p], pl.gpus)
			if bestQ == nil || d > bestDeficit || (d == bestDeficit && q.p.usage/q.p.weight < bestQ.p.usage/bestQ.p.weight) {
				bestQ, bestPl, bestDeficit = q, pl, d
			}
		}
		whole = nil
		if bestQ == nil {
			return lent{settled: in, books: lg.books, lends: lg.moves, said: log}
		}
		best := bestQ.p
		j, task := bestQ.candidates[bestQ.next], bestQ.nextTask
		if bestQ.nextTask++; bestQ.nextTask == j.tasks() {
			bestQ.next, bestQ.nextTask = bestQ.next+1, 0
		} else if c.snap.WholeArrays {
			whole = bestQ
		}
		lg.books.charge(borrowCharge{by: best, gpus: bestPl.gpus, from: &bestPl})
		if j.ArrayThrottle > 0 {
			lg.books.arrayStarted[j.ArrayJobID]++
		}
		lg.invalidateHeads(best, bestPl)
		why := fmt.Sprintf("%s; borrows %s idle in partition %s (%s)", lg.books.counts[best].quotaUsage(c.needs[j]), gpuList(bestPl.gpus), bestPl.partition, share.describe(best, bestPl.gpus, bestDeficit))
		arrayJob, taskID := j.target(task)
		to := c.cfg.Settings.BorrowTierQOSName(best.cfg.Account, sum(bestPl.gpus))
		terms := c.reclaimTerms(best)
		if best.cfg.protects(j.Priority) {
			to = c.cfg.Settings.ProtectedBorrowQOSName(best.cfg.Account)
			t := *best.cfg.ReclaimPriorityThreshold
			terms += fmt.Sprintf("; its priority %d is at least %s's reclaim priority threshold %d, so only a claim of priority %d or more may take it", j.Priority, best.cfg.Account, t, t)
		}
		lg.moves = append(lg.moves, JobMove{Kind: Lend, JobID: j.ID, ArrayJobID: arrayJob, Task: taskID, Account: j.Account, Project: best.cfg.Account, From: j.QOS, To: to, GPUs: bestPl.gpus, Code: CodeLent, Reason: why})
		text := fmt.Sprintf("(moves from %s to %s): %s; %s", j.QOS, to, why, terms)
		if j.tasks() == 1 {
			log.say(j, CodeLent, "is lent %s", text)
			continue
		}
		a := lg.arrayNote(j)
		if len(a.lent) == 0 {
			a.lentWhy = text
		}
		a.lent = append(a.lent, taskID)
		lg.sayArray(j)
	}
}

func (lg *lending) arrayNote(j *Job) *arrayLends {
	a := lg.arrays[j]
	if a == nil {
		a = &arrayLends{}
		lg.arrays[j] = a
	}
	return a
}

// sayArray explains an array record's lend: which tasks are lent and why the others wait.
func (lg *lending) sayArray(j *Job) {
	a := lg.arrayNote(j)
	var parts []string
	code := a.waitCode
	if len(a.lent) > 0 {
		code = CodeLent
		parts = append(parts, fmt.Sprintf("tasks %s are lent %s", taskList(a.lent), a.lentWhy))
	}
	switch {
	case a.waitWhy == "":
	case len(a.lent) == 0:
		parts = append(parts, fmt.Sprintf("its tasks wait: %s", a.waitWhy))
	default:
		parts = append(parts, fmt.Sprintf("the other %d tasks wait: %s", j.tasks()-len(a.lent), a.waitWhy))
	}
	lg.log.say(j, code, "(array %d, %d pending tasks): %s", j.ArrayJobID, j.tasks(), strings.Join(parts, "; "))
}

// allTasksFit says whether every pending task of an array record could borrow now: the limits
// for all of them, and nodes for each in turn (taken, then given back).
func (lg *lending) allTasksFit(j *Job, need map[string]int, p *project) (string, bool) {
	n := j.tasks()
	if over := lg.books.limitProblems(p, scaled(need, n), sum(need)*n, lg.kept); len(over) > 0 {
		return joinProblems(over), false
	}
	// Placing task after task costs a scan of the nodes each: first the count the partitions'
	// idle GPUs could hold at most, so a large record that cannot fit costs no scan at all.
	if most := lg.books.tasksIdleCouldHold(j, need); most < n {
		return fmt.Sprintf("idle GPUs for at most %d of its %d tasks", most, n), false
	}
	var taken []placement
	defer func() {
		for _, pl := range taken {
			lg.books.nodes.giveBack(pl)
		}
	}()
	for range n {
		pl, ok := lg.books.place(j, need, nil, lg.kept)
		if !ok {
			return fmt.Sprintf("idle GPUs for %d of its %d tasks only", len(taken), n), false
		}
		lg.books.nodes.take(pl)
		taken = append(taken, pl)
	}
	return "", true
}

// tasksIdleCouldHold bounds how many tasks needing need each the idle GPUs of the job's
// partitions hold, counting a node in several partitions once for each (an upper bound).
func (l *ledger) tasksIdleCouldHold(j *Job, need map[string]int) int {
	parts := j.Partitions
	if len(parts) == 0 {
		parts = l.nodes.partitions
	}
	idle := map[string]int{}
	for _, part := range parts {
		for _, t := range l.c.types {
			idle[t] += l.nodes.idleIn(part, t)
		}
	}
	most, all := math.MaxInt, 0
	for _, n := range idle {
		all += n
	}
	for t, n := range need {
		switch {
		case n <= 0:
		case t == "":
			most = min(most, all/n)
		default:
			most = min(most, idle[t]/n)
		}
	}
	if total := sum(need); total > 0 {
		most = min(most, all/total)
	}
	return most
}

// invalidateHeads forgets the cached head placements a lend may have made wrong: the lender's
// own (its limits and its head changed), and those drawing on the same GPU types, on any type,
// or on the same nodes (whose CPUs and memory the lend took).
func (lg *lending) invalidateHeads(lender *project, lent placement) {
	for _, q := range lg.queues {
		if !q.headKnown {
			continue
		}
		if q.p == lender || q.headAny || q.head.sharesNode(lent) {
			q.headKnown = false
			continue
		}
		for t := range q.head.gpus {
			if lent.gpus[t] > 0 {
				q.headKnown = false
				break
			}
		}
	}
}

// head returns where p's next lendable job would run, explaining and skipping the jobs that
// cannot borrow now. Skipping is final within a plan: lending only ever shrinks what is left.
func (lg *lending) head(q *lendQueue) (placement, bool) {
	if q.headKnown {
		return q.head, true
	}
	p := q.p
	for q.next < len(q.candidates) {
		j := q.candidates[q.next]
		need := lg.c.needs[j]
		pl, ok := lg.books.place(j, need, p, lg.kept)
		if ok && j.ArrayThrottle > 0 {
			// A task lent past the array's throttle would wait in the borrow QOS (reason
			// JobArrayTaskLimit) on GPUs promised to it. On a release that lends arrays whole,
			// every task must fit under it.
			want := 1
			if lg.c.snap.WholeArrays && q.nextTask == 0 {
				want = j.tasks()
			}
			if started := lg.books.arrayStarted[j.ArrayJobID]; started+want > j.ArrayThrottle {
				ok = false
				pl.problems = append(pl.problems, problem{CodeArrayThrottled, fmt.Sprintf("its array runs at most %d tasks at once (--array=...%%%d) and %d run or were lent", j.ArrayThrottle, j.ArrayThrottle, started)})
			}
		}
		if ok && lg.c.snap.WholeArrays && j.ArrayJobID != 0 && lg.in.arrayRecords[j.ArrayJobID] > 1 {
			// Slurm would try the array's tasks that still wait in the guaranteed QOS first and
			// skip the others of the array, the lent ones included (see Snapshot.WholeArrays).
			ok = false
			pl.problems = append(pl.problems, problem{CodeArraySplit, fmt.Sprintf("on this Slurm release a task lent does not start while another of its array waits, and array %d's pending tasks are in %d records (some were split off), which quotad does not lend together", j.ArrayJobID, lg.in.arrayRecords[j.ArrayJobID])})
		}
		if ok && lg.c.snap.WholeArrays && j.tasks() > 1 && q.nextTask == 0 {
			// Every task must fit at once, or none is lent (see Snapshot.WholeArrays).
			if short, all := lg.allTasksFit(j, need, p); !all {
				ok = false
				pl.problems = append(pl.problems, problem{CodeArrayNotWhole, fmt.Sprintf("%s; on this Slurm release a task lent alone does not start while the rest of its array waits, so the array's %d pending tasks are lent together or not at all", short, j.tasks())})
			}
		}
		if ok {
			q.head, q.headKnown, q.headAny = pl, true, need[""] > 0
			return pl, true
		}
		// The record's other tasks ask for the same and would not fit either.
		why := fmt.Sprintf("%s; %s", lg.books.counts[p].quotaUsage(need), joinProblems(pl.problems))
		if j.tasks() == 1 {
			lg.log.say(j, pl.problems[0].code, "waits: %s", why)
		} else {
			a := lg.arrayNote(j)
			a.waitWhy, a.waitCode = why, pl.problems[0].code
			lg.sayArray(j)
		}
		q.next, q.nextTask = q.next+1, 0
	}
	return placement{}, false
}
