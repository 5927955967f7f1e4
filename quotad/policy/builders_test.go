package policy

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// t0 is the snapshot time of every test scenario.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func intp(v int) *int           { return &v }
func floatp(v float64) *float64 { return &v }
func gpus(kv ...any) map[string]int { // gpus("a100", 2, "", 1)
	m := map[string]int{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1].(int)
	}
	return m
}

// jobBuilder makes test jobs: a pending one-node job in its account's guaranteed QOS, with
// Requeue=1 (an sbatch job Slurm can requeue), submitted id seconds before t0 so that ids give the age order.
type jobBuilder struct{ j Job }

func job(id uint32, account string) *jobBuilder {
	return &jobBuilder{Job{
		ID: id, Account: account, User: "u-" + account, State: StatePending, Reason: "QOSGrpGRES",
		QOS: "guar-" + account, Partitions: []string{"a100"}, Nodes: 1, Requeue: true, Batch: true, Priority: 1,
		SubmitTime: t0.Add(-time.Hour + time.Duration(id)*time.Second),
	}}
}

func (b *jobBuilder) gpu(t string, perNode int) *jobBuilder {
	if b.j.GPUsPerNode == nil {
		b.j.GPUsPerNode = map[string]int{}
	}
	b.j.GPUsPerNode[t] = perNode
	return b
}
func (b *jobBuilder) nodes(n int) *jobBuilder      { b.j.Nodes = n; return b }
func (b *jobBuilder) cpus(n int) *jobBuilder       { b.j.CPUs = n; return b }
func (b *jobBuilder) memMB(n int64) *jobBuilder    { b.j.MemoryMB = n; return b }
func (b *jobBuilder) account(a string) *jobBuilder { b.j.Account = a; return b }
func (b *jobBuilder) perJob(t string, n int) *jobBuilder { // --gpus=[t:]n
	if b.j.GPUsPerJob == nil {
		b.j.GPUsPerJob = map[string]int{}
	}
	b.j.GPUsPerJob[t] = n
	return b
}
func (b *jobBuilder) qos(q string) *jobBuilder           { b.j.QOS = q; return b }
func (b *jobBuilder) reason(r string) *jobBuilder        { b.j.Reason = r; return b }
func (b *jobBuilder) partitions(p ...string) *jobBuilder { b.j.Partitions = p; return b }
func (b *jobBuilder) noRequeue() *jobBuilder             { b.j.Requeue = false; return b }
func (b *jobBuilder) interactive() *jobBuilder           { b.j.Batch = false; return b } // salloc, srun
func (b *jobBuilder) priority(p int64) *jobBuilder       { b.j.Priority = p; return b }
func (b *jobBuilder) alloc(g map[string]int) *jobBuilder { b.j.AllocatedGPUs = g; return b }
func (b *jobBuilder) borrowed() *jobBuilder              { b.j.QOS = "borrow-" + b.j.Account; return b }
func (b *jobBuilder) running(since time.Duration) *jobBuilder {
	b.j.State, b.j.Reason, b.j.StartTime = StateRunning, "None", t0.Add(-since)
	return b
}

// array makes the job a record of array tasks (its id is the array's).
func (b *jobBuilder) array(tasks ...uint32) *jobBuilder {
	b.j.ArrayJobID, b.j.ArrayTasks = b.j.ID, tasks
	return b
}

// throttle sets the array's limit of tasks running at once (--array=...%n).
func (b *jobBuilder) throttle(n int) *jobBuilder { b.j.ArrayThrottle = n; return b }

// taskOf makes the job a task with a record of its own (split off, or started) of array arrayJob.
func (b *jobBuilder) taskOf(arrayJob, task uint32) *jobBuilder {
	b.j.ArrayJobID, b.j.ArrayTasks = arrayJob, []uint32{task}
	return b
}
func (b *jobBuilder) obj() Job { return b.j }

// jobs makes n copies of a job with ids from first on.
func jobs(first uint32, n int, mk func(id uint32) *jobBuilder) []Job {
	out := make([]Job, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, mk(first+uint32(i)).obj())
	}
	return out
}

// snapBuilder makes snapshots taken at t0 of the testbed's pools.
type snapBuilder struct{ s Snapshot }

func snapshot() *snapBuilder { return &snapBuilder{Snapshot{TakenAt: t0, Usage: map[string]float64{}}} }

// pool adds a partition's GPUs of type t as nodes of 4 GPUs (the testbed's shape), the idle
// ones filling the first nodes; every node has CPUs and memory to spare.
func (b *snapBuilder) pool(partition, t string, total, idle int) *snapBuilder {
	for total > 0 {
		n := min(total, 4)
		i := min(idle, n)
		b.node(gpuNode(fmt.Sprintf("%s-%d", partition, len(b.s.Nodes)+1), t, n, i, 64, 256000, partition))
		total, idle = total-n, idle-i
	}
	return b
}

// gpuNode is a usable node with total GPUs of type t, idle of them unallocated.
func gpuNode(name, t string, total, idle, freeCPUs int, freeMemMB int64, partitions ...string) Node {
	return Node{Name: name, Partitions: partitions, GPUs: map[string]int{t: total}, IdleGPUs: map[string]int{t: idle}, FreeCPUs: freeCPUs, FreeMemMB: freeMemMB}
}

func (b *snapBuilder) node(n Node) *snapBuilder { b.s.Nodes = append(b.s.Nodes, n); return b }

