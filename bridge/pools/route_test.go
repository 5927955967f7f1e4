package pools

import (
	"strings"
	"testing"
)

func TestRoute(t *testing.T) {
	testbed := testbedConfig()
	noCPUDefault := testbedConfig()
	noCPUDefault.DefaultCPUPool = ""
	cpuOnly := Config{DefaultCPUPool: "cpu", Pools: []Pool{cpuPool("cpu")}}
	bigCPU := testbedConfig()
	bigCPU.Pools = append(bigCPU.Pools, cpuPool("bigmem", cpuPrice(0.2), func(p *Pool) { p.Node.MemoryMB = 256000 }))

	tests := []struct {
		name          string
		config        Config
		job           Request
		wantAction    Action
		wantPartition string
		wantMessage   []string // substrings; a job that keeps its partition gets no message unless listed
		wantRefusal   Refusal  // with Reject: its kind
	}{
		{
			name: "CPU job goes to the default CPU pool", config: testbed, job: job(),
			wantAction: SetPartition, wantPartition: "cpu", wantMessage: []string{"job sent to pool cpu"},
		},
		{
			name: "--gres=gpu:1 goes to every GPU pool, cheapest first, spot before its fallback", config: testbed,
			job:        job(gres("gres:gpu:1")),
			wantAction: SetPartition, wantPartition: "a100-spot,a100,v100",
			wantMessage: []string{"pools a100-spot,a100,v100", "first with room", "policy cheapest"},
		},
		{
			name: "a type narrows the list", config: testbed, job: job(gres("gres:gpu:v100:2")),
			wantAction: SetPartition, wantPartition: "v100", wantMessage: []string{"pool v100"},
		},
		{
			name: "--gpus=8 leaves out the one-node spot pool", config: testbed, job: job(gpusPerJob("gres:gpu:8")),
			wantAction: SetPartition, wantPartition: "a100,v100",
		},
		{
			name: "more GPUs per node than any node holds", config: testbed, job: job(gres("gres:gpu:a100:5")),
			wantAction: Reject, wantRefusal: RefusedNoGPUPool,
			wantMessage: []string{"no pool can run this job (5 a100 GPUs per node)", "pool a100: its nodes have 4 GPUs; the job needs 5 on one node",
				"pool v100: it has v100 GPUs; the job asks for a100"},
		},
		{
			name: "GPU job named to a CPU pool is refused, naming the pools that fit", config: testbed,
			job:        job(partition("cpu"), gres("gres:gpu:1")),
			wantAction: Reject, wantRefusal: RefusedNamedPools,
			wantMessage: []string{"pool cpu cannot run this job: it has no GPUs; the job needs 1 on a node",
				"Pools that can run it: a100-spot,a100,v100 (submit with -p a100-spot,a100,v100"},
		},
		{
			name: "a GPU type the named pool does not have", config: testbed,
			job:        job(partition("a100"), gres("gres:gpu:v100:1")),
			wantAction: Reject, wantRefusal: RefusedNamedPools,
			wantMessage: []string{"pool a100 cannot run this job: it has a100 GPUs; the job asks for v100",
				"Pools that can run it: v100 "},
		},
		{
			name: "a named pool that fits is kept silently", config: testbed, job: job(partition("a100"), gres("gres:gpu:a100:1")),
			wantAction: Keep,
		},
		{
			name: "pools in a list that cannot run the job are dropped", config: testbed,
			job:        job(partition("a100,v100"), gpusPerJob("gres:gpu:v100:1")),
			wantAction: SetPartition, wantPartition: "v100",
			wantMessage: []string{"job sent to v100 only: pool a100 cannot run this job: it has a100 GPUs"},
		},
		{
			name: "a partition that is not a pool passes untouched", config: testbed, job: job(partition("debug"), gres("gres:gpu:1")),
			wantAction: Keep,
		},
		{
			name: "not-a-pool partitions stay when pools are dropped", config: testbed, job: job(partition("debug,cpu"), gres("gres:gpu:1")),
			wantAction: SetPartition, wantPartition: "debug", wantMessage: []string{"pool cpu cannot run this job"},
		},
		{
			name: "empty list entries are not partitions", config: testbed, job: job(partition("cpu,,"), gres("gres:gpu:1")),
			wantAction: Reject, wantRefusal: RefusedNamedPools, wantMessage: []string{"pool cpu cannot run this job"},
		},
		{
			name: "a CPU job may name a GPU pool", config: testbed, job: job(partition("a100")),
			wantAction: Keep,
		},
		{
			name: "workload class changes the cheapest order", config: testbed, job: job(gpusPerJob("gres:gpu:1"), comment("class=resnet")),
			wantAction: SetPartition, wantPartition: "a100-spot,v100,a100", wantMessage: []string{"workload class resnet"},
		},
		{
			name: "default-first still puts spot before its fallback", config: withPolicy(testbed, DefaultFirst),
			job:        job(gres("gres:gpu:1")),
			wantAction: SetPartition, wantPartition: "a100-spot,a100,v100",
		},
		{
			name: "default-first keeps config order after the default", config: withPolicy(testbed, DefaultFirst),
			job:        job(gres("gres:gpu:1"), nodesRange(2, 2)),
			wantAction: SetPartition, wantPartition: "a100,v100",
		},
		{
			name: "fastest: equal speeds go cheaper first", config: withPolicy(testbed, Fastest),
			job:        job(gres("gres:gpu:1"), comment("owner=ml class=bert")),
			wantAction: SetPartition, wantPartition: "a100-spot,a100,v100",
		},
		{
			name: "two GPU types at once fit no pool", config: testbed, job: job(gres("gres:gpu:a100:1,gres:gpu:v100:1")),
			wantAction: Reject, wantRefusal: RefusedNoGPUPool, wantMessage: []string{"the job asks for a100 and v100 GPUs at once"},
		},
		{
			name: "a CPU job too big for every node", config: testbed, job: job(memPerNodeMB(65536)),
			wantAction: Reject, wantRefusal: RefusedNoCPUPool,
			wantMessage: []string{"no CPU pool can run this job: pool cpu: its nodes have 32000 MB of memory; the job needs 65536 MB on one node",
				"No pool can run it."},
		},
		{
			name: "a CPU job too big for the default CPU pool goes to one that fits", config: bigCPU, job: job(memPerNodeMB(65536)),
			wantAction: SetPartition, wantPartition: "bigmem",
		},
		{
			name: "--mem=0 (a whole node) fits", config: testbed, job: job(memPerNodeMB(0)),
			wantAction: SetPartition, wantPartition: "cpu",
		},
		{
			name: "memory per CPU spreads over the tasks' nodes", config: testbed, job: job(memPerCPUMB(2048), tasks(2)),
			wantAction: SetPartition, wantPartition: "cpu",
		},
		{
			name: "memory per CPU times CPUs per node", config: testbed, job: job(memPerCPUMB(8192), cpusPerTask(8)),
			wantAction: Reject, wantRefusal: RefusedNoCPUPool, wantMessage: []string{"the job needs 65536 MB on one node"},
		},
		{
			name: "more CPUs per task than a node has", config: testbed, job: job(cpusPerTask(16), gres("gres:gpu:1")),
			wantAction: Reject, wantRefusal: RefusedNoGPUPool, wantMessage: []string{"pool a100: its nodes have 8 CPUs; the job needs 16 on one node"},
		},
		{
			name: "more nodes than a pool has", config: testbed, job: job(nodesRange(3, 3), gres("gres:gpu:1")),
			wantAction: Reject, wantRefusal: RefusedNoGPUPool, wantMessage: []string{"pool a100: it has 2 nodes; the job needs 3"},
		},
		{
			name: "GPUs per task over 8 tasks need two 4-GPU nodes", config: testbed, job: job(gpusPerTask("gres:gpu:1"), tasks(8)),
			wantAction: SetPartition, wantPartition: "a100,v100",
		},
		{
			name: "GPUs per task with tasks per node", config: testbed, job: job(gpusPerTask("gres:gpu:1"), tasksPerNode(5)),
			wantAction: Reject, wantRefusal: RefusedNoGPUPool, wantMessage: []string{"its nodes have 4 GPUs; the job needs 5 on one node"},
		},
		{
			name: "zero GPUs is a CPU job", config: testbed, job: job(gres("gres:gpu:0")),
			wantAction: SetPartition, wantPartition: "cpu",
		},
		{
			name: "only non-GPU GRES: left to Slurm", config: testbed, job: job(gres("gres:mps:100")),
			wantAction: Keep, wantMessage: []string{"pools do not describe GRES mps"},
		},
		{
			name: "job_modify without a partition is left alone", config: testbed, job: job(modify(), gres("gres:gpu:v100:1")),
			wantAction: Keep,
		},
		{
			name: "job_modify to a pool that fits", config: testbed, job: job(modify(), partition("v100"), gres("gres:gpu:v100:1")),
			wantAction: Keep,
		},
		{
			name: "job_modify to a pool that cannot run it", config: testbed, job: job(modify(), partition("cpu"), gres("gres:gpu:1")),
			wantAction: Reject, wantRefusal: RefusedNamedPools, wantMessage: []string{"pool cpu cannot run this job"},
		},
		{
			name: "no default CPU pool: Slurm's default partition", config: noCPUDefault, job: job(),
			wantAction: Keep,
		},
		{
			name: "a GPU job and no GPU pools", config: cpuOnly, job: job(gres("gres:gpu:1")),
			wantAction: Reject, wantRefusal: RefusedNoGPUPool, wantMessage: []string{"no GPU pools are configured"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := mustNew(t, tt.config)
			d := cfg.Route(&tt.job)
			if d.Err != nil {
				t.Fatalf("Err = %v", d.Err)
			}
			if d.Action != tt.wantAction || d.Partition != tt.wantPartition || d.Refusal != tt.wantRefusal {
				t.Errorf("Route = %v %q %s, want %v %q %s (message %q)", d.Action, d.Partition, d.Refusal, tt.wantAction, tt.wantPartition, tt.wantRefusal, d.Message)
			}
			if quiet := d.Action == Keep && len(tt.wantMessage) == 0; quiet != (d.Message == "") {
				t.Errorf("Message = %q; a message is due exactly when the job does not keep its partition silently", d.Message)
			}
			for _, want := range tt.wantMessage {
				if !strings.Contains(d.Message, want) {
					t.Errorf("Message = %q\nwant it to contain %q", d.Message, want)
				}
			}
			if len(d.Candidates) != len(cfg.Pools) {
				t.Errorf("%d candidates for %d pools", len(d.Candidates), len(cfg.Pools))
			}
		})
	}
}

