package pools

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Policy orders the GPU pools that can run a job.
type Policy string

const (
	// DefaultFirst lists the default GPU pool first, then the others in config order.
	DefaultFirst Policy = "default-first"
	// Cheapest lists pools by expected cost: price per GPU-hour divided by the pool's speed
	// for the job's workload class.
	Cheapest Policy = "cheapest"
	// Fastest lists pools by speed for the job's workload class, the cheaper first on ties.
	Fastest Policy = "fastest"
)

var policies = []Policy{DefaultFirst, Cheapest, Fastest}

// DefaultSpeedClass is the speed key a pool uses for classes it does not list, and for jobs
// without a class. Without it, speed is 1.
const DefaultSpeedClass = "default"

// Config is a pools file. Use Parse, Load or New to get one that Route accepts.
type Config struct {
	Source         string // file name used in problems
	DefaultCPUPool string
	DefaultGPUPool string
	Policy         Policy // "" means DefaultFirst
	Pools          []Pool
	// BorrowQOS is quotad's borrow QOS (its settings.borrowQOS): a pattern with "{account}"
	// for one per project, or the one shared name of a quotad from before per-project QOS;
	// "" means DefaultBorrowQOS. The plugin refuses jobs
	// there that Slurm could not requeue, since reclaiming their GPUs would kill them.
	BorrowQOS string
	// ElasticQOS is quotad's elastic QOS (its settings.elasticQOS), where elasticd runs the
	// workers it grows a job by beyond the project's guarantee, reclaimed before any other
	// borrower: a pattern with "{account}" or one name; "" means DefaultElasticQOS. It is
	// preemptable like the borrow QOS, and the plugin guards it the same way.
	ElasticQOS string
	// BorrowQOSAdmins are the users, besides root and SlurmUser, who may move a job into the
	// borrow QOS with scontrol update: the account quotad runs as.
	BorrowQOSAdmins []string

	lines lineIndex // where each key was in the file; empty for a Config built in code

	// Filled by New; read-only afterwards, so Route may run concurrently.
	ready       bool
	byPartition map[string]int
	defaultCPU  int // index into Pools, -1 when none
	defaultGPU  int
}

// Pool is one resource pool: a Slurm partition whose nodes all have the same shape.
type Pool struct {
	Name            string
	Description     string
	Partition       string // defaults to Name
	GPUType         string // "" for CPU pools
	PricePerGPUHour float64
	PricePerCPUHour float64
	Spot            bool
	Fallback        []string           // pools to try after this one, by name
	Speed           map[string]float64 // workload class -> speed relative to 1
	NodeCount       int                // nodes in the partition; 0 = unknown
	Node            NodeShape

	fallback []int // Fallback resolved to indexes into Config.Pools
}

// NodeShape is what every node of a pool holds. The plugin cannot ask slurmctld while it
// routes, so the config says it and CheckCluster compares it with the live cluster.
type NodeShape struct {
	GPUs     int
	CPUs     int
	MemoryMB uint64
}

// IsGPU reports whether the pool's nodes have GPUs.
func (p *Pool) IsGPU() bool { return p.GPUType != "" }

// SpeedFor is the pool's speed for a workload class: Speed[class], else Speed["default"],
// else 1.
func (p *Pool) SpeedFor(class string) float64 {
	if class != "" {
		if s, ok := p.Speed[class]; ok {
			return s
		}
	}
	if s, ok := p.Speed[DefaultSpeedClass]; ok {
		return s
	}
	return 1
}

// partitionName is Partition, or Name when the partition was left out.
func (p *Pool) partitionName() string {
	if p.Partition == "" {
		return p.Name
	}
	return p.Partition
}

// Problem is one thing wrong with a pools file, with the line it is about.
type Problem struct {
	Source string
	Line   int    // 0 when unknown
	Pool   string // the pool it is about, "" for the file as a whole
	Msg    string
}

func (p Problem) String() string {
	var b strings.Builder
	switch {
	case p.Source != "" && p.Line > 0:
		fmt.Fprintf(&b, "%s:%d: ", p.Source, p.Line)
	case p.Line > 0:
		fmt.Fprintf(&b, "line %d: ", p.Line)
	case p.Source != "":
		fmt.Fprintf(&b, "%s: ", p.Source)
	}
	if p.Pool != "" {
		fmt.Fprintf(&b, "pool %s: ", p.Pool)
	}
	b.WriteString(p.Msg)
	return b.String()
}

// Problems is every problem found, ordered by line; as an error it prints one per line.
type Problems []Problem

func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

func (ps Problems) sorted() Problems {
	slices.SortStableFunc(ps, func(a, b Problem) int { return a.Line - b.Line })
	return ps
}

// Load reads and checks a pools file; the error is Problems when the file is readable.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(data, path)
}

// Parse decodes and checks a pools file; source names it in problems. On any problem it
// returns nil and Problems, so a broken file is never half-used.
func Parse(data []byte, source string) (*Config, error) {
	c, problems := Decode(data, source)
	if len(problems) > 0 {
		return nil, problems
	}
	return New(*c)
}

// New checks a Config (from Decode, or built in code) and prepares it for Route. The result
// shares nothing mutable with c.
func New(c Config) (*Config, error) {
	c.Pools = slices.Clone(c.Pools)
	c.BorrowQOSAdmins = slices.Clone(c.BorrowQOSAdmins)
	for i := range c.Pools {
		p := &c.Pools[i]
		p.Partition = p.partitionName()
		p.Fallback = slices.Clone(p.Fallback)
		if p.Speed != nil {
			speed := make(map[string]float64, len(p.Speed))
			for k, v := range p.Speed {
				speed[k] = v
			}
			p.Speed = speed
		}
	}
	if problems := c.Validate(); len(problems) > 0 {
		return nil, problems
	}
	if c.Policy == "" {
		c.Policy = DefaultFirst
	}
	byName := make(map[string]int, len(c.Pools))
	c.byPartition = make(map[string]int, len(c.Pools))
	for i, p := range c.Pools {
		byName[p.Name] = i
		c.byPartition[p.Partition] = i
	}
	c.defaultCPU, c.defaultGPU = -1, -1
	if i, ok := byName[c.DefaultCPUPool]; ok {
		c.defaultCPU = i
	}
	if i, ok := byName[c.DefaultGPUPool]; ok {
		c.defaultGPU = i
	}
	for i := range c.Pools {
		p := &c.Pools[i]
		p.fallback = make([]int, len(p.Fallback))
		for j, name := range p.Fallback {
			p.fallback[j] = byName[name]
		}
	}
	c.ready = true
	return &c, nil
}

// Pool returns the pool with the given name, or nil.
func (c *Config) Pool(name string) *Pool {
	for i := range c.Pools {
		if c.Pools[i].Name == name {
			return &c.Pools[i]
		}
	}
	return nil
}

// lineIndex maps a key path ("pools.1.node.gpus", "pools.0.fallback.2") to its line.
type lineIndex map[string]int

// line is the line of the most specific known prefix of path: a problem about
// "pools.1.node.gpus" in a file without that key points at "pools.1.node", or the pool.
func (l lineIndex) line(path string) int {
	for {
		if n, ok := l[path]; ok {
			return n
		}
		i := strings.LastIndexByte(path, '.')
		if i < 0 {
			return 0
		}
		path = path[:i]
	}
}

func poolPath(i int, rest ...string) string {
	return strings.Join(append([]string{"pools", strconv.Itoa(i)}, rest...), ".")
}
