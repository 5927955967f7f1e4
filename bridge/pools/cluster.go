package pools

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/slurmbridge/slurmbridge/bridge/gpureq"
)

// Cluster is the live cluster's shape, as poolctl reads it from slurmctld (slurm.Cluster).
type Cluster struct {
	Partitions map[string][]ClusterNode
}

// ClusterNode is one node of a partition.
type ClusterNode struct {
	Name     string
	Gres     []gpureq.Gres // gpureq.ParseNodeGres of sinfo's "gres"
	CPUs     int
	MemoryMB uint64 // real_memory
}

// CheckCluster compares the config with the live cluster and returns every disagreement,
// each at the config line that states the disagreeing value: the partition exists and has
// nodes, node_count matches, and every node has the pool's GPU type, GPU count, CPUs and
// memory. Routing trusts these numbers, so too small rejects jobs that could run and too
// large lists pools where a job never starts; both are problems.
func CheckCluster(c *Config, cl Cluster) Problems {
	var problems Problems
	report := func(i int, field, format string, args ...any) {
		path := poolPath(i)
		if field != "" {
			path = poolPath(i, field)
		}
		problems = append(problems, Problem{
			Source: c.Source, Line: c.lines.line(path), Pool: c.Pools[i].Name, Msg: fmt.Sprintf(format, args...),
		})
	}
	for i := range c.Pools {
		p := &c.Pools[i]
		partition := p.partitionName()
		nodes, ok := cl.Partitions[partition]
		switch {
		case !ok:
			report(i, "partition", "partition %s does not exist in the cluster (it has %s)", partition,
				strings.Join(slices.Sorted(maps.Keys(cl.Partitions)), ", "))
			continue
		case len(nodes) == 0:
			report(i, "partition", "partition %s has no nodes", partition)
			continue
		}
		if p.NodeCount > 0 && p.NodeCount != len(nodes) {
			report(i, "node_count", "node_count is %d but partition %s has %d nodes", p.NodeCount, partition, len(nodes))
		}
		var gpus, gpuTypes, cpus, memory mismatches
		for _, n := range nodes {
			count, types := nodeGPUs(n.Gres)
			switch {
			case !p.IsGPU() && count > 0:
				gpuTypes.add(fmt.Sprintf("%d %s GPUs but the pool has no gpu_type", count, types), n.Name)
			case p.IsGPU() && count == 0:
				gpuTypes.add("no GPUs but gpu_type is "+p.GPUType, n.Name)
			case p.IsGPU() && types != p.GPUType:
				gpuTypes.add(fmt.Sprintf("GPUs of type %q but gpu_type is %s", types, p.GPUType), n.Name)
			case p.IsGPU() && count != uint64(p.Node.GPUs):
				gpus.add(fmt.Sprintf("%d GPUs but node.gpus is %d", count, p.Node.GPUs), n.Name)
			}
			if n.CPUs != p.Node.CPUs {
				cpus.add(fmt.Sprintf("%d CPUs but node.cpus is %d", n.CPUs, p.Node.CPUs), n.Name)
			}
			if n.MemoryMB != p.Node.MemoryMB {
				memory.add(fmt.Sprintf("%d MB of memory but node.memory_mb is %d", n.MemoryMB, p.Node.MemoryMB), n.Name)
			}
		}
		for _, m := range []struct {
			field string
			m     *mismatches
		}{{"gpu_type", &gpuTypes}, {"node.gpus", &gpus}, {"node.cpus", &cpus}, {"node.memory_mb", &memory}} {
			for _, g := range m.m.groups {
				report(i, m.field, "%s %s", nodeList(g.nodes), haveOrHas(len(g.nodes), g.what))
			}
		}
	}
	return problems.sorted()
}

// nodeGPUs sums a node's GPUs and names their types ("a100", "a100+v100", "" when untyped).
func nodeGPUs(gres []gpureq.Gres) (count uint64, types string) {
	var names []string
	for _, g := range gres {
		if !g.IsGPU() || g.Count == 0 {
			continue
		}
		count += g.Count
		if !slices.Contains(names, g.Type) {
			names = append(names, g.Type)
		}
	}
	slices.Sort(names)
	return count, strings.Join(names, "+")
}

// mismatches groups the nodes that disagree in the same way, so a 500-node partition with a
// wrong node.cpus gives one problem, not 500.
type mismatches struct {
	groups []mismatchGroup
}

type mismatchGroup struct {
	what  string
	nodes []string
}

func (m *mismatches) add(what, node string) {
	for i := range m.groups {
		if m.groups[i].what == what {
			m.groups[i].nodes = append(m.groups[i].nodes, node)
			return
		}
	}
	m.groups = append(m.groups, mismatchGroup{what: what, nodes: []string{node}})
}

func nodeList(nodes []string) string {
	const shown = 5
	if len(nodes) == 1 {
		return "node " + nodes[0]
	}
	if len(nodes) <= shown {
		return "nodes " + strings.Join(nodes, ", ")
	}
	return fmt.Sprintf("nodes %s and %d more", strings.Join(nodes[:shown], ", "), len(nodes)-shown)
}

func haveOrHas(n int, what string) string {
	if n == 1 {
		return "has " + what
	}
	return "have " + what
}
