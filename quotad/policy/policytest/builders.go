// Package policytest builds the quota tables, snapshots, jobs and nodes that tests of quotad's
// policy (and of what sits on it) decide over, Kueue-wrapper style:
// MakeJob(5, "proj-b").GPU("a100", 1).Running(time.Minute).Obj().
package policytest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/pools"
	"github.com/slurmbridge/slurmbridge/quotad/policy"
)

// T0 is the snapshot time of every test scenario.
var T0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// IntP and FloatP point at v, for a table's optional limits and weights.
func IntP(v int) *int           { return &v }
func FloatP(v float64) *float64 { return &v }

// GPUs makes GPU counts by type from pairs: GPUs("a100", 2, "", 1) (the type "" is any type).
func GPUs(kv ...any) map[string]int {
	m := map[string]int{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1].(int)
	}
	return m
}

// JobWrapper makes test jobs (MakeJob): a pending one-node job in its account's guaranteed QOS, with
// Requeue=1 (an sbatch job Slurm can requeue), submitted id seconds before T0 so that ids give the age order.
type JobWrapper struct{ j policy.Job }

// defaults names each project's QOS as a quota table that names none: the tests' tables.
var defaults policy.Settings

// MakeJob starts a job of account with its id (see JobWrapper for what it is until changed).
func MakeJob(id uint32, account string) *JobWrapper {
	return &JobWrapper{policy.Job{
		ID: id, Account: account, User: "u-" + account, State: policy.StatePending, Reason: "QOSGrpGRES",
		QOS: defaults.GuaranteedQOSName(account), Partitions: []string{"a100"}, Nodes: 1, Requeue: true, Batch: true, Priority: 1,
		SubmitTime: T0.Add(-time.Hour + time.Duration(id)*time.Second),
	}}
}

// GPU asks for perNode GPUs of type t on each node (--gres=gpu[:t]:perNode).
func (b *JobWrapper) GPU(t string, perNode int) *JobWrapper {
	setCount(&b.j.GPUsPerNode, t, perNode)
	return b
}
func (b *JobWrapper) Nodes(n int) *JobWrapper      { b.j.Nodes = n; return b }
func (b *JobWrapper) CPUs(n int) *JobWrapper       { b.j.CPUs = n; return b }
func (b *JobWrapper) MemMB(n int64) *JobWrapper    { b.j.MemoryMB = n; return b }
func (b *JobWrapper) Account(a string) *JobWrapper { b.j.Account = a; return b }
func (b *JobWrapper) User(u string) *JobWrapper    { b.j.User = u; return b }

// PerJob asks for n GPUs of type t for the whole job (--gpus=[t:]n).
func (b *JobWrapper) PerJob(t string, n int) *JobWrapper {
	setCount(&b.j.GPUsPerJob, t, n)
	return b
}

// setCount sets (*m)[t] to n, making the map when there is none.
func setCount(m *map[string]int, t string, n int) {
	if *m == nil {
		*m = map[string]int{}
	}
	(*m)[t] = n
}
func (b *JobWrapper) QOS(q string) *JobWrapper           { b.j.QOS = q; return b }
func (b *JobWrapper) Reason(r string) *JobWrapper        { b.j.Reason = r; return b }
func (b *JobWrapper) Partitions(p ...string) *JobWrapper { b.j.Partitions = p; return b }
func (b *JobWrapper) NoRequeue() *JobWrapper             { b.j.Requeue = false; return b }
func (b *JobWrapper) Interactive() *JobWrapper           { b.j.Batch = false; return b } // salloc, srun
func (b *JobWrapper) Priority(p int64) *JobWrapper       { b.j.Priority = p; return b }
func (b *JobWrapper) Alloc(g map[string]int) *JobWrapper { b.j.AllocatedGPUs = g; return b }
func (b *JobWrapper) Borrowed() *JobWrapper              { b.j.QOS = defaults.BorrowQOSName(b.j.Account); return b }
func (b *JobWrapper) Running(since time.Duration) *JobWrapper {
	b.j.State, b.j.Reason, b.j.StartTime = policy.StateRunning, "None", T0.Add(-since)
	return b
}

// Array makes the job a record of array tasks (its id is the array's).
func (b *JobWrapper) Array(tasks ...uint32) *JobWrapper {
	b.j.ArrayJobID, b.j.ArrayTasks = b.j.ID, tasks
	return b
}

// Throttle sets the array's limit of tasks running at once (--array=...%n).
func (b *JobWrapper) Throttle(n int) *JobWrapper { b.j.ArrayThrottle = n; return b }

