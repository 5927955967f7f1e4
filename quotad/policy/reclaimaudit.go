package policy

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/pools"
)

// Run is one run of a job as slurmdbd recorded it, for the reclaim audit: a preempted
// borrower, the job that claimed its GPUs, or a job running beside them.
type Run struct {
	JobID     uint32
	Account   string
	QOS       string
	Nodes     []string // expanded node names
	GPUs      int      // all nodes together
	Started   time.Time
	Ended     time.Time // zero while it runs
	Preempted bool      // the run ended because Slurm preempted (requeued) it
	Priority  int64     // the job's Slurm priority as slurmdbd recorded it (at its start)
}

func (r Run) runningAt(t time.Time) bool {
	return !r.Started.IsZero() && !r.Started.After(t) && (r.Ended.IsZero() || !r.Ended.Before(t))
}

// gpusOn is the run's GPUs on nodes, taking a multi-node run's GPUs as spread evenly.
func (r Run) gpusOn(nodes []string) int {
	if len(r.Nodes) == 0 {
		return 0
	}
	shared := 0
	for _, n := range r.Nodes {
		if slices.Contains(nodes, n) {
			shared++
		}
	}
	return r.GPUs * shared / len(r.Nodes)
}

// ClaimWindow is how long after a preemption the job that claimed the GPUs may start: Slurm
// starts it once the victims' nodes are free (their epilog done). A reclaim with no claimant
// after it is audited without one.
const ClaimWindow = 2 * time.Minute

// ReclaimAudit is one claim as it happened: who claimed, who lost what, and whether that was
// the fewest borrowed GPUs that would have made room.
type ReclaimAudit struct {
	At       time.Time // when the first victim ended
	Claimant *Run      // nil when no job of a guaranteed QOS started on the victims' nodes
	Project  string    // the claimant's project
	Lost     []Run     // the runs Slurm preempted for it
	LostGPUs int
	// Needed is the GPUs the claim had to take from borrowers (its GPUs less those idle on its
	// nodes); Fewest the fewest borrowed GPUs there, past PreemptExemptTime, that cover it,
	// and Would the borrowers that give them.
	Needed, Fewest int
	Would          []uint32
	// NotBorrowing are lost runs outside every borrow and elastic QOS: jobs within a
	// guarantee, which no claim may take.
	NotBorrowing []uint32
	// Protected are lost runs in a project's protected borrow QOS that the claim, below that
	// project's reclaim priority threshold, should not have reached (another claim of its
	// project above the threshold opened the QOS while this one also waited).
	Protected []uint32
}

// Minimal says whether the claim took no more borrowed GPUs than it had to, and only borrowers.
func (a ReclaimAudit) Minimal() bool {
	return a.Claimant != nil && len(a.NotBorrowing) == 0 && len(a.Protected) == 0 && a.LostGPUs <= a.Fewest
}

// Verdict is the judgement in a word or two: minimal, not minimal, or no claimant.
func (a ReclaimAudit) Verdict() string {
	switch {
	case a.Minimal():
		return "minimal"
	case a.Claimant == nil && len(a.NotBorrowing) == 0:
		return "no claimant"
	}
	return "not minimal"
}

// Text is the audit line, e.g. "job 9 of proj-a (1 GPU on a100-2) claimed: Slurm requeued job 2
// of proj-b (3 GPUs in borrow-proj-b, after 45s); not minimal: 1 GPU would do (job 3)".
func (a ReclaimAudit) Text() string {
	var lost []string
	for _, r := range a.Lost {
		lost = append(lost, fmt.Sprintf("job %d of %s (%d GPU(s) in %s, after %s)", r.JobID, r.Account, r.GPUs, r.QOS, r.Ended.Sub(r.Started).Round(time.Second)))
	}
	claim := "no job of a guaranteed QOS started on its nodes within " + ClaimWindow.String()
	if c := a.Claimant; c != nil {
		claim = fmt.Sprintf("job %d of %s (%d GPU(s) on %s) claimed", c.JobID, a.Project, c.GPUs, strings.Join(c.Nodes, ","))
	}
	text := fmt.Sprintf("%s: Slurm requeued %s", claim, strings.Join(lost, ", "))
	switch {
	case len(a.NotBorrowing) > 0:
		return fmt.Sprintf("%s; NOT MINIMAL: job(s) %v ran in no borrow QOS", text, a.NotBorrowing)
	case len(a.Protected) > 0:
		return fmt.Sprintf("%s; NOT MINIMAL: job(s) %v were protected by their project's reclaim priority threshold, above the claim's priority %d", text, a.Protected, a.Claimant.Priority)
	case a.Claimant == nil:
		return text
	case a.Minimal():
		return fmt.Sprintf("%s; minimal: it needed %d borrowed GPU(s), %d GPU(s) requeued", text, a.Needed, a.LostGPUs)
	}
	return fmt.Sprintf("%s; not minimal: %d GPU(s) requeued where %d would do (job(s) %v)", text, a.LostGPUs, a.Fewest, a.Would)
}

