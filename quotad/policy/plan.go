package policy

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Plan is what one quotad cycle should do, and why. It never cancels, kills or requeues a job:
// reclaiming lent GPUs is Slurm's own QOS preemption.
type Plan struct {
	// Acting is false when the plan must not act (stale snapshot, invalid quota table);
	// Notes says why, and the action lists are empty.
	Acting bool
	Notes  []string
	// Sync actions, in the order to apply them: QOS before the accounts that name them.
	QOS      []QOSChange
	Accounts []AccountChange
	Users    []UserChange // after the accounts: they name the same QOS
	// Moves of pending jobs between QOS; returns come before lends.
	Moves    []JobMove
	Projects []ProjectStatus
	Types    []TypeStatus
	Jobs     []JobExplanation // sorted by job id
	// Unreadable are the snapshot's jobs quotad could not read, each counted at its worst.
	Unreadable []UnreadableJob
}

// HasActions says whether applying the plan would change anything.
func (p *Plan) HasActions() bool {
	return len(p.QOS)+len(p.Accounts)+len(p.Users)+len(p.Moves) > 0
}

// Explain returns the explanation for job id.
func (p *Plan) Explain(id uint32) (string, bool) {
	x, ok := p.Explanation(id)
	return x.Text, ok
}

// Explanation returns job id's explanation, its code with its words.
func (p *Plan) Explanation(id uint32) (JobExplanation, bool) {
	i := sort.Search(len(p.Jobs), func(i int) bool { return p.Jobs[i].JobID >= id })
	if i < len(p.Jobs) && p.Jobs[i].JobID == id {
		return p.Jobs[i], true
	}
	return JobExplanation{}, false
}

// TaskExplanation returns the explanation of array task arrayJob_task: of the record that
// stands for it, the task's own or the array's pending one.
func (p *Plan) TaskExplanation(arrayJob, task uint32) (JobExplanation, bool) {
	for _, x := range p.Jobs {
		if x.ArrayJobID == arrayJob && slices.Contains(x.ArrayTasks, task) {
			return x, true
		}
	}
	return JobExplanation{}, false
}

// ExplainAccount returns the project's summary followed by the explanations of its jobs, the
// jobs of its sub-accounts included, or of the account's own jobs when it is no project.
func (p *Plan) ExplainAccount(account string) []string {
	var out []string
	for _, ps := range p.Projects {
		if ps.Account == account {
			out = append(out, ps.Summary)
		}
	}
	for _, j := range p.Jobs {
		if j.Account == account || j.Project == account {
			out = append(out, j.Text)
		}
	}
	return out
}

// ClearLimit as a GrpTRES value removes the limit (sacctmgr's own spelling); as a From value it
// means the limit was not set.
const ClearLimit int64 = -1

// Change is one field's old and new value.
type Change[T any] struct {
	From, To T
}

// TRESChange is one GrpTRES entry's old and new value.
type TRESChange struct {
	Name     string // gres/gpu or gres/gpu:TYPE
	From, To int64
}

// QOSChange creates or modifies one QOS. A nil field stays as it is.
type QOSChange struct {
	Name   string
	Create bool
	// Band is the project whose place in the reclaim order this QOS's Priority holds (its
	// borrow, tier, protected and elastic QOS); "" for a guaranteed QOS. A project's band is
	// written whole or not at all, so its tiers never sit out of order.
	Band              string
	GrpTRES           []TRESChange // sorted by name; GPU entries only, other TRES are not touched
	Preempt           *Change[[]string]
	PreemptMode       *Change[string]
	GraceTime         *Change[time.Duration]
	PreemptExemptTime *Change[time.Duration]
	Priority          *Change[int]
}

func (c QOSChange) String() string {
	var b strings.Builder
	if c.Create {
		fmt.Fprintf(&b, "create qos %s:", c.Name)
	} else {
		fmt.Fprintf(&b, "modify qos %s:", c.Name)
	}
	for _, t := range c.GrpTRES {
		fmt.Fprintf(&b, " grptres %s %s->%s", t.Name, limitString(t.From), limitString(t.To))
	}
	if c.Preempt != nil {
		fmt.Fprintf(&b, " preempt [%s]->[%s]", strings.Join(c.Preempt.From, ","), strings.Join(c.Preempt.To, ","))
	}
	if c.PreemptMode != nil {
		fmt.Fprintf(&b, " preemptmode %s->%s", cmp.Or(c.PreemptMode.From, unsetText), c.PreemptMode.To)
	}
	if c.GraceTime != nil {
		fmt.Fprintf(&b, " gracetime %s->%s", c.GraceTime.From, c.GraceTime.To)
	}
	if c.PreemptExemptTime != nil {
		fmt.Fprintf(&b, " preemptexempttime %s->%s", c.PreemptExemptTime.From, c.PreemptExemptTime.To)
	}
	if c.Priority != nil {
		fmt.Fprintf(&b, " priority %d->%d", c.Priority.From, c.Priority.To)
	}
	return b.String()
}

// AccountChange sets an account's allowed QOS list and default QOS. A nil field stays.
type AccountChange struct {
	Account    string
	QOS        *Change[[]string] // the whole new list, sorted
	DefaultQOS *Change[string]
}

