package policy

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// randomCluster makes a synced cluster with nProjects projects and about nPending pending GPU
// jobs of every kind the policy distinguishes.
func randomCluster(tb testing.TB, seed uint64, nProjects, nPending int) (*Config, *Snapshot) {
	tb.Helper()
	r := rand.New(rand.NewPCG(seed, 42))
	types := []string{"a100", "v100", "h100"}
	parts := map[string][]string{"a100": {"a100", "a100-spot"}, "v100": {"v100"}, "h100": {"h100"}}
	cb := config().lendLimit("a100", 40*nProjects/10+r.IntN(10)).lendLimit("v100", 30*nProjects/10)
	for i := 0; i < nProjects; i++ {
		g := gpus(types[r.IntN(3)], r.IntN(8), types[r.IntN(3)], r.IntN(4))
		var opts []func(*Project)
		if r.IntN(2) == 0 {
			opts = append(opts, borrowLimit(r.IntN(12)))
		}
		if r.IntN(3) == 0 {
			opts = append(opts, borrowLimitOf(types[r.IntN(3)], r.IntN(6)))
		}
		opts = append(opts, weight(float64(1+r.IntN(4))))
		cb.project(fmt.Sprintf("proj-%03d", i), g, opts...)
	}
	cfg := cb.obj()
	sb := snapshot()
	for _, t := range types {
		for _, p := range parts[t] {
			total := max(8*nProjects/4, nPending/4) // enough that lending happens at every size
			sb.pool(p, t, total, r.IntN(total/2+1))
		}
	}
	for i := 0; i < nProjects; i++ {
		sb.usage(fmt.Sprintf("proj-%03d", i), float64(r.IntN(100000)))
	}
	id := uint32(1)
	for i := 0; i < nPending+nPending/4; i++ {
		acct := fmt.Sprintf("proj-%03d", r.IntN(nProjects+1)) // one account without quota
		t := types[r.IntN(3)]
		b := job(id, acct).gpu(t, 1+r.IntN(2)).partitions(parts[t]...).priority(int64(r.IntN(5)))
		id++
		switch k := r.IntN(20); {
		case k == 0:
			b.gpu(t, 0).gpu("", 1) // any type
		case k == 1:
			b.noRequeue()
		case k == 2:
			b.reason("Resources")
		case k == 3:
			b.borrowed()
		case k == 4:
			b.borrowed().noRequeue()
		case k == 5:
			b.qos("normal")
		case k == 6:
			b.nodes(2)
		case k == 7:
			b.interactive()
		case k == 8:
			b.borrowed().interactive()
		case k == 9 && i < nPending, k == 10 && i < nPending: // an array record of 1-6 tasks
			b.array(seq(uint32(r.IntN(3)), uint32(3+r.IntN(3)))...)
			if k == 10 {
				b.borrowed()
			}
		}
		if i >= nPending { // a quarter runs
			b.running(time.Duration(r.IntN(3600)) * time.Second)
			if r.IntN(3) == 0 {
				b.borrowed()
			}
		}
		sb.jobs(b.obj())
	}
	sb.s.WholeArrays = r.IntN(2) == 0 // before the sync: lends decide the reclaim order
	snap := sb.synced(tb, cfg).obj()
	return cfg, snap
}

