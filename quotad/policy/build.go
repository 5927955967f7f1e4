package policy

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// BuildPlan decides one quotad cycle: a pure function of the quota table, the snapshot and the
// current time. It acts only on a valid table and a snapshot younger than
// Settings.MaxSnapshotAge; otherwise the plan has Acting=false, no actions, and Notes say why.
//
// Steps: sync (QOS, accounts and users' own QOS lists to the table); settle pending borrowers (return them when
// their project has guarantee room again, or when they may no longer borrow); lend idle GPUs to
// over-quota pending jobs, largest weighted fair-share deficit first. Moves are planned only
// when nothing needs syncing, so they rest on QOS that already match the table.
func BuildPlan(cfg *Config, snap *Snapshot, now time.Time) *Plan {
	plan := &Plan{}
	if err := cfg.Validate(); err != nil {
		plan.Notes = append(plan.Notes, "quota table is invalid, nothing is done: "+err.Error())
		return plan
	}
	if note, fresh := freshness(snap.TakenAt, now, cfg.Settings.SnapshotMaxAge()); !fresh {
		plan.Notes = append(plan.Notes, note)
		return plan
	}
	if len(snap.Unreadable) > 0 {
		plan.Notes = append(plan.Notes, unreadableNotes(snap.Unreadable)...)
		return plan
	}
	plan.Acting = true
	types := gpuTypes(cfg, snap)
	// Lends rest on the QOS and accounts matching the table; the reclaim order (who may be
	// preempted, and in which order) follows usage every cycle and holds nothing back.
	structure, accounts, users, _ := syncPlan(cfg, snap, types, nil)

	e := newEngine(cfg, snap, types, now)
	if n := len(structure) + len(accounts) + len(users); n > 0 {
		e.holdMoves = fmt.Sprintf("quotad first applies %d QOS/account change(s); jobs move from the next cycle on", n)
		plan.Notes = append(plan.Notes, "no job moves this cycle: "+e.holdMoves)
	}
	e.classify()
	e.reserveInQuota()
	e.settleBorrowers()
	e.lend()
	order := e.reclaimOrder()
	e.explainRunning(order)

	var notes []string
	plan.QOS, plan.Accounts, plan.Users, notes = syncPlan(cfg, snap, types, &order)
	plan.Notes = append(plan.Notes, notes...)
	plan.Moves = e.moves
	slices.Sort(e.notes) // the plan must not depend on the snapshot's job order
	plan.Notes = append(plan.Notes, e.notes...)
	plan.Projects = e.projectStatuses()
	plan.Types = e.typeStatuses()
	plan.Jobs = e.jobExplanations()
	return plan
}

// freshness refuses snapshots that are old, undated or from the future (a clock step).
func freshness(taken, now time.Time, maxAge time.Duration) (string, bool) {
	if taken.IsZero() {
		return "snapshot has no time: nothing is done", false
	}
	age := now.Sub(taken)
	if age > maxAge {
		return fmt.Sprintf("snapshot is %s old, more than maxSnapshotAge %s: nothing is done until Slurm and slurmdbd are read again", age.Round(time.Millisecond), maxAge), false
	}
	if age < -maxAge {
		return fmt.Sprintf("snapshot is %s in the future (clock step?): nothing is done", (-age).Round(time.Millisecond)), false
	}
	return "", true
}

// unreadableNotes names each job the snapshot could not read: a plan that ignored them could
// lend GPUs they are about to take, so nothing is done until they are readable or gone.
func unreadableNotes(jobs []UnreadableJob) []string {
	out := make([]string, 0, len(jobs))
	for _, j := range jobs {
		out = append(out, fmt.Sprintf("job %d cannot be read (%s): nothing is done while a job in the queue is not accounted for", j.ID, j.Problem))
	}
	return out
}

// waitingForNodes are pending reasons of jobs that pass their limits and wait for GPUs: Slurm
// will start them, preempting borrowers if needed, so idle GPUs they can use are not lent.
var waitingForNodes = map[string]bool{"Resources": true, "Priority": true, "None": true, "": true}

type engine struct {
	cfg       *Config
	snap      *Snapshot
	now       time.Time
	types     []string
	reasons   map[string]bool
	holdMoves string // non-empty: plan no moves, and this says why

	projects  []*project // sorted by account
	byAccount map[string]*project
	borrowOf  map[string]*project // borrow QOS name → its project
	elasticOf map[string]*project // elastic QOS name → its project
	byQOS     map[string]*project // guaranteed QOS (lower case) → its project
	tree      *accountTree

	nodes     *idleNodes     // free capacity not yet promised
	total     map[string]int // type → GPUs in the cluster
	idleStart map[string]int // type → idle GPUs in the snapshot
	lent      map[string]int // type → GPUs held or promised in the borrow and elastic QOS

	needs          map[*Job]map[string]int // each job's need, computed once
	inQuotaPending []*Job
	borrowPending  []*Job
	borrowRunning  []*Job
	moves          []JobMove
	explain        map[uint32]*JobExplanation
	notes          []string             // for the plan's Notes
	arrays         map[*Job]*arrayLends // what lend decided for the tasks of array records
	// arrayStarted counts, per throttled array, its tasks that run or were lent (pending in a
	// borrow QOS): each takes one of the array's --array=...%N slots.
	arrayStarted map[uint32]int
	// arrayRecords counts, per array, its pending records in a guaranteed QOS: more than one
	// when tasks were split off (returned from the borrow QOS, or updated alone).
	arrayRecords map[uint32]int
	mains        map[uint32]*Job // the main jobs elastic workers name, by id
}

// arrayLends collects the lend decisions on one array record's tasks, for its explanation.
type arrayLends struct {
	lent    []uint32
	lentWhy string // the first lent task's explanation
	waitWhy string // why the tasks not lent wait; "" when every task was lent
}

