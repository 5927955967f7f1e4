package slurm

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/slurmbridge/slurmbridge/bridge/gpureq"
	"github.com/slurmbridge/slurmbridge/bridge/noderoom"
	"github.com/slurmbridge/slurmbridge/bridge/pools"
)

// Node is one node as `scontrol show nodes` prints it (nodes_text.go), with the fields poolctl,
// quotad, elasticd and doctor read.
type Node struct {
	Name       string
	Partitions []string
	// State is the base state in lower case, as 22.05 prints it: idle, mixed, allocated, down,
	// unknown, error, future.
	State string
	// StateFlags are the flags on top of it, upper case: DRAIN, NOT_RESPONDING, MAINTENANCE...
	StateFlags    []string
	CPUs          int
	AllocCPUs     int
	MemoryMB      uint64 // real_memory
	AllocMemoryMB uint64
	Gres          []gpureq.Gres // configured, e.g. gpu:a100:4
	GresUsed      []gpureq.Gres // allocated now, e.g. gpu:a100:2(IDX:0-1)
	TRES          gpureq.TRES   // configured, e.g. cpu=8,mem=32000M,gres/gpu=4
	TRESUsed      gpureq.TRES   // allocated now; empty when idle
	// Reservation is the active reservation the node is in ("" none; 22.05 does not say, its
	// RESERVED state flag does).
	Reservation string
	// Address and Hostname are the node's NodeAddr and NodeHostname: where slurmctld reaches
	// its slurmd, and the host it runs on (a name or an address, unresolved).
	Address, Hostname string
}

// downStates are base states in which a node runs nothing new.
var downStates = []string{"down", "unknown", "error", "future"}

// downFlags are flags that keep the scheduler off a node whatever its base state.
var downFlags = []string{
	"DRAIN", "FAIL", "NOT_RESPONDING", "MAINTENANCE", "POWERED_DOWN", "POWERING_DOWN", "POWER_DOWN",
	"REBOOT_ISSUED", "INVALID_REG",
}

// Up reports whether Slurm may start jobs on the node: its base state is idle, mixed or
// allocated and no flag such as DRAIN or NOT_RESPONDING holds it back.
func (n *Node) Up() bool {
	if slices.Contains(downStates, strings.ToLower(n.State)) {
		return false
	}
	for _, f := range n.StateFlags {
		if slices.Contains(downFlags, strings.ToUpper(f)) {
			return false
		}
	}
	return true
}

// WhyNoNewJobs says why Slurm starts no new job on the node now; "" when it may:
//   - not up: down, drained or draining, failing, powered down, not responding (Up);
//   - in an active reservation: only the reservation's jobs may use it;
//   - RESERVED: in a reservation that a state flag reports but the node's record does not name;
//   - PLANNED: backfill keeps it for a pending job that starts there once the node's running
//     jobs end, so a job given its idle GPUs would wait behind that one (22.05's backfill flags
//     only nodes with nothing running; from 23.02 on it flags partly used nodes too).
func (n *Node) WhyNoNewJobs() string {
	switch {
	case !n.Up():
		return fmt.Sprintf("state %s", strings.Join(append([]string{n.State}, n.StateFlags...), "+"))
	case n.Reservation != "":
		return "in reservation " + n.Reservation
	case slices.Contains(n.StateFlags, "RESERVED"):
		return "reserved"
	case slices.Contains(n.StateFlags, "PLANNED"):
		return "planned by backfill for a pending job"
	}
	return ""
}

// Free is what the node has unallocated now: GPUs by type ("" for GPUs configured without a
// type), CPUs and memory. It says nothing of whether Slurm starts jobs there (WhyNoNewJobs).
func (n *Node) Free() noderoom.Free {
	f := noderoom.Free{GPUs: map[string]int{}, CPUs: max(n.CPUs-n.AllocCPUs, 0),
		MemoryMB: int64(n.MemoryMB) - int64(min(n.AllocMemoryMB, n.MemoryMB))}
	used := map[string]uint64{}
	for _, g := range n.GresUsed {
		if g.IsGPU() {
			used[g.Type] += g.Count
		}
	}
	for _, g := range n.Gres {
		if !g.IsGPU() || g.Count == 0 {
			continue
		}
		taken := min(g.Count, used[g.Type])
		used[g.Type] -= taken
		if free := int(g.Count - taken); free > 0 {
			f.GPUs[g.Type] += free
		}
	}
	return f
}

// GPUs is the number of GPUs the node has, all types together.
func (n *Node) GPUs() uint64 { return countGPUs(n.Gres) }

// AllocGPUs is the number of the node's GPUs allocated to jobs now.
func (n *Node) AllocGPUs() uint64 { return countGPUs(n.GresUsed) }

// InPartition reports whether the node belongs to the partition.
func (n *Node) InPartition(partition string) bool { return slices.Contains(n.Partitions, partition) }

func countGPUs(gres []gpureq.Gres) uint64 {
	var n uint64
	for _, g := range gres {
		if g.IsGPU() {
			n += g.Count
		}
	}
	return n
}

