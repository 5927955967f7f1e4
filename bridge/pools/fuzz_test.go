package pools

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// FuzzRoute feeds arbitrary user-controlled fields to Route and checks what must always
// hold: no panic, the same answer twice, and a partition list made only of what the job
// named or of pools that fit.
func FuzzRoute(f *testing.F) {
	f.Add("", "", "gres:gpu:1", "", "", "class=resnet", uint32(1), uint16(NoVal16), uint64(NoVal64), uint32(NoVal), uint32(NoVal), uint32(NoVal), uint16(NoVal16), false)
	f.Add("cpu", "gres:gpu:8", "", "", "", "", uint32(1), uint16(4), uint64(8192), uint32(2), uint32(2), uint32(4), uint16(2), false)
	f.Add("a100,debug,,v100", "", "gres:gpu:a100:1,gres:mps:10", "gres:gpu:1", "gres:gpu:1", "class=bert", uint32(4), uint16(NoVal16), MemPerCPU|2048, uint32(1), uint32(Infinite), uint32(8), uint16(NoVal16), true)
	f.Add("", "gres:gpu:a100:x", "", "", "", "", uint32(0), uint16(0), uint64(0), uint32(0), uint32(0), uint32(0), uint16(0), false)
	cfg := mustNew(f, testbedConfig())
	f.Fuzz(func(t *testing.T, partition, perJob, perNode, perSocket, perTask, comment string,
		minCPUs uint32, cpusPerTask uint16, mem uint64, minNodes, maxNodes, numTasks uint32, tasksPerNode uint16, isModify bool) {
		r := Request{
			Partition: partition, TRESPerJob: perJob, TRESPerNode: perNode, TRESPerSocket: perSocket, TRESPerTask: perTask,
			MinCPUs: minCPUs, CPUsPerTask: cpusPerTask, PnMinCPUs: cpusPerTask, PnMinMemory: mem,
			MinNodes: minNodes, MaxNodes: maxNodes, NumTasks: numTasks, NTasksPerNode: tasksPerNode,
			SocketsPerNode: NoVal16, Comment: comment,
		}
		if isModify {
			r.Op = Modify
		}
		d := cfg.Route(&r)
		again := cfg.Route(&r)
		if d.Action != again.Action || d.Partition != again.Partition || d.Message != again.Message {
			t.Fatalf("two answers: %+v and %+v", d, again)
		}
		if d.Err != nil {
			if d.Action != Keep {
				t.Fatalf("an unreadable request was not kept: %v", d.Action)
			}
			return
		}
		switch d.Action {
		case Reject:
			if d.Message == "" {
				t.Fatal("rejected without a message")
			}
		case SetPartition:
			if d.Partition == "" || d.Message == "" {
				t.Fatalf("SetPartition %q with message %q", d.Partition, d.Message)
			}
			named := strings.Split(partition, ",")
			for _, p := range strings.Split(d.Partition, ",") {
				i, isPool := cfg.byPartition[p]
				switch {
				case !isPool && !slices.Contains(named, p):
					t.Fatalf("partition %q is neither a pool nor named by the job", p)
				case isPool && !fitsCandidate(d.Candidates, i, cfg):
					t.Fatalf("pool %q is listed but does not fit", p)
				}
			}
		}
	})
}

func fitsCandidate(cands []Candidate, poolIndex int, cfg *Config) bool {
	for i := range cands {
		if cands[i].Pool == &cfg.Pools[poolIndex] {
			return cands[i].Fit == FitOK && cands[i].Rank > 0
		}
	}
	return false
}

// FuzzParse checks that no file makes the decoder panic, and that what Parse accepts
// validates cleanly and routes.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"pools:\n  - name: cpu\n    node: {cpus: 8, memory_mb: 32000}\n",
		"default_gpu_pool: a\npools:\n  - name: a\n    gpu_type: a100\n    fallback: [b]\n    node: {gpus: 4, cpus: 8, memory_mb: 1}\n  - name: b\n    gpu_type: a100\n    fallback: [a]\n    node: {gpus: 4, cpus: 8, memory_mb: 1}\n",
		"x: &a [*a]\n",
		"pools: [{name: a, node: *x}]",
		"",
	} {
		f.Add([]byte(s))
	}
	testbed, err := os.ReadFile("testdata/pools.yaml")
	if err == nil {
		f.Add(testbed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data, "fuzz.yaml")
		if err != nil {
			if cfg != nil {
				t.Fatal("Parse returned a config with an error")
			}
			return
		}
		if problems := cfg.Validate(); len(problems) != 0 {
			t.Fatalf("a parsed config has problems: %v", problems)
		}
		j := job(gres("gres:gpu:1"))
		if d := cfg.Route(&j); d.Err != nil {
			t.Fatalf("Route: %v", d.Err)
		}
	})
}
