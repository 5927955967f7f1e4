package policy

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// workerOf names the main job of an elastic worker, e.g. "elastic worker of main job 12", when
// its name says so and that job is queued with the same user and account; else a plain
// "elastic worker" (any user may name a job like a worker).
func (c *cycle) workerOf(j *Job) string {
	if j.ElasticMain != 0 {
		if m, ok := c.mains[j.ElasticMain]; ok && m.User == j.User && m.Account == j.Account {
			return fmt.Sprintf("elastic worker of main job %d", j.ElasticMain)
		}
	}
	return "elastic worker"
}

// journal is what one step says: its explanation of each job it decided (its last, where it
// spoke of a job twice) and its notes. Each step returns its own; no step reads one, and
// BuildPlan merges them (merged) into the plan's.
type journal struct {
	projectOfJob map[*Job]*project // to name a job's project (ledger.projectOfJob)
	explain      map[uint32]*JobExplanation
	notes        []string
}

func newJournal(projectOfJob map[*Job]*project) *journal {
	return &journal{projectOfJob: projectOfJob, explain: map[uint32]*JobExplanation{}}
}

func (log *journal) say(j *Job, code Code, format string, args ...any) {
	x := &JobExplanation{JobID: j.ID, ArrayJobID: j.ArrayJobID, ArrayTasks: j.ArrayTasks, Account: j.Account, User: j.User, State: j.State, Code: code, Text: fmt.Sprintf("job %d ", j.ID) + fmt.Sprintf(format, args...)}
	if p := log.projectOfJob[j]; p != nil {
		x.Project = p.cfg.Account
	}
	log.explain[j.ID] = x
}

func (log *journal) note(text string) { log.notes = append(log.notes, text) }

// merged is the steps' journals as one, in the order given: a job's explanation is the last
// step's that gave one, and the notes are all of theirs.
func merged(steps ...*journal) *journal {
	out := newJournal(nil)
	for _, s := range steps {
		maps.Copy(out.explain, s.explain)
		out.notes = append(out.notes, s.notes...)
	}
	return out
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

func projectStatuses(c *cycle, books *ledger) []ProjectStatus {
	out := make([]ProjectStatus, 0, len(books.projects))
	backingOff := map[*project]int{}
	for i := range c.snap.Jobs {
		if j := &c.snap.Jobs[i]; j.State == StatePending && c.backingOff(j) {
			if p := books.projectOfJob[j]; p != nil {
				backingOff[p]++
			}
		}
	}
	for _, p := range books.projects {
		n := books.counts[p]
		st := ProjectStatus{Account: p.cfg.Account, GuaranteedQOS: p.guarQOS, Weight: p.weight, Usage: p.usage, BackingOff: backingOff[p]}
		types := slices.Clone(c.types)
		if n.inUse[""]+n.borrowed[""]+n.pending[""] > 0 {
			types = append([]string{""}, types...)
		}
		var parts []string
		for _, t := range types {
			row := ProjectTypeStatus{Type: t, Guaranteed: p.cfg.GPUs[t], InUse: n.inUse[t], Borrowed: n.borrowed[t], Elastic: n.elastic[t], Pending: n.pending[t], LendLimit: -1}
			if lim, ok := p.cfg.LendLimitByType[t]; ok {
				row.LendLimit, row.KeptIdle = lim, min(books.keptFor(p, t), books.idleStart[t])
			}
			st.ByType = append(st.ByType, row)
			borrowed := fmt.Sprintf("%d borrowed", row.Borrowed)
			if row.Elastic > 0 {
				borrowed += fmt.Sprintf(" (%d by elastic workers)", row.Elastic)
			}
			lends := ""
			if row.LendLimit >= 0 {
				lends = fmt.Sprintf(", lends at most %d (%d idle kept for its own jobs)", row.LendLimit, row.KeptIdle)
			}
			parts = append(parts, fmt.Sprintf("%s %d/%d guaranteed in use, %s, %d pending%s", typeName(t), row.InUse, row.Guaranteed, borrowed, row.Pending, lends))
		}
		st.Summary = fmt.Sprintf("%s (QOS %s, weight %g): %s; all types %d/%d guaranteed in use, %d borrowed", p.cfg.Account, p.guarQOS, p.weight, strings.Join(parts, "; "), n.inUseTotal, p.cfg.Total(), n.borrowedTotal)
		if st.BackingOff > 0 {
			st.Summary += fmt.Sprintf("; %d job(s) a claim took back wait out their reclaim backoff", st.BackingOff)
		}
		if t := p.cfg.ReclaimPriorityThreshold; t != nil {
			st.Summary += fmt.Sprintf("; its borrowed jobs of priority %d or more run in %s, which only claims of priority %d or more may take", *t, c.cfg.Settings.ProtectedBorrowQOSName(p.cfg.Account), *t)
		}
		out = append(out, st)
	}
	return out
}

func typeStatuses(c *cycle, books *ledger) []TypeStatus {
	out := make([]TypeStatus, 0, len(c.types))
	for _, t := range c.types {
		limit := -1
		if l, ok := c.cfg.LendLimits[t]; ok {
			limit = l
		}
		out = append(out, TypeStatus{Type: t, Total: books.total[t], Idle: books.idleStart[t], Lent: books.lent[t], LendLimit: limit})
	}
	return out
}

func (log *journal) jobExplanations() []JobExplanation {
	out := make([]JobExplanation, 0, len(log.explain))
	for _, x := range log.explain {
		out = append(out, *x)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].JobID < out[b].JobID })
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
