package policy

import (
	"fmt"
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
// Requeue=1, submitted id seconds before t0 so that ids give the age order.
type jobBuilder struct{ j Job }

func job(id uint32, account string) *jobBuilder {
	return &jobBuilder{Job{
		ID: id, Account: account, User: "u-" + account, State: StatePending, Reason: "QOSGrpGRES",
		QOS: "guar-" + account, Partitions: []string{"a100"}, Nodes: 1, Requeue: true,
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
func (b *jobBuilder) nodes(n int) *jobBuilder            { b.j.Nodes = n; return b }
func (b *jobBuilder) qos(q string) *jobBuilder           { b.j.QOS = q; return b }
func (b *jobBuilder) reason(r string) *jobBuilder        { b.j.Reason = r; return b }
func (b *jobBuilder) partitions(p ...string) *jobBuilder { b.j.Partitions = p; return b }
func (b *jobBuilder) noRequeue() *jobBuilder             { b.j.Requeue = false; return b }
func (b *jobBuilder) priority(p int64) *jobBuilder       { b.j.Priority = p; return b }
func (b *jobBuilder) alloc(g map[string]int) *jobBuilder { b.j.AllocatedGPUs = g; return b }
func (b *jobBuilder) borrowed() *jobBuilder              { b.j.QOS = "borrow"; return b }
func (b *jobBuilder) running(since time.Duration) *jobBuilder {
	b.j.State, b.j.Reason, b.j.StartTime = StateRunning, "None", t0.Add(-since)
	return b
}

// array makes the job a record of array tasks (its id is the array's).
func (b *jobBuilder) array(tasks ...uint32) *jobBuilder {
	b.j.ArrayJobID, b.j.ArrayTasks = b.j.ID, tasks
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

func (b *snapBuilder) pool(partition, t string, total, idle int) *snapBuilder {
	b.s.GPUs = append(b.s.GPUs, GPUPool{Partition: partition, Type: t, Total: total, Idle: idle})
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
		b.s.Accounts = append(b.s.Accounts, Account{Name: p.Account, QOS: []string{"normal"}, DefaultQOS: "normal"})
	}
	plan := BuildPlan(cfg, &b.s, t0)
	applySync(&b.s, plan)
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
			if c.QOS != nil {
				s.Accounts[i].QOS = c.QOS.To
			}
			if c.DefaultQOS != nil {
				s.Accounts[i].DefaultQOS = c.DefaultQOS.To
			}
		}
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