type project struct {
	cfg           Project
	guarQOS       string
	borrowQOS     string
	elasticQOS    string
	weight, usage float64
	inUse         map[string]int // type → GPUs of started jobs in the guaranteed QOS
	inUseTotal    int
	// borrowed counts the borrow QOS and the elastic QOS together: the project's borrowing
	// limits, its fair share and its place in the reclaim order see both.
	borrowed      map[string]int // type → GPUs held or promised in the borrow and elastic QOS
	borrowedTotal int
	elastic       map[string]int // type → the part of borrowed in the elastic QOS
	pending       map[string]int // type → GPUs wanted by pending jobs in the guaranteed QOS
	reserved      map[string]int // type → GPUs of in-quota pending jobs that fit the guarantee
	candidates    []*Job         // over-quota pending jobs, in serving order
	next          int            // candidates[:next] are decided
	nextTask      int            // and of candidates[next], its first nextTask array tasks
	// head is where candidates[next] would borrow, while headKnown; headAny marks an
	// untyped request, whose type choice any lend may change.
	head               placement
	headKnown, headAny bool
}

func newEngine(cfg *Config, snap *Snapshot, types []string, now time.Time) *engine {
	e := &engine{
		cfg:          cfg,
		snap:         snap,
		now:          now,
		types:        types,
		reasons:      map[string]bool{},
		byAccount:    map[string]*project{},
		borrowOf:     map[string]*project{},
		elasticOf:    map[string]*project{},
		byQOS:        map[string]*project{},
		tree:         newAccountTree(cfg, snap.Accounts),
		lent:         map[string]int{},
		explain:      map[uint32]*JobExplanation{},
		arrayStarted: map[uint32]int{},
		arrayRecords: map[uint32]int{},
		needs:        map[*Job]map[string]int{},
		arrays:       map[*Job]*arrayLends{},
	}
	for _, r := range cfg.Settings.Reasons() {
		e.reasons[r] = true
	}
	for _, pc := range cfg.Projects {
		p := &project{
			cfg:        pc,
			guarQOS:    cfg.Settings.GuaranteedQOSName(pc.Account),
			borrowQOS:  cfg.Settings.BorrowQOSName(pc.Account),
			elasticQOS: cfg.Settings.ElasticQOSName(pc.Account),
			weight:     pc.ShareWeight(),
			inUse:      map[string]int{},
			borrowed:   map[string]int{},
			elastic:    map[string]int{},
			pending:    map[string]int{},
		}
		e.projects = append(e.projects, p)
		e.byAccount[pc.Account] = p
		e.borrowOf[p.borrowQOS] = p
		e.elasticOf[p.elasticQOS] = p
		e.byQOS[strings.ToLower(p.guarQOS)] = p
	}
	sort.Slice(e.projects, func(a, b int) bool { return e.projects[a].cfg.Account < e.projects[b].cfg.Account })
	// A project's usage is its whole subtree's, as its quota covers the subtree.
	for acct, u := range snap.Usage {
		if p := e.projectOf(acct); p != nil {
			p.usage += u
		}
	}
	e.nodes, e.total, e.idleStart = newIdleNodes(snap.Nodes)
	e.mains = map[uint32]*Job{}
	for i := range snap.Jobs {
		if m := snap.Jobs[i].ElasticMain; m != 0 {
			e.mains[m] = nil
		}
	}
	for i := range snap.Jobs {
		if _, named := e.mains[snap.Jobs[i].ID]; named {
			e.mains[snap.Jobs[i].ID] = &snap.Jobs[i]
		}
	}
	for id, m := range e.mains {
		if m == nil {
			delete(e.mains, id)
		}
	}
	return e
}

// projectOf is the project whose quota covers account (see accountTree), or nil.
func (e *engine) projectOf(account string) *project {
	return e.byAccount[e.tree.projectOf(account)]
}

// jobProject is the project a job counts for: the owner of the guaranteed, borrow or elastic
// QOS it is in (Slurm counts it in that QOS's limits whatever its account), else the project
// covering its account.
func (e *engine) jobProject(j *Job) *project {
	q := strings.ToLower(j.QOS)
	if p := e.byQOS[q]; p != nil {
		return p
	}
	if p := e.lenderOf(q); p != nil {
		return p
	}
	return e.projectOf(j.Account)
}

// lenderOf is the project whose borrow or elastic QOS qos (lower case) is, or nil: jobs there
// run on borrowed GPUs.
func (e *engine) lenderOf(qos string) *project {
	if p := e.borrowOf[qos]; p != nil {
		return p
	}
	return e.elasticOf[qos]
}

// isElastic says whether j runs or waits in an elastic QOS: a worker elasticd grew a job by.
func (e *engine) isElastic(j *Job) bool {
	return e.elasticOf[strings.ToLower(j.QOS)] != nil
}

// workerOf names the main job of an elastic worker, e.g. "elastic worker of main job 12", when
// its name says so and that job is queued with the same user and account; else a plain
// "elastic worker" (any user may name a job like a worker).
func (e *engine) workerOf(j *Job) string {
	if j.ElasticMain != 0 {
		if m, ok := e.mains[j.ElasticMain]; ok && m.User == j.User && m.Account == j.Account {
			return fmt.Sprintf("elastic worker of main job %d", j.ElasticMain)
		}
	}
	return "elastic worker"
}

func (e *engine) say(j *Job, format string, args ...any) {
	x := &JobExplanation{JobID: j.ID, Account: j.Account, User: j.User, Text: fmt.Sprintf("job %d ", j.ID) + fmt.Sprintf(format, args...)}
	if p := e.jobProject(j); p != nil {
		x.Project = p.cfg.Account
	}
	e.explain[j.ID] = x
}