// AuditReclaims pairs each preempted run among runs with the claim it made room for and judges
// it. runs are the runs around the reclaims (RunsBetween: all that overlap [first end, last
// end + ClaimWindow]); nodeGPUs the GPUs each node has.
func AuditReclaims(cfg *Config, runs []Run, nodeGPUs map[string]int) []ReclaimAudit {
	s := cfg.Settings
	guaranteed := map[string]string{}
	for _, p := range cfg.Projects {
		guaranteed[s.GuaranteedQOSName(p.Account)] = p.Account
	}
	byClaimant := map[uint32]*ReclaimAudit{}
	var out []*ReclaimAudit
	for _, v := range runs {
		if !v.Preempted {
			continue
		}
		var claimant *Run
		for i := range runs {
			c := &runs[i]
			if _, ok := guaranteed[pools.QOSKey(c.QOS)]; !ok || c.Preempted || c.Started.Before(v.Ended) ||
				c.Started.After(v.Ended.Add(ClaimWindow)) || !overlaps(c.Nodes, v.Nodes) {
				continue
			}
			if claimant == nil || c.Started.Before(claimant.Started) || c.Started.Equal(claimant.Started) && c.JobID < claimant.JobID {
				claimant = c
			}
		}
		a := (*ReclaimAudit)(nil)
		if claimant != nil {
			a = byClaimant[claimant.JobID]
		}
		if a == nil {
			a = &ReclaimAudit{At: v.Ended, Claimant: claimant}
			if claimant != nil {
				a.Project = guaranteed[pools.QOSKey(claimant.QOS)]
				byClaimant[claimant.JobID] = a
			}
			out = append(out, a)
		}
		a.At = minTime(a.At, v.Ended)
		a.Lost = append(a.Lost, v)
		a.LostGPUs += v.GPUs
		if !s.isLendingQOS(v.QOS) {
			a.NotBorrowing = append(a.NotBorrowing, v.JobID)
		}
	}
	for _, a := range out {
		if a.Claimant == nil {
			continue
		}
		for _, v := range a.Lost {
			if shielded(cfg, *a.Claimant, v) {
				a.Protected = append(a.Protected, v.JobID)
			}
		}
		a.Needed, a.Fewest, a.Would = fewestToFree(cfg, *a.Claimant, a.At, runs, nodeGPUs)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	res := make([]ReclaimAudit, len(out))
	for i, a := range out {
		res[i] = *a
	}
	return res
}

// fewestToFree is what claimant c had to take from borrowers at t, the moment of the
// preemption, and the fewest GPUs of borrowers past PreemptExemptTime on its nodes that cover
// it (a small subset sum: a node has a handful of GPUs), with who gives them.
func fewestToFree(cfg *Config, c Run, t time.Time, runs []Run, nodeGPUs map[string]int) (needed, fewest int, who []uint32) {
	s := cfg.Settings
	free := 0
	for _, n := range c.Nodes {
		free += nodeGPUs[n]
	}
	// A giver frees on its GPUs on the claimant's nodes and loses all its own (a multi-node
	// borrower is requeued whole).
	type giver struct {
		id       uint32
		on, cost int
	}
	var givers []giver
	for _, r := range runs {
		if r.JobID == c.JobID || !r.runningAt(t) {
			continue
		}
		on := r.gpusOn(c.Nodes)
		free -= on
		if on > 0 && takeable(cfg, c, r) && !t.Before(r.Started.Add(s.PreemptExemptTime)) {
			givers = append(givers, giver{r.JobID, on, r.GPUs})
		}
	}
	needed = max(c.GPUs-max(free, 0), 0)
	if needed == 0 {
		return 0, 0, nil
	}
	// cost[f] is the fewest GPUs lost to free exactly f on the nodes, by set[f]; -1 unreached.
	total := 0
	for _, g := range givers {
		total += g.on
	}
	cost := make([]int, total+1)
	set := make([][]uint32, total+1)
	for f := range cost {
		cost[f] = -1
	}
	cost[0] = 0
	for _, g := range givers {
		for f := total - g.on; f >= 0; f-- {
			if cost[f] >= 0 && (cost[f+g.on] < 0 || cost[f]+g.cost < cost[f+g.on]) {
				cost[f+g.on] = cost[f] + g.cost
				set[f+g.on] = append(slices.Clone(set[f]), g.id)
			}
		}
	}
	fewest = -1
	for f := needed; f <= total; f++ {
		if cost[f] >= 0 && (fewest < 0 || cost[f] < fewest) {
			fewest, who = cost[f], set[f]
		}
	}
	if fewest < 0 { // no set would do: whatever Slurm took was all there was
		fewest, who = 0, nil
		for _, g := range givers {
			fewest += g.cost
		}
	}
	return needed, fewest, who
}

// takeable says whether claimant c may take run r: r borrows (a borrow or elastic QOS), and is
// not shielded from c.
func takeable(cfg *Config, c, r Run) bool {
	return cfg.Settings.isLendingQOS(r.QOS) && !shielded(cfg, c, r)
}

// shielded says whether run r is in a protected borrow QOS whose project's reclaim priority
// threshold is above claimant c's priority.
func shielded(cfg *Config, c, r Run) bool {
	acct, ok := cfg.Settings.protectedBorrowOf(r.QOS)
	if !ok {
		return false
	}
	p, ok := cfg.Project(acct)
	return ok && p.ReclaimPriorityThreshold != nil && c.Priority < *p.ReclaimPriorityThreshold
}

// WithQueuePriorities sets the Priority of each run whose job is still in the queue, started,
// to the queue's: slurmdbd keeps the priority a job had when it became eligible, not one an
// admin set later, and a started job keeps the priority it started with, which is what opened
// (or not) a protected borrow QOS to its claim.
func WithQueuePriorities(runs []Run, jobs []Job) {
	started := map[uint32]int64{}
	for i := range jobs {
		if jobs[i].State == StateRunning {
			started[jobs[i].ID] = jobs[i].Priority
		}
	}
	for i := range runs {
		if p, ok := started[runs[i].JobID]; ok && runs[i].Ended.IsZero() {
			runs[i].Priority = p
		}
	}
}

func overlaps(a, b []string) bool {
	for _, n := range a {
		if slices.Contains(b, n) {
			return true
		}
	}
	return false
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
