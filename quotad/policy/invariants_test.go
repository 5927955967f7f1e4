package policy_test

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/quotad/policy"
	"github.com/slurmbridge/slurmbridge/quotad/policy/policytest"
)

// randomCluster makes a synced cluster with nProjects projects and about nPending pending GPU
// jobs of every kind the policy distinguishes.
func randomCluster(tb testing.TB, seed uint64, nProjects, nPending int) (*policy.Config, *policy.Snapshot) {
	tb.Helper()
	r := rand.New(rand.NewPCG(seed, 42))
	types := []string{"a100", "v100", "h100"}
	parts := map[string][]string{"a100": {"a100", "a100-spot"}, "v100": {"v100"}, "h100": {"h100"}}
	cb := policytest.MakeConfig().LendLimit("a100", 40*nProjects/10+r.IntN(10)).LendLimit("v100", 30*nProjects/10)
	for i := 0; i < nProjects; i++ {
		g := policytest.GPUs(types[r.IntN(3)], r.IntN(8), types[r.IntN(3)], r.IntN(4))
		var opts []func(*policy.Project)
		if r.IntN(2) == 0 {
			opts = append(opts, policytest.BorrowLimit(r.IntN(12)))
		}
		if r.IntN(3) == 0 {
			opts = append(opts, policytest.BorrowLimitOf(types[r.IntN(3)], r.IntN(6)))
		}
		opts = append(opts, policytest.Weight(float64(1+r.IntN(4))))
		if t := types[r.IntN(3)]; r.IntN(4) == 0 && g[t] > 0 {
			opts = append(opts, policytest.LendLimitOf(t, r.IntN(g[t]+1)))
		}
		cb.Project(fmt.Sprintf("proj-%03d", i), g, opts...)
	}
	cfg := cb.Obj()
	sb := policytest.MakeSnapshot()
	for _, t := range types {
		for _, p := range parts[t] {
			total := max(8*nProjects/4, nPending/4) // enough that lending happens at every size
			sb.Pool(p, t, total, r.IntN(total/2+1))
		}
	}
	for i := 0; i < nProjects; i++ {
		sb.Usage(fmt.Sprintf("proj-%03d", i), float64(r.IntN(100000)))
	}
	id := uint32(1)
	for i := 0; i < nPending+nPending/4; i++ {
		acct := fmt.Sprintf("proj-%03d", r.IntN(nProjects+1)) // one account without quota
		t := types[r.IntN(3)]
		b := policytest.MakeJob(id, acct).GPU(t, 1+r.IntN(2)).Partitions(parts[t]...).Priority(int64(r.IntN(5)))
		id++
		switch k := r.IntN(20); {
		case k == 0:
			b.GPU(t, 0).GPU("", 1) // any type
		case k == 1:
			b.NoRequeue()
		case k == 2:
			b.Reason("Resources")
		case k == 3:
			b.Borrowed()
		case k == 4:
			b.Borrowed().NoRequeue()
		case k == 5:
			b.QOS("normal")
		case k == 6:
			b.Nodes(2)
		case k == 7:
			b.Interactive()
		case k == 8:
			b.Borrowed().Interactive()
		case k == 9 && i < nPending, k == 10 && i < nPending: // an array record of 1-6 tasks
			b.Array(seq(uint32(r.IntN(3)), uint32(3+r.IntN(3)))...)
			if k == 10 {
				b.Borrowed()
			}
		}
		if i >= nPending { // a quarter runs
			b.Running(time.Duration(r.IntN(3600)) * time.Second)
			if r.IntN(3) == 0 {
				b.Borrowed()
			}
		}
		sb.Jobs(b.Obj())
	}
	sb.WholeArrays(r.IntN(2) == 0) // before the sync: lends decide the reclaim order
	// Some jobs a claim took back 10 s ago: with a 1 min backoff none of them may be lent.
	cfg.Settings.ReclaimBackoff = time.Minute
	for id := uint32(1); id < uint32(nPending); id++ {
		if r.IntN(15) == 0 {
			sb.Reclaimed(id, cfg.Settings.BorrowQOSName(fmt.Sprintf("proj-%03d", r.IntN(nProjects))), time.Minute, 10*time.Second)
		}
	}
	snap := sb.Synced(tb, cfg).Obj()
	return cfg, snap
}

