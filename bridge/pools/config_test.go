package pools

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestLoadTestbedPools(t *testing.T) {
	got, err := Load("testdata/pools.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := mustNew(t, testbedConfig())
	if got.DefaultCPUPool != want.DefaultCPUPool || got.DefaultGPUPool != want.DefaultGPUPool || got.Policy != want.Policy {
		t.Errorf("defaults/policy = %q %q %q, want %q %q %q", got.DefaultCPUPool, got.DefaultGPUPool, got.Policy,
			want.DefaultCPUPool, want.DefaultGPUPool, want.Policy)
	}
	if !reflect.DeepEqual(got.Pools, want.Pools) {
		t.Errorf("pools differ:\n got %+v\nwant %+v", got.Pools, want.Pools)
	}
}

func TestLoadMissingFile(t *testing.T) {
	if _, err := Load("testdata/no-such-file.yaml"); err == nil {
		t.Error("Load of a missing file succeeded")
	}
}

// problemAt is an expected problem: its line and a substring of its message.
type problemAt struct {
	Line int
	Msg  string
}

func checkProblems(t *testing.T, got Problems, want []problemAt) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%d problems, want %d:\n%v", len(got), len(want), got)
	}
	for i := 0; i < len(got) && i < len(want); i++ {
		if got[i].Line != want[i].Line || !strings.Contains(got[i].Msg, want[i].Msg) {
			t.Errorf("problem %d = line %d %q, want line %d containing %q", i, got[i].Line, got[i].Msg, want[i].Line, want[i].Msg)
		}
	}
}

func TestDecodeProblems(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []problemAt
	}{
		{
			name: "unknown keys everywhere, all reported",
			yaml: `default_cpu_pool: cpu
polcy: cheapest
pools:
  - name: cpu
    gpu_typ: a100
    node: {cpus: 8, memory_mb: 32000, disk_mb: 10}
`,
			want: []problemAt{
				{2, `unknown key "polcy" (known keys: default_cpu_pool, default_gpu_pool, policy, borrow_qos, elastic_qos, borrow_qos_admins, pools)`},
				{5, `unknown key "gpu_typ"`},
				{6, `node: unknown key "disk_mb" (known keys: gpus, cpus, memory_mb)`},
			},
		},
		{
			name: "repeated key",
			yaml: "policy: cheapest\npolicy: fastest\npools: []\n",
			want: []problemAt{{2, "policy is repeated (first at line 1)"}},
		},
		{
			name: "values of the wrong kind",
			yaml: `pools:
  - name: a
    price_per_gpu_hour: cheap
    spot: yes
    node_count: -1
    fallback: b
    speed: [1, 2]
    node: {gpus: 1.5, cpus: "8", memory_mb: ~}
  - name: [x]
`,
			want: []problemAt{
				{3, `price_per_gpu_hour: want a number, got "cheap"`},
				{4, `spot: want true or false, got "yes"`},
				{5, "node_count: want a whole number"},
				{6, `fallback: want a list of pool names, got "b"`},
				{7, "speed: want a mapping of workload class to speed, got a list"},
				{8, `node.gpus: want a whole number from 0 to 2147483647, got "1.5"`},
				{8, `node.cpus: want a whole number`},
				{8, "node.memory_mb: want a whole number from 0 to 9223372036854775807, got nothing"},
				{9, "name: want a string, got a list"},
			},
		},
		{
			name: "pools is not a list",
			yaml: "pools: {cpu: {}}\n",
			want: []problemAt{{1, "pools: want a list of pools, got a mapping"}},
		},
		{
			name: "a pool is not a mapping",
			yaml: "pools:\n  - cpu\n",
			want: []problemAt{{2, "want a mapping of name, description"}},
		},
		{
			name: "YAML syntax error",
			yaml: "policy: cheapest\npools: x: y\n",
			want: []problemAt{{2, "mapping values are not allowed in this context"}},
		},
		{
			name: "empty file",
			yaml: "",
			want: []problemAt{{0, "the file is empty"}},
		},
		{
			name: "top level is a list",
			yaml: "- a\n",
			want: []problemAt{{1, "want a mapping of default_cpu_pool"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, problems := Decode([]byte(tt.yaml), "pools.yaml")
			checkProblems(t, problems, tt.want)
		})
	}
}

func TestDecodeFollowsAliases(t *testing.T) {
	c, problems := Decode([]byte(`
shape: &shape {gpus: 4, cpus: 8, memory_mb: 32000}
`), "x")
	if len(problems) != 1 || !strings.Contains(problems[0].Msg, `unknown key "shape"`) {
		t.Errorf("problems = %v", problems)
	}
	_ = c
	c, problems = Decode([]byte(`pools:
  - name: a100
    gpu_type: a100
    node: &shape {gpus: 4, cpus: 8, memory_mb: 32000}
  - name: a100-spot
    gpu_type: a100
    node: *shape
`), "x")
	if len(problems) != 0 {
		t.Fatal(problems)
	}
	if c.Pools[1].Node != (NodeShape{GPUs: 4, CPUs: 8, MemoryMB: 32000}) {
		t.Errorf("aliased node = %+v", c.Pools[1].Node)
	}
}

