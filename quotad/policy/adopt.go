package policy

import "fmt"

// adoptStrays moves each stray (classify: a project's pending GPU job in a QOS its association
// no longer allows) into its project's guaranteed QOS. A job submitted before quotad first gave
// its account the project's QOS waits in the account's old default (normal) for ever: Slurm
// 26.05 holds it with reason InvalidQOS, and a release that ran it there would run it outside
// the project's guarantee and its limits. In the guaranteed QOS it runs, or is lent, as any
// job submitted since. Run only on a synced cycle (classify keeps no strays otherwise), so the
// guaranteed QOS exists.
func adoptStrays(c *cycle, in counted) adopted {
	var moves []JobMove
	log := newJournal(in.books.projectOfJob)
	for _, j := range in.strays {
		p := in.books.projectOfJob[j]
		why := fmt.Sprintf("it waits in QOS %s, which account %s no longer allows since slurmbridge manages its QOS (it was submitted before): it would never start there, and %s's guarantee would not count it", j.QOS, j.Account, p.cfg.Account)
		// An array's pending record moves task by task, as a lend does: the array's own id
		// would name its running and split-off tasks too.
		for i := range j.tasks() {
			arrayJob, task := j.target(i)
			moves = append(moves, JobMove{Kind: Adopt, JobID: j.ID, ArrayJobID: arrayJob, Task: task, Account: j.Account, Project: p.cfg.Account,
				From: j.QOS, To: p.guarQOS, GPUs: c.needs[j], Code: CodeAdopted, Reason: why})
		}
		log.say(j, CodeAdopted, "moves from %s to %s's guaranteed QOS %s: %s", j.QOS, p.cfg.Account, p.guarQOS, why)
	}
	return adopted{moves: moves, said: log}
}

// adopted is what adoptStrays hands on: the moves it planned, and what it said of each stray.
type adopted struct {
	moves []JobMove
	said  *journal
}