func (c AccountChange) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "modify account %s:", c.Account)
	if c.QOS != nil {
		fmt.Fprintf(&b, " qos [%s]->[%s]", strings.Join(c.QOS.From, ","), strings.Join(c.QOS.To, ","))
	}
	if c.DefaultQOS != nil {
		fmt.Fprintf(&b, " defaultqos %s->%s", cmp.Or(c.DefaultQOS.From, unsetText), c.DefaultQOS.To)
	}
	return b.String()
}

// UserChange adds QOS to a user association's own QOS list (sacctmgr's qos+=), leaving the
// QOS the site gave it.
type UserChange struct {
	User, Account, Partition string
	From                     []string // the list before, sorted
	Add                      []string // sorted
}

func (c UserChange) String() string {
	where := c.Account
	if c.Partition != "" {
		where += ", partition " + c.Partition
	}
	return fmt.Sprintf("modify user %s (account %s): qos [%s] += [%s]", c.User, where, strings.Join(c.From, ","), strings.Join(c.Add, ","))
}

// MoveKind says why a pending job changes QOS.
type MoveKind string

const (
	// Lend moves an over-quota job into its project's borrow QOS to run on idle GPUs.
	Lend MoveKind = "lend"
	// Return moves a pending borrower back to its project's guaranteed QOS.
	Return MoveKind = "return"
	// Adopt moves a project's pending job out of a QOS its account no longer allows (submitted
	// before quotad managed the account) into the project's guaranteed QOS.
	Adopt MoveKind = "adopt"
)

// JobMove changes a PENDING job's QOS (scontrol update jobid=N qos=TO).
type JobMove struct {
	Kind  MoveKind
	JobID uint32 // the record the job is in
	// ArrayJobID and Task name one array task (ArrayJobID 0: not an array task); a task still in
	// its array's pending record is split off by the move, the other tasks stay.
	ArrayJobID, Task uint32
	Account          string // the job's account
	Project          string // the project whose quota covers it: the account or an ancestor
	From             string
	To               string
	GPUs             map[string]int // the GPUs this decision counted, by type ("" any type)
	Code             Code           // why, as a kind: CodeLent, CodeAdopted, or one of the CodeReturn... codes
	Reason           string
}

func (m JobMove) String() string {
	return fmt.Sprintf("%s job %s (%s, %s): qos %s->%s", m.Kind, m.Target(), m.Account, gpuList(m.GPUs), m.From, m.To)
}

// Target is the job as scontrol update names it: "123", or "123_7" for an array task.
func (m JobMove) Target() string {
	if m.ArrayJobID != 0 {
		return fmt.Sprintf("%d_%d", m.ArrayJobID, m.Task)
	}
	return strconv.FormatUint(uint64(m.JobID), 10)
}

// ProjectStatus is one project's quota position, for quotactl list and explain.
type ProjectStatus struct {
	Account       string
	GuaranteedQOS string
	Weight        float64
	Usage         float64 // GPU-seconds in the fairness window
	ByType        []ProjectTypeStatus
	// BackingOff counts its pending jobs that a claim took back and that wait out their
	// reclaim backoff before they are lent again.
	BackingOff int
	Summary    string
}

// ProjectTypeStatus counts one project's GPUs of one type ("" for requests of any type whose
// type is not known yet).
type ProjectTypeStatus struct {
	Type       string
	Guaranteed int
	InUse      int // held by started jobs in the guaranteed QOS
	Borrowed   int // held or promised (pending after a lend) in the borrow and elastic QOS
	Elastic    int // the part of Borrowed held or promised by elastic workers (the elastic QOS)
	Pending    int // requested by pending jobs in the guaranteed QOS
	LendLimit  int // most of the guarantee others may borrow; -1: no limit
	KeptIdle   int // idle GPUs the lending limit keeps for the project's own jobs now
}

// TypeStatus is the cluster-wide position of one GPU type.
type TypeStatus struct {
	Type      string
	Total     int
	Idle      int
	Lent      int // held or promised in the borrow and elastic QOS, this plan's lends included
	LendLimit int // -1: no limit
}

// JobExplanation says why a job runs or waits, and what this plan does with it.
type JobExplanation struct {
	JobID uint32
	// ArrayJobID and ArrayTasks are the job's array and the tasks its record stands for, as in
	// Job: squeue prints a task as 123_7, and so may a user ask for it.
	ArrayJobID uint32
	ArrayTasks []uint32
	Account    string
	Project    string   // the project the job counts for, "" for none
	User       string   // who may read it when explanations are private to their owners
	State      JobState // the job's state in the snapshot (PENDING, RUNNING, ...)
	Code       Code     // the kind of explanation: stable, for scripts and tests
	Text       string
}

// unsetText is how a plan line spells a value that is not set: "grptres gres/gpu none->4",
// "preemptmode none->requeue". quotactl shows "(none)" in its own tables instead.
const unsetText = "none"

func limitString(v int64) string {
	if v == ClearLimit {
		return unsetText
	}
	return strconv.FormatInt(v, 10)
}

// gpuList spells GPU counts like "2 a100 + 1 any".
func gpuList(g map[string]int) string {
	if len(g) == 0 {
		return "0 GPUs"
	}
	parts := make([]string, 0, len(g))
	for _, t := range slices.Sorted(maps.Keys(g)) {
		parts = append(parts, fmt.Sprintf("%d %s", g[t], typeName(t)))
	}
	return strings.Join(parts, " + ")
}

func typeName(t string) string {
	if t == "" {
		return "any-type GPU"
	}
	return t
}
