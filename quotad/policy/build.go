package policy

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/pools"
)

// BuildPlan decides one quotad cycle: a pure function of the quota table, the snapshot and the
// current time. It acts only on a valid table and a snapshot younger than
// Settings.MaxSnapshotAge; otherwise the plan has Acting=false, no actions, and Notes say why.
//
// The steps run in the order written here, and each takes what the step before it handed on:
// the GPU books (a *ledger: the projects' fixed facts, and the counts and idle nodes that change
// as the cycle goes) inside the previous step's result, plus what that step decided. So two
// steps cannot be swapped without the compiler saying so. A step that changes the books changes
// its own copy of them (withOwnBooks), never the books it was handed. Each step's result holds
// what it explained (its journal, said), and the plan keeps, for each job, the last step's
// explanation. Moves are planned only when nothing needs syncing, so they rest on QOS that
// already match the table.
func BuildPlan(cfg *Config, snap *Snapshot, now time.Time) *Plan {
	plan, _ := buildPlan(cfg, snap, now)
	return plan
}

// buildPlan is BuildPlan, and the books it ended with (nil when it did not act), for the tests.
func buildPlan(cfg *Config, snap *Snapshot, now time.Time) (*Plan, *ledger) {
	plan := &Plan{}
	if err := cfg.Validate(); err != nil {
		plan.Notes = append(plan.Notes, "quota table is invalid, nothing is done: "+err.Error())
		return plan, nil
	}
	if note, fresh := freshness(snap.TakenAt, now, cfg.Settings.SnapshotMaxAge()); !fresh {
		plan.Notes = append(plan.Notes, note)
		return plan, nil
	}
	plan.Acting = true
	plan.Unreadable = slices.Clone(snap.Unreadable)
	plan.Notes = append(plan.Notes, unreadableNotes(snap.Unreadable)...)
	types := gpuTypes(cfg, snap)

	c := newCycle(cfg, snap, types, now)
	structure := syncStructure(cfg, snap, types)
	if n := structure.behind(); n > 0 {
		c.holdMoves = fmt.Sprintf("quotad first applies %d QOS/account change(s); jobs move from the next cycle on", n)
		plan.Notes = append(plan.Notes, "no job moves this cycle: "+c.holdMoves)
	}
	books := newLedger(c)
	counted := classify(c, books)
	reserved := reserveInQuota(c, counted)
	worst := countUnreadable(c, reserved)
	settled := settleBorrowers(c, worst)
	lent := lend(c, settled)
	order := reclaimOrderOf(lent.books)
	running := explainRunning(c, lent, order)

	plan.QOS = syncQOS(cfg, structure, order)
	plan.Accounts, plan.Users = structure.accounts, structure.users
	plan.Notes = append(plan.Notes, structure.notes...)
	adopted := adoptStrays(c, counted)
	plan.Moves = slices.Concat(adopted.moves, settled.returns, lent.lends)
	// Each job's explanation is the last of the steps that explained it, in the order they ran:
	// a later step decided more about it.
	said := merged(counted.said, reserved.said, worst.said, settled.said, lent.said, running, adopted.said)
	slices.Sort(said.notes) // the plan must not depend on the snapshot's job order
	plan.Notes = append(plan.Notes, said.notes...)
	plan.Projects = projectStatuses(c, lent.books)
	plan.Types = typeStatuses(c, lent.books)
	plan.Jobs = said.jobExplanations()
	return plan, books
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

// cycle is what one plan reads and never changes: the table, the snapshot, and what is
// derived from them alone.
type cycle struct {
	cfg       *Config
	snap      *Snapshot
	now       time.Time
	types     []string
	reasons   map[string]bool         // the pending reasons that mark a job over quota
	holdMoves string                  // non-empty: plan no moves, and this says why
	tree      *accountTree            // which project covers an account
	mains     map[uint32]*Job         // the main jobs elastic workers name, by id
	needs     map[*Job]map[string]int // each GPU job's need, computed once
	backoffs  map[uint32]backoff      // jobs a claim took back that are not lent yet (backoff.go)
	// unreadable stands for each of the snapshot's unreadable jobs, as a Job with what is known
	// of it, so that the steps and the journal name it as any other job.
	unreadable []Job
}

func newCycle(cfg *Config, snap *Snapshot, types []string, now time.Time) *cycle {
	c := &cycle{cfg: cfg, snap: snap, now: now, types: types, reasons: map[string]bool{},
		tree: newAccountTree(cfg, snap.Accounts), mains: map[uint32]*Job{}, needs: map[*Job]map[string]int{},
		backoffs: reclaimBackoffs(cfg.Settings, snap.Reclaims, now)}
	for _, u := range snap.Unreadable {
		c.unreadable = append(c.unreadable, Job{ID: u.ID, Account: u.Account, User: u.User, QOS: u.QOS, State: u.State})
	}
	for _, r := range cfg.Settings.Reasons() {
		c.reasons[r] = true
	}
	for i := range snap.Jobs {
		j := &snap.Jobs[i]
		c.needs[j] = j.need()
		if m := j.ElasticMain; m != 0 {
			c.mains[m] = nil
		}
	}
	for i := range snap.Jobs {
		if _, named := c.mains[snap.Jobs[i].ID]; named {
			c.mains[snap.Jobs[i].ID] = &snap.Jobs[i]
		}
	}
	for id, m := range c.mains {
		if m == nil {
			delete(c.mains, id)
		}
	}
	return c
}

// ledger is the GPU books of one plan: the projects' facts (read only) and, changing as the
// steps go, what each project holds, borrows and has kept for it (counts), the idle capacity
// not yet promised, and what is lent. It passes from one step to the next inside each step's
// result; a step that changes it works on its own copy (withOwnBooks).
type ledger struct {
	c         *cycle
	projects  []*project // the projects' facts (newProjects), sorted by account
	byAccount map[string]*project
	// counts are what the steps count for each project (projectCounts).
	counts map[*project]*projectCounts
	// borrowOf is every borrow QOS name of the cycle (size tiers and protected QOS too, those the
	// table dropped included) → its project; nil: known not one. Filled whole by newLedger.
	borrowOf  map[string]*project
	elasticOf map[string]*project // elastic QOS name → its project
	byQOS     map[string]*project // guaranteed QOS → its project (each name a pools.QOSKey)
	// projectOfJob is the project each job of the snapshot counts for (the unreadable ones'
	// stand-ins too), nil for none: found once, by jobProject, and read by every step.
	projectOfJob map[*Job]*project

	nodes     *idleNodes     // free capacity not yet promised: each step's own (withOwnBooks)
	total     map[string]int // type → GPUs in the cluster
	idleStart map[string]int // type → idle GPUs in the snapshot
	lent      map[string]int // type → GPUs held or promised in the borrow and elastic QOS
	limited   []*project     // projects with a lending limit: part of their idle guarantee is never lent
	// arrayStarted counts, per throttled array, its tasks that run or were lent (pending in a
	// borrow QOS): each takes one of the array's --array=...%N slots.
	arrayStarted map[uint32]int
	// former are the former borrow QOS (former.go), by pools.QOSKey: their running jobs count
	// as their projects' borrowers. formerNotes say why a QOS that looks like one is not kept.
	former      map[string]*formerQOS
	formerNotes []string
}

func newLedger(c *cycle) *ledger {
	l := &ledger{
		c:            c,
		borrowOf:     map[string]*project{},
		elasticOf:    map[string]*project{},
		byQOS:        map[string]*project{},
		lent:         map[string]int{},
		arrayStarted: map[uint32]int{},
	}
	l.projects, l.byAccount = newProjects(c)
	l.counts = make(map[*project]*projectCounts, len(l.projects))
	for _, p := range l.projects {
		l.counts[p] = newProjectCounts(p)
	}
	for _, pc := range c.cfg.Projects {
		p := l.byAccount[pc.Account]
		if len(pc.LendLimitByType) > 0 {
			l.limited = append(l.limited, p)
		}
		for _, q := range c.cfg.Settings.BorrowQOSNames(pc.Account) {
			l.borrowOf[q] = p
		}
		if pc.ReclaimPriorityThreshold != nil {
			l.borrowOf[c.cfg.Settings.ProtectedBorrowQOSName(pc.Account)] = p
		}
		l.elasticOf[p.elasticQOS] = p
		l.byQOS[p.guarQOS] = p
	}
	// Every other QOS name the cycle may ask lenderOf about, read once here.
	for i := range c.snap.Jobs {
		l.knowBorrowQOS(pools.QOSKey(c.snap.Jobs[i].QOS))
	}
	for _, u := range c.snap.Unreadable {
		l.knowBorrowQOS(pools.QOSKey(u.QOS))
	}
	for _, q := range c.snap.QOS {
		l.knowBorrowQOS(pools.QOSKey(q.Name))
	}
	l.projectOfJob = make(map[*Job]*project, len(c.snap.Jobs)+len(c.unreadable))
	for i := range c.snap.Jobs {
		l.projectOfJob[&c.snap.Jobs[i]] = l.jobProject(&c.snap.Jobs[i])
	}
	for i := range c.unreadable {
		l.projectOfJob[&c.unreadable[i]] = l.jobProject(&c.unreadable[i])
	}
	l.nodes, l.total, l.idleStart = newIdleNodes(c.snap.Nodes)
	l.former, l.formerNotes = formerBorrowQOSOf(l)
	return l
}

// withOwnBooks is l with a copy of everything the steps change: each project's counts, what
// is lent, the arrays' started tasks and the idle nodes (idleNodes.clone), for a step that
// changes them. The step's result holds the copy, and the books it was handed stay as the step
// before left them. The rest (the facts, the QOS and job look-ups, the snapshot's totals) is
// shared, being read only once newLedger made it.
func (l *ledger) withOwnBooks() *ledger {
	next := *l
	next.counts = make(map[*project]*projectCounts, len(l.counts))
	for p, n := range l.counts {
		next.counts[p] = n.clone()
	}
	next.lent = clone(l.lent)
	next.arrayStarted = maps.Clone(l.arrayStarted)
	next.nodes = l.nodes.clone()
	return &next
}

// projectOf is the project whose quota covers account (see accountTree), or nil.
func (l *ledger) projectOf(account string) *project {
	return l.byAccount[l.c.tree.projectOf(account)]
}

// jobProject is the project a job counts for: the owner of the guaranteed, borrow or elastic
// QOS it is in (Slurm counts it in that QOS's limits whatever its account), else the project
// covering its account. newLedger asks it once per job, for projectOfJob.
func (l *ledger) jobProject(j *Job) *project {
	q := pools.QOSKey(j.QOS)
	if p := l.byQOS[q]; p != nil {
		return p
	}
	if p := l.lenderOf(q); p != nil {
		return p
	}
	return l.projectOf(j.Account)
}

// lenderOf is the project whose borrow or elastic QOS qos (a pools.QOSKey) is, or nil: jobs there
// run on borrowed GPUs.
func (l *ledger) lenderOf(qos string) *project {
	if p, known := l.borrowOf[qos]; known {
		return p
	}
	if p := l.elasticOf[qos]; p != nil {
		return p
	}
	return l.droppedBorrowQOSOwner(qos)
}

// knowBorrowQOS records in borrowOf whether qos, not the table's own borrow or elastic QOS, is a
// borrow QOS all the same, so that lenderOf finds it there.
func (l *ledger) knowBorrowQOS(qos string) {
	if _, known := l.borrowOf[qos]; known || l.elasticOf[qos] != nil {
		return
	}
	l.borrowOf[qos] = l.droppedBorrowQOSOwner(qos)
}

// droppedBorrowQOSOwner is the project of a size tier or protected QOS the table dropped
// (keptBorrowQOSOf), which still holds borrowers, or nil.
func (l *ledger) droppedBorrowQOSOwner(qos string) *project {
	if acct, _, ok := l.c.cfg.Settings.borrowTierOf(qos); ok {
		return l.byAccount[acct]
	}
	if acct, ok := l.c.cfg.Settings.protectedBorrowOf(qos); ok {
		return l.byAccount[acct]
	}
	return nil
}

// borrowCharge is one borrower's GPUs as the books count them: a job running, promised, or lent
// in a borrow or elastic QOS.
type borrowCharge struct {
	by      *project       // the borrowing project; nil: a job of no project, counted as lent only
	gpus    map[string]int // by type
	from    *placement     // the idle nodes they are taken off; nil: held already, or none now
	elastic bool           // an elastic worker's: by's elastic part counts them too
}

// charge counts a borrower's GPUs: off the idle nodes, as lent, and as borrowed by its project.
// Every step that counts a borrower counts it here, so the counts cannot drift apart.
func (l *ledger) charge(b borrowCharge) {
	if b.from != nil {
		l.nodes.take(*b.from)
	}
	addAll(l.lent, b.gpus)
	if b.by == nil {
		return
	}
	by := l.counts[b.by]
	by.borrow(b.gpus)
	if b.elastic {
		addAll(by.elastic, b.gpus)
	}
}

// placedOn is pl when place found it (ok), else nil: a borrowCharge's from.
func placedOn(pl placement, ok bool) *placement {
	if ok {
		return &pl
	}
	return nil
}

// isElastic says whether j runs or waits in an elastic QOS: a worker elasticd grew a job by.
func (l *ledger) isElastic(j *Job) bool {
	return l.elasticOf[pools.QOSKey(j.QOS)] != nil
}