func TestValidateProblems(t *testing.T) {
	const broken = `default_cpu_pool: a100
default_gpu_pool: nope
policy: random
pools:
  - name: a100
    gpu_type: a100
    price_per_gpu_hour: -1
    fallback: [a100-spot, ghost, a100]
    speed: {resnet: 0, "bad class": 2}
    node: {gpus: 0, cpus: 0, memory_mb: 0}
  - name: a100-spot
    partition: a100
    gpu_type: a100
    fallback: [a100, cpu]
    node: {gpus: 4, cpus: 8, memory_mb: 32000}
  - name: cpu
    price_per_gpu_hour: 1
    node: {gpus: 2, cpus: 8, memory_mb: 32000}
  - name: cpu
    partition: "cpu,x"
  - description: nameless
    node: {cpus: 1, memory_mb: 1}
`
	c, problems := Decode([]byte(broken), "pools.yaml")
	if len(problems) != 0 {
		t.Fatalf("decode problems: %v", problems)
	}
	checkProblems(t, c.Validate(), []problemAt{
		{1, "default_cpu_pool: pool a100 is a GPU pool; the default CPU pool must be one"},
		{2, `default_gpu_pool: no pool is named "nope"`},
		{3, `policy "random" is not one of default-first, cheapest, fastest`},
		{7, "price_per_gpu_hour must be a number of 0 or more, not -1"},
		{8, `fallback: no pool is named "ghost"`},
		{8, "fallback: a pool cannot fall back to itself"},
		{8, "fallback cycle: a100 -> a100-spot -> a100"},
		{9, `workload class "bad class" is not a word`},
		{9, "speed for resnet must be a number above 0, not 0"},
		{10, "node.gpus must be at least 1 in a GPU pool (gpu_type a100)"},
		{10, "node.cpus must be at least 1"},
		{10, "node.memory_mb must be at least 1"},
		{12, "partition a100 is pool a100's too"},
		{14, "fallback: cpu is a CPU pool and a100-spot a GPU pool"},
		{17, "a CPU pool (no gpu_type) has no GPUs to price"},
		{18, "node.gpus is 2 but the pool has no gpu_type"},
		{19, "name is used by pool #3 too"},
		{19, "node is missing"},
		{20, `partition "cpu,x" is not a Slurm partition name`},
		{21, "name is missing"},
	})
	for _, p := range c.Validate() {
		if p.Line >= 5 && p.Line <= 10 && p.Pool != "a100" {
			t.Errorf("problem %q at line %d is labelled pool %q, want a100", p.Msg, p.Line, p.Pool)
		}
	}
}

func TestParseRefusesABrokenFile(t *testing.T) {
	cfg, err := Parse([]byte("pools:\n  - name: cpu\n    node: {cpus: 8}\n"), "pools.yaml")
	var problems Problems
	if cfg != nil || !errors.As(err, &problems) {
		t.Fatalf("Parse = %v, %v; want nil and Problems", cfg, err)
	}
	// The problem's line, pool, field and minimum, and the error printing them where the user looks.
	if len(problems) != 1 || problems[0].Line != 3 || problems[0].Pool != "cpu" || !strings.HasPrefix(problems[0].Msg, "node.memory_mb ") || !strings.HasSuffix(problems[0].Msg, " least 1") ||
		!strings.HasPrefix(err.Error(), "pools.yaml:3: pool cpu: node.memory_mb ") {
		t.Errorf("problems %+v, error %q; want one about node.memory_mb on line 3 of pool cpu", problems, err)
	}
}

func TestNewDoesNotShareMutableState(t *testing.T) {
	in := testbedConfig()
	cfg := mustNew(t, in)
	in.Pools[2].Fallback[0] = "v100"
	in.Pools[1].Speed["default"] = 100
	in.Pools[0].Name = "renamed"
	if p := cfg.Pool("a100-spot"); p.Fallback[0] != "a100" {
		t.Errorf("fallback changed through the input: %v", p.Fallback)
	}
	if p := cfg.Pool("a100"); p.SpeedFor("") != 2 {
		t.Errorf("speed changed through the input: %v", p.SpeedFor(""))
	}
	if cfg.Pool("cpu") == nil || cfg.Pool("renamed") != nil {
		t.Error("pool name changed through the input")
	}
}

func TestPartitionDefaultsToName(t *testing.T) {
	cfg, err := Parse([]byte("pools:\n  - name: cpu\n    node: {cpus: 8, memory_mb: 1000}\n"), "x")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Pools[0].Partition != "cpu" || cfg.Policy != DefaultFirst {
		t.Errorf("partition %q policy %q, want cpu and default-first", cfg.Pools[0].Partition, cfg.Policy)
	}
}

func TestSpeedFor(t *testing.T) {
	p := gpuPool("a100", "a100", speeds("default", 2.0, "resnet", 1.5))
	plain := gpuPool("v100", "v100")
	for _, tt := range []struct {
		pool  Pool
		class string
		want  float64
	}{{p, "resnet", 1.5}, {p, "bert", 2}, {p, "", 2}, {plain, "resnet", 1}, {plain, "", 1}} {
		if got := tt.pool.SpeedFor(tt.class); got != tt.want {
			t.Errorf("%s.SpeedFor(%q) = %v, want %v", tt.pool.Name, tt.class, got, tt.want)
		}
	}
}

func TestProblemString(t *testing.T) {
	for _, tt := range []struct {
		p    Problem
		want string
	}{
		{Problem{Source: "pools.yaml", Line: 3, Pool: "a100", Msg: "m"}, "pools.yaml:3: pool a100: m"},
		{Problem{Line: 3, Msg: "m"}, "line 3: m"},
		{Problem{Source: "pools.yaml", Msg: "m"}, "pools.yaml: m"},
		{Problem{Pool: "a", Msg: "m"}, "pool a: m"},
	} {
		if got := tt.p.String(); got != tt.want {
			t.Errorf("%+v.String() = %q, want %q", tt.p, got, tt.want)
		}
	}
}

func TestNodeList(t *testing.T) {
	nodes := []string{"n1", "n2", "n3", "n4", "n5", "n6", "n7"}
	if got := nodeList(nodes); got != "nodes n1, n2, n3, n4, n5 and 2 more" {
		t.Errorf("nodeList = %q", got)
	}
}
