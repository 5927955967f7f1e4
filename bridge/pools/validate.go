package pools

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/slurmbridge/slurmbridge/bridge/gpureq"
)

// Validate checks the config on its own (CheckCluster compares it with the cluster) and
// returns every problem, ordered by line.
func (c *Config) Validate() Problems {
	v := validator{c: c}
	if len(c.Pools) == 0 {
		v.top("pools", "no pools are configured")
	}
	if c.Policy != "" && !slices.Contains(policies, c.Policy) {
		v.top("policy", "policy %q is not one of %s", c.Policy, joinPolicies())
	}
	byName := map[string]int{}
	byPartition := map[string]int{}
	for i := range c.Pools {
		v.pool(i, byName, byPartition)
	}
	v.defaultPool("default_cpu_pool", c.DefaultCPUPool, false, byName)
	v.defaultPool("default_gpu_pool", c.DefaultGPUPool, true, byName)
	for i := range c.Pools {
		v.fallbacks(i, byName)
	}
	v.cycles(byName)
	v.borrowQOS()
	return v.problems.sorted()
}

// borrowQOS checks borrow_qos and elastic_qos (CheckQOSPattern, and not the same QOS) and the
// admins.
func (v *validator) borrowQOS() {
	for _, k := range []struct{ key, q string }{{"borrow_qos", v.c.BorrowQOS}, {"elastic_qos", v.c.ElasticQOS}} {
		if k.q == "" {
			continue
		}
		if err := CheckQOSPattern(k.q); err != nil {
			v.top(k.key, "%s %q %v", k.key, k.q, err)
		}
	}
	if QOSKey(v.c.BorrowQOSPattern()) == QOSKey(v.c.ElasticQOSPattern()) {
		v.top("elastic_qos", "elastic_qos %q is also borrow_qos: elastic workers need a QOS of their own, reclaimed before other borrowers", v.c.ElasticQOSPattern())
	}
	for i, u := range v.c.BorrowQOSAdmins {
		if !validUser(u) {
			v.top("borrow_qos_admins."+strconv.Itoa(i), "borrow_qos_admins: %q is not a user name", u)
		}
	}
}

// validUser accepts the portable user names of POSIX (and a trailing '$' of Samba accounts).
func validUser(s string) bool {
	if s == "" || len(s) > 256 || s[0] == '-' {
		return false
	}
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '.', r == '-':
		case r == '$' && i == len(s)-1:
		default:
			return false
		}
	}
	return true
}

type validator struct {
	c        *Config
	problems Problems
}

func (v *validator) top(path, format string, args ...any) {
	v.problems = append(v.problems, Problem{
		Source: v.c.Source, Line: v.c.lines.line(path), Msg: fmt.Sprintf(format, args...),
	})
}

func (v *validator) at(i int, field, format string, args ...any) {
	path := poolPath(i)
	if field != "" {
		path = poolPath(i, field)
	}
	v.problems = append(v.problems, Problem{
		Source: v.c.Source, Line: v.c.lines.line(path), Pool: v.label(i), Msg: fmt.Sprintf(format, args...),
	})
}

func (v *validator) label(i int) string {
	if name := v.c.Pools[i].Name; name != "" {
		return name
	}
	return fmt.Sprintf("#%d", i+1)
}

func (v *validator) pool(i int, byName, byPartition map[string]int) {
	p := &v.c.Pools[i]
	switch first, dup := byName[p.Name]; {
	case p.Name == "":
		v.at(i, "", "name is missing")
	case !validName(p.Name):
		v.at(i, "name", "name %q is not a word of letters, digits, '_', '-' or '.'", p.Name)
	case dup:
		v.at(i, "name", "name is used by pool #%d too", first+1)
	default:
		byName[p.Name] = i
	}
	partition := p.partitionName()
	switch first, dup := byPartition[partition]; {
	case partition == "":
	case !validName(partition):
		v.at(i, "partition", "partition %q is not a Slurm partition name", partition)
	case dup:
		v.at(i, "partition", "partition %s is pool %s's too; a partition is one pool", partition, v.label(first))
	default:
		byPartition[partition] = i
	}
	if p.GPUType != "" && !validName(p.GPUType) {
		v.at(i, "gpu_type", "gpu_type %q is not a GRES type", p.GPUType)
	}

	v.price(i, "price_per_gpu_hour", p.PricePerGPUHour)
	v.price(i, "price_per_cpu_hour", p.PricePerCPUHour)
	if !p.IsGPU() && p.PricePerGPUHour != 0 {
		v.at(i, "price_per_gpu_hour", "a CPU pool (no gpu_type) has no GPUs to price")
	}
	for _, class := range slices.Sorted(maps.Keys(p.Speed)) {
		switch s := p.Speed[class]; {
		case !validClass(class):
			v.at(i, "speed."+class, "workload class %q is not a word of letters, digits, '_', '-' or '.'", class)
		case !(s > 0) || math.IsInf(s, 0):
			v.at(i, "speed."+class, "speed for %s must be a number above 0, not %v", class, s)
		}
	}

	if p.NodeCount < 0 {
		v.at(i, "node_count", "node_count must not be negative")
	}
	n := p.Node
	if _, written := v.c.lines[poolPath(i, "node")]; n == (NodeShape{}) && !written {
		v.at(i, "node", "node is missing: say what each node holds, e.g. node: {gpus: 4, cpus: 8, memory_mb: 32000}")
		return
	}
	switch {
	case p.IsGPU() && n.GPUs <= 0:
		v.at(i, "node.gpus", "node.gpus must be at least 1 in a GPU pool (gpu_type %s)", p.GPUType)
	case !p.IsGPU() && n.GPUs != 0:
		v.at(i, "node.gpus", "node.gpus is %d but the pool has no gpu_type", n.GPUs)
	}
	if n.CPUs <= 0 {
		v.at(i, "node.cpus", "node.cpus must be at least 1")
	}
	if n.MemoryMB == 0 {
		v.at(i, "node.memory_mb", "node.memory_mb must be at least 1")
	}
}