func TestRouteCandidatesExplainEveryPool(t *testing.T) {
	cfg := mustNew(t, testbedConfig())
	j := job(gpusPerJob("gres:gpu:8"))
	d := cfg.Route(&j)
	type row struct {
		pool   string
		rank   int
		reason string
	}
	want := []row{
		{"a100", 1, ""},
		{"v100", 2, ""},
		{"cpu", 0, "it has no GPUs; the job needs 4 on a node"}, // 8 GPUs over its 2 nodes
		{"a100-spot", 0, "its nodes have 4 GPUs; the job needs 8 on one node"},
	}
	if len(d.Candidates) != len(want) {
		t.Fatalf("%d candidates, want %d", len(d.Candidates), len(want))
	}
	for i, w := range want {
		c := &d.Candidates[i]
		if got := (row{c.Pool.Name, c.Rank, c.Reason()}); got != w {
			t.Errorf("candidate %d = %+v, want %+v", i, got, w)
		}
	}
	if c := d.Candidates[0]; c.Speed != 2 || c.Cost != 1.5 {
		t.Errorf("a100 speed %v cost %v, want 2 and 1.5", c.Speed, c.Cost)
	}
}

func TestRouteSkipReasons(t *testing.T) {
	cfg := mustNew(t, Config{
		DefaultCPUPool: "cpu",
		Pools:          []Pool{cpuPool("cpu"), cpuPool("cpu2"), gpuPool("a100", "a100")},
	})
	j := job()
	d := cfg.Route(&j)
	reasons := map[string]string{}
	for i := range d.Candidates {
		reasons[d.Candidates[i].Pool.Name] = d.Candidates[i].Reason()
	}
	want := map[string]string{
		"cpu":  "",
		"cpu2": "fits, but CPU jobs go to the default CPU pool",
		"a100": "fits, but CPU-only jobs go to GPU pools only when they name them with -p",
	}
	for pool, w := range want {
		if reasons[pool] != w {
			t.Errorf("%s: reason %q, want %q", pool, reasons[pool], w)
		}
	}
	named := job(partition("cpu2"))
	d = cfg.Route(&named)
	for i := range d.Candidates {
		if c := &d.Candidates[i]; c.Pool.Name == "cpu" && (c.Fit != FitOK || c.Skip != SkipNotRequested || c.Reason() == "") {
			t.Errorf("cpu: fit %d skip %d reason %q; want it skipped as not requested", c.Fit, c.Skip, c.Reason())
		}
	}
}

