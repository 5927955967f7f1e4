// Package scale builds a testbed of a site's size from the Alibaba GPU trace
// (cluster-trace-gpu-v2023): the trace cluster's nodes become pools, one per GPU model and GPU
// count per node, scaled to any node count with the trace's proportions; its pods are assigned
// to many projects of unequal sizes by a seeded rule, and each project's guarantee is set from
// what its pods used, the way a site sets quotas.
//
// It is pure: it reads the trace's rows and writes facts; testbed/testbed.sh starts the
// cluster (make testbed-up PRESET=alibaba NODES=N).
package scale

import (
	"cmp"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// TraceNode is one row of openb_node_list_all_node.csv.
type TraceNode struct {
	Name      string
	CPUMilli  int64
	MemoryMiB int64
	GPUs      int
	Model     string // "" for a CPU-only node
}

// ReadNodes reads a node list CSV with its header line (sn,cpu_milli,memory_mib,gpu,model).
// Errors name the line.
func ReadNodes(r io.Reader) ([]TraceNode, error) {
	cr := csv.NewReader(r)
	head, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("node list: reading the header: %w", err)
	}
	col := map[string]int{}
	for i, h := range head {
		col[strings.TrimSpace(h)] = i
	}
	for _, c := range []string{"sn", "cpu_milli", "memory_mib", "gpu", "model"} {
		if _, ok := col[c]; !ok {
			return nil, fmt.Errorf("node list: no column %q (have %s)", c, strings.Join(head, ","))
		}
	}
	var nodes []TraceNode
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("node list line %d: %w", line, err)
		}
		n := TraceNode{Name: rec[col["sn"]], Model: strings.TrimSpace(rec[col["model"]])}
		var gpus int64
		for _, f := range []struct {
			name string
			v    *int64
		}{{"cpu_milli", &n.CPUMilli}, {"memory_mib", &n.MemoryMiB}, {"gpu", &gpus}} {
			v, err := strconv.ParseInt(strings.TrimSpace(rec[col[f.name]]), 10, 64)
			if err != nil || v < 0 {
				return nil, fmt.Errorf("node list line %d: %s %q is not a count", line, f.name, rec[col[f.name]])
			}
			*f.v = v
		}
		n.GPUs = int(gpus)
		switch {
		case n.CPUMilli < 1000 || n.MemoryMiB < 1:
			return nil, fmt.Errorf("node list line %d: node %s has %d milli-CPUs and %d MiB", line, n.Name, n.CPUMilli, n.MemoryMiB)
		case (n.GPUs > 0) != (n.Model != ""):
			return nil, fmt.Errorf("node list line %d: node %s has %d GPUs of model %q", line, n.Name, n.GPUs, n.Model)
		}
		nodes = append(nodes, n)
	}
	if len(nodes) == 0 {
		return nil, errors.New("node list: no nodes")
	}
	return nodes, nil
}

// Group is a pool of the preset: the trace's nodes of one GPU model with one GPU count per
// node (the CPU-only nodes are one group, the CPU pool). Its node shape is the largest CPU
// count and memory among its nodes, so every pod that ran on one of them fits on any.
type Group struct {
	Pool     string // e.g. t4x2; "cpu" for the CPU-only nodes
	Model    string // the trace's model, e.g. T4
	Type     string // the GPU type Slurm knows (gres gpu:TYPE), e.g. t4
	GPUs     int    // per node
	CPUs     int    // per node
	MemoryMB int    // per node
	Nodes    int
}

// CPUPool is the name of the group of CPU-only nodes.
const CPUPool = "cpu"

// Groups groups the trace's nodes: the CPU pool first, then by model and GPUs per node.
func Groups(nodes []TraceNode) []Group {
	byKey := map[[2]string]*Group{}
	for _, n := range nodes {
		key := [2]string{n.Model, strconv.Itoa(n.GPUs)}
		g := byKey[key]
		if g == nil {
			g = &Group{Pool: CPUPool, Model: n.Model, Type: strings.ToLower(n.Model), GPUs: n.GPUs}
			if n.Model != "" {
				g.Pool = fmt.Sprintf("%sx%d", g.Type, n.GPUs)
			}
			byKey[key] = g
		}
		g.Nodes++
		g.CPUs = max(g.CPUs, int(n.CPUMilli/1000))
		g.MemoryMB = max(g.MemoryMB, int(n.MemoryMiB))
	}
	groups := make([]Group, 0, len(byKey))
	for _, g := range byKey {
		groups = append(groups, *g)
	}
	slices.SortFunc(groups, func(a, b Group) int {
		return cmp.Or(cmp.Compare(a.Model, b.Model), cmp.Compare(a.GPUs, b.GPUs))
	})
	return groups
}

// Scale gives the groups n nodes in all, in the trace's proportions (largest remainder); every
// group keeps at least one node, so n must be at least the number of groups.
func Scale(groups []Group, n int) ([]Group, error) {
	total := 0
	for _, g := range groups {
		total += g.Nodes
	}
	if n < len(groups) || n > total {
		return nil, fmt.Errorf("%d nodes: the trace's %d node shapes need from %d to %d (its own size)", n, len(groups), len(groups), total)
	}
	out := slices.Clone(groups)
	weights := make([]float64, len(groups))
	for i, g := range groups {
		weights[i] = float64(g.Nodes)
	}
	for i, c := range apportion(weights, n, 1) {
		out[i].Nodes = c
	}
	return out, nil
}

// apportion splits total into integer parts proportional to weights by the largest remainder
// (ties to the earlier weight), then lifts every part below least to least, taking from the
// part furthest above its share; at total = the weights' sum it gives the weights back.
func apportion(weights []float64, total, least int) []int {
	counts := make([]int, len(weights))
	sum := 0.0
	for _, w := range weights {
		sum += w
	}
	if sum == 0 || total <= 0 {
		return counts
	}
	type rem struct {
		i int
		r float64
	}
	rems := make([]rem, len(weights))
	given := 0
	for i, w := range weights {
		exact := float64(total) * w / sum
		counts[i] = int(math.Floor(exact))
		given += counts[i]
		rems[i] = rem{i, exact - math.Floor(exact)}
	}
	slices.SortStableFunc(rems, func(a, b rem) int { return cmp.Compare(b.r, a.r) })
	for k := 0; given < total; k++ {
		counts[rems[k%len(rems)].i]++
		given++
	}
	if least*len(weights) > total {
		return counts
	}
	for i := range counts {
		for counts[i] < least {
			// The donor: the part with the most above its exact share.
			donor, most := -1, math.Inf(-1)
			for j, c := range counts {
				if over := float64(c) - float64(total)*weights[j]/sum; c > least && over > most {
					donor, most = j, over
				}
			}
			counts[donor]--
			counts[i]++
		}
	}
	return counts
}