// TaskOf makes the job a task with a record of its own (split off, or started) of array arrayJob.
func (b *JobWrapper) TaskOf(arrayJob, task uint32) *JobWrapper {
	b.j.ArrayJobID, b.j.ArrayTasks = arrayJob, []uint32{task}
	return b
}

// Worker makes the job an elastic worker of main job main: in its project's elastic QOS, named
// like elasticd's workers.
func (b *JobWrapper) Worker(main uint32) *JobWrapper {
	b.j.QOS, b.j.ElasticMain = defaults.ElasticQOSName(b.j.Account), main
	return b
}

// Obj is the job built.
func (b *JobWrapper) Obj() policy.Job { return b.j }

// Jobs makes n copies of a job with ids from first on.
func Jobs(first uint32, n int, mk func(id uint32) *JobWrapper) []policy.Job {
	out := make([]policy.Job, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, mk(first+uint32(i)).Obj())
	}
	return out
}

// SnapshotWrapper makes snapshots (MakeSnapshot) taken at T0 of the testbed's pools.
type SnapshotWrapper struct{ s policy.Snapshot }

// MakeSnapshot starts an empty snapshot taken at T0.
func MakeSnapshot() *SnapshotWrapper {
	return &SnapshotWrapper{policy.Snapshot{TakenAt: T0, Usage: map[string]float64{}}}
}

// Pool adds a partition's GPUs of type t as nodes of 4 GPUs (the testbed's shape), the idle
// ones filling the first nodes; every node has CPUs and memory to spare.
func (b *SnapshotWrapper) Pool(partition, t string, total, idle int) *SnapshotWrapper {
	for total > 0 {
		n := min(total, 4)
		i := min(idle, n)
		b.Node(GPUNode(fmt.Sprintf("%s-%d", partition, len(b.s.Nodes)+1), t, n, i, 64, 256000, partition))
		total, idle = total-n, idle-i
	}
	return b
}

// GPUNode is a usable node with total GPUs of type t, idle of them unallocated.
func GPUNode(name, t string, total, idle, freeCPUs int, freeMemMB int64, partitions ...string) policy.Node {
	return policy.Node{Name: name, Partitions: partitions, GPUs: map[string]int{t: total}, IdleGPUs: map[string]int{t: idle}, FreeCPUs: freeCPUs, FreeMemMB: freeMemMB}
}

func (b *SnapshotWrapper) Node(n policy.Node) *SnapshotWrapper {
	b.s.Nodes = append(b.s.Nodes, n)
	return b
}

// Account adds a sub-account under parent that inherits the parent's QOS list and default.
func (b *SnapshotWrapper) Account(name, parent string) *SnapshotWrapper {
	b.s.Accounts = append(b.s.Accounts, policy.Account{Name: name, Parent: parent})
	return b
}

// UserQOS gives user a QOS list of their own in account (sacctmgr modify user ... set qos=...).
func (b *SnapshotWrapper) UserQOS(user, account string, qos ...string) *SnapshotWrapper {
	b.s.Users = append(b.s.Users, policy.UserAssociation{User: user, Account: account, QOS: qos})
	return b
}

// Unreadable adds a job of account the adapter could not read, in qos and state.
func (b *SnapshotWrapper) Unreadable(id uint32, account, qos string, state policy.JobState, problem string) *SnapshotWrapper {
	b.s.Unreadable = append(b.s.Unreadable, policy.UnreadableJob{ID: id, Account: account, User: "u-" + account, QOS: qos, State: state, Problem: problem})
	return b
}
func (b *SnapshotWrapper) Jobs(js ...policy.Job) *SnapshotWrapper {
	b.s.Jobs = append(b.s.Jobs, js...)
	return b
}
func (b *SnapshotWrapper) Usage(account string, gpuSeconds float64) *SnapshotWrapper {
	b.s.Usage[account] = gpuSeconds
	return b
}
func (b *SnapshotWrapper) TakenAt(t time.Time) *SnapshotWrapper { b.s.TakenAt = t; return b }

// DecayedUsage sets account's GPU-seconds as Slurm's fair share keeps them (sshare).
func (b *SnapshotWrapper) DecayedUsage(account string, gpuSeconds float64) *SnapshotWrapper {
	if b.s.DecayedUsage == nil {
		b.s.DecayedUsage = map[string]float64{}
	}
	b.s.DecayedUsage[account] = gpuSeconds
	return b
}