// classify counts what every GPU job holds or wants and sorts pending jobs into the lists the
// later steps work on.
func (e *engine) classify() {
	for i := range e.snap.Jobs {
		j := &e.snap.Jobs[i]
		if j.ArrayThrottle > 0 && (j.State.holdsGPUs() || (j.State == StatePending && e.lenderOf(strings.ToLower(j.QOS)) != nil)) {
			e.arrayStarted[j.ArrayJobID] += j.tasks()
		}
		need := j.need()
		e.needs[j] = need
		if len(need) == 0 {
			continue // quotas are about GPUs only
		}
		p := e.jobProject(j)
		qos := strings.ToLower(j.QOS)
		borrowing := e.lenderOf(qos) != nil
		switch {
		case j.State.holdsGPUs():
			held := j.held()
			switch {
			case borrowing:
				addAll(e.lent, held)
				if p != nil {
					p.borrow(held)
					if e.isElastic(j) {
						addAll(p.elastic, held)
					}
				}
				e.borrowRunning = append(e.borrowRunning, j)
			case p != nil && qos == p.guarQOS:
				for t, n := range held {
					p.inUse[t] += n
					p.inUseTotal += n
				}
				e.say(j, "runs within %s's guarantee in %s (%s): it is never reclaimed", p.cfg.Account, p.guarQOS, gpuList(held))
			case p == nil:
				e.say(j, "runs in account %s, which has no quota and is under no project: quotad does not manage it", j.Account)
			default:
				e.say(j, "runs in QOS %s, not in %s's guaranteed QOS %s: quotad does not manage it, and the account's QOS list is being restricted to %s, %s and %s", j.QOS, p.cfg.Account, p.guarQOS, p.guarQOS, p.borrowQOS, p.elasticQOS)
			}
		case j.State == StatePending:
			switch {
			case borrowing:
				e.borrowPending = append(e.borrowPending, j)
			case p != nil && qos == p.guarQOS:
				if j.ArrayJobID != 0 {
					e.arrayRecords[j.ArrayJobID]++
				}
				addAll(p.pending, scaled(need, j.tasks()))
				if e.reasons[j.Reason] {
					p.candidates = append(p.candidates, j)
				} else {
					e.inQuotaPending = append(e.inQuotaPending, j)
				}
			case p == nil:
				e.say(j, "waits in account %s, which has no quota and is under no project: quotad does not manage it", j.Account)
			default:
				e.say(j, "waits in QOS %s, not in %s's guaranteed QOS %s: quotad does not move it", j.QOS, p.cfg.Account, p.guarQOS)
			}
		}
	}
	jobOrder(e.inQuotaPending)
	jobOrder(e.borrowPending)
	for _, p := range e.projects {
		jobOrder(p.candidates)
	}
}