// account adds a sub-account under parent that inherits the parent's QOS list and default.
func (b *snapBuilder) account(name, parent string) *snapBuilder {
	b.s.Accounts = append(b.s.Accounts, Account{Name: name, Parent: parent})
	return b
}

// unreadable adds a job the adapter could not read.
func (b *snapBuilder) unreadable(id uint32, problem string) *snapBuilder {
	b.s.Unreadable = append(b.s.Unreadable, UnreadableJob{ID: id, Problem: problem})
	return b
}
func (b *snapBuilder) jobs(js ...Job) *snapBuilder { b.s.Jobs = append(b.s.Jobs, js...); return b }
func (b *snapBuilder) usage(account string, gpuSeconds float64) *snapBuilder {
	b.s.Usage[account] = gpuSeconds
	return b
}
func (b *snapBuilder) takenAt(t time.Time) *snapBuilder { b.s.TakenAt = t; return b }

// synced puts into the snapshot the QOS and accounts that cfg asks for, as if a previous cycle
// had applied its sync, so that a test sees only moves.
func (b *snapBuilder) synced(t testing.TB, cfg *Config) *snapBuilder {
	t.Helper()
	for _, p := range cfg.Projects {
		if !slices.ContainsFunc(b.s.Accounts, func(a Account) bool { return a.Name == p.Account }) {
			b.s.Accounts = append(b.s.Accounts, Account{Name: p.Account, QOS: []string{"normal"}, DefaultQOS: "normal", OwnQOS: true, OwnDefaultQOS: true})
		}
	}
	inherit(b.s.Accounts)
	// Twice: the first plan creates the structure, the second may lend and so change the
	// reclaim order (who may be preempted) once more.
	for range 2 {
		applySync(&b.s, BuildPlan(cfg, &b.s, t0))
	}
	if again := BuildPlan(cfg, &b.s, t0); len(again.QOS)+len(again.Accounts) > 0 {
		t.Fatalf("sync does not converge: %v %v", again.QOS, again.Accounts)
	}
	return b
}
func (b *snapBuilder) obj() *Snapshot { return &b.s }

// testbedPools are the testbed's GPUs with idle counts given.
func (b *snapBuilder) testbed(idleA100, idleSpot, idleV100 int) *snapBuilder {
	return b.pool("a100", "a100", 8, idleA100).pool("a100-spot", "a100", 4, idleSpot).pool("v100", "v100", 8, idleV100)
}

// config builds a quota table with testbed-like defaults.
type configBuilder struct{ c Config }

func config() *configBuilder {
	return &configBuilder{Config{Settings: Settings{GraceTime: 10 * time.Second, PreemptExemptTime: 30 * time.Second}}}
}

func (b *configBuilder) project(account string, guaranteed map[string]int, opts ...func(*Project)) *configBuilder {
	p := Project{Account: account, GPUs: guaranteed}
	for _, o := range opts {
		o(&p)
	}
	b.c.Projects = append(b.c.Projects, p)
	return b
}
func (b *configBuilder) lendLimit(t string, n int) *configBuilder {
	if b.c.LendLimits == nil {
		b.c.LendLimits = map[string]int{}
	}
	b.c.LendLimits[t] = n
	return b
}
func (b *configBuilder) obj() *Config { return &b.c }

func weight(w float64) func(*Project)  { return func(p *Project) { p.Weight = &w } }
func borrowLimit(n int) func(*Project) { return func(p *Project) { p.BorrowLimit = &n } }
func borrowLimitOf(t string, n int) func(*Project) {
	return func(p *Project) {
		if p.BorrowLimitByType == nil {
			p.BorrowLimitByType = map[string]int{}
		}
		p.BorrowLimitByType[t] = n
	}
}

// applySync is the fake adapter for sync actions: it changes the snapshot as sacctmgr would.
func applySync(s *Snapshot, plan *Plan) {
	for _, c := range plan.QOS {
		var q *QOS
		for i := range s.QOS {
			if strings.EqualFold(s.QOS[i].Name, c.Name) {
				q = &s.QOS[i]
			}
		}
		if q == nil {
			s.QOS = append(s.QOS, QOS{Name: c.Name})
			q = &s.QOS[len(s.QOS)-1]
		}
		for _, t := range c.GrpTRES {
			if q.GrpTRES == nil {
				q.GrpTRES = map[string]int64{}
			}
			if t.To == ClearLimit {
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
	inherit(s.Accounts)
}

// inherit resolves what accounts without their own QOS list or default get from their
// parents, as slurmdbd does.
func inherit(accounts []Account) {
	byName := map[string]*Account{}
	for i := range accounts {
		byName[accounts[i].Name] = &accounts[i]
	}
	var resolve func(a *Account, depth int)
	resolve = func(a *Account, depth int) {
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

// targetLines renders moves by what scontrol is told: "lend 12_3 proj-b".
func targetLines(plan *Plan) []string {
	var out []string
	for _, m := range plan.Moves {
		out = append(out, fmt.Sprintf("%s %s %s", m.Kind, m.Target(), m.Account))
	}
	return out
}

// moveLines renders moves compactly for comparison: "lend 12 proj-b".
func moveLines(plan *Plan) []string {
	var out []string
	for _, m := range plan.Moves {
		out = append(out, fmt.Sprintf("%s %d %s", m.Kind, m.JobID, m.Account))
	}
	return out
}