// Reclaimed records that Slurm preempted and requeued job id in qos after a run of ran that
// ended ago before T0 (a claim took it back, when qos is a borrow QOS).
func (b *SnapshotWrapper) Reclaimed(id uint32, qos string, ran, ago time.Duration) *SnapshotWrapper {
	end := T0.Add(-ago)
	b.s.Reclaims = append(b.s.Reclaims, policy.Reclaim{JobID: id, QOS: qos, Started: end.Add(-ran), Ended: end})
	return b
}

// WholeArrays marks the snapshot as from a Slurm release that starts an array's tasks only
// together (see policy.Snapshot.WholeArrays).
func (b *SnapshotWrapper) WholeArrays(whole bool) *SnapshotWrapper { b.s.WholeArrays = whole; return b }

// Synced puts into the snapshot the QOS and accounts that cfg asks for, as if a previous cycle
// had applied its sync, so that a test sees only moves.
func (b *SnapshotWrapper) Synced(t testing.TB, cfg *policy.Config) *SnapshotWrapper {
	t.Helper()
	for _, p := range cfg.Projects {
		if !slices.ContainsFunc(b.s.Accounts, func(a policy.Account) bool { return a.Name == p.Account }) {
			b.s.Accounts = append(b.s.Accounts, policy.Account{Name: p.Account, QOS: []string{"normal"}, DefaultQOS: "normal", OwnQOS: true, OwnDefaultQOS: true})
		}
	}
	Inherit(b.s.Accounts)
	// Twice: the first plan creates the structure, the second may lend and so change the
	// reclaim order (who may be preempted) once more.
	for range 2 {
		ApplySync(&b.s, policy.BuildPlan(cfg, &b.s, T0))
	}
	if again := policy.BuildPlan(cfg, &b.s, T0); len(again.QOS)+len(again.Accounts) > 0 {
		t.Fatalf("sync does not converge: %v %v", again.QOS, again.Accounts)
	}
	return b
}
func (b *SnapshotWrapper) Obj() *policy.Snapshot { return &b.s }

// Testbed adds the testbed's GPUs with idle counts given.
func (b *SnapshotWrapper) Testbed(idleA100, idleSpot, idleV100 int) *SnapshotWrapper {
	return b.Pool("a100", "a100", 8, idleA100).Pool("a100-spot", "a100", 4, idleSpot).Pool("v100", "v100", 8, idleV100)
}

// ConfigWrapper builds a quota table (MakeConfig) with testbed-like defaults.
type ConfigWrapper struct{ c policy.Config }

// MakeConfig starts a quota table with no projects, GraceTime 10 s and PreemptExemptTime 30 s.
func MakeConfig() *ConfigWrapper {
	return &ConfigWrapper{policy.Config{Settings: policy.Settings{GraceTime: 10 * time.Second, PreemptExemptTime: 30 * time.Second}}}
}

func (b *ConfigWrapper) Project(account string, guaranteed map[string]int, opts ...func(*policy.Project)) *ConfigWrapper {
	p := policy.Project{Account: account, GPUs: guaranteed}
	for _, o := range opts {
		o(&p)
	}
	b.c.Projects = append(b.c.Projects, p)
	return b
}

// LendLimit caps the GPUs of type t lent at once.
func (b *ConfigWrapper) LendLimit(t string, n int) *ConfigWrapper {
	setCount(&b.c.LendLimits, t, n)
	return b
}

// Obj is the quota table built.
func (b *ConfigWrapper) Obj() *policy.Config { return &b.c }

// Weight, BorrowLimit, BorrowLimitOf and LendLimitOf set a project's fair-share weight, its
// borrowing limit in all, its borrowing limit of type t, and how many of its guaranteed GPUs
// of type t it lends at most (options of ConfigWrapper.Project).
func Weight(w float64) func(*policy.Project)  { return func(p *policy.Project) { p.Weight = &w } }
func BorrowLimit(n int) func(*policy.Project) { return func(p *policy.Project) { p.BorrowLimit = &n } }
func BorrowLimitOf(t string, n int) func(*policy.Project) {
	return func(p *policy.Project) { setCount(&p.BorrowLimitByType, t, n) }
}
func LendLimitOf(t string, n int) func(*policy.Project) {
	return func(p *policy.Project) { setCount(&p.LendLimitByType, t, n) }
}

