package scale

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/slurmbridge/slurmbridge/bench/replay"
	"github.com/slurmbridge/slurmbridge/bridge/pools"
	"github.com/slurmbridge/slurmbridge/bridge/testbed/facts"
)

// nodeList builds a node list CSV: each shape "CPUS,MIB,GPUS,MODEL" repeated count times.
func nodeList(shapes map[string]int) string {
	var b strings.Builder
	b.WriteString("sn,cpu_milli,memory_mib,gpu,model\n")
	i := 0
	for _, shape := range slices.Sorted(maps.Keys(shapes)) {
		for range shapes[shape] {
			cpus, rest, _ := strings.Cut(shape, ",")
			fmt.Fprintf(&b, "node-%04d,%s000,%s\n", i, cpus, rest)
			i++
		}
	}
	return b.String()
}

// A small cluster in the trace's manner: many 8-GPU nodes, T4 nodes of two sizes whose CPUs
// differ, a few P100s, a single A10 and CPU-only nodes of two shapes.
var traceLike = map[string]int{
	"96,393216,8,G2":    55,
	"104,524288,2,T4":   38,
	"96,393216,4,T4":    2,
	"16,122880,2,P100":  10,
	"64,262144,2,P100":  3,
	"128,1048576,1,A10": 1,
	"32,262144,0,":      16,
	"96,524288,0,":      10,
}

func readNodes(t *testing.T, csv string) []TraceNode {
	t.Helper()
	nodes, err := ReadNodes(strings.NewReader(csv))
	if err != nil {
		t.Fatal(err)
	}
	return nodes
}

