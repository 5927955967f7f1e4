package policy

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// placement is where a job's GPUs would come from; untyped requests resolved to one type.
type placement struct {
	partition string
	gpus      map[string]int // whole job, by type
	nodes     []*nodeRoom    // the nodes it would start on
	perNode   map[string]int // GPUs taken on each of them, by type
	shape     shape
	problems  []problem // why there is no placement
}

// problem is one thing that stops a job from borrowing now: its kind and its words.
type problem struct {
	code Code
	text string
}

// joinProblems is the words of problems, joined.
func joinProblems(ps []problem) string {
	texts := make([]string, len(ps))
	for i, pr := range ps {
		texts[i] = pr.text
	}
	return strings.Join(texts, "; ")
}

// place finds the first of the job's partitions with enough nodes where a job of its shape
// (GPUs, CPUs and memory per node) can start now. With a borrower p it also applies p's
// borrowing limits and the lending limits, and an untyped request takes the type with the
// most room.
func (l *ledger) place(j *Job, need map[string]int, p *project, kept keptIdle) (placement, bool) {
	var pl placement
	typed := map[string]int{}
	for t, n := range need {
		if t != "" {
			typed[t] = n
		}
	}
	anyN := need[""]
	if p != nil {
		pl.problems = l.limitProblems(p, typed, sum(need), kept)
		if anyN > 0 && !slices.ContainsFunc(l.c.types, func(t string) bool {
			return t != "" && min(l.borrowRoom(p, t)-typed[t], l.lendRoom(t, kept)-typed[t]) >= anyN
		}) {
			pl.problems = append(pl.problems, problem{CodeNoTypeRoom, fmt.Sprintf("no GPU type has borrowing and lending room for %d more GPUs of any type", anyN)})
		}
	}
	if len(pl.problems) > 0 {
		return pl, false // a limit holds it: no need to look for nodes
	}
	sh := jobShape(j)
	parts := j.Partitions
	if len(parts) == 0 {
		parts = l.nodes.partitions
	}
	for _, part := range parts {
		anyType, nodes := "", []*nodeRoom(nil)
		if anyN == 0 {
			nodes = l.nodes.fit(part, sh, sh.resolve(""))
		} else {
			bestRoom := 0
			for _, t := range l.c.types {
				room := l.nodes.idleIn(part, t) - typed[t]
				if p != nil {
					room = min(room, l.borrowRoom(p, t)-typed[t], l.lendRoom(t, kept)-typed[t])
				}
				if room < anyN || room <= bestRoom {
					continue
				}
				if got := l.nodes.fit(part, sh, sh.resolve(t)); got != nil {
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
		return placement{partition: part, gpus: gpus, nodes: nodes, perNode: sh.resolve(anyType), shape: sh}, true
	}
	if p != nil && anyN > 0 {
		// Idle GPUs of a type may be there and kept by lending limits: say so, not only that
		// no node has room.
		for _, t := range l.c.types {
			if k := kept(t); k > 0 && l.nodes.free[t]-typed[t] >= anyN && l.nodes.free[t]-k-typed[t] < anyN {
				pl.problems = append(pl.problems, l.keptProblem(t, k))
			}
		}
	}
	pl.problems = append(pl.problems, problem{CodeNoIdleGPUs, l.idleText(need, sh, parts)})
	return pl, false
}

// limitProblems lists the borrowing and lending limits that typed GPUs gpus, total GPUs in
// all, would break.
func (l *ledger) limitProblems(p *project, gpus map[string]int, total int, kept keptIdle) []problem {
	var out []problem
	for _, t := range slices.Sorted(maps.Keys(gpus)) {
		n := gpus[t]
		if t == "" {
			continue
		}
		if lim, ok := p.cfg.BorrowLimitByType[t]; ok && l.counts[p].borrowed[t]+n > lim {
			out = append(out, problem{CodeBorrowLimit, fmt.Sprintf("borrowing limit of %s reached: %s borrows %d %s, limit %d", t, p.cfg.Account, l.counts[p].borrowed[t], t, lim)})
		}
		if lim, ok := l.c.cfg.LendLimits[t]; ok && l.lent[t]+n > lim {
			out = append(out, problem{CodeLendLimit, fmt.Sprintf("lending limit of %s reached: %d/%d %s lent", t, l.lent[t], lim, t)})
		}
		if k := kept(t); k > 0 && l.nodes.free[t]-k < n {
			out = append(out, l.keptProblem(t, k))
		}
	}
	if lim := p.cfg.BorrowLimit; lim != nil && l.counts[p].borrowedTotal+total > *lim {
		out = append(out, problem{CodeBorrowLimit, fmt.Sprintf("borrowing limit reached: %s borrows %d GPUs, limit %d", p.cfg.Account, l.counts[p].borrowedTotal, *lim)})
	}
	return out
}

// borrowRoom is how many more GPUs of type t project p may borrow; lendRoom how many more of
// t may be lent at all.
func (l *ledger) borrowRoom(p *project, t string) int {
	room := int(^uint(0) >> 1)
	if lim, ok := p.cfg.BorrowLimitByType[t]; ok {
		room = lim - l.counts[p].borrowed[t]
	}
	if lim := p.cfg.BorrowLimit; lim != nil {
		room = min(room, *lim-l.counts[p].borrowedTotal)
	}
	return room
}

func (l *ledger) lendRoom(t string, kept keptIdle) int {
	room := int(^uint(0) >> 1)
	if lim, ok := l.c.cfg.LendLimits[t]; ok {
		room = lim - l.lent[t]
	}
	if k := kept(t); k > 0 {
		room = min(room, l.nodes.free[t]-k)
	}
	return room
}

// keptForOwners is how many idle GPUs of type t the projects' lending limits keep for their
// own jobs: of each limited guarantee, the part never lent, less what the project runs in it
// and the idle GPUs already kept for its in-quota pending jobs. The GPUs are counted, not
// placed: a borrower may start on any idle GPU of the type as long as that many stay idle, as
// Kueue counts a lendingLimit.
func (l *ledger) keptForOwners(t string) int {
	kept := 0
	for _, p := range l.limited {
		kept += l.keptFor(p, t)
	}
	return kept
}

// keptIdle is keptForOwners by type as a step reads it: l.keptForOwners itself while the
// guarantees' counts change, or lend's memo of it (lends change neither what projects run in
// their guarantee nor what is kept for their in-quota jobs, which it counts).
type keptIdle func(t string) int

func (l *ledger) keptFor(p *project, t string) int {
	n := l.counts[p]
	return max(0, p.cfg.KeptFromLending(t)-n.inUse[t]-n.reserved[t])
}

// keptProblem says that lending limits keep kept idle GPUs of type t, naming whose, e.g.
// "proj-a keeps 6 of its 8 a100 (lends at most 2)".
func (l *ledger) keptProblem(t string, kept int) problem {
	var parts []string
	for _, p := range l.limited {
		if n := l.keptFor(p, t); n > 0 {
			parts = append(parts, fmt.Sprintf("%s keeps %d of its %d %s (lends at most %d)", p.cfg.Account, n, p.cfg.GPUs[t], t, p.cfg.LendLimitByType[t]))
		}
	}
	return problem{CodeOwnersKeep, fmt.Sprintf("lending limits keep %d of the %d idle %s for their owners' own jobs (%s)", kept, l.nodes.free[t], t, strings.Join(parts, ", "))}
}

// resolved is the GPUs a job counts against limits: its placement when there is one, else its
// request as it stands.
func resolved(pl placement, ok bool, need map[string]int) map[string]int {
	if ok {
		return pl.gpus
	}
	return need
}
