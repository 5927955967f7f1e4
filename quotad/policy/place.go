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
func (l *ledger) place(j *Job, need map[string]int, p *project) (placement, bool) {
	var pl placement
	typed := map[string]int{}
	for t, n := range need {
		if t != "" {
			typed[t] = n
		}
	}
	anyN := need[""]
	if p != nil {
		pl.problems = l.limitProblems(p, typed, sum(need))
		if anyN > 0 && !slices.ContainsFunc(l.c.types, func(t string) bool {
			return min(l.borrowRoom(p, t)-typed[t], l.lendRoom(t)-typed[t]) >= anyN
		}) {
			pl.problems = append(pl.problems, problem{CodeNoTypeRoom, fmt.Sprintf("no GPU type has borrowing and lending room for %d more GPUs of any type", anyN)})
		}
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
					room = min(room, l.borrowRoom(p, t)-typed[t], l.lendRoom(t)-typed[t])
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
		if len(pl.problems) == 0 {
			return placement{partition: part, gpus: gpus, nodes: nodes, perNode: sh.resolve(anyType), shape: sh}, true
		}
		return pl, false
	}
	pl.problems = append(pl.problems, problem{CodeNoIdleGPUs, l.idleText(need, sh, parts)})
	return pl, false
}

// limitProblems lists the borrowing and lending limits that typed GPUs gpus, total GPUs in
// all, would break.
func (l *ledger) limitProblems(p *project, gpus map[string]int, total int) []problem {
	var out []problem
	for _, t := range slices.Sorted(maps.Keys(gpus)) {
		n := gpus[t]
		if t == "" {
			continue
		}
		if lim, ok := p.cfg.BorrowLimitByType[t]; ok && p.borrowed[t]+n > lim {
			out = append(out, problem{CodeBorrowLimit, fmt.Sprintf("borrowing limit of %s reached: %s borrows %d %s, limit %d", t, p.cfg.Account, p.borrowed[t], t, lim)})
		}
		if lim, ok := l.c.cfg.LendLimits[t]; ok && l.lent[t]+n > lim {
			out = append(out, problem{CodeLendLimit, fmt.Sprintf("lending limit of %s reached: %d/%d %s lent", t, l.lent[t], lim, t)})
		}
	}
	if lim := p.cfg.BorrowLimit; lim != nil && p.borrowedTotal+total > *lim {
		out = append(out, problem{CodeBorrowLimit, fmt.Sprintf("borrowing limit reached: %s borrows %d GPUs, limit %d", p.cfg.Account, p.borrowedTotal, *lim)})
	}
	return out
}

// borrowRoom is how many more GPUs of type t project p may borrow; lendRoom how many more of
// t may be lent at all.
func (l *ledger) borrowRoom(p *project, t string) int {
	room := int(^uint(0) >> 1)
	if lim, ok := p.cfg.BorrowLimitByType[t]; ok {
		room = lim - p.borrowed[t]
	}
	if lim := p.cfg.BorrowLimit; lim != nil {
		room = min(room, *lim-p.borrowedTotal)
	}
	return room
}

func (l *ledger) lendRoom(t string) int {
	if lim, ok := l.c.cfg.LendLimits[t]; ok {
		return lim - l.lent[t]
	}
	return int(^uint(0) >> 1)
}

// resolved is the GPUs a job counts against limits: its placement when there is one, else its
// request as it stands.
func resolved(pl placement, ok bool, need map[string]int) map[string]int {
	if ok {
		return pl.gpus
	}
	return need
}
