package pools

import (
	"bufio"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/slurmbridge/slurmbridge/bridge/gpureq"
)

// capturedRequest turns one JOBDESC line of bridge/testdata/job_desc-22.05.8.txt (what
// slurmctld 22.05.8 passed to a logging job_submit.lua) into the Request the cgo layer builds.
func capturedRequest(t *testing.T, line string) Request {
	t.Helper()
	rest, _ := strings.CutPrefix(line, "JOBDESC ")
	op, rest, _ := strings.Cut(rest, " ")
	f := map[string]string{}
	for kv := range strings.SplitSeq(rest, " | ") {
		k, v, _ := strings.Cut(kv, "=")
		if v == "nil" {
			v = ""
		}
		f[k] = v
	}
	num := func(key string) uint64 {
		n, err := strconv.ParseUint(f[key], 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", key, f[key], err)
		}
		return n
	}
	r := Request{
		Partition: f["partition"], TRESPerJob: f["tres_per_job"], TRESPerNode: f["tres_per_node"],
		TRESPerSocket: f["tres_per_socket"], TRESPerTask: f["tres_per_task"],
		MinCPUs: uint32(num("min_cpus")), CPUsPerTask: uint16(num("cpus_per_task")), PnMinCPUs: uint16(num("pn_min_cpus")),
		MinNodes: uint32(num("min_nodes")), MaxNodes: uint32(num("max_nodes")), NumTasks: uint32(num("num_tasks")),
		NTasksPerNode:  uint16(num("ntasks_per_node")),
		SocketsPerNode: NoVal16, // not in the capture

		Comment: f["comment"], Features: f["features"],
	}
	if op == "modify" {
		r.Op = Modify
	}
	// Lua printed pn_min_memory as a double, losing the low bits of the sentinels: rebuild it
	// from the exact fields the capture has beside it.
	switch mem := f["pn_min_memory"]; {
	case mem == "1.844674407371e+19":
		r.PnMinMemory = NoVal64
	case mem == "9.2233720368548e+18":
		r.PnMinMemory = MemPerCPU | num("min_mem_per_cpu")
	default:
		r.PnMinMemory = num("pn_min_memory")
	}
	return r
}

// TestRouteCapturedJobDescs routes every job_desc of the fixture with the testbed's pools.
func TestRouteCapturedJobDescs(t *testing.T) {
	type outcome struct {
		action    Action
		partition string
	}
	allGPU := outcome{SetPartition, "a100-spot,a100,v100"}
	want := []struct {
		command string
		outcome
	}{
		{"sbatch --wrap true", outcome{SetPartition, "cpu"}},
		{"sbatch -p a100 --gres=gpu:a100:1", outcome{Keep, ""}},
		{"sbatch --gres=gpu:2", allGPU},
		{"sbatch --gpus=3", allGPU},
		{"sbatch --gpus=v100:2", outcome{SetPartition, "v100"}},
		{"sbatch --gpus-per-node=a100:2 -N 2", outcome{SetPartition, "a100"}}, // a100-spot has one node
		{"sbatch --gpus-per-task=1 -n 4", allGPU},
		{"sbatch --gpus-per-socket=1 --sockets-per-node=1", allGPU},
		{"sbatch --gres=gpu:a100:1,gpu:v100:1", outcome{Reject, ""}},
		{"sbatch --mem=8G -c 4 --gres=gpu:1", allGPU},
		{"sbatch --mem-per-cpu=2G -n 2", outcome{SetPartition, "cpu"}},
		{"sbatch --mem-per-gpu=10G --gpus=1", allGPU},
		{"sbatch -p a100,v100 --gpus=1", outcome{Keep, ""}},
		{"sbatch --constraint=a100 --gpus=1 --no-requeue", allGPU},
		{"sbatch -J train-resnet --comment 'class=resnet' --gpus=1", outcome{SetPartition, "a100-spot,v100,a100"}},
		{"srun -p cpu true", outcome{Keep, ""}},
		{"scontrol update jobid=J partition=v100 gres=gpu:v100:1", outcome{Keep, ""}},
		{"scontrol update jobid=J numnodes=2", outcome{Keep, ""}},
	}
	cfg := mustNew(t, testbedConfig())
	f, err := os.Open("../testdata/job_desc-22.05.8.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var commands, lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		switch line := sc.Text(); {
		case strings.HasPrefix(line, "# sbatch ") || strings.HasPrefix(line, "# srun ") || strings.HasPrefix(line, "# scontrol "):
			command, _, _ := strings.Cut(strings.TrimPrefix(line, "# "), "   ")
			commands = append(commands, strings.TrimSpace(command))
		case strings.HasPrefix(line, "JOBDESC "):
			lines = append(lines, line)
		}
	}
	if len(lines) != len(want) || len(commands) != len(want) {
		t.Fatalf("fixture has %d commands and %d JOBDESC lines, the test expects %d", len(commands), len(lines), len(want))
	}
	for i, w := range want {
		t.Run(w.command, func(t *testing.T) {
			if commands[i] != w.command {
				t.Fatalf("fixture command %d is %q", i, commands[i])
			}
			r := capturedRequest(t, lines[i])
			d := cfg.Route(&r)
			if d.Err != nil {
				t.Fatal(d.Err)
			}
			if got := (outcome{d.Action, d.Partition}); got != w.outcome {
				t.Errorf("Route = %+v, want %+v (message %q)", got, w.outcome, d.Message)
			}
		})
	}
}

