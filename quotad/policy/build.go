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
// Steps: sync (QOS and accounts to the table); settle pending borrowers (return them when
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
	plan.Acting = true
	types := gpuTypes(cfg, snap)
	var notes []string
	plan.QOS, plan.Accounts, notes = syncPlan(cfg, snap, types)
	plan.Notes = append(plan.Notes, notes...)

	e := newEngine(cfg, snap, types, now)
	if n := len(plan.QOS) + len(plan.Accounts); n > 0 {
		e.holdMoves = fmt.Sprintf("quotad first applies %d QOS/account change(s); jobs move from the next cycle on", n)
		plan.Notes = append(plan.Notes, "no job moves this cycle: "+e.holdMoves)
	}
	e.classify()
	e.reserveInQuota()
	e.settleBorrowers()
	e.lend()
	e.explainRunning()

	plan.Moves = e.moves
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

// waitingForNodes are pending reasons of jobs that pass their limits and wait for GPUs: Slurm
// will start them, preempting borrowers if needed, so idle GPUs they can use are not lent.
var waitingForNodes = map[string]bool{"Resources": true, "Priority": true, "None": true, "": true}

type engine struct {
	cfg       *Config
	snap      *Snapshot
	now       time.Time
	borrowQOS string
	types     []string
	reasons   map[string]bool
	holdMoves string // non-empty: plan no moves, and this says why

	projects  []*project // sorted by account
	byAccount map[string]*project

	partitions []string                  // sorted, for jobs that list none
	idle       map[string]map[string]int // partition → type → idle GPUs not yet promised
	total      map[string]int            // type → GPUs in the cluster
	idleStart  map[string]int            // type → idle GPUs in the snapshot
	lent       map[string]int            // type → GPUs held or promised in the borrow QOS

	needs          map[*Job]map[string]int // each job's need, computed once
	inQuotaPending []*Job
	borrowPending  []*Job
	borrowRunning  []*Job
	moves          []JobMove
	explain        map[uint32]*JobExplanation
	arrays         map[*Job]*arrayLends // what lend decided for the tasks of array records
}

// arrayLends collects the lend decisions on one array record's tasks, for its explanation.
type arrayLends struct {
	lent     []uint32
	lentWhy  string // the first lent task's explanation
	waitWhy  string // why the tasks not lent wait; "" when every task was lent
	waitDone bool
}

type project struct {
	cfg           Project
	guarQOS       string
	weight, usage float64
	inUse         map[string]int // type → GPUs of started jobs in the guaranteed QOS
	inUseTotal    int
	borrowed      map[string]int // type → GPUs held or promised in the borrow QOS
	borrowedTotal int
	pending       map[string]int // type → GPUs wanted by pending jobs in the guaranteed QOS
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
		cfg:       cfg,
		snap:      snap,
		now:       now,
		borrowQOS: cfg.Settings.BorrowQOSName(),
		types:     types,
		reasons:   map[string]bool{},
		byAccount: map[string]*project{},
		idle:      map[string]map[string]int{},
		total:     map[string]int{},
		idleStart: map[string]int{},
		lent:      map[string]int{},
		explain:   map[uint32]*JobExplanation{},
		needs:     map[*Job]map[string]int{},
		arrays:    map[*Job]*arrayLends{},
	}
	for _, r := range cfg.Settings.Reasons() {
		e.reasons[r] = true
	}
	for _, pc := range cfg.Projects {
		p := &project{
			cfg:      pc,
			guarQOS:  cfg.Settings.GuaranteedQOSName(pc.Account),
			weight:   pc.ShareWeight(),
			usage:    snap.Usage[pc.Account],
			inUse:    map[string]int{},
			borrowed: map[string]int{},
			pending:  map[string]int{},
		}
		e.projects = append(e.projects, p)
		e.byAccount[pc.Account] = p
	}
	sort.Slice(e.projects, func(a, b int) bool { return e.projects[a].cfg.Account < e.projects[b].cfg.Account })
	for _, g := range snap.GPUs {
		if e.idle[g.Partition] == nil {
			e.idle[g.Partition] = map[string]int{}
			e.partitions = append(e.partitions, g.Partition)
		}
		e.idle[g.Partition][g.Type] += max(g.Idle, 0)
		e.total[g.Type] += g.Total
		e.idleStart[g.Type] += max(g.Idle, 0)
	}
	sort.Strings(e.partitions)
	return e
}