// ReclaimPriorityThreshold protects the project's borrowers of at least priority t from claims
// below it (an option of ConfigWrapper.Project).
func ReclaimPriorityThreshold(t int64) func(*policy.Project) {
	return func(p *policy.Project) { p.ReclaimPriorityThreshold = &t }
}

// ApplySync is the fake adapter for sync actions: it changes the snapshot as sacctmgr would.
func ApplySync(s *policy.Snapshot, plan *policy.Plan) {
	for _, c := range plan.QOS {
		var q *policy.QOS
		for i := range s.QOS {
			if pools.QOSKey(s.QOS[i].Name) == pools.QOSKey(c.Name) {
				q = &s.QOS[i]
			}
		}
		if q == nil {
			s.QOS = append(s.QOS, policy.QOS{Name: c.Name})
			q = &s.QOS[len(s.QOS)-1]
		}
		for _, t := range c.GrpTRES {
			if q.GrpTRES == nil {
				q.GrpTRES = map[string]int64{}
			}
			if t.To == policy.ClearLimit {
				delete(q.GrpTRES, t.Name)
			} else {
				q.GrpTRES[t.Name] = t.To
			}
		}
		if c.Preempt != nil {
			q.Preempt = c.Preempt.To
		}
		if c.PreemptMode != nil {
			q.PreemptMode = c.PreemptMode.To
		}
		if c.GraceTime != nil {
			q.GraceTime = c.GraceTime.To
		}
		if c.PreemptExemptTime != nil {
			q.PreemptExemptTime = c.PreemptExemptTime.To
		}
		if c.Priority != nil {
			q.Priority = c.Priority.To
		}
	}
	for _, c := range plan.Accounts {
		for i := range s.Accounts {
			if s.Accounts[i].Name != c.Account {
				continue
			}
			// sacctmgr modify account sets the values on the association itself.
			if c.QOS != nil {
				s.Accounts[i].QOS, s.Accounts[i].OwnQOS = c.QOS.To, true
			}
			if c.DefaultQOS != nil {
				s.Accounts[i].DefaultQOS, s.Accounts[i].OwnDefaultQOS = c.DefaultQOS.To, true
			}
		}
	}
	for _, c := range plan.Users {
		for i := range s.Users {
			if u := &s.Users[i]; u.User == c.User && u.Account == c.Account && (c.Partition == "" || u.Partition == c.Partition) {
				u.QOS = append(u.QOS, c.Add...) // sacctmgr's qos+=
			}
		}
	}
	Inherit(s.Accounts)
}

// Inherit resolves what accounts without their own QOS list or default get from their
// parents, as slurmdbd does.
func Inherit(accounts []policy.Account) {
	byName := map[string]*policy.Account{}
	for i := range accounts {
		byName[accounts[i].Name] = &accounts[i]
	}
	var resolve func(a *policy.Account, depth int)
	resolve = func(a *policy.Account, depth int) {
		parent := byName[a.Parent]
		if parent == nil || depth > 64 {
			return
		}
		resolve(parent, depth+1)
		if !a.OwnQOS {
			a.QOS = slices.Clone(parent.QOS)
		}
		if !a.OwnDefaultQOS {
			a.DefaultQOS = parent.DefaultQOS
		}
	}
	for i := range accounts {
		resolve(&accounts[i], 0)
	}
}

// TargetLines renders moves by what scontrol is told: "lend 12_3 proj-b".
func TargetLines(plan *policy.Plan) []string {
	var out []string
	for _, m := range plan.Moves {
		out = append(out, fmt.Sprintf("%s %s %s", m.Kind, m.Target(), m.Account))
	}
	return out
}

// MoveLines renders moves compactly for comparison: "lend 12 proj-b".
func MoveLines(plan *policy.Plan) []string {
	var out []string
	for _, m := range plan.Moves {
		out = append(out, fmt.Sprintf("%s %d %s", m.Kind, m.JobID, m.Account))
	}
	return out
}

// Says is what a test expects a job's explanation to be: its kind, and a part of its words
// (the figures or names it must give; "" when the kind says it all).
type Says struct {
	Code  policy.Code
	Words string
}

// CheckExplains fails t unless plan explains each job of want as want says.
func CheckExplains(t testing.TB, plan *policy.Plan, want map[uint32]Says) {
	t.Helper()
	for id, w := range want {
		x, ok := plan.Explanation(id)
		if !ok || x.Code != w.Code || !strings.Contains(x.Text, w.Words) {
			t.Errorf("explain %d:\n got %s %q\nwant %s with %q", id, x.Code, x.Text, w.Code, w.Words)
		}
	}
}
