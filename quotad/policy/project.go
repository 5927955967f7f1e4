package policy

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// project is one project's facts for a cycle: what the table and the snapshot say of it, set
// by newProjects and never written after (TestFactsStayFixed checks). What the steps count for
// it (GPUs in use, borrowed, pending, kept) is its projectCounts.
type project struct {
	cfg           Project
	guarQOS       string
	borrowQOS     string
	elasticQOS    string
	weight, usage float64
	// lendWeight is weight as borrowers divide idle GPUs: weight itself, or scaled by the
	// fair-share factor of the project's decayed GPU usage (fairshare.go).
	lendWeight  float64
	usageFactor float64 // that factor; 1 when the lend order does not use it
}

// projectCounts is what the steps count for one project as the cycle goes: GPUs its jobs hold,
// borrow, want and have kept for them.
type projectCounts struct {
	of         *project
	inUse      map[string]int // type → GPUs of started jobs in the guaranteed QOS
	inUseTotal int
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

// clone is a copy of pc that shares nothing with it.
func (pc *projectCounts) clone() *projectCounts {
	out := *pc
	out.inUse, out.borrowed, out.elastic, out.pending = clone(pc.inUse), clone(pc.borrowed), clone(pc.elastic), clone(pc.pending)
	if pc.reserved != nil {
		out.reserved = clone(pc.reserved)
	}
	return &out
}

// newProjects makes the facts of the table's projects, sorted by account, and finds them by
// account: the one place facts are written.
func newProjects(c *cycle) ([]*project, map[string]*project) {
	projects, byAccount := make([]*project, 0, len(c.cfg.Projects)), map[string]*project{}
	for _, pc := range c.cfg.Projects {
		p := &project{
			cfg:        pc,
			guarQOS:    c.cfg.Settings.GuaranteedQOSName(pc.Account),
			borrowQOS:  c.cfg.Settings.BorrowQOSName(pc.Account),
			elasticQOS: c.cfg.Settings.ElasticQOSName(pc.Account),
			weight:     pc.ShareWeight(),
		}
		projects = append(projects, p)
		byAccount[pc.Account] = p
	}
	sort.Slice(projects, func(a, b int) bool { return projects[a].cfg.Account < projects[b].cfg.Account })
	// A project's usage is its whole subtree's, as its quota covers the subtree; summed in
	// account order, so that the same snapshot gives the same sum to the last bit.
	for _, acct := range slices.Sorted(maps.Keys(c.snap.Usage)) {
		if p := byAccount[c.tree.projectOf(acct)]; p != nil {
			p.usage += c.snap.Usage[acct]
		}
	}
	weighByDecayedUsage(c, projects)
	return projects, byAccount
}

func newProjectCounts(p *project) *projectCounts {
	return &projectCounts{of: p, inUse: map[string]int{}, borrowed: map[string]int{}, elastic: map[string]int{}, pending: map[string]int{}}
}

// holdingText is what p holds against its guarantee, e.g. "6 GPUs of a 4-GPU guarantee".
func (pc *projectCounts) holdingText() string {
	return fmt.Sprintf("%d GPUs (%d in quota, %d borrowed) of a %d-GPU guarantee", pc.inUseTotal+pc.borrowedTotal, pc.inUseTotal, pc.borrowedTotal, pc.of.cfg.Total())
}

// fits says whether a job needing need would pass the guaranteed QOS's GrpTRES now. An untyped
// request counts against gres/gpu only, as in Slurm.
func (pc *projectCounts) fits(need map[string]int) bool {
	for t, n := range need {
		if t != "" && pc.inUse[t]+n > pc.of.cfg.GPUs[t] {
			return false
		}
	}
	return pc.inUseTotal+sum(need) <= pc.of.cfg.Total()
}

// fitsReserved is fits with the GPUs kept for the project's earlier in-quota pending jobs
// counted as in use: those start first.
func (pc *projectCounts) fitsReserved(need map[string]int) bool {
	for t, n := range need {
		if t != "" && pc.inUse[t]+pc.reserved[t]+n > pc.of.cfg.GPUs[t] {
			return false
		}
	}
	return pc.inUseTotal+sum(pc.reserved)+sum(need) <= pc.of.cfg.Total()
}

func (pc *projectCounts) reserve(gpus map[string]int) {
	if pc.reserved == nil {
		pc.reserved = map[string]int{}
	}
	addAll(pc.reserved, gpus)
}

func (pc *projectCounts) use(gpus map[string]int) {
	addAll(pc.inUse, gpus)
	pc.inUseTotal += sum(gpus)
}

func (pc *projectCounts) borrow(gpus map[string]int) {
	addAll(pc.borrowed, gpus)
	pc.borrowedTotal += sum(gpus)
}

func (pc *projectCounts) guaranteeRoom(t string) int {
	if t == "" {
		return pc.of.cfg.Total() - pc.inUseTotal
	}
	return min(pc.of.cfg.GPUs[t]-pc.inUse[t], pc.of.cfg.Total()-pc.inUseTotal)
}

// quotaText is the guarantee position for the types a job asks for, e.g. "a100 3/4 in use".
// The all-types count is shown when it matters: for untyped requests, or when it alone binds.
func (pc *projectCounts) quotaText(need map[string]int) string {
	var parts []string
	for _, t := range slices.Sorted(maps.Keys(need)) {
		if t != "" {
			parts = append(parts, fmt.Sprintf("%s %d/%d in use", t, pc.inUse[t], pc.of.cfg.GPUs[t]))
		}
	}
	if pc.totalMatters(need) {
		parts = append(parts, fmt.Sprintf("all types %d/%d in use", pc.inUseTotal, pc.of.cfg.Total()))
	}
	return strings.Join(parts, ", ")
}

// quotaUsage says why a job is over quota, e.g. "proj-a uses 4/4 guaranteed a100".
func (pc *projectCounts) quotaUsage(need map[string]int) string {
	var parts []string
	for _, t := range slices.Sorted(maps.Keys(need)) {
		if t != "" && pc.inUse[t]+need[t] > pc.of.cfg.GPUs[t] {
			parts = append(parts, fmt.Sprintf("%d/%d guaranteed %s", pc.inUse[t], pc.of.cfg.GPUs[t], t))
		}
	}
	if pc.totalMatters(need) {
		parts = append(parts, fmt.Sprintf("%d/%d guaranteed GPUs of all types", pc.inUseTotal, pc.of.cfg.Total()))
	}
	return fmt.Sprintf("%s uses %s and the job needs %s more", pc.of.cfg.Account, strings.Join(parts, ", "), gpuList(need))
}

func (pc *projectCounts) totalMatters(need map[string]int) bool {
	if need[""] > 0 {
		return true
	}
	for t, n := range need {
		if pc.inUse[t]+n > pc.of.cfg.GPUs[t] {
			return false // a typed limit binds and says it better
		}
	}
	return pc.inUseTotal+sum(need) > pc.of.cfg.Total()
}