// TestFactsStayFixed checks that no step writes a project's facts: what the table and the
// snapshot say of a project is the same after the plan as before it.
func TestFactsStayFixed(t *testing.T) {
	for seed := uint64(0); seed < 50; seed++ {
		cfg, snap := randomCluster(t, seed, 8, 120)
		if written := policy.FactsWritten(cfg, snap, policytest.T0); len(written) > 0 {
			t.Fatalf("seed %d: a step wrote facts:\n%s", seed, strings.Join(written, "\n"))
		}
	}
}

// TestStepsKeepHandedBooks checks that no step writes the books it was handed, their counts
// nor their idle nodes: a step that changes the books changes its own copy, and hands that on.
func TestStepsKeepHandedBooks(t *testing.T) {
	changed := map[string]int{}
	for seed := uint64(0); seed < 50; seed++ {
		cfg, snap := randomCluster(t, seed, 8, 120)
		if seed%2 == 1 { // jobs quotad cannot read, for which countUnreadable keeps idle GPUs back
			acct := fmt.Sprintf("proj-%03d", seed%8)
			for i, qos := range []string{cfg.Settings.GuaranteedQOSName(acct), cfg.Settings.BorrowQOSName(acct)} {
				snap.Unreadable = append(snap.Unreadable, policy.UnreadableJob{ID: uint32(100001 + i), Account: acct, User: "u1", QOS: qos, State: policy.StatePending, Problem: `tres_per_node "gres/gpu:a100:two"`})
			}
		}
		steps := policy.StepsBooks(cfg, snap, policytest.T0)
		if len(steps) != 9 {
			t.Fatalf("seed %d: %d steps checked, want 9", seed, len(steps))
		}
		for _, s := range steps {
			if s.After != s.Before {
				line, was, now := firstDifference(s.Before, s.After)
				t.Fatalf("seed %d: %s wrote the books it was handed: line %d was %q, is %q", seed, s.Step, line, was, now)
			}
			if s.Result != s.Before {
				changed[s.Step]++
			}
		}
	}
	// The steps that count must change books of their own, or the check above proves little.
	for _, step := range []string{"classify", "reserveInQuota", "countUnreadable", "settleBorrowers", "lend"} {
		if changed[step] == 0 {
			t.Errorf("%s changed the books in none of the clusters", step)
		}
	}
}

// firstDifference is the first line (from 1) where a and b differ, and that line in each.
func firstDifference(a, b string) (int, string, string) {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range max(len(la), len(lb)) {
		var x, y string
		if i < len(la) {
			x = la[i]
		}
		if i < len(lb) {
			y = lb[i]
		}
		if x != y {
			return i + 1, x, y
		}
	}
	return 0, "", ""
}

// TestPlanInvariants checks, over many random clusters, what must hold for every plan.
func TestPlanInvariants(t *testing.T) {
	kinds := map[policy.MoveKind]int{}
	for seed := uint64(0); seed < 200; seed++ {
		cfg, snap := randomCluster(t, seed, 8, 120)
		plan := policy.BuildPlan(cfg, snap, policytest.T0)
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
		shuffled.Jobs = append([]policy.Job(nil), snap.Jobs...)
		shuffled.Nodes = append([]policy.Node(nil), snap.Nodes...)
		shuffled.QOS = append([]policy.QOS(nil), snap.QOS...)
		r.Shuffle(len(shuffled.Jobs), func(i, j int) { shuffled.Jobs[i], shuffled.Jobs[j] = shuffled.Jobs[j], shuffled.Jobs[i] })
		r.Shuffle(len(shuffled.Nodes), func(i, j int) { shuffled.Nodes[i], shuffled.Nodes[j] = shuffled.Nodes[j], shuffled.Nodes[i] })
		r.Shuffle(len(shuffled.QOS), func(i, j int) { shuffled.QOS[i], shuffled.QOS[j] = shuffled.QOS[j], shuffled.QOS[i] })
		if again := policy.BuildPlan(cfg, &shuffled, policytest.T0); !reflect.DeepEqual(plan, again) {
			t.Fatalf("seed %d: plan depends on input order:\n%v\n%v", seed, policytest.MoveLines(plan), policytest.MoveLines(again))
		}
	}
	// The clusters must exercise both kinds of moves, or the checks above prove little.
	if kinds[policy.Lend] < 200 || kinds[policy.Return] < 200 {
		t.Fatalf("random clusters gave too few moves: %v", kinds)
	}
	t.Logf("moves checked: %v", kinds)
}