func (e *engine) say(j *Job, format string, args ...any) {
	e.explain[j.ID] = &JobExplanation{JobID: j.ID, Account: j.Account, Text: fmt.Sprintf("job %d ", j.ID) + fmt.Sprintf(format, args...)}
}

// classify counts what every GPU job holds or wants and sorts pending jobs into the lists the
// later steps work on.
func (e *engine) classify() {
	for i := range e.snap.Jobs {
		j := &e.snap.Jobs[i]
		need := j.need()
		e.needs[j] = need
		if len(need) == 0 {
			continue // quotas are about GPUs only
		}
		p := e.byAccount[j.Account]
		qos := strings.ToLower(j.QOS)
		switch {
		case j.State.holdsGPUs():
			held := j.held()
			switch {
			case qos == e.borrowQOS:
				addAll(e.lent, held)
				if p != nil {
					p.borrow(held)
				}
				e.borrowRunning = append(e.borrowRunning, j)
			case p != nil && qos == p.guarQOS:
				for t, n := range held {
					p.inUse[t] += n
					p.inUseTotal += n
				}
				e.say(j, "runs within %s's guarantee in %s (%s): it is never reclaimed", p.cfg.Account, p.guarQOS, gpuList(held))
			case p == nil:
				e.say(j, "runs in account %s, which has no quota: quotad does not manage it", j.Account)
			default:
				e.say(j, "runs in QOS %s, not in %s's guaranteed QOS %s: quotad does not manage it, and the account's QOS list is being restricted to %s and %s", j.QOS, p.cfg.Account, p.guarQOS, p.guarQOS, e.borrowQOS)
			}
		case j.State == StatePending:
			switch {
			case qos == e.borrowQOS:
				e.borrowPending = append(e.borrowPending, j)
			case p != nil && qos == p.guarQOS:
				addAll(p.pending, scaled(need, j.tasks()))
				if e.reasons[j.Reason] {
					p.candidates = append(p.candidates, j)
				} else {
					e.inQuotaPending = append(e.inQuotaPending, j)
				}
			case p == nil:
				e.say(j, "waits in account %s, which has no quota: quotad does not manage it", j.Account)
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
		p := e.byAccount[j.Account]
		need := e.needs[j]
		base := fmt.Sprintf("waits in %s's guarantee (%s; reason %s): Slurm starts it when GPUs are free, preempting borrowers if it must", p.cfg.Account, p.quotaText(need), j.Reason)
		if !waitingForNodes[j.Reason] {
			e.say(j, "%s", base)
			continue
		}
		kept, keptTasks, lastPart := map[string]int{}, 0, ""
		for range j.tasks() {
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
		e.say(j, "(array %d, %d pending tasks in %s): %s", j.ArrayJobID, j.tasks(), e.borrowQOS, strings.Join(parts, "; "))
	}
}

// settleTask decides task i of a pending borrower and says how (outcome) and why (text).
func (e *engine) settleTask(j *Job, i int) (outcome, text string) {
	need := e.needs[j]
	p := e.byAccount[j.Account]
	if p == nil {
		// It still takes lendable GPUs when it starts, so count it.
		pl, ok := e.place(j, need, nil)
		if ok {
			e.take(pl)
		}
		addAll(e.lent, resolved(pl, ok, need))
		return "no quota", fmt.Sprintf("waits in %s, but account %s has no quota: quotad cannot return it", e.borrowQOS, j.Account)
	}
	switch {
	case !j.Requeue:
		return "return", e.returnJob(j, i, p, need, "it has Requeue=0 (--no-requeue): on reclaim it would be cancelled, not requeued, so it must not borrow")
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
		return "promised", fmt.Sprintf("was lent and waits in %s to start: %s is over its guarantee (%s); %s idle in partition %s are promised to it", e.borrowQOS, p.cfg.Account, p.quotaText(need), gpuList(gpus), pl.partition)
	}
	return "waits", fmt.Sprintf("was lent and waits in %s for GPUs: %s is over its guarantee (%s); no idle GPUs it can use now", e.borrowQOS, p.cfg.Account, p.quotaText(need))
}

// returnJob plans the move of task i of j back to its guaranteed QOS and says so.
func (e *engine) returnJob(j *Job, i int, p *project, need map[string]int, why string) string {
	if e.holdMoves != "" {
		return fmt.Sprintf("waits in %s and will return to %s: %s; not this cycle: %s", e.borrowQOS, p.guarQOS, why, e.holdMoves)
	}
	arrayJob, task := j.target(i)
	e.moves = append(e.moves, JobMove{Kind: Return, JobID: j.ID, ArrayJobID: arrayJob, Task: task, Account: j.Account, From: j.QOS, To: p.guarQOS, GPUs: need, Reason: why})
	return fmt.Sprintf("returns from %s to %s: %s", e.borrowQOS, p.guarQOS, why)
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
			case p.fits(need):
				e.say(j, "waits with reason %s, but %s's guarantee has room (%s): Slurm should start it in %s; not lent", j.Reason, p.cfg.Account, p.quotaText(need), p.guarQOS)
			case !j.Requeue:
				e.say(j, "waits for %s's guarantee: %s; it is never lent because it has Requeue=0 (--no-requeue) and would be cancelled, not requeued, when its GPUs are reclaimed", p.cfg.Account, p.quotaUsage(need))
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
		if e.snap.WholeArrays && best.candidates[best.next].tasks() > 1 && best.nextTask+1 < best.candidates[best.next].tasks() {
			whole = best
		}
		j, task := best.candidates[best.next], best.nextTask
		if best.nextTask++; best.nextTask == j.tasks() {
			best.next, best.nextTask = best.next+1, 0
		}
		e.take(bestPl)
		addAll(e.lent, bestPl.gpus)
		best.borrow(bestPl.gpus)
		e.invalidateHeads(best, bestPl.gpus)
		why := fmt.Sprintf("%s; borrows %s idle in partition %s (%s)", best.quotaUsage(e.needs[j]), gpuList(bestPl.gpus), bestPl.partition, share.describe(best, bestPl.gpus, bestDeficit))
		arrayJob, taskID := j.target(task)
		e.moves = append(e.moves, JobMove{Kind: Lend, JobID: j.ID, ArrayJobID: arrayJob, Task: taskID, Account: j.Account, From: j.QOS, To: e.borrowQOS, GPUs: bestPl.gpus, Reason: why})
		text := fmt.Sprintf("(moves from %s to %s): %s; %s", j.QOS, e.borrowQOS, why, e.reclaimTerms())
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
	if a.waitWhy != "" {
		parts = append(parts, fmt.Sprintf("the other %d tasks wait: %s", j.tasks()-len(a.lent), a.waitWhy))
	}
	e.say(j, "(array %d, %d pending tasks): %s", j.ArrayJobID, j.tasks(), strings.Join(parts, "; "))
}

// invalidateHeads forgets the cached head placements a lend of gpus by lender may have made
// wrong: the lender's own (its limits and its head changed), and those drawing on the same
// GPU types or on any type.
func (e *engine) invalidateHeads(lender *project, gpus map[string]int) {
	for _, p := range e.projects {
		if !p.headKnown {
			continue
		}
		if p == lender || p.headAny {
			p.headKnown = false
			continue
		}
		for t := range p.head.gpus {
			if gpus[t] > 0 {
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
		if ok && e.snap.WholeArrays && j.tasks() > 1 && p.nextTask == 0 {
			// Every task must fit at once, or none is lent (see Snapshot.WholeArrays).
			if all, fits := e.place(j, scaled(need, j.tasks()), p); !fits {
				pl, ok = all, false
				pl.problems = append(pl.problems, fmt.Sprintf("on this Slurm release a task lent alone does not start while the rest of its array waits, so the array's %d pending tasks are lent together or not at all", j.tasks()))
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
	gpus      map[string]int
	problems  []string // why there is no placement
}

// place finds the first of the job's partitions with enough idle GPUs. With a borrower p it
// also applies p's borrowing limits and the lending limits, and an untyped request takes the
// type with the most room. Multi-node jobs are checked against a partition's total idle GPUs:
// per-node fit is Slurm's to judge.
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
	parts := j.Partitions
	if len(parts) == 0 {
		parts = e.partitions
	}
	for _, part := range parts {
		idle := e.idle[part]
		fits := true
		for t, n := range typed {
			if idle[t] < n {
				fits = false
				break
			}
		}
		if !fits {
			continue
		}
		gpus := clone(typed)
		if anyN > 0 {
			bestType, bestRoom := "", 0
			for _, t := range e.types {
				room := idle[t] - typed[t]
				if p != nil {
					room = min(room, e.borrowRoom(p, t)-typed[t], e.lendRoom(t)-typed[t])
				}
				if room >= anyN && room > bestRoom {
					bestType, bestRoom = t, room
				}
			}
			if bestType == "" {
				continue
			}
			gpus[bestType] += anyN
		}
		if len(pl.problems) == 0 {
			return placement{partition: part, gpus: gpus}, true
		}
		return pl, false
	}
	pl.problems = append(pl.problems, e.idleText(need, parts))
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

func (e *engine) idleText(need map[string]int, parts []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "not enough idle GPUs for %s:", gpuList(need))
	for i, part := range parts {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, " %s has", part)
		idle := e.idle[part]
		shown := 0
		for _, t := range e.types {
			if _, asked := need[t]; asked || need[""] > 0 {
				if shown > 0 {
					b.WriteByte('/')
				}
				fmt.Fprintf(&b, " %d %s", idle[t], t)
				shown++
			}
		}
		if shown == 0 {
			b.WriteString(" none")
		}
	}
	return b.String()
}

func (e *engine) take(pl placement) {
	for t, n := range pl.gpus {
		e.idle[pl.partition][t] -= n
	}
}

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
		idle := 0
		for _, part := range e.partitions {
			idle += e.idle[part][t]
		}
		lendable[t] = max(0, min(idle, e.lendRoom(t)))
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

// reclaimTerms says how a borrower loses its GPUs: by Slurm's preemption, never by quotad.
func (e *engine) reclaimTerms() string {
	s := e.cfg.Settings
	return fmt.Sprintf("a guaranteed job may reclaim its GPUs after it has run %s: Slurm requeues it after a %s grace period (SIGTERM first)", s.PreemptExemptTime, s.GraceTime)
}

// explainRunning says for each started borrower whether and by whom it can be reclaimed now.
func (e *engine) explainRunning() {
	// Who could reclaim a type: the projects with unused guarantee of it, found once.
	reclaimers := map[string][]string{}
	for _, t := range append([]string{""}, e.types...) {
		for _, p := range e.projects {
			if p.guaranteeRoom(t) > 0 {
				reclaimers[t] = append(reclaimers[t], p.cfg.Account)
			}
		}
	}
	for _, j := range e.borrowRunning {
		held := j.held()
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
		e.say(j, "runs borrowed in %s (%s): %s; %s; reclaim requeues it after a %s grace period, it is never cancelled", e.borrowQOS, gpuList(held), when, who, e.cfg.Settings.GraceTime)
	}
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
			row := ProjectTypeStatus{Type: t, Guaranteed: p.cfg.GPUs[t], InUse: p.inUse[t], Borrowed: p.borrowed[t], Pending: p.pending[t]}
			st.ByType = append(st.ByType, row)
			parts = append(parts, fmt.Sprintf("%s %d/%d guaranteed in use, %d borrowed, %d pending", typeName(t), row.InUse, row.Guaranteed, row.Borrowed, row.Pending))
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