// TestPlanInvariants checks, over many random clusters, what must hold for every plan.
func TestPlanInvariants(t *testing.T) {
	kinds := map[MoveKind]int{}
	for seed := uint64(0); seed < 200; seed++ {
		cfg, snap := randomCluster(t, seed, 8, 120)
		plan := BuildPlan(cfg, snap, t0)
		for _, m := range plan.Moves {
			kinds[m.Kind]++
		}
		if !plan.Acting || len(plan.QOS)+len(plan.Accounts) > 0 {
			t.Fatalf("seed %d: not a synced cluster: %q", seed, plan.Notes)
		}
		checkInvariants(t, seed, cfg, snap, plan)

		// Deterministic: input order does not matter.
		r := rand.New(rand.NewPCG(seed, 7))
		shuffled := *snap
		shuffled.Jobs = append([]Job(nil), snap.Jobs...)
		shuffled.Nodes = append([]Node(nil), snap.Nodes...)
		shuffled.QOS = append([]QOS(nil), snap.QOS...)
		r.Shuffle(len(shuffled.Jobs), func(i, j int) { shuffled.Jobs[i], shuffled.Jobs[j] = shuffled.Jobs[j], shuffled.Jobs[i] })
		r.Shuffle(len(shuffled.Nodes), func(i, j int) { shuffled.Nodes[i], shuffled.Nodes[j] = shuffled.Nodes[j], shuffled.Nodes[i] })
		r.Shuffle(len(shuffled.QOS), func(i, j int) { shuffled.QOS[i], shuffled.QOS[j] = shuffled.QOS[j], shuffled.QOS[i] })
		if again := BuildPlan(cfg, &shuffled, t0); !reflect.DeepEqual(plan, again) {
			t.Fatalf("seed %d: plan depends on input order:\n%v\n%v", seed, moveLines(plan), moveLines(again))
		}
	}
	// The clusters must exercise both kinds of moves, or the checks above prove little.
	if kinds[Lend] < 200 || kinds[Return] < 200 {
		t.Fatalf("random clusters gave too few moves: %v", kinds)
	}
	t.Logf("moves checked: %v", kinds)
}