// reserveInQuota keeps idle GPUs for pending jobs within their guarantee: lending them would
// only have Slurm preempt the borrower at once.
func (e *engine) reserveInQuota() {
	for _, j := range e.inQuotaPending {
		p := e.jobProject(j)
		need := e.needs[j]
		if why := j.notStartable(); why != "" {
			e.say(j, "waits in %s (reason %s): %s, so no idle GPUs are kept for it", p.guarQOS, j.Reason, why)
			continue
		}
		if j.Reason == "JobArrayTaskLimit" && j.ArrayThrottle > 0 {
			e.say(j, "waits in %s: its array runs at most %d tasks at once (--array=...%%%d) and %d run or were lent; Slurm starts the next task when one ends, so no idle GPUs are kept for it",
				p.guarQOS, j.ArrayThrottle, j.ArrayThrottle, e.arrayStarted[j.ArrayJobID])
			continue
		}
		base := fmt.Sprintf("waits in %s's guarantee (%s; reason %s): Slurm starts it when GPUs are free, preempting borrowers if it must", p.cfg.Account, p.quotaText(need), j.Reason)
		if !waitingForNodes[j.Reason] {
			e.say(j, "%s", base)
			continue
		}
		if !p.fitsReserved(need) {
			// Over its guarantee, but Slurm has not marked it QOSGrpGRES yet (it stopped at a
			// job before it): it cannot start in its QOS, so it keeps nothing.
			e.say(j, "waits in %s with reason %s, but %s's guarantee has no room for it (%s, %s kept for jobs before it): no idle GPUs are kept for it; it can borrow once Slurm marks it %s", p.guarQOS, j.Reason, p.cfg.Account, p.quotaText(need), gpuList(p.reserved), strings.Join(e.cfg.Settings.Reasons(), " or "))
			continue
		}
		// Each task of an array record that fits the guarantee keeps its GPUs.
		kept, keptTasks, lastPart := map[string]int{}, 0, ""
		for i := range j.tasks() {
			if i > 0 && !p.fitsReserved(need) {
				break
			}
			p.reserve(need)
			pl, ok := e.place(j, need, nil)
			if !ok {
				break
			}
			e.take(pl)
			addAll(kept, pl.gpus)
			keptTasks, lastPart = keptTasks+1, pl.partition
		}
		switch {
		case keptTasks == 0:
			e.say(j, "%s", base)
		case j.tasks() == 1:
			e.say(j, "%s; %s idle in partition %s are kept for it, not lent", base, gpuList(kept), lastPart)
		default:
			e.say(j, "%s; %s idle are kept for %d of its %d pending tasks, not lent", base, gpuList(kept), keptTasks, j.tasks())
		}
	}
}

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
	case p.fits(need):
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
	if ok {
		return "promised", fmt.Sprintf("was lent and waits in %s to start: %s is over its guarantee (%s); %s idle in partition %s are promised to it", j.QOS, p.cfg.Account, p.quotaText(need), gpuList(gpus), pl.partition)
	}
	return "waits", fmt.Sprintf("was lent and waits in %s for GPUs: %s is over its guarantee (%s); no idle GPUs it can use now", j.QOS, p.cfg.Account, p.quotaText(need))
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
	if p.fits(need) {
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

// lend serves over-quota pending jobs from the idle GPUs that remain: each round, among the
// projects whose next job can borrow, the one furthest below its weighted fair share of the
// lendable GPUs goes first.
func (e *engine) lend() {
	for _, p := range e.projects {
		kept := p.candidates[:0]
		for _, j := range p.candidates {
			need := e.needs[j]
			switch {
			case j.notStartable() != "":
				e.say(j, "waits in %s (reason %s): %s, so it is not lent", p.guarQOS, j.Reason, j.notStartable())
			case p.fits(need):
				e.say(j, "waits with reason %s, but %s's guarantee has room (%s): Slurm should start it in %s; not lent", j.Reason, p.cfg.Account, p.quotaText(need), p.guarQOS)
			case !j.Requeueable():
				e.say(j, "waits for %s's guarantee in %s: %s; it is never lent: %s, and a borrower's GPUs may be reclaimed, which would kill it. To borrow idle GPUs, submit it with sbatch --requeue", p.cfg.Account, p.guarQOS, p.quotaUsage(need), j.whyNotRequeueable())
			case e.holdMoves != "":
				e.say(j, "waits: %s; %s", p.quotaUsage(need), e.holdMoves)
			default:
				kept = append(kept, j)
			}
		}
		p.candidates = kept
	}
	share := e.fairShares()
	var whole *project // lending an array whole: its other tasks go next, before any other job
	for {
		var best *project
		var bestPl placement
		var bestDeficit float64
		for _, p := range e.projects {
			if whole != nil && p != whole {
				continue
			}
			pl, ok := e.head(p)
			if !ok {
				continue
			}
			d := share.deficit(p, pl.gpus)
			if best == nil || d > bestDeficit || (d == bestDeficit && p.usage/p.weight < best.usage/best.weight) {
				best, bestPl, bestDeficit = p, pl, d
			}
		}
		whole = nil
		if best == nil {
			return
		}
		j, task := best.candidates[best.next], best.nextTask
		if best.nextTask++; best.nextTask == j.tasks() {
			best.next, best.nextTask = best.next+1, 0
		} else if e.snap.WholeArrays {
			whole = best
		}
		e.take(bestPl)
		if j.ArrayThrottle > 0 {
			e.arrayStarted[j.ArrayJobID]++
		}
		addAll(e.lent, bestPl.gpus)
		best.borrow(bestPl.gpus)
		e.invalidateHeads(best, bestPl)
		why := fmt.Sprintf("%s; borrows %s idle in partition %s (%s)", best.quotaUsage(e.needs[j]), gpuList(bestPl.gpus), bestPl.partition, share.describe(best, bestPl.gpus, bestDeficit))
		arrayJob, taskID := j.target(task)
		e.moves = append(e.moves, JobMove{Kind: Lend, JobID: j.ID, ArrayJobID: arrayJob, Task: taskID, Account: j.Account, Project: best.cfg.Account, From: j.QOS, To: best.borrowQOS, GPUs: bestPl.gpus, Reason: why})
		text := fmt.Sprintf("(moves from %s to %s): %s; %s", j.QOS, best.borrowQOS, why, e.reclaimTerms(best))
		if j.tasks() == 1 {
			e.say(j, "is lent %s", text)
			continue
		}
		a := e.arrayNote(j)
		if len(a.lent) == 0 {
			a.lentWhy = text
		}
		a.lent = append(a.lent, taskID)
		e.sayArray(j)
	}
}

func (e *engine) arrayNote(j *Job) *arrayLends {
	a := e.arrays[j]
	if a == nil {
		a = &arrayLends{}
		e.arrays[j] = a
	}
	return a
}

// sayArray explains an array record's lend: which tasks are lent and why the others wait.
func (e *engine) sayArray(j *Job) {
	a := e.arrayNote(j)
	var parts []string
	if len(a.lent) > 0 {
		parts = append(parts, fmt.Sprintf("tasks %s are lent %s", taskList(a.lent), a.lentWhy))
	}
	switch {
	case a.waitWhy == "":
	case len(a.lent) == 0:
		parts = append(parts, fmt.Sprintf("its tasks wait: %s", a.waitWhy))
	default:
		parts = append(parts, fmt.Sprintf("the other %d tasks wait: %s", j.tasks()-len(a.lent), a.waitWhy))
	}
	e.say(j, "(array %d, %d pending tasks): %s", j.ArrayJobID, j.tasks(), strings.Join(parts, "; "))
}

// allTasksFit says whether every pending task of an array record could borrow now: the limits
// for all of them, and nodes for each in turn (taken, then given back).
func (e *engine) allTasksFit(j *Job, need map[string]int, p *project) (string, bool) {
	n := j.tasks()
	if over := e.limitProblems(p, scaled(need, n), sum(need)*n); len(over) > 0 {
		return strings.Join(over, "; "), false
	}
	var taken []placement
	defer func() {
		for _, pl := range taken {
			e.nodes.giveBack(pl)
		}
	}()
	for range n {
		pl, ok := e.place(j, need, nil)
		if !ok {
			return fmt.Sprintf("idle GPUs for %d of its %d tasks only", len(taken), n), false
		}
		e.take(pl)
		taken = append(taken, pl)
	}
	return "", true
}

// invalidateHeads forgets the cached head placements a lend may have made wrong: the lender's
// own (its limits and its head changed), and those drawing on the same GPU types, on any type,
// or on the same nodes (whose CPUs and memory the lend took).
func (e *engine) invalidateHeads(lender *project, lent placement) {
	for _, p := range e.projects {
		if !p.headKnown {
			continue
		}
		if p == lender || p.headAny || p.head.sharesNode(lent) {
			p.headKnown = false
			continue
		}
		for t := range p.head.gpus {
			if lent.gpus[t] > 0 {
				p.headKnown = false
				break
			}
		}
	}
}

// head returns where p's next lendable job would run, explaining and skipping the jobs that
// cannot borrow now. Skipping is final within a plan: lending only ever shrinks what is left.
func (e *engine) head(p *project) (placement, bool) {
	if p.headKnown {
		return p.head, true
	}
	for p.next < len(p.candidates) {
		j := p.candidates[p.next]
		need := e.needs[j]
		pl, ok := e.place(j, need, p)
		if ok && j.ArrayThrottle > 0 {
			// A task lent past the array's throttle would wait in the borrow QOS (reason
			// JobArrayTaskLimit) on GPUs promised to it. On a release that lends arrays whole,
			// every task must fit under it.
			want := 1
			if e.snap.WholeArrays && p.nextTask == 0 {
				want = j.tasks()
			}
			if started := e.arrayStarted[j.ArrayJobID]; started+want > j.ArrayThrottle {
				ok = false
				pl.problems = append(pl.problems, fmt.Sprintf("its array runs at most %d tasks at once (--array=...%%%d) and %d run or were lent", j.ArrayThrottle, j.ArrayThrottle, started))
			}
		}
		if ok && e.snap.WholeArrays && j.ArrayJobID != 0 && e.arrayRecords[j.ArrayJobID] > 1 {
			// Slurm would try the array's tasks that still wait in the guaranteed QOS first and
			// skip the others of the array, the lent ones included (see Snapshot.WholeArrays).
			ok = false
			pl.problems = append(pl.problems, fmt.Sprintf("on this Slurm release a task lent does not start while another of its array waits, and array %d's pending tasks are in %d records (some were split off), which quotad does not lend together", j.ArrayJobID, e.arrayRecords[j.ArrayJobID]))
		}
		if ok && e.snap.WholeArrays && j.tasks() > 1 && p.nextTask == 0 {
			// Every task must fit at once, or none is lent (see Snapshot.WholeArrays).
			if short, all := e.allTasksFit(j, need, p); !all {
				ok = false
				pl.problems = append(pl.problems, fmt.Sprintf("%s; on this Slurm release a task lent alone does not start while the rest of its array waits, so the array's %d pending tasks are lent together or not at all", short, j.tasks()))
			}
		}
		if ok {
			p.head, p.headKnown, p.headAny = pl, true, need[""] > 0
			return pl, true
		}
		// The record's other tasks ask for the same and would not fit either.
		why := fmt.Sprintf("%s; %s", p.quotaUsage(need), strings.Join(pl.problems, "; "))
		if j.tasks() == 1 {
			e.say(j, "waits: %s", why)
		} else {
			e.arrayNote(j).waitWhy = why
			e.sayArray(j)
		}
		p.next, p.nextTask = p.next+1, 0
	}
	return placement{}, false
}

// placement is where a job's GPUs would come from; untyped requests resolved to one type.
type placement struct {
	partition string
	gpus      map[string]int // whole job, by type
	nodes     []*nodeRoom    // the nodes it would start on
	perNode   map[string]int // GPUs taken on each of them, by type
	shape     shape
	problems  []string // why there is no placement
}

// place finds the first of the job's partitions with enough nodes where a job of its shape
// (GPUs, CPUs and memory per node) can start now. With a borrower p it also applies p's
// borrowing limits and the lending limits, and an untyped request takes the type with the
// most room.
func (e *engine) place(j *Job, need map[string]int, p *project) (placement, bool) {
	var pl placement
	typed := map[string]int{}
	for t, n := range need {
		if t != "" {
			typed[t] = n
		}
	}
	anyN := need[""]
	if p != nil {
		pl.problems = e.limitProblems(p, typed, sum(need))
		if anyN > 0 && !slices.ContainsFunc(e.types, func(t string) bool {
			return min(e.borrowRoom(p, t)-typed[t], e.lendRoom(t)-typed[t]) >= anyN
		}) {
			pl.problems = append(pl.problems, fmt.Sprintf("no GPU type has borrowing and lending room for %d more GPUs of any type", anyN))
		}
	}
	sh := jobShape(j)
	parts := j.Partitions
	if len(parts) == 0 {
		parts = e.nodes.partitions
	}
	for _, part := range parts {
		anyType, nodes := "", []*nodeRoom(nil)
		if anyN == 0 {
			nodes = e.nodes.fit(part, sh, sh.resolve(""))
		} else {
			bestRoom := 0
			for _, t := range e.types {
				room := e.nodes.idleIn(part, t) - typed[t]
				if p != nil {
					room = min(room, e.borrowRoom(p, t)-typed[t], e.lendRoom(t)-typed[t])
				}
				if room < anyN || room <= bestRoom {
					continue
				}
				if got := e.nodes.fit(part, sh, sh.resolve(t)); got != nil {
					anyType, nodes, bestRoom = t, got, room
				}
			}
		}
		if nodes == nil {
			continue
		}
		gpus := clone(typed)
		if anyType != "" {
			gpus[anyType] += anyN
		}
		if len(pl.problems) == 0 {
			return placement{partition: part, gpus: gpus, nodes: nodes, perNode: sh.resolve(anyType), shape: sh}, true
		}
		return pl, false
	}
	pl.problems = append(pl.problems, e.idleText(need, sh, parts))
	return pl, false
}

// limitProblems lists the borrowing and lending limits that typed GPUs gpus, total GPUs in
// all, would break.
func (e *engine) limitProblems(p *project, gpus map[string]int, total int) []string {
	var out []string
	for _, t := range sortedKeys(gpus) {
		n := gpus[t]
		if t == "" {
			continue
		}
		if lim, ok := p.cfg.BorrowLimitByType[t]; ok && p.borrowed[t]+n > lim {
			out = append(out, fmt.Sprintf("borrowing limit of %s reached: %s borrows %d %s, limit %d", t, p.cfg.Account, p.borrowed[t], t, lim))
		}
		if lim, ok := e.cfg.LendLimits[t]; ok && e.lent[t]+n > lim {
			out = append(out, fmt.Sprintf("lending limit of %s reached: %d/%d %s lent", t, e.lent[t], lim, t))
		}
	}
	if lim := p.cfg.BorrowLimit; lim != nil && p.borrowedTotal+total > *lim {
		out = append(out, fmt.Sprintf("borrowing limit reached: %s borrows %d GPUs, limit %d", p.cfg.Account, p.borrowedTotal, *lim))
	}
	return out
}

// borrowRoom is how many more GPUs of type t project p may borrow; lendRoom how many more of
// t may be lent at all.
func (e *engine) borrowRoom(p *project, t string) int {
	room := int(^uint(0) >> 1)
	if lim, ok := p.cfg.BorrowLimitByType[t]; ok {
		room = lim - p.borrowed[t]
	}
	if lim := p.cfg.BorrowLimit; lim != nil {
		room = min(room, *lim-p.borrowedTotal)
	}
	return room
}

func (e *engine) lendRoom(t string) int {
	if lim, ok := e.cfg.LendLimits[t]; ok {
		return lim - e.lent[t]
	}
	return int(^uint(0) >> 1)
}

func (e *engine) take(pl placement) { e.nodes.take(pl) }

// resolved is the GPUs a job counts against limits: its placement when there is one, else its
// request as it stands.
func resolved(pl placement, ok bool, need map[string]int) map[string]int {
	if ok {
		return pl.gpus
	}
	return need
}

// shares holds, per GPU type, the pool that borrowers divide by weight: what contending
// projects borrow already plus what can still be lent. It is fixed for the plan, since each
// lend moves GPUs from "lendable" to "borrowed" without changing the sum.
type shares struct {
	pool    map[string]float64
	weights map[string]float64 // type → sum of contending projects' weights
}

func (e *engine) fairShares() shares {
	s := shares{pool: map[string]float64{}, weights: map[string]float64{}}
	lendable := map[string]int{}
	for _, t := range e.types {
		lendable[t] = max(0, min(e.nodes.lendable(t), e.lendRoom(t)))
		s.pool[t] = float64(lendable[t])
	}
	for _, p := range e.projects {
		wants := map[string]bool{}
		for _, j := range p.candidates {
			for t := range e.needs[j] {
				if t != "" {
					wants[t] = true
					continue
				}
				for _, u := range e.types { // an untyped job contends for every type
					wants[u] = true
				}
			}
		}
		for t, n := range p.borrowed {
			if n > 0 {
				wants[t] = true
			}
		}
		for _, t := range sortedKeys(wants) {
			s.pool[t] += float64(p.borrowed[t])
			s.weights[t] += p.weight
		}
	}
	return s
}

// deficit is how far p is below its weighted fair share of the types in gpus; for a job of
// several types, the smallest (the type where p is best served decides).
func (s shares) deficit(p *project, gpus map[string]int) float64 {
	first, d := true, 0.0
	for _, t := range sortedKeys(gpus) {
		v := s.fair(p, t) - float64(p.borrowed[t])
		if first || v < d {
			first, d = false, v
		}
	}
	return d
}

func (s shares) fair(p *project, t string) float64 {
	if s.weights[t] == 0 {
		return 0
	}
	return s.pool[t] * p.weight / s.weights[t]
}

func (s shares) describe(p *project, gpus map[string]int, deficit float64) string {
	var parts []string
	for _, t := range sortedKeys(gpus) {
		parts = append(parts, fmt.Sprintf("fair share %.1f of %.0f %s for borrowers", s.fair(p, t), s.pool[t], t))
	}
	return fmt.Sprintf("%s; deficit was %.1f, the largest", strings.Join(parts, ", "), deficit)
}

// reclaimTerms says how a borrower of p loses its GPUs: by Slurm's preemption, never by
// quotad, and only while p holds more than its guarantee.
func (e *engine) reclaimTerms(p *project) string {
	s := e.cfg.Settings
	return fmt.Sprintf("while %s holds more than its guarantee, a guaranteed job may reclaim these GPUs once the job has run %s: Slurm requeues it after a %s grace period (SIGTERM first)", p.cfg.Account, s.PreemptExemptTime, s.GraceTime)
}

// reclaimOrder ranks the projects whose borrowers a claim may take: those holding more than
// their guarantee, borrowers running or promised counted, the furthest over per unit of weight
// first, then the one that used more in the fairness window. A project within its guarantee is
// left out, so no guaranteed QOS may preempt its borrow QOS.
func (e *engine) reclaimOrder() reclaimOrder {
	var over []*project
	for _, p := range e.projects {
		if p.excess() > 0 {
			over = append(over, p)
		}
	}
	sort.SliceStable(over, func(a, b int) bool {
		x, y := over[a], over[b]
		ex, ey := float64(x.excess())/x.weight, float64(y.excess())/y.weight
		if ex != ey {
			return ex > ey
		}
		if ux, uy := x.usage/x.weight, y.usage/y.weight; ux != uy {
			return ux > uy
		}
		return x.cfg.Account < y.cfg.Account
	})
	o := reclaimOrder{}
	for _, p := range over {
		o.reclaimable = append(o.reclaimable, p.cfg.Account)
	}
	return o
}

// excess is how many GPUs p holds beyond its guarantee, in-quota jobs and borrowers (running
// or promised) together: the typed overshoots summed, or the all-types one if larger.
func (p *project) excess() int {
	types := map[string]bool{}
	for t := range p.inUse {
		types[t] = true
	}
	for t := range p.borrowed {
		types[t] = true
	}
	typed := 0
	for t := range types {
		if t != "" {
			typed += max(0, p.inUse[t]+p.borrowed[t]-p.cfg.GPUs[t])
		}
	}
	return max(typed, p.inUseTotal+p.borrowedTotal-p.cfg.Total(), 0)
}

// explainRunning says for each started borrower whether, by whom and in which order it can be
// reclaimed now.
func (e *engine) explainRunning(order reclaimOrder) {
	// Who could reclaim a type: the projects with unused guarantee of it, found once.
	reclaimers := map[string][]string{}
	for _, t := range append([]string{""}, e.types...) {
		for _, p := range e.projects {
			if p.guaranteeRoom(t) > 0 {
				reclaimers[t] = append(reclaimers[t], p.cfg.Account)
			}
		}
	}
	rank := map[string]int{}
	for i, acct := range order.reclaimable {
		rank[acct] = i
	}
	for _, j := range e.borrowRunning {
		held := j.held()
		p := e.jobProject(j)
		if p == nil {
			e.say(j, "runs in %s (%s), but account %s has no quota: quotad does not manage it", j.QOS, gpuList(held), j.Account)
			continue
		}
		i, reclaimable := rank[p.cfg.Account]
		subject := fmt.Sprintf("runs borrowed in %s (%s)", j.QOS, gpuList(held))
		if e.isElastic(j) {
			subject = fmt.Sprintf("is an %s on borrowed GPUs in %s (%s)", e.workerOf(j), j.QOS, gpuList(held))
		}
		if !reclaimable {
			text := fmt.Sprintf("%s: %s holds %s, borrowers counted, which is within its guarantee, so no claim may reclaim it (quotad re-checks this every cycle)", subject, p.cfg.Account, p.holdingText())
			if e.isElastic(j) && j.Requeueable() {
				text += "; should the project go over its guarantee, elastic workers are the first borrowers reclaimed, and elasticd counts a reclaim as a shrink"
			}
			if why := j.whyNotRequeueable(); why != "" {
				text += fmt.Sprintf("; should its project go over its guarantee, a reclaim would KILL it, not requeue it: %s", why)
				e.notes = append(e.notes, fmt.Sprintf("job %d (%s) runs in %s but Slurm cannot requeue it (%s): a reclaim would kill it", j.ID, j.Account, j.QOS, why))
			}
			e.say(j, "%s", text)
			continue
		}
		var by []string
		for _, t := range sortedKeys(held) {
			by = append(by, reclaimers[t]...)
		}
		slices.Sort(by)
		by = slices.Compact(by)
		who := "no project has unused guarantee of its GPU type now, so nobody would reclaim it"
		if len(by) > 0 {
			who = "it may be reclaimed by pending guaranteed jobs of " + strings.Join(by, ", ") + " (unused guarantee of its type)"
		}
		exempt := j.StartTime.Add(e.cfg.Settings.PreemptExemptTime)
		when := "its PreemptExemptTime has passed"
		if e.now.Before(exempt) {
			when = fmt.Sprintf("it is exempt from reclaim until %s (PreemptExemptTime %s)", exempt.UTC().Format(time.RFC3339), e.cfg.Settings.PreemptExemptTime)
		}
		loses := fmt.Sprintf("%s holds %s, %d GPU(s) beyond its guarantee: %s of %d over-quota projects to lose borrowers", p.cfg.Account, p.holdingText(), p.excess(), ordinal(i+1), len(order.reclaimable))
		if !j.Requeueable() {
			// It got here without quotad (a user's own update, or flags changed after a lend).
			e.say(j, "%s: %s; %s; %s; a reclaim would KILL it, not requeue it: %s. quotad cannot move a running job out of %s", subject, loses, when, who, j.whyNotRequeueable(), j.QOS)
			e.notes = append(e.notes, fmt.Sprintf("job %d (%s) runs in %s but Slurm cannot requeue it (%s): a reclaim would kill it", j.ID, j.Account, j.QOS, j.whyNotRequeueable()))
			continue
		}
		if e.isElastic(j) {
			e.say(j, "%s: %s, and elastic workers are reclaimed first, before any other borrower (%s has the lowest QOS priority), since losing one costs a job a transition, not its progress; %s; %s; a reclaim requeues it after a %s grace period and elasticd counts that as a shrink: it ends the requeued worker and the job runs on without it", subject, loses, j.QOS, when, who, e.cfg.Settings.GraceTime)
			continue
		}
		e.say(j, "%s: %s; %s; %s; a reclaim requeues it after a %s grace period (it is a batch job with Requeue=1), so it runs again later", subject, loses, when, who, e.cfg.Settings.GraceTime)
	}
}

// holdingText is what p holds against its guarantee, e.g. "6 GPUs of a 4-GPU guarantee".
func (p *project) holdingText() string {
	return fmt.Sprintf("%d GPUs (%d in quota, %d borrowed) of a %d-GPU guarantee", p.inUseTotal+p.borrowedTotal, p.inUseTotal, p.borrowedTotal, p.cfg.Total())
}

func ordinal(n int) string {
	switch {
	case n%100 >= 11 && n%100 <= 13:
		return fmt.Sprintf("%dth", n)
	case n%10 == 1:
		return fmt.Sprintf("%dst", n)
	case n%10 == 2:
		return fmt.Sprintf("%dnd", n)
	case n%10 == 3:
		return fmt.Sprintf("%drd", n)
	}
	return fmt.Sprintf("%dth", n)
}

func (e *engine) projectStatuses() []ProjectStatus {
	out := make([]ProjectStatus, 0, len(e.projects))
	for _, p := range e.projects {
		st := ProjectStatus{Account: p.cfg.Account, GuaranteedQOS: p.guarQOS, Weight: p.weight, Usage: p.usage}
		types := slices.Clone(e.types)
		if p.inUse[""]+p.borrowed[""]+p.pending[""] > 0 {
			types = append([]string{""}, types...)
		}
		var parts []string
		for _, t := range types {
			row := ProjectTypeStatus{Type: t, Guaranteed: p.cfg.GPUs[t], InUse: p.inUse[t], Borrowed: p.borrowed[t], Elastic: p.elastic[t], Pending: p.pending[t]}
			st.ByType = append(st.ByType, row)
			borrowed := fmt.Sprintf("%d borrowed", row.Borrowed)
			if row.Elastic > 0 {
				borrowed += fmt.Sprintf(" (%d by elastic workers)", row.Elastic)
			}
			parts = append(parts, fmt.Sprintf("%s %d/%d guaranteed in use, %s, %d pending", typeName(t), row.InUse, row.Guaranteed, borrowed, row.Pending))
		}
		st.Summary = fmt.Sprintf("%s (QOS %s, weight %g): %s; all types %d/%d guaranteed in use, %d borrowed", p.cfg.Account, p.guarQOS, p.weight, strings.Join(parts, "; "), p.inUseTotal, p.cfg.Total(), p.borrowedTotal)
		out = append(out, st)
	}
	return out
}

func (e *engine) typeStatuses() []TypeStatus {
	out := make([]TypeStatus, 0, len(e.types))
	for _, t := range e.types {
		limit := -1
		if l, ok := e.cfg.LendLimits[t]; ok {
			limit = l
		}
		out = append(out, TypeStatus{Type: t, Total: e.total[t], Idle: e.idleStart[t], Lent: e.lent[t], LendLimit: limit})
	}
	return out
}

func (e *engine) jobExplanations() []JobExplanation {
	out := make([]JobExplanation, 0, len(e.explain))
	for _, x := range e.explain {
		out = append(out, *x)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].JobID < out[b].JobID })
	return out
}

