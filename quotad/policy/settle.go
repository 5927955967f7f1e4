package policy

import (
	"fmt"
	"strings"
)

// settleBorrowers decides each pending job in the borrow QOS, task by task for an array
// record: back to its guaranteed QOS when that has room again or when it may no longer borrow,
// else it keeps its promised GPUs.
func (e *engine) settleBorrowers() {
	for _, j := range e.borrowPending {
		if j.tasks() == 1 {
			_, text := e.settleTask(j, 0)
			e.say(j, "%s", text)
			continue
		}
		// One line per outcome, naming its tasks and the first task's reasons.
		var order []string
		tasks, texts := map[string][]uint32{}, map[string]string{}
		for i := range j.tasks() {
			outcome, text := e.settleTask(j, i)
			if _, seen := tasks[outcome]; !seen {
				order, texts[outcome] = append(order, outcome), text
			}
			tasks[outcome] = append(tasks[outcome], j.ArrayTasks[i])
		}
		parts := make([]string, len(order))
		for i, o := range order {
			parts[i] = fmt.Sprintf("tasks %s: %s", taskList(tasks[o]), texts[o])
		}
		e.say(j, "(array %d, %d pending tasks in %s): %s", j.ArrayJobID, j.tasks(), j.QOS, strings.Join(parts, "; "))
	}
}

// settleTask decides task i of a pending borrower and says how (outcome) and why (text).
func (e *engine) settleTask(j *Job, i int) (outcome, text string) {
	need := e.needs[j]
	p := e.jobProject(j)
	if p != nil && e.isElastic(j) && j.Requeueable() {
		return e.settleWorker(j, i, p, need)
	}
	if why := j.notStartable(); why != "" {
		if p == nil {
			return "no quota", fmt.Sprintf("waits in %s (reason %s): %s, so no GPUs are promised to it; account %s has no quota, so quotad cannot return it", j.QOS, j.Reason, why, j.Account)
		}
		return "return", e.returnJob(j, i, p, need, why+": a borrower must be ready to start, and this one would keep idle GPUs promised that nobody uses")
	}
	if p == nil {
		// It still takes lendable GPUs when it starts, so count it.
		pl, ok := e.place(j, need, nil)
		if ok {
			e.take(pl)
		}
		addAll(e.lent, resolved(pl, ok, need))
		if why := j.whyNotRequeueable(); why != "" {
			return "no quota", fmt.Sprintf("waits in %s, but account %s has no quota: quotad cannot return it; %s, so a reclaim would kill it once it runs", j.QOS, j.Account, why)
		}
		return "no quota", fmt.Sprintf("waits in %s, but account %s has no quota: quotad cannot return it", j.QOS, j.Account)
	}
	switch {
	case !j.Requeueable():
		return "return", e.returnJob(j, i, p, need, j.whyNotRequeueable()+": a reclaim would kill it, so it must not borrow")
	case p.fits(need) && e.unaccountedText(p) == "":
		text := e.returnJob(j, i, p, need, fmt.Sprintf("%s is under quota again (%s), so it runs where it cannot be reclaimed", p.cfg.Account, p.quotaText(need)))
		p.use(need) // promised: the next returned job must not count the same room
		return "return", text
	}
	pl, ok := e.place(j, need, nil)
	gpus := resolved(pl, ok, need)
	if over := e.limitProblems(p, gpus, sum(gpus)); len(over) > 0 {
		return "return", e.returnJob(j, i, p, need, "it may no longer borrow: "+strings.Join(over, "; "))
	}
	if ok {
		e.take(pl)
	}
	addAll(e.lent, gpus)
	p.borrow(gpus)
	over := fmt.Sprintf("%s is over its guarantee (%s)", p.cfg.Account, p.quotaText(need))
	if why := e.unaccountedText(p); why != "" {
		over = "it is not returned: " + why
	}
	if ok {
		return "promised", fmt.Sprintf("was lent and waits in %s to start: %s; %s idle in partition %s are promised to it", j.QOS, over, gpuList(gpus), pl.partition)
	}
	return "waits", fmt.Sprintf("was lent and waits in %s for GPUs: %s; no idle GPUs it can use now", j.QOS, over)
}

// settleWorker decides a pending elastic worker Slurm can requeue. Workers are elasticd's: it
// submitted this one beyond the guarantee's room, ends it when Slurm requeues it (a reclaim is
// a shrink) and when it waits too long, so quotad moves it only back into the guarantee when
// that has room again (where nothing can reclaim it), never into a borrow QOS. Else it counts
// as borrowed and keeps idle GPUs promised, within the project's borrowing limits or not:
// Slurm starts it whenever the elastic QOS' own limit allows, and counting it too much only
// lends a little less.
func (e *engine) settleWorker(j *Job, i int, p *project, need map[string]int) (outcome, text string) {
	who := e.workerOf(j)
	if why := j.notStartable(); why != "" {
		return "worker", fmt.Sprintf("is an %s and waits in %s (reason %s): %s, so no GPUs are promised to it; elasticd ends a worker Slurm requeued (the job shrinks) and one that waits too long", who, j.QOS, j.Reason, why)
	}
	if p.fits(need) && e.unaccountedText(p) == "" {
		text := e.returnJob(j, i, p, need, fmt.Sprintf("it is an %s and %s's guarantee has room again (%s), so it runs where it cannot be reclaimed", who, p.cfg.Account, p.quotaText(need)))
		p.use(need)
		return "return", text
	}
	pl, ok := e.place(j, need, nil)
	gpus := resolved(pl, ok, need)
	over := e.limitProblems(p, gpus, sum(gpus))
	if ok {
		e.take(pl)
	}
	addAll(e.lent, gpus)
	p.borrow(gpus)
	addAll(p.elastic, gpus)
	text = fmt.Sprintf("is an %s on borrowed GPUs and waits in %s to start: %s is over its guarantee (%s)", who, j.QOS, p.cfg.Account, p.quotaText(need))
	if ok {
		text += fmt.Sprintf("; %s idle in partition %s are promised to it", gpuList(gpus), pl.partition)
	}
	if len(over) > 0 {
		text += "; " + strings.Join(over, "; ") + ", but quotad leaves workers to elasticd and Slurm starts it within the elastic QOS' own limit"
	}
	return "worker", text + "; elastic workers are the first borrowers reclaimed"
}

// returnJob plans the move of task i of j back to its guaranteed QOS and says so.
func (e *engine) returnJob(j *Job, i int, p *project, need map[string]int, why string) string {
	if e.holdMoves != "" {
		return fmt.Sprintf("waits in %s and will return to %s: %s; not this cycle: %s", j.QOS, p.guarQOS, why, e.holdMoves)
	}
	arrayJob, task := j.target(i)
	e.moves = append(e.moves, JobMove{Kind: Return, JobID: j.ID, ArrayJobID: arrayJob, Task: task, Account: j.Account, Project: p.cfg.Account, From: j.QOS, To: p.guarQOS, GPUs: need, Reason: why})
	return fmt.Sprintf("returns from %s to %s: %s", j.QOS, p.guarQOS, why)
}