func checkInvariants(t *testing.T, seed uint64, cfg *Config, snap *Snapshot, plan *Plan) {
	t.Helper()
	byID := map[uint32]*Job{}
	for i := range snap.Jobs {
		byID[snap.Jobs[i].ID] = &snap.Jobs[i]
	}
	lentBefore := map[string]int{}
	borrowedBefore := map[string]map[string]int{}
	for _, j := range snap.Jobs {
		if _, ok := cfg.Project(j.Account); ok && j.QOS == cfg.Settings.BorrowQOSName(j.Account) {
			if borrowedBefore[j.Account] == nil {
				borrowedBefore[j.Account] = map[string]int{}
			}
			addAll(lentBefore, scaled(j.need(), j.tasks()))
			addAll(borrowedBefore[j.Account], scaled(j.need(), j.tasks()))
		}
	}
	for _, m := range plan.Moves { // a returned job borrows no more
		if m.Kind == Return {
			for tp, n := range m.GPUs {
				lentBefore[tp] -= n
				borrowedBefore[m.Account][tp] -= n
			}
		}
	}
	idle := map[string]int{}
	for _, n := range snap.Nodes {
		for tp, c := range n.IdleGPUs {
			idle[tp] += c
		}
	}
	lent := map[string]int{}
	borrowed := map[string]map[string]int{}
	seen := map[string]bool{}
	movedRecord := map[uint32]bool{}
	sawLend := false
	for _, m := range plan.Moves {
		j := byID[m.JobID]
		if j == nil || j.State != StatePending || j.QOS != m.From || seen[m.Target()] {
			t.Fatalf("seed %d: move of a job that is not a distinct pending job in %s: %v", seed, m.From, m)
		}
		if (m.ArrayJobID != 0) != (j.ArrayJobID != 0) || (m.ArrayJobID != 0 && !slices.Contains(j.ArrayTasks, m.Task)) {
			t.Fatalf("seed %d: move %v names no task of record %d (tasks %v)", seed, m, j.ID, j.ArrayTasks)
		}
		seen[m.Target()] = true
		movedRecord[m.JobID] = true
		guar := cfg.Settings.GuaranteedQOSName(j.Account)
		switch m.Kind {
		case Lend:
			sawLend = true
			if m.From != guar || m.To != cfg.Settings.BorrowQOSName(j.Account) || !j.Requeueable() {
				t.Fatalf("seed %d: bad lend %v (requeue %v, batch %v)", seed, m, j.Requeue, j.Batch)
			}
			addAll(lent, m.GPUs)
			if borrowed[j.Account] == nil {
				borrowed[j.Account] = map[string]int{}
			}
			addAll(borrowed[j.Account], m.GPUs)
		case Return:
			if sawLend || m.From != cfg.Settings.BorrowQOSName(j.Account) || m.To != guar {
				t.Fatalf("seed %d: bad return %v (returns come first)", seed, m)
			}
		default:
			t.Fatalf("seed %d: move of kind %q", seed, m.Kind)
		}
	}
	if snap.WholeArrays { // an array record is lent whole or not at all
		lentTasks := map[uint32]int{}
		for _, m := range plan.Moves {
			if m.Kind == Lend && m.ArrayJobID != 0 {
				lentTasks[m.JobID]++
			}
		}
		for id, n := range lentTasks {
			if n != byID[id].tasks() {
				t.Fatalf("seed %d: %d of the %d tasks of array record %d lent", seed, n, byID[id].tasks(), id)
			}
		}
	}
	for tp, n := range lent {
		if n > idle[tp] {
			t.Fatalf("seed %d: lent %d %s but only %d idle", seed, n, tp, idle[tp])
		}
		if lim, ok := cfg.LendLimits[tp]; ok && n > 0 && lentBefore[tp]+n > lim {
			t.Fatalf("seed %d: lent %d %s on top of %d, over the lending limit %d", seed, n, tp, lentBefore[tp], lim)
		}
	}
	for acct, got := range borrowed {
		p, _ := cfg.Project(acct)
		total := sum(got)
		for tp, n := range got {
			if lim, ok := p.BorrowLimitByType[tp]; ok && borrowedBefore[acct][tp]+n > lim {
				t.Fatalf("seed %d: %s borrows %d %s over its limit %d", seed, acct, borrowedBefore[acct][tp]+n, tp, lim)
			}
		}
		if p.BorrowLimit != nil && sum(borrowedBefore[acct])+total > *p.BorrowLimit {
			t.Fatalf("seed %d: %s borrows %d over its limit %d", seed, acct, sum(borrowedBefore[acct])+total, *p.BorrowLimit)
		}
	}
	for _, x := range plan.Jobs {
		if strings.Contains(x.Text, "never cancel") || strings.Contains(x.Text, "never kill") {
			t.Fatalf("seed %d: %q promises what Slurm's preemption does not", seed, x.Text)
		}
	}
	for _, j := range snap.Jobs {
		if text, _ := plan.Explain(j.ID); j.QOS == "borrow" && j.State == StateRunning && len(j.need()) > 0 {
			if killed := strings.Contains(text, "would KILL it"); killed == j.Requeueable() {
				t.Fatalf("seed %d: running borrower %d (requeue %v, batch %v) explained as %q", seed, j.ID, j.Requeue, j.Batch, text)
			}
		}
		if j.State != StatePending {
			continue
		}
		if _, ok := plan.Explain(j.ID); !ok {
			t.Fatalf("seed %d: pending job %d (%s, %s, %s) has no explanation", seed, j.ID, j.Account, j.QOS, j.Reason)
		}
		// A pending borrower Slurm could not requeue goes back whenever quotad can move it.
		if _, hasQuota := cfg.Project(j.Account); hasQuota && j.QOS == "borrow" && !j.Requeueable() && len(j.need()) > 0 && !movedRecord[j.ID] {
			t.Fatalf("seed %d: pending borrower %d (requeue %v, batch %v) is not returned", seed, j.ID, j.Requeue, j.Batch)
		}
	}
}

func BenchmarkBuildPlan(b *testing.B) {
	for _, size := range []struct{ projects, pending int }{{100, 10000}, {100, 2000}} {
		b.Run(fmt.Sprintf("projects=%d/pending=%d", size.projects, size.pending), func(b *testing.B) {
			cfg, snap := randomCluster(b, 1, size.projects, size.pending)
			var plan *Plan
			b.ReportAllocs()
			for b.Loop() {
				plan = BuildPlan(cfg, snap, t0)
			}
			b.ReportMetric(float64(len(plan.Moves)), "moves")
		})
	}
}
