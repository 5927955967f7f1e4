package pools

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// The file is walked as a yaml.Node rather than decoded into structs: yaml.v3's KnownFields
// stops at the first unknown key and Node.Decode is never strict, while poolctl validate must
// report every problem with its line.

var (
	topKeys  = []string{"default_cpu_pool", "default_gpu_pool", "policy", "borrow_qos", "elastic_qos", "borrow_qos_admins", "pools"}
	poolKeys = []string{
		"name", "description", "partition", "gpu_type", "price_per_gpu_hour", "price_per_cpu_hour",
		"spot", "fallback", "speed", "node_count", "node",
	}
	nodeKeys = []string{"gpus", "cpus", "memory_mb"}
)

// Decode reads a pools file without the checks of Validate: unknown or repeated keys, values
// of the wrong kind and YAML syntax errors are its problems.
func Decode(data []byte, source string) (*Config, Problems) {
	d := decoder{source: source, lines: lineIndex{}}
	c := &Config{Source: source}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		line, msg := yamlError(err)
		d.problem(line, "", "%s", msg)
		return nil, d.problems
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		d.problem(0, "", "the file is empty")
		return nil, d.problems
	}
	root := resolve(doc.Content[0])
	d.mapping(root, "", "", "", topKeys, func(key string, v *yaml.Node) {
		switch key {
		case "default_cpu_pool":
			c.DefaultCPUPool = d.str(v, "", key)
		case "default_gpu_pool":
			c.DefaultGPUPool = d.str(v, "", key)
		case "policy":
			c.Policy = Policy(d.str(v, "", key))
		case "borrow_qos":
			c.BorrowQOS = d.str(v, "", key)
		case "elastic_qos":
			c.ElasticQOS = d.str(v, "", key)
		case "borrow_qos_admins":
			c.BorrowQOSAdmins = d.userList(v, key)
		case "pools":
			c.Pools = d.pools(v)
		}
	})
	c.lines = d.lines
	return c, d.problems.sorted()
}

type decoder struct {
	source   string
	lines    lineIndex
	problems Problems
}

func (d *decoder) problem(line int, pool, format string, args ...any) {
	d.problems = append(d.problems, Problem{Source: d.source, Line: line, Pool: pool, Msg: fmt.Sprintf(format, args...)})
}

// mapping calls each for every known key of n in file order, recording the key's line under
// path; unknown and repeated keys are problems. label ("node") prefixes the messages.
func (d *decoder) mapping(n *yaml.Node, path, label, pool string, known []string, each func(key string, v *yaml.Node)) {
	prefix := ""
	if label != "" {
		prefix = label + ": "
	}
	if n.Kind != yaml.MappingNode {
		d.problem(n.Line, pool, "%swant a mapping of %s, got %s", prefix, strings.Join(known, ", "), kindName(n))
		return
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], resolve(n.Content[i+1])
		key := k.Value
		switch first, dup := seen[key]; {
		case dup:
			d.problem(k.Line, pool, "%s%s is repeated (first at line %d)", prefix, key, first)
			continue
		case k.Kind != yaml.ScalarNode || !slices.Contains(known, key):
			d.problem(k.Line, pool, "%sunknown key %q (known keys: %s)", prefix, key, strings.Join(known, ", "))
			continue
		}
		seen[key] = k.Line
		d.lines[joinPath(path, key)] = k.Line
		each(key, v)
	}
}

func (d *decoder) pools(n *yaml.Node) []Pool {
	if n.Kind != yaml.SequenceNode {
		d.problem(n.Line, "", "pools: want a list of pools, got %s", kindName(n))
		return nil
	}
	pools := make([]Pool, 0, len(n.Content))
	for i, item := range n.Content {
		item = resolve(item)
		path := poolPath(i)
		d.lines[path] = item.Line
		var p Pool
		// The name labels every other problem of the pool, so read it first.
		if item.Kind == yaml.MappingNode {
			for j := 0; j+1 < len(item.Content); j += 2 {
				if item.Content[j].Value == "name" {
					p.Name = resolve(item.Content[j+1]).Value
				}
			}
		}
		label := p.Name
		if label == "" {
			label = fmt.Sprintf("#%d", i+1)
		}
		d.mapping(item, path, "", label, poolKeys, func(key string, v *yaml.Node) {
			switch key {
			case "name":
				p.Name = d.str(v, label, key)
			case "description":
				p.Description = d.str(v, label, key)
			case "partition":
				p.Partition = d.str(v, label, key)
			case "gpu_type":
				p.GPUType = d.str(v, label, key)
			case "price_per_gpu_hour":
				p.PricePerGPUHour = d.float(v, label, key)
			case "price_per_cpu_hour":
				p.PricePerCPUHour = d.float(v, label, key)
			case "spot":
				p.Spot = d.bool(v, label, key)
			case "fallback":
				p.Fallback = d.strList(v, label, key, poolPath(i, key))
			case "speed":
				p.Speed = d.speeds(v, label, poolPath(i, key))
			case "node_count":
				p.NodeCount = int(d.uint(v, label, key, math.MaxInt32))
			case "node":
				p.Node = d.node(v, label, poolPath(i, key))
			}
		})
		if p.Partition == "" {
			p.Partition = p.Name
		}
		pools = append(pools, p)
	}
	return pools
}

