package pools

import (
	"slices"
	"strings"
)

// rank is the ranking step: the candidates that pass keep, ordered by the policy and then so
// that every pool comes before the pools it falls back to. It appends to buf.
func (c *Config) rank(cands []Candidate, buf []int, keep func(*Candidate) bool) []int {
	order := buf
	for i := range cands {
		if !keep(&cands[i]) {
			continue
		}
		// Insertion sort: a handful of pools, stable, no allocation.
		order = append(order, i)
		for k := len(order) - 1; k > 0 && c.before(cands, order[k], order[k-1]); k-- {
			order[k], order[k-1] = order[k-1], order[k]
		}
	}
	return c.fallbackOrder(order)
}

// before is the policy's order; config order breaks ties, so the result never depends on
// anything but the config and the request.
func (c *Config) before(cands []Candidate, i, j int) bool {
	a, b := &cands[i], &cands[j]
	switch c.Policy {
	case Cheapest:
		if a.Cost != b.Cost {
			return a.Cost < b.Cost
		}
		if a.Speed != b.Speed {
			return a.Speed > b.Speed
		}
	case Fastest:
		if a.Speed != b.Speed {
			return a.Speed > b.Speed
		}
		if a.Cost != b.Cost {
			return a.Cost < b.Cost
		}
	default: // DefaultFirst
		if (i == c.defaultGPU) != (j == c.defaultGPU) {
			return i == c.defaultGPU
		}
	}
	return i < j
}

// fallbackOrder reorders a ranked list in place so that no pool comes after one of its
// fallbacks, moving as little as possible: repeatedly take the best-ranked pool that no
// remaining pool falls back to. Validate has ruled out cycles, so there always is one.
func (c *Config) fallbackOrder(order []int) []int {
	for placed := 0; placed < len(order); placed++ {
		for k := placed; k < len(order); k++ {
			if pick := order[k]; !c.fallenBackTo(order[placed:], pick) {
				copy(order[placed+1:k+1], order[placed:k])
				order[placed] = pick
				break
			}
		}
	}
	return order
}

// fallenBackTo reports whether a pool in pools other than j falls back to j.
func (c *Config) fallenBackTo(pools []int, j int) bool {
	for _, i := range pools {
		if i != j && slices.Contains(c.Pools[i].fallback, j) {
			return true
		}
	}
	return false
}

// list is the select step: the ranked pools become the partition list.
func (c *Config) list(d *Decision, order []int) {
	c.setRanks(d.Candidates, order)
	var b strings.Builder
	for k, i := range order {
		if k > 0 {
			b.WriteByte(',')
		}
		b.WriteString(c.Pools[i].Partition)
	}
	d.Partition = b.String()
}

func (c *Config) setRanks(cands []Candidate, order []int) {
	for k, i := range order {
		cands[i].Rank = k + 1
	}
}

// listedFirst puts listed candidates first in their order, the rest after in config order.
func listedFirst(cands []Candidate) {
	key := func(c *Candidate) int {
		if c.Rank == 0 {
			return len(cands) + 1
		}
		return c.Rank
	}
	for k := 1; k < len(cands); k++ {
		for j := k; j > 0 && key(&cands[j]) < key(&cands[j-1]); j-- {
			cands[j], cands[j-1] = cands[j-1], cands[j]
		}
	}
}
