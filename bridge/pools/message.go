package pools

import (
	"fmt"
	"strings"
)

// suggest names the pools that would run the job, as Route would list them without -p.
func (c *Config) suggest(cands []Candidate, isGPU bool) string {
	var scratch [32]int
	var order []int
	switch {
	case isGPU:
		order = c.rank(cands, scratch[:0], func(cand *Candidate) bool { return cand.Fit == FitOK && cand.Pool.IsGPU() })
	case c.defaultCPU >= 0 && cands[c.defaultCPU].Fit == FitOK:
		order = append(scratch[:0], c.defaultCPU)
	default:
		order = c.rank(cands, scratch[:0], func(cand *Candidate) bool { return cand.Fit == FitOK && !cand.Pool.IsGPU() })
	}
	if len(order) == 0 {
		return c.suggestAny(cands)
	}
	return ". " + suggestion(c, order)
}

// suggestAny names every pool that fits, of either kind.
func (c *Config) suggestAny(cands []Candidate) string {
	var scratch [32]int
	order := c.rank(cands, scratch[:0], func(cand *Candidate) bool { return cand.Fit == FitOK })
	if len(order) == 0 {
		return ". No pool can run it."
	}
	return ". " + suggestion(c, order)
}

func suggestion(c *Config, order []int) string {
	names := make([]string, len(order))
	for k, i := range order {
		names[k] = c.Pools[i].Partition
	}
	list := strings.Join(names, ",")
	return fmt.Sprintf("Pools that can run it: %s (submit with -p %s, or without -p to let slurmbridge choose).", list, list)
}

// reasons lists why each pool (GPU pools only when gpuOnly, CPU pools only otherwise) cannot
// run the job.
func reasons(cands []Candidate, gpuOnly bool) string {
	var b strings.Builder
	for i := range cands {
		cand := &cands[i]
		if cand.Fit == FitOK || cand.Pool.IsGPU() != gpuOnly {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "pool %s: %s", cand.Pool.Name, cand.Reason())
	}
	if b.Len() == 0 {
		if gpuOnly {
			return "no GPU pools are configured"
		}
		return "no CPU pools are configured"
	}
	return b.String()
}

func droppedPhrase(cands []Candidate, dropped []int) string {
	var b strings.Builder
	for k, i := range dropped {
		if k > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "pool %s cannot run this job: %s", cands[i].Pool.Name, cands[i].Reason())
	}
	return b.String()
}

func writePools(b *strings.Builder, list string, n int) {
	if n == 1 {
		b.WriteString("pool ")
	} else {
		b.WriteString("pools ")
	}
	b.WriteString(list)
}