func (d *decoder) node(n *yaml.Node, pool, path string) NodeShape {
	var s NodeShape
	d.mapping(n, path, "node", pool, nodeKeys, func(key string, v *yaml.Node) {
		switch key {
		case "gpus":
			s.GPUs = int(d.uint(v, pool, "node.gpus", math.MaxInt32))
		case "cpus":
			s.CPUs = int(d.uint(v, pool, "node.cpus", math.MaxInt32))
		case "memory_mb":
			s.MemoryMB = d.uint(v, pool, "node.memory_mb", math.MaxInt64)
		}
	})
	return s
}

func (d *decoder) speeds(n *yaml.Node, pool, path string) map[string]float64 {
	if n.Kind != yaml.MappingNode {
		d.problem(n.Line, pool, "speed: want a mapping of workload class to speed, got %s", kindName(n))
		return nil
	}
	speeds := make(map[string]float64, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], resolve(n.Content[i+1])
		if _, dup := speeds[k.Value]; dup {
			d.problem(k.Line, pool, "speed: class %q is repeated", k.Value)
			continue
		}
		d.lines[joinPath(path, k.Value)] = k.Line
		speeds[k.Value] = d.float(v, pool, "speed."+k.Value)
	}
	return speeds
}

func (d *decoder) str(n *yaml.Node, pool, key string) string {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		d.problem(n.Line, pool, "%s: want a string, got %s", key, kindName(n))
		return ""
	}
	return n.Value
}

func (d *decoder) strList(n *yaml.Node, pool, key, path string) []string {
	if n.Kind != yaml.SequenceNode {
		d.problem(n.Line, pool, "%s: want a list of pool names, got %s", key, kindName(n))
		return nil
	}
	out := make([]string, 0, len(n.Content))
	for i, item := range n.Content {
		item = resolve(item)
		d.lines[joinPath(path, strconv.Itoa(i))] = item.Line
		out = append(out, d.str(item, pool, key))
	}
	return out
}

func (d *decoder) userList(n *yaml.Node, key string) []string {
	if n.Kind != yaml.SequenceNode {
		d.problem(n.Line, "", "%s: want a list of user names, got %s", key, kindName(n))
		return nil
	}
	out := make([]string, 0, len(n.Content))
	for i, item := range n.Content {
		item = resolve(item)
		d.lines[joinPath(key, strconv.Itoa(i))] = item.Line
		out = append(out, d.str(item, "", key))
	}
	return out
}

func (d *decoder) float(n *yaml.Node, pool, key string) float64 {
	var f float64
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" || n.Decode(&f) != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		d.problem(n.Line, pool, "%s: want a number, got %s", key, kindName(n))
		return 0
	}
	return f
}

func (d *decoder) uint(n *yaml.Node, pool, key string, limit uint64) uint64 {
	var v uint64
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" || n.Decode(&v) != nil || v > limit {
		d.problem(n.Line, pool, "%s: want a whole number from 0 to %d, got %s", key, limit, kindName(n))
		return 0
	}
	return v
}

func (d *decoder) bool(n *yaml.Node, pool, key string) bool {
	var b bool
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" || n.Decode(&b) != nil {
		d.problem(n.Line, pool, "%s: want true or false, got %s", key, kindName(n))
		return false
	}
	return b
}

// resolve follows aliases (*anchor) to the node they stand for.
func resolve(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// kindName describes a node for a problem message, quoting scalars.
func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "nothing"
		}
		v := n.Value
		if len(v) > 40 {
			v = v[:40] + "..."
		}
		return strconv.Quote(v)
	}
	return "nothing"
}

var yamlLineRE = regexp.MustCompile(`^(?:yaml: )?line (\d+): `)

// yamlError splits a yaml.v3 syntax error ("yaml: line 3: ...") into its line and message.
func yamlError(err error) (int, string) {
	msg := err.Error()
	m := yamlLineRE.FindStringSubmatch(msg)
	if m == nil {
		return 0, strings.TrimPrefix(msg, "yaml: ")
	}
	n, _ := strconv.Atoi(m[1])
	return n, msg[len(m[0]):]
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