func TestGroupsAreModelAndGPUsPerNodeWithTheLargestShape(t *testing.T) {
	groups := Groups(readNodes(t, nodeList(traceLike)))
	var got []string
	for _, g := range groups {
		got = append(got, fmt.Sprintf("%s %s %d×%d gpus %d cpus %d MB", g.Pool, g.Type, g.Nodes, g.GPUs, g.CPUs, g.MemoryMB))
	}
	want := []string{
		"cpu  26×0 gpus 96 cpus 524288 MB",
		"a10x1 a10 1×1 gpus 128 cpus 1048576 MB",
		"g2x8 g2 55×8 gpus 96 cpus 393216 MB",
		"p100x2 p100 13×2 gpus 64 cpus 262144 MB",
		"t4x2 t4 38×2 gpus 104 cpus 524288 MB",
		"t4x4 t4 2×4 gpus 96 cpus 393216 MB",
	}
	if !slices.Equal(got, want) {
		t.Errorf("groups:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestScaleKeepsTheTracesProportions(t *testing.T) {
	groups := Groups(readNodes(t, nodeList(traceLike)))
	total := 0
	for _, g := range groups {
		total += g.Nodes
	}
	for _, tc := range []struct {
		nodes int
		want  map[string]int
	}{
		// Its own size gives every group back.
		{total, map[string]int{"cpu": 26, "a10x1": 1, "g2x8": 55, "p100x2": 13, "t4x2": 38, "t4x4": 2}},
		// A tenth: exact shares 2.50, 0.10, 5.30, 1.25, 3.66, 0.19 by largest remainder, then the A10
		// and 4-T4 groups lifted to one node each from the groups furthest above their share.
		{13, map[string]int{"cpu": 2, "a10x1": 1, "g2x8": 5, "p100x2": 1, "t4x2": 3, "t4x4": 1}},
		// As few as there are groups: one each.
		{6, map[string]int{"cpu": 1, "a10x1": 1, "g2x8": 1, "p100x2": 1, "t4x2": 1, "t4x4": 1}},
	} {
		scaled, err := Scale(groups, tc.nodes)
		if err != nil {
			t.Fatal(err)
		}
		got, sum := map[string]int{}, 0
		for _, g := range scaled {
			got[g.Pool] = g.Nodes
			sum += g.Nodes
		}
		if !maps.Equal(got, tc.want) || sum != tc.nodes {
			t.Errorf("%d nodes: %v (%d in all), want %v", tc.nodes, got, sum, tc.want)
		}
	}
	for _, n := range []int{5, total + 1} {
		if _, err := Scale(groups, n); err == nil {
			t.Errorf("%d nodes: no error, want one (6 groups, %d nodes in the trace)", n, total)
		}
	}
}

func TestReadNodesRefusesWhatIsNoNode(t *testing.T) {
	for _, tc := range []struct{ name, csv, want string }{
		{"missing column", "sn,cpu_milli,memory_mib,gpu\nn,1000,1,0\n", `no column "model"`},
		{"negative", "sn,cpu_milli,memory_mib,gpu,model\nn,-1000,1,0,\n", "line 2: cpu_milli"},
		{"GPUs without model", "sn,cpu_milli,memory_mib,gpu,model\nn,1000,1,2,\n", "line 2: node n has 2 GPUs"},
		{"model without GPUs", "sn,cpu_milli,memory_mib,gpu,model\nn,1000,1,0,T4\n", "line 2: node n has 0 GPUs"},
		{"empty", "sn,cpu_milli,memory_mib,gpu,model\n", "no nodes"},
	} {
		if _, err := ReadNodes(strings.NewReader(tc.csv)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}

func TestProjectsAreUnequalAndTheAssignmentIsSeeded(t *testing.T) {
	rule := Rule{Seed: 7, Count: 20, Zipf: 1}
	projects := rule.Projects()
	counts := make([]int, len(projects))
	for i := range 20000 {
		counts[rule.ProjectOf(fmt.Sprintf("openb-pod-%05d", i), projects)]++
	}
	// 1/k over 20 projects: the first has 1/H(20) ≈ 27.8 % of the pods, the last 1.4 %.
	if first := float64(counts[0]) / 20000; first < 0.26 || first > 0.30 {
		t.Errorf("the largest project has %.3f of the pods, want about 0.278", first)
	}
	if last := float64(counts[19]) / 20000; last < 0.010 || last > 0.018 {
		t.Errorf("the smallest project has %.3f of the pods, want about 0.014", last)
	}
	for i := range 100 {
		name := fmt.Sprintf("openb-pod-%05d", i)
		if a, b := rule.ProjectOf(name, projects), rule.ProjectOf(name, rule.Projects()); a != b {
			t.Fatalf("%s: project %d, then %d", name, a, b)
		}
	}
	other := Rule{Seed: 8, Count: 20, Zipf: 1}
	moved := 0
	for i := range 1000 {
		name := fmt.Sprintf("openb-pod-%05d", i)
		if rule.ProjectOf(name, projects) != other.ProjectOf(name, projects) {
			moved++
		}
	}
	if moved < 500 {
		t.Errorf("another seed moved %d of 1000 pods, want most", moved)
	}
}

// Guarantees follow use: a project whose pods used a type gets that type's GPUs in proportion,
// typed pods count for their types alone, and each type's guarantees add up to its GPUs.
func TestGuaranteesFollowWhatTheProjectsUsed(t *testing.T) {
	groups := []Group{
		{Pool: "cpu", Nodes: 2, CPUs: 8, MemoryMB: 1000},
		{Pool: "t4x2", Model: "T4", Type: "t4", GPUs: 2, Nodes: 10, CPUs: 8, MemoryMB: 1000},
		{Pool: "g2x8", Model: "G2", Type: "g2", GPUs: 8, Nodes: 5, CPUs: 8, MemoryMB: 1000},
	}
	rule := Rule{Seed: 1, Count: 3, Zipf: 1, Guaranteed: 1}
	projects := rule.Projects()
	// Names the rule sends to each project.
	names := map[int][]string{}
	for i := 0; len(names[0]) < 3 || len(names[1]) < 3 || len(names[2]) < 3; i++ {
		name := fmt.Sprintf("pod-%d", i)
		p := rule.ProjectOf(name, projects)
		names[p] = append(names[p], name)
	}
	task := func(name string, gpus int, seconds int64, spec ...string) replay.Task {
		return replay.Task{Name: name, NumGPU: gpus, GPUSpec: spec, Scheduled: 100, Deletion: 100 + seconds, Creation: 0}
	}
	tasks := []replay.Task{
		// Project 0: T4 only, 3 GPU-hours' worth.
		task(names[0][0], 1, 3*3600, "T4"),
		// Project 1: G2 only, 1 GPU-hour; a pod never scheduled and a CPU pod use nothing.
		task(names[1][0], 1, 3600, "G2"),
		{Name: names[1][1], NumGPU: 8, Scheduled: -1, Deletion: 5000},
		task(names[1][2], 0, 99999),
		// Project 2: any type, 1 GPU-hour: spread by the types' GPUs (20 t4, 40 g2).
		task(names[2][0], 1, 3600),
	}
	got := rule.Guarantee(projects, tasks, groups)
	// t4: project 0 used 3 h, project 2 1/3 h → 20 GPUs split 18 : 2.
	// g2: project 1 used 1 h, project 2 2/3 h → 40 GPUs split 24 : 16.
	want := []map[string]int{{"t4": 18}, {"g2": 24}, {"t4": 2, "g2": 16}}
	for i := range want {
		if !maps.Equal(got[i].GPUs, want[i]) {
			t.Errorf("%s: %v, want %v", got[i].Account, got[i].GPUs, want[i])
		}
	}
}

// A project whose pods used no GPU-time (or too little to round to one GPU) still gets one GPU
// of the largest type, from the project holding the most: under static quotas it can run.
func TestEveryProjectIsGuaranteedAGPU(t *testing.T) {
	groups := []Group{
		{Pool: "t4x2", Model: "T4", Type: "t4", GPUs: 2, Nodes: 2, CPUs: 8, MemoryMB: 1000},
		{Pool: "g2x8", Model: "G2", Type: "g2", GPUs: 8, Nodes: 1, CPUs: 8, MemoryMB: 1000},
	}
	rule := Rule{Seed: 1, Count: 3, Zipf: 1, Guaranteed: 1}
	projects := rule.Projects()
	var name string
	for i := 0; name == ""; i++ {
		if n := fmt.Sprintf("pod-%d", i); rule.ProjectOf(n, projects) == 0 {
			name = n
		}
	}
	got := rule.Guarantee(projects, []replay.Task{{Name: name, NumGPU: 1, Scheduled: 0, Deletion: 3600}}, groups)
	want := []map[string]int{{"t4": 4, "g2": 6}, {"g2": 1}, {"g2": 1}}
	for i := range want {
		if !maps.Equal(got[i].GPUs, want[i]) {
			t.Errorf("%s: %v, want %v", got[i].Account, got[i].GPUs, want[i])
		}
	}
}

// The preset's files are what testbed.sh and the plugin read: the facts load, their pools are
// the groups with their own shapes, and pools.yaml parses with the same shapes.
func TestPresetFilesAgreeWithEachOther(t *testing.T) {
	groups, err := Scale(Groups(readNodes(t, nodeList(traceLike))), 20)
	if err != nil {
		t.Fatal(err)
	}
	rule := Rule{Seed: 1, Count: 4, Zipf: 1, Guaranteed: 1}
	projects := rule.Guarantee(rule.Projects(), []replay.Task{{Name: "p", NumGPU: 1, Scheduled: 0, Deletion: 10}}, groups)
	base, err := facts.LoadRepo()
	if err != nil {
		t.Fatal(err)
	}
	data, err := FactsYAML(base, "scaletest", groups, projects, "a test")
	if err != nil {
		t.Fatal(err)
	}
	back, err := facts.Parse(data, "facts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pools.Parse(PoolsYAML(groups, "a test"), "pools.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Pools) != len(groups) || len(cfg.Pools) != len(groups) {
		t.Fatalf("%d facts pools, %d pools.yaml pools, want %d", len(back.Pools), len(cfg.Pools), len(groups))
	}
	for _, p := range back.Pools {
		shape, pool := back.ShapeOf(p), cfg.Pool(p.Name)
		if pool == nil {
			t.Errorf("pool %s is not in pools.yaml", p.Name)
			continue
		}
		if pool.NodeCount != p.Nodes || pool.Node.GPUs != back.GPUsOf(p) || pool.Node.CPUs != shape.Sockets*shape.CoresPerSocket ||
			pool.Node.MemoryMB != uint64(shape.MemoryMB) || pool.GPUType != p.GPU {
			t.Errorf("pool %s: pools.yaml %+v, facts %d nodes of %d %s GPUs, %+v", p.Name, *pool, p.Nodes, back.GPUsOf(p), p.GPU, shape)
		}
	}
	if back.Local.JobAcctGather != "none" {
		t.Errorf("the preset samples its jobs' processes (jobacct_gather/%s): on one host that is every node's /proc", back.Local.JobAcctGather)
	}
	if cfg.DefaultCPUPool != CPUPool || cfg.DefaultGPUPool != "g2x8" {
		t.Errorf("default pools %q and %q, want cpu and g2x8 (the most GPUs)", cfg.DefaultCPUPool, cfg.DefaultGPUPool)
	}
	if got := back.GPUs(); got != groupGPUs(groups) {
		t.Errorf("the facts have %d GPUs, the groups %d", got, groupGPUs(groups))
	}
}

func groupGPUs(groups []Group) int {
	n := 0
	for _, g := range groups {
		n += g.GPUs * g.Nodes
	}
	return n
}