func TestRouteFallbackChains(t *testing.T) {
	// spot-b falls back to spot-a, which falls back to ondemand; prices would put them the other
	// way round.
	cfg := mustNew(t, Config{
		Policy: Cheapest,
		Pools: []Pool{
			gpuPool("ondemand", "a100", gpuPrice(1)),
			gpuPool("spot-a", "a100", gpuPrice(2), spotWithFallback("ondemand")),
			gpuPool("spot-b", "a100", gpuPrice(3), spotWithFallback("spot-a")),
			gpuPool("other", "a100", gpuPrice(0.5)),
		},
	})
	j := job(gres("gres:gpu:1"))
	if d := cfg.Route(&j); d.Partition != "other,spot-b,spot-a,ondemand" {
		t.Errorf("Partition = %q, want other,spot-b,spot-a,ondemand", d.Partition)
	}
}

func TestRouteFailsOpen(t *testing.T) {
	cfg := mustNew(t, testbedConfig())
	bad := job(partition("cpu"), gres("gres:gpu:a100:lots"))
	d := cfg.Route(&bad)
	if d.Action != Keep || d.Err == nil || !strings.Contains(d.Err.Error(), `tres_per_node: bad token "gres:gpu:a100:lots"`) {
		t.Errorf("malformed GPU string: %v %q, Err %v; want Keep and an error naming the token", d.Action, d.Message, d.Err)
	}
	var unprepared Config
	if d := unprepared.Route(&bad); d.Action != Keep || d.Err == nil {
		t.Errorf("unprepared config: %v, Err %v; want Keep and an error", d.Action, d.Err)
	}
	var nilConfig *Config
	if d := nilConfig.Route(&bad); d.Action != Keep || d.Err == nil {
		t.Errorf("nil config: %v, Err %v; want Keep and an error", d.Action, d.Err)
	}
}

