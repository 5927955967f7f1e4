package capacity

import (
	"testing"

	"github.com/slurmbridge/slurmbridge/bridge/gpureq"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/elasticd/policy"
)

// Capacity is what a worker of the main job's shape can start on: a node with free GPUs but
// too few free CPUs or too little memory takes none.
func TestCapacityCountsCPUsAndMemory(t *testing.T) {
	nodes := []slurm.Node{
		{Name: "a", Partitions: []string{"a100"}, State: "mixed", CPUs: 8, AllocCPUs: 6, MemoryMB: 32000, Gres: []gpureq.Gres{{Name: "gpu", Type: "a100", Count: 4}}},
		{Name: "b", Partitions: []string{"a100"}, State: "mixed", CPUs: 8, MemoryMB: 32000, AllocMemoryMB: 20000, Gres: []gpureq.Gres{{Name: "gpu", Type: "a100", Count: 4}}},
		{Name: "c", Partitions: []string{"a100"}, State: "idle", CPUs: 8, MemoryMB: 32000, Gres: []gpureq.Gres{{Name: "gpu", Type: "a100", Count: 4}}},
		{Name: "d", Partitions: []string{"a100"}, State: "idle", StateFlags: []string{"DRAIN"}, CPUs: 8, MemoryMB: 32000, Gres: []gpureq.Gres{{Name: "gpu", Type: "a100", Count: 4}}},
	}
	s := Shape{Tasks: 1, CPUsPerTask: 4, MemMB: 16000, GPUs: 2}
	if got := s.fits(&Snapshot{Nodes: nodes}, []string{"a100"}, policy.GPUType("a100")); got != 2 {
		t.Fatalf("%d workers fit, want 2 (both on node c)", got)
	}
}
