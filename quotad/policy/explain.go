package policy

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

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
