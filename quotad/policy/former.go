package policy

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/pools"
)

// A former borrow QOS is a QOS the quota table does not manage that a guaranteed QOS's Preempt
// list names in Slurm today, with jobs of projects still running in it on borrowed GPUs: the
// shared QOS "borrow" of a cluster upgraded from one borrow QOS for every project, or a
// site's own requeue QOS its guaranteed QOS preempted before quotad managed them. quotad's
// sync writes each guaranteed QOS's Preempt list from the table, which would drop it at once
// and leave those jobs holding their GPUs, out of every claim's reach, until they end: a
// project's guarantee would wait on another's borrower. So the QOS stays in the lists that
// name it, and its running jobs count as their projects' borrowers, until no such job runs:
// then it leaves the lists as any QOS the table does not name.
//
// It is kept only where Slurm preempting any job in it is what a borrower may suffer:
//   - its PreemptMode is requeue, and every job running in it is a batch job with Requeue=1,
//     so a reclaim requeues, never kills;
//   - every job running in it is a project's whose association will not allow the QOS once
//     quotad has synced (the project's accounts get their project's QOS only; a user with a
//     QOS list of their own that names it keeps it, and the QOS is then the site's): no new job
//     enters it, a requeued one waits there and is adopted into its guarantee (adopt.go), so it
//     empties as its jobs end;
//   - no job quotad cannot read runs in it.
//
// Jobs of several projects share it, and quotad's reclaim order cannot reach inside it: Slurm
// preempts any job of a QOS a claim's Preempt list names, lowest QOS Priority first (its own,
// which quotad does not manage). So it stays open to claims as it was under the old layout,
// even while a project running in it is within its guarantee: a claim must not wait on it, and
// a list it left would never take it back (a QOS is kept only where a list names it). A
// borrower of such a project that a claim takes is requeued, and adopted into its guarantee,
// which has room for it.
type formerQOS struct {
	qos *QOS
	// namedBy are the guaranteed QOS (each a pools.QOSKey) whose Preempt lists name it now: it
	// stays in those, and is added to no other.
	namedBy []string
}

// formerBorrowQOSOf finds the former borrow QOS (by pools.QOSKey) of the snapshot, and says in
// notes why a QOS a guaranteed QOS preempts, with jobs of projects running in it, is dropped
// from the lists all the same.
func formerBorrowQOSOf(l *ledger) (map[string]*formerQOS, []string) {
	c := l.c
	qos := map[string]*QOS{}
	for i := range c.snap.QOS {
		qos[pools.QOSKey(c.snap.QOS[i].Name)] = &c.snap.QOS[i]
	}
	named := map[string][]string{}
	for _, p := range l.projects {
		g := qos[p.guarQOS]
		if g == nil {
			continue
		}
		for _, q := range normalizeNames(g.Preempt) {
			if l.byQOS[q] == nil && l.lenderOf(q) == nil && qos[q] != nil {
				named[q] = append(named[q], p.guarQOS)
			}
		}
	}
	if len(named) == 0 {
		return nil, nil
	}
	out := map[string]*formerQOS{}
	// why is, per QOS, why it is not kept: the first reason by job id, so that the plan does
	// not depend on the snapshot's job order.
	why, whyID := map[string]string{}, map[string]uint32{}
	refuse := func(q string, id uint32, text string) {
		if why[q] == "" || id < whyID[q] {
			why[q], whyID[q] = text, id
		}
	}
	// borrowing: a job of a project that may be kept runs in it on GPUs; ours: any project's
	// job does (only then is a QOS that is not kept worth a note).
	borrowing, ours := map[string]bool{}, map[string]bool{}
	for i := range c.snap.Jobs {
		j := &c.snap.Jobs[i]
		q := pools.QOSKey(j.QOS)
		if named[q] == nil || !j.State.holdsGPUs() {
			continue
		}
		p := l.projectOf(j.Account)
		if p != nil && len(c.needs[j]) > 0 {
			ours[q] = true
		}
		switch {
		case p == nil:
			refuse(q, j.ID, fmt.Sprintf("job %d of account %s, which is under no project, runs in it", j.ID, j.Account))
		case c.userAllows(j):
			refuse(q, j.ID, fmt.Sprintf("user %s may use it in account %s (a QOS list of their own): it is the site's, not a borrow QOS", j.User, j.Account))
		case !j.Requeueable():
			refuse(q, j.ID, fmt.Sprintf("job %d (%s) runs in it and Slurm cannot requeue it (%s): a reclaim would kill it", j.ID, j.Account, j.whyNotRequeueable()))
		default:
			if out[q] == nil {
				out[q] = &formerQOS{qos: qos[q], namedBy: named[q]}
			}
			if len(c.needs[j]) > 0 {
				borrowing[q] = true
			}
		}
	}
	for _, u := range c.snap.Unreadable {
		if q := pools.QOSKey(u.QOS); named[q] != nil && u.State.holdsGPUs() {
			refuse(q, u.ID, fmt.Sprintf("job %d runs in it and cannot be read (%s)", u.ID, u.Problem))
		}
	}
	var notes []string
	for q, f := range out {
		mode, _, _ := strings.Cut(f.qos.PreemptMode, ",")
		if why[q] == "" && !strings.EqualFold(mode, "requeue") {
			why[q] = fmt.Sprintf("its PreemptMode is %s, not requeue, so Slurm might not requeue what it preempts", f.qos.PreemptMode)
		}
		if why[q] != "" || !borrowing[q] {
			delete(out, q)
		}
	}
	for _, q := range slices.Sorted(maps.Keys(why)) {
		if !ours[q] {
			continue
		}
		notes = append(notes, fmt.Sprintf("QOS %s, which %s preempt now, leaves their Preempt lists although jobs still run in it: %s", q, strings.Join(named[q], ", "), why[q]))
	}
	return out, notes
}

// explainFormer says how a borrower running in former borrow QOS f may be reclaimed: by any
// claim in the guaranteed QOS that keep it, whatever its project holds, as under the layout it
// was lent in.
func explainFormer(c *cycle, j *Job, n *projectCounts, f *formerQOS, log *journal) {
	p := n.of
	held := j.held()
	exempt := j.StartTime.Add(f.qos.PreemptExemptTime)
	when := "its PreemptExemptTime has passed"
	if c.now.Before(exempt) {
		when = fmt.Sprintf("it is exempt from reclaim until %s (%s's PreemptExemptTime %s)", exempt.UTC().Format(time.RFC3339), j.QOS, f.qos.PreemptExemptTime)
	}
	log.say(j, CodeReclaimable, "runs borrowed in %s (%s), a QOS the quota table does not name that %s preempted before quotad managed them (one borrow QOS shared by every project, of an older layout): "+
		"quotad keeps it in those Preempt lists until no borrower runs in it, so that no claim waits on it. %s holds %s, and a pending job in any of those QOS may reclaim it whatever %s holds, "+
		"Slurm taking the jobs of the lowest QOS Priority first (%s has %d); %s; %s (it is a batch job with Requeue=1), and quotad then moves it into %s's guaranteed QOS %s. %s",
		j.QOS, gpuList(held), strings.Join(f.namedBy, ", "), p.cfg.Account, n.holdingText(), p.cfg.Account, j.QOS, f.qos.Priority, when, reclaimWindow(f.qos.GraceTime), p.cfg.Account, p.guarQOS, workSurvives)
}