// nodeBaseStates are the base states of a node (NODE_STATE_BASE); every other name is a flag.
var nodeBaseStates = []string{"UNKNOWN", "DOWN", "IDLE", "ALLOCATED", "ERROR", "MIXED", "FUTURE"}

type wireNode struct {
	Name        string     `json:"name"`
	Partitions  []string   `json:"partitions"`
	State       stateNames `json:"state"`       // 22.05: the base state; later: base and flags
	StateFlags  []string   `json:"state_flags"` // 22.05 only
	CPUs        number     `json:"cpus"`
	AllocCPUs   number     `json:"alloc_cpus"`
	RealMemory  number     `json:"real_memory"`
	AllocMem    number     `json:"alloc_memory"`
	Gres        string     `json:"gres"`
	GresUsed    string     `json:"gres_used"`
	TRES        string     `json:"tres"`
	TRESUsed    string     `json:"tres_used"`   // null or "" when nothing is allocated
	Reservation string     `json:"reservation"` // 23.02 on
	Address     string     `json:"address"`
	Hostname    string     `json:"hostname"`
}

// ParseNodes reads the nodes of Slurm 22.05's `sinfo --json` or of `scontrol show nodes
// --json` (23.02 on): both have a top-level "nodes" array. An answer with errors, or without
// that array, is an error: never a partial or empty list that looks like an empty cluster.
// No daemon reads nodes so (Client.Nodes reads text); it stays as the oracle that the text
// read's tests hold it to, and for the JSON captures that tests of doctor, quotad and pools
// replay.
func ParseNodes(data []byte) ([]Node, error) {
	var resp struct {
		envelope
		Nodes *[]wireNode `json:"nodes"`
		// From 23.02, sinfo --json aggregates nodes per partition here and has no "nodes".
		Sinfo json.RawMessage `json:"sinfo"`
	}
	if err := decode(data, "nodes", &resp, &resp.envelope); err != nil {
		return nil, err
	}
	if resp.Nodes == nil {
		if resp.Sinfo != nil {
			return nil, errors.New(`sinfo JSON of Slurm 23.02 or later has no "nodes" array: read scontrol show nodes --json`)
		}
		return nil, errors.New(`nodes JSON has no "nodes" array`)
	}
	nodes := make([]Node, 0, len(*resp.Nodes))
	for _, w := range *resp.Nodes {
		n, err := w.node()
		if err != nil {
			return nil, fmt.Errorf("nodes JSON: node %s: %w", w.Name, err)
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}

func (w *wireNode) node() (Node, error) {
	if w.Name == "" {
		return Node{}, errors.New("no name")
	}
	base, flags := splitState(w.State, nodeBaseStates)
	if base == "" {
		return Node{}, fmt.Errorf("state %q has no base state", w.State)
	}
	for _, f := range w.StateFlags {
		flags = append(flags, strings.ToUpper(f))
	}
	n := Node{Name: w.Name, Partitions: w.Partitions, State: strings.ToLower(base), StateFlags: flags, Reservation: w.Reservation,
		Address: w.Address, Hostname: w.Hostname}
	var err error
	if n.CPUs, err = w.CPUs.int(); err != nil {
		return Node{}, fmt.Errorf("cpus: %w", err)
	}
	if n.AllocCPUs, err = w.AllocCPUs.int(); err != nil {
		return Node{}, fmt.Errorf("alloc_cpus: %w", err)
	}
	if n.MemoryMB, err = w.RealMemory.uint64(); err != nil {
		return Node{}, fmt.Errorf("real_memory: %w", err)
	}
	if n.AllocMemoryMB, err = w.AllocMem.uint64(); err != nil {
		return Node{}, fmt.Errorf("alloc_memory: %w", err)
	}
	if n.Gres, err = gpureq.ParseNodeGres(w.Gres); err != nil {
		return Node{}, fmt.Errorf("gres: %w", err)
	}
	if n.GresUsed, err = gpureq.ParseNodeGres(w.GresUsed); err != nil {
		return Node{}, fmt.Errorf("gres_used: %w", err)
	}
	if n.TRES, err = gpureq.ParseTRES(w.TRES); err != nil {
		return Node{}, fmt.Errorf("tres: %w", err)
	}
	if n.TRESUsed, err = gpureq.ParseTRES(w.TRESUsed); err != nil {
		return Node{}, fmt.Errorf("tres_used: %w", err)
	}
	return n, nil
}

// Cluster gives the cluster's shape for pools.CheckCluster: each partition with its nodes,
// down ones included (a drained node still has the shape the config describes).
func Cluster(nodes []Node) pools.Cluster {
	cl := pools.Cluster{Partitions: map[string][]pools.ClusterNode{}}
	for _, n := range nodes {
		cn := pools.ClusterNode{Name: n.Name, Gres: n.Gres, CPUs: n.CPUs, MemoryMB: n.MemoryMB}
		for _, p := range n.Partitions {
			cl.Partitions[p] = append(cl.Partitions[p], cn)
		}
	}
	return cl
}
