package scale

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/slurmbridge/slurmbridge/bridge/testbed/facts"
)

// PricePerGPUHour is each trace model's price in the preset's pools.yaml, in dollars per GPU-hour.
// The trace has no prices: these are assumptions in the order of the cards' generation and
// class (T4 an inference card; G2 and G3 are Alibaba's own names, taken as one and two
// generations past V100). Routing orders pools by them; no figure of the replay depends on
// their exact values.
var PricePerGPUHour = map[string]float64{
	"T4": 0.35, "P100": 1.5, "A10": 1.1, "V100M16": 2.5, "V100M32": 3.0, "G2": 2.0, "G3": 3.5,
}

// CPUPricePerHour is the CPU pool's price per CPU-hour, the testbed's.
const CPUPricePerHour = 0.05

// FactsYAML is the preset's facts file under a header saying how it was made: base's ports
// and settings (the repository's facts), the cluster named cluster, one pool per group with its
// own node shape and GPUs, and the projects, each an account with a user of the same name. It
// is validated as testbed.sh will read it.
func FactsYAML(base *facts.Facts, cluster string, groups []Group, projects []Project, header string) ([]byte, error) {
	f := *base
	f.Cluster = cluster
	// One host's /proc holds every node's processes: each running job's sampler would read
	// all of them every 30 s, a load that grows with jobs × processes and no real node has.
	f.Local.JobAcctGather = "none"
	f.Projects = nil
	for _, p := range projects {
		f.Projects = append(f.Projects, facts.Project{Account: p.Account, User: p.Account, GPUs: p.GPUs})
	}
	f.Pools = nil
	for _, g := range groups {
		shape := &facts.Shape{Sockets: 1, CoresPerSocket: g.CPUs, MemoryMB: g.MemoryMB}
		p := facts.Pool{Name: g.Pool, Nodes: g.Nodes, Node: shape}
		if g.GPUs == 0 {
			p.Default = true
			f.Node = *shape
		} else {
			p.GPU, p.GPUsPerNode, p.Features = g.Type, g.GPUs, []string{g.Type}
		}
		f.Pools = append(f.Pools, p)
	}
	data, err := yaml.Marshal(&f)
	if err != nil {
		return nil, err
	}
	data = append([]byte(comment(header)), data...)
	if _, err := facts.Parse(data, "the preset's facts"); err != nil {
		return nil, err
	}
	return data, nil
}

// PoolsYAML is the preset's pools.yaml for the job_submit plugin and elasticd: each group a
// pool at its price, the CPU pool the default for CPU jobs and the group with the most GPUs
// the default for GPU jobs; the testbed's QOS names.
func PoolsYAML(groups []Group, header string) []byte {
	var b bytes.Buffer
	b.WriteString(comment(header))
	most, defaultGPU := 0, ""
	for _, g := range groups {
		if n := g.GPUs * g.Nodes; n > most {
			most, defaultGPU = n, g.Pool
		}
	}
	fmt.Fprintf(&b, "default_cpu_pool: %s\ndefault_gpu_pool: %s\npolicy: cheapest\n", CPUPool, defaultGPU)
	b.WriteString("borrow_qos: borrow-{account}\nelastic_qos: elastic-{account}\n\npools:\n")
	sorted := slices.Clone(groups)
	slices.SortStableFunc(sorted, func(a, b Group) int { return strings.Compare(a.Pool, b.Pool) })
	for _, g := range sorted {
		fmt.Fprintf(&b, "  - name: %s\n", g.Pool)
		if g.GPUs == 0 {
			fmt.Fprintf(&b, "    description: the trace's CPU-only nodes\n    price_per_cpu_hour: %g\n", CPUPricePerHour)
			fmt.Fprintf(&b, "    node_count: %d\n    node: {cpus: %d, memory_mb: %d}\n", g.Nodes, g.CPUs, g.MemoryMB)
			continue
		}
		fmt.Fprintf(&b, "    description: the trace's %s nodes with %d GPUs\n    gpu_type: %s\n    price_per_gpu_hour: %g\n",
			g.Model, g.GPUs, g.Type, PricePerGPUHour[g.Model])
		fmt.Fprintf(&b, "    node_count: %d\n    node: {gpus: %d, cpus: %d, memory_mb: %d}\n", g.Nodes, g.GPUs, g.CPUs, g.MemoryMB)
	}
	return b.Bytes()
}

func comment(text string) string {
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		b.WriteString(strings.TrimRight("# "+line, " ") + "\n")
	}
	return b.String()
}
