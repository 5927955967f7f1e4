package policy

import (
	"encoding/json"
	"fmt"
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
