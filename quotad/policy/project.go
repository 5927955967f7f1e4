package policy

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

type project struct {
	cfg           Project
	guarQOS       string
	borrowQOS     string
	elasticQOS    string
	weight, usage float64
	// lendWeight is weight as borrowers divide idle GPUs: weight itself, or scaled by the
	// fair-share factor of the project's decayed GPU usage (fairshare.go).
	lendWeight  float64
	usageFactor float64        // that factor; 1 when the lend order does not use it
	inUse       map[string]int // type → GPUs of started jobs in the guaranteed QOS
	inUseTotal  int
	// borrowed counts the borrow QOS and the elastic QOS together: the project's borrowing
	// limits, its fair share and its place in the reclaim order see both.
	borrowed      map[string]int // type → GPUs held or promised in the borrow and elastic QOS
	borrowedTotal int
	elastic       map[string]int // type → the part of borrowed in the elastic QOS
	pending       map[string]int // type → GPUs wanted by pending jobs in the guaranteed QOS
	reserved      map[string]int // type → GPUs of in-quota pending jobs that fit the guarantee
	// claiming: an in-quota job waits for GPUs (a claim Slurm may preempt for); claimPriority
	// is the highest Slurm priority among such jobs.
	claiming      bool
	claimPriority int64
}

// holdingText is what p holds against its guarantee, e.g. "6 GPUs of a 4-GPU guarantee".
func (p *project) holdingText() string {
	return fmt.Sprintf("%d GPUs (%d in quota, %d borrowed) of a %d-GPU guarantee", p.inUseTotal+p.borrowedTotal, p.inUseTotal, p.borrowedTotal, p.cfg.Total())
}

// fits says whether a job needing need would pass the guaranteed QOS's GrpTRES now. An untyped
// request counts against gres/gpu only, as in Slurm.
func (p *project) fits(need map[string]int) bool {
	for t, n := range need {
		if t != "" && p.inUse[t]+n > p.cfg.GPUs[t] {
			return false
		}
	}
	return p.inUseTotal+sum(need) <= p.cfg.Total()
}

// fitsReserved is fits with the GPUs kept for the project's earlier in-quota pending jobs
// counted as in use: those start first.
func (p *project) fitsReserved(need map[string]int) bool {
	for t, n := range need {
		if t != "" && p.inUse[t]+p.reserved[t]+n > p.cfg.GPUs[t] {
			return false
		}
	}
	return p.inUseTotal+sum(p.reserved)+sum(need) <= p.cfg.Total()
}

func (p *project) reserve(gpus map[string]int) {
	if p.reserved == nil {
		p.reserved = map[string]int{}
	}
	addAll(p.reserved, gpus)
}

func (p *project) use(gpus map[string]int) {
	addAll(p.inUse, gpus)
	p.inUseTotal += sum(gpus)
}

func (p *project) borrow(gpus map[string]int) {
	addAll(p.borrowed, gpus)
	p.borrowedTotal += sum(gpus)
}

func (p *project) guaranteeRoom(t string) int {
	if t == "" {
		return p.cfg.Total() - p.inUseTotal
	}
	return min(p.cfg.GPUs[t]-p.inUse[t], p.cfg.Total()-p.inUseTotal)
}

// quotaText is the guarantee position for the types a job asks for, e.g. "a100 3/4 in use".
// The all-types count is shown when it matters: for untyped requests, or when it alone binds.
func (p *project) quotaText(need map[string]int) string {
	var parts []string
	for _, t := range slices.Sorted(maps.Keys(need)) {
		if t != "" {
			parts = append(parts, fmt.Sprintf("%s %d/%d in use", t, p.inUse[t], p.cfg.GPUs[t]))
		}
	}
	if p.totalMatters(need) {
		parts = append(parts, fmt.Sprintf("all types %d/%d in use", p.inUseTotal, p.cfg.Total()))
	}
	return strings.Join(parts, ", ")
}

// quotaUsage says why a job is over quota, e.g. "proj-a uses 4/4 guaranteed a100".
func (p *project) quotaUsage(need map[string]int) string {
	var parts []string
	for _, t := range slices.Sorted(maps.Keys(need)) {
		if t != "" && p.inUse[t]+need[t] > p.cfg.GPUs[t] {
			parts = append(parts, fmt.Sprintf("%d/%d guaranteed %s", p.inUse[t], p.cfg.GPUs[t], t))
		}
	}
	if p.totalMatters(need) {
		parts = append(parts, fmt.Sprintf("%d/%d guaranteed GPUs of all types", p.inUseTotal, p.cfg.Total()))
	}
	return fmt.Sprintf("%s uses %s and the job needs %s more", p.cfg.Account, strings.Join(parts, ", "), gpuList(need))
}

func (p *project) totalMatters(need map[string]int) bool {
	if need[""] > 0 {
		return true
	}
	for t, n := range need {
		if p.inUse[t]+n > p.cfg.GPUs[t] {
			return false // a typed limit binds and says it better
		}
	}
	return p.inUseTotal+sum(need) > p.cfg.Total()
}
