package slurm

import (
	"strings"
	"testing"

	"github.com/slurmbridge/slurmbridge/bridge/gpureq"
	"github.com/slurmbridge/slurmbridge/bridge/pools"
)

func TestParseNodesReadsEveryField(t *testing.T) {
	nodes, err := ParseNodes(fixture(t, "sinfo-22.05-testbed-busy.json"))
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]Node{}
	for _, n := range nodes {
		byName[n.Name] = n
	}
	spot := byName["a100-spot-1"] // three of its four GPUs allocated
	if spot.State != "mixed" || len(spot.StateFlags) != 0 || !spot.InPartition("a100-spot") || spot.InPartition("a100") ||
		spot.CPUs != 8 || spot.AllocCPUs != 1 || spot.MemoryMB != 32000 || spot.AllocMemoryMB != 1000 {
		t.Fatalf("a100-spot-1 read as %+v", spot)
	}
	if spot.Address != "127.0.0.1" || spot.Hostname != "vm" {
		t.Fatalf("a100-spot-1 NodeAddr %q NodeHostname %q, want 127.0.0.1 and vm", spot.Address, spot.Hostname)
	}
	if spot.GPUs() != 4 || spot.AllocGPUs() != 3 || spot.Gres[0].Type != "a100" {
		t.Fatalf("a100-spot-1 GPUs %d allocated %d (gres %v)", spot.GPUs(), spot.AllocGPUs(), spot.Gres)
	}
	if spot.TRES.GPUs("a100") != 4 || spot.TRES["mem"] != 32000 || spot.TRESUsed.GPUs("a100") != 3 {
		t.Fatalf("a100-spot-1 TRES %v used %v", spot.TRES, spot.TRESUsed)
	}
	idle := byName["a100-2"] // tres_used is null, gres_used "gpu:a100:0(IDX:N/A)"
	if idle.AllocGPUs() != 0 || len(idle.TRESUsed) != 0 || !idle.Up() {
		t.Fatalf("idle a100-2 read as %+v", idle)
	}
	cpu := byName["cpu-1"] // gres "", gres_used "gpu:0"
	if cpu.GPUs() != 0 || cpu.AllocGPUs() != 0 || len(cpu.Gres) != 0 {
		t.Fatalf("cpu-1 read as %+v", cpu)
	}
}

func TestNodeUp(t *testing.T) {
	for _, tc := range []struct {
		state string
		flags []string
		up    bool
	}{
		{"idle", nil, true},
		{"mixed", nil, true},
		{"allocated", []string{"COMPLETING"}, true},
		{"idle", []string{"DRAIN"}, false},
		{"mixed", []string{"DRAIN"}, false}, // draining: runs what it has, takes nothing new
		{"idle", []string{"NOT_RESPONDING"}, false},
		{"idle", []string{"POWERED_DOWN"}, false},
		{"down", nil, false},
		{"unknown", nil, false},
		{"future", nil, false},
	} {
		n := Node{State: tc.state, StateFlags: tc.flags}
		if n.Up() != tc.up {
			t.Errorf("%s %v: Up() = %v, want %v", tc.state, tc.flags, n.Up(), tc.up)
		}
	}
}

func TestClusterMatchesTheTestbedPools(t *testing.T) {
	nodes, err := ParseNodes(fixture(t, "sinfo-22.05-testbed-idle.json"))
	if err != nil {
		t.Fatal(err)
	}
	cl := Cluster(nodes)
	if len(cl.Partitions) != 4 || len(cl.Partitions["a100"]) != 2 || len(cl.Partitions["a100-spot"]) != 1 {
		t.Fatalf("partitions: %v", cl.Partitions)
	}
	cfg, err := pools.Load("../../slurm-conf/testbed/pools.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if problems := pools.CheckCluster(cfg, cl); len(problems) > 0 {
		t.Fatalf("the testbed's pools.yaml does not match its sinfo:\n%v", problems)
	}

	// A node in two partitions is in both; a wrong shape is found through the conversion.
	nodes[0].Partitions = append(nodes[0].Partitions, "v100")
	problems := pools.CheckCluster(cfg, Cluster(nodes))
	if len(problems) == 0 || !strings.Contains(problems.Error(), "node_count is 2 but partition v100 has 3 nodes") {
		t.Fatalf("got problems %v", problems)
	}
}

func TestWhyNoNewJobs(t *testing.T) {
	base := Node{Name: "a100-1", State: "idle", CPUs: 8, MemoryMB: 32000}
	for _, tc := range []struct {
		name string
		edit func(*Node)
		want string
	}{
		{"up", func(*Node) {}, ""},
		{"drained", func(n *Node) { n.StateFlags = []string{"DRAIN"} }, "state idle+DRAIN"},
		{"down", func(n *Node) { n.State = "down" }, "state down"},
		{"in a reservation (23.02 on)", func(n *Node) { n.Reservation = "maint"; n.StateFlags = []string{"RESERVED"} }, "in reservation maint"},
		{"reserved (22.05 says it by flag only)", func(n *Node) { n.StateFlags = []string{"RESERVED"} }, "reserved"},
		{"planned by backfill", func(n *Node) { n.StateFlags = []string{"PLANNED"} }, "planned by backfill for a pending job"},
		{"planned and partly used", func(n *Node) { n.State = "mixed"; n.StateFlags = []string{"PLANNED"} }, "planned by backfill for a pending job"},
	} {
		n := base
		tc.edit(&n)
		if got := n.WhyNoNewJobs(); got != tc.want {
			t.Errorf("%s: WhyNoNewJobs = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestFreeIsWhatIsNotAllocated(t *testing.T) {
	n := Node{Name: "mix-1", State: "mixed", CPUs: 16, AllocCPUs: 10, MemoryMB: 64000, AllocMemoryMB: 70000,
		Gres:     []gpureq.Gres{{Name: "gpu", Type: "a100", Count: 4}, {Name: "gpu", Type: "t4", Count: 2}, {Name: "shard", Count: 8}},
		GresUsed: []gpureq.Gres{{Name: "gpu", Type: "a100", Count: 3}, {Name: "gpu", Type: "t4", Count: 2}}}
	f := n.Free()
	if f.CPUs != 6 || f.MemoryMB != 0 {
		t.Errorf("free CPUs, memory = %d, %d; want 6, 0 (memory allocated past the node's is none free)", f.CPUs, f.MemoryMB)
	}
	if len(f.GPUs) != 1 || f.GPUs["a100"] != 1 {
		t.Errorf("free GPUs = %v; want a100:1 only (t4 all used, shards are not GPUs)", f.GPUs)
	}
}
