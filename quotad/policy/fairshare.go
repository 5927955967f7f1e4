package policy

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
)

// shares holds, per GPU type, the pool that borrowers divide by weight: what contending
// projects borrow already plus what can still be lent. It is fixed for the plan, since each
// lend moves GPUs from "lendable" to "borrowed" without changing the sum.
type shares struct {
	pool    map[string]float64
	weights map[string]float64 // type → sum of contending projects' weights
	byUsage bool               // weights scaled by decayed usage (Settings.LendOrder)
}

// weighByDecayedUsage sets each project's lendWeight: its weight times Slurm's classic
// fair-share factor 2^(-U/S) of its decayed GPU usage, U its part of all projects' usage and S
// its part of all weights, so a project that used twice its share of the cluster lately
// counts a quarter of its weight. Without that order, or with no usage at all, the weight.
// Part of newProjects: it writes facts.
func weighByDecayedUsage(c *cycle, projects []*project) {
	var used, weights float64
	for _, p := range projects {
		p.lendWeight, p.usageFactor = p.weight, 1
		used += c.snap.DecayedUsage[p.cfg.Account]
		weights += p.weight
	}
	if !c.cfg.Settings.ByDecayedUsage() || used <= 0 || weights <= 0 {
		return
	}
	for _, p := range projects {
		u, s := c.snap.DecayedUsage[p.cfg.Account]/used, p.weight/weights
		p.usageFactor = math.Exp2(-u / s)
		p.lendWeight = p.weight * p.usageFactor
	}
}

// fairShares divides what can be lent among the projects with candidates (queues) or
// borrowers.
func (l *ledger) fairShares(queues []*lendQueue, kept keptIdle) shares {
	s := shares{pool: map[string]float64{}, weights: map[string]float64{}, byUsage: l.c.cfg.Settings.ByDecayedUsage()}
	lendable := map[string]int{}
	for _, t := range l.c.types {
		lendable[t] = max(0, min(l.nodes.lendable(t), l.lendRoom(t, kept)))
		s.pool[t] = float64(lendable[t])
	}
	for _, q := range queues {
		p := q.p
		wants := map[string]bool{}
		for _, j := range q.candidates {
			for t := range l.c.needs[j] {
				if t != "" {
					wants[t] = true
					continue
				}
				for _, u := range l.c.types { // an untyped job contends for every type
					wants[u] = true
				}
			}
		}
		for t, n := range l.counts[p].borrowed {
			if n > 0 {
				wants[t] = true
			}
		}
		for _, t := range slices.Sorted(maps.Keys(wants)) {
			s.pool[t] += float64(l.counts[p].borrowed[t])
			s.weights[t] += p.lendWeight
		}
	}
	return s
}

// deficit is how far a project is below its weighted fair share of the types in gpus; for a
// job of several types, the smallest (the type where it is best served decides).
func (s shares) deficit(n *projectCounts, gpus map[string]int) float64 {
	first, d := true, 0.0
	for _, t := range slices.Sorted(maps.Keys(gpus)) {
		v := s.fair(n.of, t) - float64(n.borrowed[t])
		if first || v < d {
			first, d = false, v
		}
	}
	return d
}

func (s shares) fair(p *project, t string) float64 {
	if s.weights[t] == 0 {
		return 0
	}
	return s.pool[t] * p.lendWeight / s.weights[t]
}

func (s shares) describe(p *project, gpus map[string]int, deficit float64) string {
	var parts []string
	for _, t := range slices.Sorted(maps.Keys(gpus)) {
		parts = append(parts, fmt.Sprintf("fair share %.1f of %.0f %s for borrowers", s.fair(p, t), s.pool[t], t))
	}
	by := ""
	if s.byUsage {
		by = fmt.Sprintf(" (weight %g × %.2f for its decayed GPU use)", p.weight, p.usageFactor)
	}
	return fmt.Sprintf("%s%s; deficit was %.1f, the largest", strings.Join(parts, ", "), by, deficit)
}