func (v *validator) price(i int, field string, price float64) {
	if price < 0 || math.IsNaN(price) || math.IsInf(price, 0) {
		v.at(i, field, "%s must be a number of 0 or more, not %v", field, price)
	}
}

func (v *validator) defaultPool(key, name string, gpu bool, byName map[string]int) {
	if name == "" {
		return
	}
	i, ok := byName[name]
	kind, other := "CPU", "a GPU"
	if gpu {
		kind, other = "GPU", "a CPU"
	}
	switch {
	case !ok:
		v.top(key, "%s: no pool is named %q", key, name)
	case v.c.Pools[i].IsGPU() != gpu:
		v.top(key, "%s: pool %s is %s pool; the default %s pool must be one", key, name, other, kind)
	}
}

func (v *validator) fallbacks(i int, byName map[string]int) {
	p := &v.c.Pools[i]
	for k, name := range p.Fallback {
		field := fmt.Sprintf("fallback.%d", k)
		j, ok := byName[name]
		switch {
		case !ok:
			v.at(i, field, "fallback: no pool is named %q", name)
		case j == i:
			v.at(i, field, "fallback: a pool cannot fall back to itself")
		case slices.Index(p.Fallback, name) < k:
			v.at(i, field, "fallback: %s is listed twice", name)
		case v.c.Pools[j].IsGPU() != p.IsGPU():
			v.at(i, field, "fallback: %s is a %s pool and %s a %s pool; a job can only fall back to the same kind",
				name, kindOf(&v.c.Pools[j]), v.label(i), kindOf(p))
		}
	}
}

// cycles reports each fallback cycle once, at the pool where it is first entered in config
// order: routing must be able to list every pool before all of its fallbacks.
func (v *validator) cycles(byName map[string]int) {
	const (
		unvisited = iota
		onPath
		done
	)
	state := make([]int, len(v.c.Pools))
	var path []int
	var visit func(i int)
	visit = func(i int) {
		state[i] = onPath
		path = append(path, i)
		for _, name := range v.c.Pools[i].Fallback {
			j, ok := byName[name]
			if !ok || j == i { // reported by fallbacks
				continue
			}
			switch state[j] {
			case unvisited:
				visit(j)
			case onPath:
				start := slices.Index(path, j)
				names := make([]string, 0, len(path)-start+1)
				for _, k := range path[start:] {
					names = append(names, v.label(k))
				}
				names = append(names, v.label(j))
				v.at(j, "fallback", "fallback cycle: %s", strings.Join(names, " -> "))
			}
		}
		path = path[:len(path)-1]
		state[i] = done
	}
	for i := range v.c.Pools {
		if state[i] == unvisited {
			visit(i)
		}
	}
}

func kindOf(p *Pool) string {
	if p.IsGPU() {
		return "GPU"
	}
	return "CPU"
}

func joinPolicies() string {
	names := make([]string, len(policies))
	for i, p := range policies {
		names[i] = string(p)
	}
	return strings.Join(names, ", ")
}

// validName accepts pool, partition and GPU type names: gpureq's rule for GRES names (no
// commas: partitions are listed comma-separated).
func validName(s string) bool { return gpureq.ValidName(s) }

// validClass accepts workload class names; same rule as names.
func validClass(s string) bool { return validName(s) }
