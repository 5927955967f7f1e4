package policy

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// What the tests in package policy_test need of the package's inside.

// Need is the GPUs j counts against its limits, by type.
func (j *Job) Need() map[string]int { return j.need() }

// Tasks is how many pending tasks the record stands for (1 unless it is an array record).
func (j *Job) Tasks() int { return j.tasks() }

// PerNodeGPUs is what j takes on each of its nodes, by type.
func (j *Job) PerNodeGPUs() map[string]int { return j.perNodeGPUs() }

// ForgetLines drops where each value stood in the YAML, so that parsed tables compare equal.
func (c *Config) ForgetLines() { c.lines = nil }

var (
	AddAll         = addAll
	Scaled         = scaled
	Sum            = sum
	NormalizeNames = normalizeNames
)

// Placeable says whether a plan at now would find nodes for j on snap's nodes (limits aside).
func Placeable(cfg *Config, snap *Snapshot, types []string, now time.Time, j *Job) bool {
	l := newLedger(newCycle(cfg, snap, types, now))
	_, ok := l.place(j, j.need(), nil, l.keptForOwners)
	return ok
}

// ReclaimSlots places projects on the reclaim order's scale (reclaimSlots).
func ReclaimSlots(order, projects []string, was map[string]int, space int) map[string]int {
	return reclaimSlots(order, projects, was, space)
}

// FactsWritten says which projects' facts (newProjects) a plan changed: each project's facts as
// a fresh cycle makes them, and as they are after every step ran. A step must write none.
func FactsWritten(cfg *Config, snap *Snapshot, now time.Time) []string {
	before := newLedger(newCycle(cfg, snap, gpuTypes(cfg, snap), now))
	was := map[string]string{}
	for _, p := range before.projects {
		was[p.cfg.Account] = p.factsText()
	}
	_, books := buildPlan(cfg, snap, now)
	if books == nil {
		return nil
	}
	var out []string
	for _, p := range books.projects {
		if now := p.factsText(); now != was[p.cfg.Account] {
			out = append(out, fmt.Sprintf("%s: %s, was %s", p.cfg.Account, now, was[p.cfg.Account]))
		}
	}
	if len(books.projects) != len(before.projects) {
		out = append(out, fmt.Sprintf("%d projects, was %d", len(books.projects), len(before.projects)))
	}
	return out
}

// factsText spells out every fact of p, the table's maps and pointers by value.
func (p *project) factsText() string {
	cfg, err := json.Marshal(p.cfg)
	if err != nil {
		panic(err)
	}
	return fmt.Sprintf("cfg=%s guarQOS=%q borrowQOS=%q elasticQOS=%q weight=%v usage=%v lendWeight=%v usageFactor=%v",
		cfg, p.guarQOS, p.borrowQOS, p.elasticQOS, p.weight, p.usage, p.lendWeight, p.usageFactor)
}

// HandedBooks is what one step did to the books it was handed: those books spelled out
// (booksText) before and after the step ran, and the books it handed on (its result's; Before
// for a step that hands none on).
type HandedBooks struct {
	Step                  string
	Before, After, Result string
}

// StepsBooks runs the steps of buildPlan in its order (a valid table and a fresh snapshot
// assumed) and says, for each, what it did to the books it was handed: a step must leave them
// as they were.
func StepsBooks(cfg *Config, snap *Snapshot, now time.Time) []HandedBooks {
	types := gpuTypes(cfg, snap)
	c := newCycle(cfg, snap, types, now)
	if syncStructure(cfg, snap, types).behind() > 0 {
		c.holdMoves = "held"
	}
	var out []HandedBooks
	step := func(name string, handed *ledger, run func() *ledger) {
		before := handed.booksText()
		result := run()
		h := HandedBooks{Step: name, Before: before, After: handed.booksText(), Result: before}
		if result != nil {
			h.Result = result.booksText()
		}
		out = append(out, h)
	}
	books := newLedger(c)
	var (
		counted  counted
		reserved reserved
		worst    atWorst
		settled  settled
		lent     lent
		order    reclaimOrder
	)
	step("classify", books, func() *ledger { counted = classify(c, books); return counted.books })
	step("reserveInQuota", counted.books, func() *ledger { reserved = reserveInQuota(c, counted); return reserved.books })
	step("countUnreadable", reserved.books, func() *ledger { worst = countUnreadable(c, reserved); return worst.books })
	step("settleBorrowers", worst.books, func() *ledger { settled = settleBorrowers(c, worst); return settled.books })
	step("lend", settled.books, func() *ledger { lent = lend(c, settled); return lent.books })
	step("reclaimOrderOf", lent.books, func() *ledger { order = reclaimOrderOf(lent.books); return nil })
	step("explainRunning", lent.books, func() *ledger { explainRunning(c, lent, order); return nil })
	step("adoptStrays", counted.books, func() *ledger { adoptStrays(c, counted); return nil })
	step("statuses", lent.books, func() *ledger { projectStatuses(c, lent.books); typeStatuses(c, lent.books); return nil })
	return out
}

// booksText spells out everything in l that the steps may change: each project's counts, what
// is lent, the arrays' started tasks, and the idle nodes (each node's free room, as all nodes
// and as each partition lists them, the idle counts, what did not fit).
func (l *ledger) booksText() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d projects counted\n", len(l.counts))
	for _, p := range l.projects {
		n := l.counts[p]
		fmt.Fprintf(&b, "%s: inUse=%v/%d borrowed=%v/%d elastic=%v pending=%v reserved=%v claiming=%v/%d\n", p.cfg.Account,
			n.inUse, n.inUseTotal, n.borrowed, n.borrowedTotal, n.elastic, n.pending, n.reserved, n.claiming, n.claimPriority)
	}
	fmt.Fprintf(&b, "lent=%v arrayStarted=%v\n", l.lent, l.arrayStarted)
	in := l.nodes
	room := func(r *nodeRoom) string {
		return fmt.Sprintf("%s(%v) %v %d CPUs %d MB", r.name, r.parts, r.free.GPUs, r.free.CPUs, r.free.MemoryMB)
	}
	for _, r := range in.all {
		fmt.Fprintf(&b, "node %s\n", room(r))
	}
	for _, part := range slices.Sorted(maps.Keys(in.byPartition)) {
		fmt.Fprintf(&b, "partition %s:", part)
		for _, r := range in.byPartition[part] {
			fmt.Fprintf(&b, " %s;", room(r))
		}
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "idle=%v free=%v partitions=%v unfit=%v\n", in.idle, in.free, in.partitions, in.unfit)
	return b.String()
}