// fits says whether a job needing need would pass the guaranteed QOS's GrpTRES now. An untyped
// request counts against gres/gpu only, as in Slurm.
func (p *project) fits(need map[string]int) bool {
	for t, n := range need {
		if t != "" && p.inUse[t]+n > p.cfg.GPUs[t] {
			return false
		}
	}
	return p.inUseTotal+sum(need) <= p.cfg.Total()
}

// fitsReserved is fits with the GPUs kept for the project's earlier in-quota pending jobs
// counted as in use: those start first.
func (p *project) fitsReserved(need map[string]int) bool {
	for t, n := range need {
		if t != "" && p.inUse[t]+p.reserved[t]+n > p.cfg.GPUs[t] {
			return false
		}
	}
	return p.inUseTotal+sum(p.reserved)+sum(need) <= p.cfg.Total()
}

func (p *project) reserve(gpus map[string]int) {
	if p.reserved == nil {
		p.reserved = map[string]int{}
	}
	addAll(p.reserved, gpus)
}

func (p *project) use(gpus map[string]int) {
	addAll(p.inUse, gpus)
	p.inUseTotal += sum(gpus)
}

func (p *project) borrow(gpus map[string]int) {
	addAll(p.borrowed, gpus)
	p.borrowedTotal += sum(gpus)
}