// testbedCluster reads the cluster's shape from sinfo --json captured on the testbed.
func testbedCluster(t *testing.T) Cluster {
	t.Helper()
	data, err := os.ReadFile("../slurm/testdata/sinfo-testbed-idle.json")
	if err != nil {
		t.Fatal(err)
	}
	var sinfo struct {
		Nodes []struct {
			Name       string   `json:"name"`
			Partitions []string `json:"partitions"`
			Gres       string   `json:"gres"`
			CPUs       int      `json:"cpus"`
			RealMemory uint64   `json:"real_memory"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal(data, &sinfo); err != nil {
		t.Fatal(err)
	}
	cl := Cluster{Partitions: map[string][]ClusterNode{}}
	for _, n := range sinfo.Nodes {
		gres, err := gpureq.ParseNodeGres(n.Gres)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range n.Partitions {
			cl.Partitions[p] = append(cl.Partitions[p], ClusterNode{Name: n.Name, Gres: gres, CPUs: n.CPUs, MemoryMB: n.RealMemory})
		}
	}
	return cl
}

func TestCheckCluster(t *testing.T) {
	loaded, err := Load("testdata/pools.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if problems := CheckCluster(loaded, testbedCluster(t)); len(problems) != 0 {
		t.Errorf("testdata/pools.yaml disagrees with the testbed:\n%v", problems)
	}

	const file = `pools:
  - name: cpu
    node_count: 3
    node: {cpus: 16, memory_mb: 32000}
  - name: a100
    gpu_type: h100
    node: {gpus: 4, cpus: 8, memory_mb: 32000}
  - name: v100
    gpu_type: v100
    node: {gpus: 8, cpus: 8, memory_mb: 64000}
  - name: a100-spot
    node: {cpus: 8, memory_mb: 32000}
  - name: gone
    partition: debug
    node: {cpus: 8, memory_mb: 32000}
`
	cfg, err := Parse([]byte(file), "pools.yaml")
	if err != nil {
		t.Fatal(err)
	}
	checkProblems(t, CheckCluster(cfg, testbedCluster(t)), []problemAt{
		{3, "node_count is 3 but partition cpu has 2 nodes"},
		{4, "nodes cpu-1, cpu-2 have 8 CPUs but node.cpus is 16"},
		{6, `nodes a100-1, a100-2 have GPUs of type "a100" but gpu_type is h100`},
		{10, "nodes v100-1, v100-2 have 4 GPUs but node.gpus is 8"},
		{10, "nodes v100-1, v100-2 have 32000 MB of memory but node.memory_mb is 64000"},
		{11, "node a100-spot-1 has 4 a100 GPUs but the pool has no gpu_type"},
		{14, "partition debug does not exist in the cluster (it has a100, a100-spot, cpu, v100)"},
	})

	untyped := Cluster{Partitions: map[string][]ClusterNode{
		"a100": {{Name: "n1", Gres: []gpureq.Gres{{Name: "gpu", Count: 4}}, CPUs: 8, MemoryMB: 32000}},
	}}
	cfg = mustNew(t, Config{Pools: []Pool{gpuPool("a100", "a100")}})
	problems := CheckCluster(cfg, untyped)
	if len(problems) != 1 || problems[0].Msg != `node n1 has GPUs of type "" but gpu_type is a100` {
		t.Errorf("untyped GPUs: %v", problems)
	}
}

func TestNodeList(t *testing.T) {
	nodes := []string{"n1", "n2", "n3", "n4", "n5", "n6", "n7"}
	if got := nodeList(nodes); got != "nodes n1, n2, n3, n4, n5 and 2 more" {
		t.Errorf("nodeList = %q", got)
	}
}
