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
	plan.Acting = true
	plan.Unreadable = slices.Clone(snap.Unreadable)
	plan.Notes = append(plan.Notes, unreadableNotes(snap.Unreadable)...)
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
	e.unreadables()
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

type engine struct {
	cfg       *Config
	snap      *Snapshot
	now       time.Time
	types     []string
	reasons   map[string]bool
	holdMoves string // non-empty: plan no moves, and this says why
	// unaccounted are the projects with an unreadable job (the first one's id): their counts
	// are lower bounds. noLends, when set, says why nothing is lent (unreadable.go).
	unaccounted map[*project]uint32
	noLends     string

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
		unaccounted:  map[*project]uint32{},
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
