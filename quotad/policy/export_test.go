package policy

import "time"

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