func checkInvariants(t *testing.T, seed uint64, cfg *policy.Config, snap *policy.Snapshot, plan *policy.Plan) {
	t.Helper()
	byID := map[uint32]*policy.Job{}
	for i := range snap.Jobs {
		byID[snap.Jobs[i].ID] = &snap.Jobs[i]
	}
	reclaimed := map[uint32]bool{} // all within their backoff (randomCluster)
	for _, r := range snap.Reclaims {
		reclaimed[r.JobID] = true
	}
	for _, m := range plan.Moves {
		if m.Kind == policy.Lend && reclaimed[m.JobID] {
			t.Fatalf("seed %d: job %d lent within its reclaim backoff", seed, m.JobID)
		}
	}
	lentBefore := map[string]int{}
	borrowedBefore := map[string]map[string]int{}
	for _, j := range snap.Jobs {
		if _, ok := cfg.Project(j.Account); ok && j.QOS == cfg.Settings.BorrowQOSName(j.Account) {
			if borrowedBefore[j.Account] == nil {
				borrowedBefore[j.Account] = map[string]int{}
			}
			policy.AddAll(lentBefore, policy.Scaled(j.Need(), j.Tasks()))
			policy.AddAll(borrowedBefore[j.Account], policy.Scaled(j.Need(), j.Tasks()))
		}
	}
	for _, m := range plan.Moves { // a returned job borrows no more
		if m.Kind == policy.Return {
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
		if j == nil || j.State != policy.StatePending || j.QOS != m.From || seen[m.Target()] {
			t.Fatalf("seed %d: move of a job that is not a distinct pending job in %s: %v", seed, m.From, m)
		}
		if (m.ArrayJobID != 0) != (j.ArrayJobID != 0) || (m.ArrayJobID != 0 && !slices.Contains(j.ArrayTasks, m.Task)) {
			t.Fatalf("seed %d: move %v names no task of record %d (tasks %v)", seed, m, j.ID, j.ArrayTasks)
		}
		seen[m.Target()] = true
		movedRecord[m.JobID] = true
		guar := cfg.Settings.GuaranteedQOSName(j.Account)
		switch m.Kind {
		case policy.Lend:
			sawLend = true
			if m.From != guar || m.To != cfg.Settings.BorrowQOSName(j.Account) || !j.Requeueable() {
				t.Fatalf("seed %d: bad lend %v (requeue %v, batch %v)", seed, m, j.Requeue, j.Batch)
			}
			policy.AddAll(lent, m.GPUs)
			if borrowed[j.Account] == nil {
				borrowed[j.Account] = map[string]int{}
			}
			policy.AddAll(borrowed[j.Account], m.GPUs)
		case policy.Return:
			if sawLend || m.From != cfg.Settings.BorrowQOSName(j.Account) || m.To != guar {
				t.Fatalf("seed %d: bad return %v (returns come first)", seed, m)
			}
		case policy.Adopt:
			// A job in a QOS its account no longer allows (normal, here) joins its guarantee.
			if sawLend || m.To != guar || m.From == guar || cfg.Settings.IsBorrowQOS(m.From) {
				t.Fatalf("seed %d: bad adoption %v", seed, m)
			}
		default:
			t.Fatalf("seed %d: move of kind %q", seed, m.Kind)
		}
	}
	if snap.WholeArrays { // an array record is lent whole or not at all
		lentTasks := map[uint32]int{}
		for _, m := range plan.Moves {
			if m.Kind == policy.Lend && m.ArrayJobID != 0 {
				lentTasks[m.JobID]++
			}
		}
		for id, n := range lentTasks {
			if n != byID[id].Tasks() {
				t.Fatalf("seed %d: %d of the %d tasks of array record %d lent", seed, n, byID[id].Tasks(), id)
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
		total := policy.Sum(got)
		for tp, n := range got {
			if lim, ok := p.BorrowLimitByType[tp]; ok && borrowedBefore[acct][tp]+n > lim {
				t.Fatalf("seed %d: %s borrows %d %s over its limit %d", seed, acct, borrowedBefore[acct][tp]+n, tp, lim)
			}
		}
		if p.BorrowLimit != nil && policy.Sum(borrowedBefore[acct])+total > *p.BorrowLimit {
			t.Fatalf("seed %d: %s borrows %d over its limit %d", seed, acct, policy.Sum(borrowedBefore[acct])+total, *p.BorrowLimit)
		}
	}
	// Every move and every explanation says its kind; a moved single job's explanation is of
	// the same kind as its move.
	explained := map[uint32]policy.JobExplanation{}
	for _, x := range plan.Jobs {
		if x.Code == "" {
			t.Fatalf("seed %d: job %d explained without a code: %q", seed, x.JobID, x.Text)
		}
		explained[x.JobID] = x
	}
	for _, m := range plan.Moves {
		switch {
		case m.Kind == policy.Lend && m.Code != policy.CodeLent,
			m.Kind == policy.Return && !strings.HasPrefix(string(m.Code), "return-") && m.Code != policy.CodeElasticWorkerReturned:
			t.Fatalf("seed %d: %s has code %q", seed, m, m.Code)
		}
		if byID[m.JobID].Tasks() == 1 && explained[m.JobID].Code != m.Code {
			t.Fatalf("seed %d: %s (code %s) explained as %s: %q", seed, m, m.Code, explained[m.JobID].Code, explained[m.JobID].Text)
		}
	}
	for _, x := range plan.Jobs {
		if strings.Contains(x.Text, "never cancel") || strings.Contains(x.Text, "never kill") {
			t.Fatalf("seed %d: %q promises what Slurm's preemption does not", seed, x.Text)
		}
	}
	for _, j := range snap.Jobs {
		// A borrower is in its project's borrow QOS (the random clusters' jobs borrow in their own
		// account's: policytest's Borrowed).
		_, hasQuota := cfg.Project(j.Account)
		borrowing := hasQuota && j.QOS == cfg.Settings.BorrowQOSName(j.Account)
		if text, _ := plan.Explain(j.ID); borrowing && j.State == policy.StateRunning && len(j.Need()) > 0 {
			if killed := strings.Contains(text, "would KILL it"); killed == j.Requeueable() {
				t.Fatalf("seed %d: running borrower %d (requeue %v, batch %v) explained as %q", seed, j.ID, j.Requeue, j.Batch, text)
			}
		}
		if j.State != policy.StatePending {
			continue
		}
		if _, ok := plan.Explain(j.ID); !ok {
			t.Fatalf("seed %d: pending job %d (%s, %s, %s) has no explanation", seed, j.ID, j.Account, j.QOS, j.Reason)
		}
		// A pending borrower Slurm could not requeue goes back whenever quotad can move it.
		if borrowing && !j.Requeueable() && len(j.Need()) > 0 && !movedRecord[j.ID] {
			t.Fatalf("seed %d: pending borrower %d (requeue %v, batch %v) is not returned", seed, j.ID, j.Requeue, j.Batch)
		}
	}
}

func BenchmarkBuildPlan(b *testing.B) {
	for _, size := range []struct{ projects, pending int }{{100, 10000}, {100, 2000}} {
		b.Run(fmt.Sprintf("projects=%d/pending=%d", size.projects, size.pending), func(b *testing.B) {
			cfg, snap := randomCluster(b, 1, size.projects, size.pending)
			var plan *policy.Plan
			b.ReportAllocs()
			for b.Loop() {
				plan = policy.BuildPlan(cfg, snap, policytest.T0)
			}
			b.ReportMetric(float64(len(plan.Moves)), "moves")
		})
	}
}

// A cluster of a site's size with its idle GPUs scattered one per node, and a queue of
// over-quota jobs that each want two on one node: none fits anywhere. Each job's question has
// the same answer, so a plan must not scan every node once per job (pending × nodes).
func BenchmarkBuildPlanNothingFits(b *testing.B) {
	for _, size := range []struct{ nodes, pending int }{{152, 5000}, {1523, 50000}} {
		b.Run(fmt.Sprintf("nodes=%d/pending=%d", size.nodes, size.pending), func(b *testing.B) {
			cb := policytest.MakeConfig()
			for p := range 40 {
				cb.Project(fmt.Sprintf("team%02d", p+1), policytest.GPUs("g2", 1))
			}
			cfg := cb.Obj()
			sb := policytest.MakeSnapshot()
			for i := range size.nodes {
				sb.Node(policytest.GPUNode(fmt.Sprintf("g2-%d", i+1), "g2", 8, 1, 96, 393216, "g2"))
			}
			sb.Jobs(policytest.Jobs(1, size.pending, func(id uint32) *policytest.JobWrapper {
				return policytest.MakeJob(id, fmt.Sprintf("team%02d", 1+id%40)).GPU("g2", 2).Partitions("g2")
			})...)
			snap := sb.Synced(b, cfg).Obj()
			var plan *policy.Plan
			b.ReportAllocs()
			for b.Loop() {
				plan = policy.BuildPlan(cfg, snap, policytest.T0)
			}
			if len(plan.Moves) != 0 {
				b.Fatalf("%d moves: a two-GPU job fitted where every node has one idle GPU", len(plan.Moves))
			}
		})
	}
}