func (p *project) guaranteeRoom(t string) int {
	if t == "" {
		return p.cfg.Total() - p.inUseTotal
	}
	return min(p.cfg.GPUs[t]-p.inUse[t], p.cfg.Total()-p.inUseTotal)
}

// quotaText is the guarantee position for the types a job asks for, e.g. "a100 3/4 in use".
// The all-types count is shown when it matters: for untyped requests, or when it alone binds.
func (p *project) quotaText(need map[string]int) string {
	var parts []string
	for _, t := range sortedKeys(need) {
		if t != "" {
			parts = append(parts, fmt.Sprintf("%s %d/%d in use", t, p.inUse[t], p.cfg.GPUs[t]))
		}
	}
	if p.totalMatters(need) {
		parts = append(parts, fmt.Sprintf("all types %d/%d in use", p.inUseTotal, p.cfg.Total()))
	}
	return strings.Join(parts, ", ")
}

// quotaUsage says why a job is over quota, e.g. "proj-a uses 4/4 guaranteed a100".
func (p *project) quotaUsage(need map[string]int) string {
	var parts []string
	for _, t := range sortedKeys(need) {
		if t != "" && p.inUse[t]+need[t] > p.cfg.GPUs[t] {
			parts = append(parts, fmt.Sprintf("%d/%d guaranteed %s", p.inUse[t], p.cfg.GPUs[t], t))
		}
	}
	if p.totalMatters(need) {
		parts = append(parts, fmt.Sprintf("%d/%d guaranteed GPUs of all types", p.inUseTotal, p.cfg.Total()))
	}
	return fmt.Sprintf("%s uses %s and the job needs %s more", p.cfg.Account, strings.Join(parts, ", "), gpuList(need))
}

func (p *project) totalMatters(need map[string]int) bool {
	if need[""] > 0 {
		return true
	}
	for t, n := range need {
		if p.inUse[t]+n > p.cfg.GPUs[t] {
			return false // a typed limit binds and says it better
		}
	}
	return p.inUseTotal+sum(need) > p.cfg.Total()
}

func addAll(dst, src map[string]int) {
	for t, n := range src {
		dst[t] += n
	}
}

func sum(m map[string]int) int {
	s := 0
	for _, n := range m {
		s += n
	}
	return s
}

// scaled is m times n.
func scaled(m map[string]int, n int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v * n
	}
	return out
}

// taskList spells array task ids compactly: "1-3,7".
func taskList(ids []uint32) string {
	var b strings.Builder
	for i := 0; i < len(ids); {
		k := i
		for k+1 < len(ids) && ids[k+1] == ids[k]+1 {
			k++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		if k > i {
			fmt.Fprintf(&b, "%d-%d", ids[i], ids[k])
		} else {
			fmt.Fprintf(&b, "%d", ids[i])
		}
		i = k + 1
	}
	return b.String()
}

func clone(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
