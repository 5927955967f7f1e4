package pools_test

import (
	"testing"

	"github.com/slurmbridge/slurmbridge/bridge/gpureq"
	"github.com/slurmbridge/slurmbridge/bridge/pools"
	"github.com/slurmbridge/slurmbridge/bridge/pools/poolstest"
	"github.com/slurmbridge/slurmbridge/bridge/slurm/slurmtest"
)

// TestRouteCapturedJobDescs routes every job_desc of every release's capture with the
// testbed's pools: the same commands go to the same pools whatever the release spells.
func TestRouteCapturedJobDescs(t *testing.T) {
	type outcome struct {
		action    pools.Action
		partition string
	}
	allGPU := outcome{pools.SetPartition, "a100-spot,a100,v100"}
	want := []struct {
		command string
		outcome
	}{
		{"sbatch --wrap true", outcome{pools.SetPartition, "cpu"}},
		{"sbatch -p a100 --gres=gpu:a100:1", outcome{pools.Keep, ""}},
		{"sbatch --gres=gpu:2", allGPU},
		{"sbatch --gpus=3", allGPU},
		{"sbatch --gpus=v100:2", outcome{pools.SetPartition, "v100"}},
		{"sbatch --gpus-per-node=a100:2 -N 2", outcome{pools.SetPartition, "a100"}}, // a100-spot has one node
		{"sbatch --gpus-per-task=1 -n 4", allGPU},
		{"sbatch --gpus-per-socket=1 --sockets-per-node=1", allGPU},
		{"sbatch --gres=gpu:a100:1,gpu:v100:1", outcome{pools.Reject, ""}},
		{"sbatch --mem=8G -c 4 --gres=gpu:1", allGPU},
		{"sbatch --mem-per-cpu=2G -n 2", outcome{pools.SetPartition, "cpu"}},
		{"sbatch --mem-per-gpu=10G --gpus=1", allGPU},
		{"sbatch -p a100,v100 --gpus=1", outcome{pools.Keep, ""}},
		{"sbatch --constraint=a100 --gpus=1 --no-requeue", allGPU},
		{"sbatch -J train-resnet --comment 'class=resnet' --gpus=1", outcome{pools.SetPartition, "a100-spot,v100,a100"}},
		{"srun -p cpu true", outcome{pools.Keep, ""}},
		{"scontrol update jobid=J partition=v100 gres=gpu:v100:1", outcome{pools.Keep, ""}},
		{"scontrol update jobid=J numnodes=2", outcome{pools.Keep, ""}},
	}
	cfg := pools.MustNew(t, pools.TestbedConfig())
	for _, capture := range slurmtest.JobDescCaptures(t) {
		t.Run(slurmtest.CaptureVersion(capture), func(t *testing.T) {
			descs := poolstest.JobDescs(t, capture)
			if len(descs) != len(want) {
				t.Fatalf("capture has %d commands, the test expects %d", len(descs), len(want))
			}
			for i, w := range want {
				t.Run(w.command, func(t *testing.T) {
					if descs[i].Command != w.command {
						t.Fatalf("capture command %d is %q", i, descs[i].Command)
					}
					r := descs[i].Request
					d := cfg.Route(&r)
					if d.Err != nil {
						t.Fatal(d.Err)
					}
					if got := (outcome{d.Action, d.Partition}); got != w.outcome {
						t.Errorf("Route = %+v, want %+v (message %q)", got, w.outcome, d.Message)
					}
				})
			}
		})
	}
}

func TestCheckCluster(t *testing.T) {
	loaded, err := pools.Load("testdata/pools.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if problems := pools.CheckCluster(loaded, poolstest.TestbedCluster(t)); len(problems) != 0 {
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
	cfg, err := pools.Parse([]byte(file), "pools.yaml")
	if err != nil {
		t.Fatal(err)
	}
	pools.CheckProblems(t, pools.CheckCluster(cfg, poolstest.TestbedCluster(t)), []pools.ProblemAt{
		{3, "node_count is 3 but partition cpu has 2 nodes"},
		{4, "nodes cpu-1, cpu-2 have 8 CPUs but node.cpus is 16"},
		{6, `nodes a100-1, a100-2 have GPUs of type "a100" but gpu_type is h100`},
		{10, "nodes v100-1, v100-2 have 4 GPUs but node.gpus is 8"},
		{10, "nodes v100-1, v100-2 have 32000 MB of memory but node.memory_mb is 64000"},
		{11, "node a100-spot-1 has 4 a100 GPUs but the pool has no gpu_type"},
		{14, "partition debug does not exist in the cluster (it has a100, a100-spot, cpu, v100)"},
	})

	untyped := pools.Cluster{Partitions: map[string][]pools.ClusterNode{
		"a100": {{Name: "n1", Gres: []gpureq.Gres{{Name: "gpu", Count: 4}}, CPUs: 8, MemoryMB: 32000}},
	}}
	cfg = pools.MustNew(t, pools.Config{Pools: []pools.Pool{pools.GPUPool("a100", "a100")}})
	problems := pools.CheckCluster(cfg, untyped)
	if len(problems) != 1 || problems[0].Msg != `node n1 has GPUs of type "" but gpu_type is a100` {
		t.Errorf("untyped GPUs: %v", problems)
	}
}