func TestWorkloadClass(t *testing.T) {
	tests := map[string]string{
		"":                       "",
		"class=resnet":           "resnet",
		"owner=ml class=bert":    "bert",
		"a,class=gpt2;b":         "gpt2",
		"class=":                 "",
		"class=bad/name class=x": "x",
		"subclass=resnet":        "",
		"Class=resnet":           "",
	}
	for comment, want := range tests {
		if got := WorkloadClass(comment); got != want {
			t.Errorf("WorkloadClass(%q) = %q, want %q", comment, got, want)
		}
	}
}

func TestNeedsOnSentinels(t *testing.T) {
	tests := []struct {
		name      string
		job       Request
		poolNodes uint64
		want      nodeNeeds
	}{
		{name: "nothing set", job: job(), poolNodes: 2, want: nodeNeeds{nodes: 1, cpus: 1}},
		{name: "INFINITE counts as not set", job: job(func(r *Request) { r.MaxNodes, r.NTasksPerNode = Infinite, Infinite16 }), want: nodeNeeds{nodes: 1, cpus: 1}},
		{name: "min CPUs spread over the pool's nodes", job: job(func(r *Request) { r.MinCPUs = 12 }), poolNodes: 2, want: nodeNeeds{nodes: 1, cpus: 6}},
		{name: "min CPUs, unknown pool size", job: job(func(r *Request) { r.MinCPUs = 12 }), want: nodeNeeds{nodes: 1, cpus: 1}},
		{name: "max nodes bounds the spread", job: job(func(r *Request) { r.MinCPUs = 12; r.MaxNodes = 1 }), poolNodes: 4, want: nodeNeeds{nodes: 1, cpus: 12}},
		{name: "tasks bound the spread", job: job(tasks(3), gpusPerJob("gres:gpu:6")), poolNodes: 10, want: nodeNeeds{nodes: 1, cpus: 1, gpus: 2}},
		{name: "memory per CPU", job: job(memPerCPUMB(1000), cpusPerTask(4)), want: nodeNeeds{nodes: 1, cpus: 4, memoryMB: 4000}},
		{name: "NO_VAL64 memory", job: job(memPerNodeMB(NoVal64)), want: nodeNeeds{nodes: 1, cpus: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			shape, err := newJobShape(&tt.job)
			if err != nil {
				t.Fatal(err)
			}
			if got := shape.needsOn(tt.poolNodes); got != tt.want {
				t.Errorf("needsOn(%d) = %+v, want %+v", tt.poolNodes, got, tt.want)
			}
		})
	}
}
