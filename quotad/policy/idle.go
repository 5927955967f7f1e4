package policy

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/slurmbridge/slurmbridge/bridge/noderoom"
)

// nodeRoom is what one usable node has free now. Every partition that lists the node shares
// the same nodeRoom, so what one placement takes is gone for all of them.
type nodeRoom struct {
	name  string
	at    int           // its index in idleNodes.all
	parts []string      // read only once newIdleNodes made it
	free  noderoom.Free // idle GPUs by type, free CPUs and memory, less what the plan took
}

// idleNodes is the free capacity of the usable nodes, by partition.
type idleNodes struct {
	all         []*nodeRoom // by name
	byPartition map[string][]*nodeRoom
	idle        map[string]map[string]int // partition → type → idle GPUs on its nodes, kept with take
	free        map[string]int            // type → idle GPUs on all usable nodes, each node once, kept with take
	partitions  []string                  // sorted, for jobs that list none; read only
	// unfit are the partitions and shapes a scan of the nodes found no room for. Room only
	// shrinks while a plan lends (take), so they stay unfit until giveBack: without this, a
	// queue of jobs of one shape that fits nowhere would scan every node once per job.
	unfit map[string]bool
}

// newIdleNodes reads the snapshot's nodes. total counts every node's GPUs once; idle counts
// the unallocated GPUs of usable nodes (a down, drained or reserved node has none to lend).
func newIdleNodes(nodes []Node) (in *idleNodes, total, idle map[string]int) {
	in = &idleNodes{byPartition: map[string][]*nodeRoom{}, idle: map[string]map[string]int{}}
	total, idle = map[string]int{}, map[string]int{}
	sorted := make([]*Node, len(nodes))
	for i := range nodes {
		sorted[i] = &nodes[i]
	}
	sort.Slice(sorted, func(a, b int) bool { return sorted[a].Name < sorted[b].Name })
	for _, n := range sorted {
		for t, c := range n.GPUs {
			total[t] += max(c, 0)
		}
		if n.Unusable != "" {
			continue
		}
		r := &nodeRoom{name: n.Name, at: len(in.all), free: noderoom.Free{GPUs: map[string]int{}, CPUs: max(n.FreeCPUs, 0), MemoryMB: max(n.FreeMemMB, 0)}}
		for t, c := range n.IdleGPUs {
			if c > 0 {
				r.free.GPUs[t] = c
				idle[t] += c
			}
		}
		in.all = append(in.all, r)
		for _, part := range n.Partitions {
			if slices.Contains(r.parts, part) {
				continue // listed twice: still one node
			}
			r.parts = append(r.parts, part)
			if _, ok := in.byPartition[part]; !ok {
				in.partitions = append(in.partitions, part)
				in.idle[part] = map[string]int{}
			}
			in.byPartition[part] = append(in.byPartition[part], r)
			addAll(in.idle[part], r.free.GPUs)
		}
	}
	sort.Strings(in.partitions)
	in.free = clone(idle)
	return in, total, idle
}

// clone is a copy of in that shares nothing the steps change: each node's free room (one
// copy per node, shared by its partitions as in in), the idle counts and what did not fit. The
// node names, their partitions and the partition list, read only, are shared.
func (in *idleNodes) clone() *idleNodes {
	rooms := make([]nodeRoom, len(in.all))
	out := &idleNodes{
		all:         make([]*nodeRoom, len(in.all)),
		byPartition: make(map[string][]*nodeRoom, len(in.byPartition)),
		idle:        make(map[string]map[string]int, len(in.idle)),
		free:        maps.Clone(in.free),
		partitions:  in.partitions,
		unfit:       maps.Clone(in.unfit),
	}
	for i, r := range in.all {
		rooms[i] = *r
		rooms[i].free.GPUs = maps.Clone(r.free.GPUs)
		out.all[i] = &rooms[i]
	}
	for part, rs := range in.byPartition {
		own := make([]*nodeRoom, len(rs))
		for i, r := range rs {
			own[i] = out.all[r.at]
		}
		out.byPartition[part] = own
	}
	for part, idle := range in.idle {
		out.idle[part] = maps.Clone(idle)
	}
	return out
}

// idleIn is the idle GPUs of type t on the partition's usable nodes.
func (in *idleNodes) idleIn(part, t string) int { return in.idle[part][t] }

// lendable is the idle GPUs of type t on nodes with a CPU free: a GPU job needs at least one.
func (in *idleNodes) lendable(t string) int {
	n := 0
	for _, r := range in.all {
		if r.free.CPUs > 0 {
			n += r.free.GPUs[t]
		}
	}
	return n
}

// shape is what each node of a job must have free for the job to start there.
type shape struct {
	nodes int
	gpus  map[string]int // per node by type; "" any type
	cpus  int
	memMB int64
}

func jobShape(j *Job) shape {
	nodes := j.nodeCount()
	return shape{
		nodes: nodes,
		gpus:  j.perNodeGPUs(),
		cpus:  max(1, ceilDiv(j.CPUs, nodes)),
		memMB: int64(ceilDiv(int(j.MemoryMB), nodes)),
	}
}

// resolve is the per-node GPUs with an untyped request taken as type anyType ("" leaves none).
func (s shape) resolve(anyType string) map[string]int {
	per := map[string]int{}
	for t, n := range s.gpus {
		if t != "" && n > 0 {
			per[t] += n
		}
	}
	if anyType != "" && s.gpus[""] > 0 {
		per[anyType] += s.gpus[""]
	}
	return per
}

// fit finds s.nodes distinct nodes of the partition that each have per GPUs and the shape's
// CPUs and memory free, first by name; nil when there are not enough.
func (in *idleNodes) fit(part string, s shape, per map[string]int) []*nodeRoom {
	want := make([]noderoom.GPUCount, 0, len(per))
	for t, n := range per {
		if in.idle[part][t] < n*s.nodes {
			return nil // not enough on all the partition's nodes together
		}
		want = append(want, noderoom.GPUCount{Type: t, Count: n})
	}
	key := unfitKey(part, s, want)
	if in.unfit[key] {
		return nil
	}
	var got []*nodeRoom
	each := noderoom.Shape{GPUs: want, CPUs: s.cpus, MemoryMB: s.memMB}
	for _, r := range in.byPartition[part] {
		if r.free.Holds(each) {
			got = append(got, r)
			if len(got) == s.nodes {
				return got
			}
		}
	}
	if in.unfit == nil {
		in.unfit = map[string]bool{}
	}
	in.unfit[key] = true
	return nil
}

// unfitKey names a fit's question: the partition, the node count, each node's CPUs, memory
// and GPUs by type.
func unfitKey(part string, s shape, want []noderoom.GPUCount) string {
	parts := make([]string, 0, len(want))
	for _, c := range want {
		parts = append(parts, c.Type+"="+strconv.Itoa(c.Count))
	}
	slices.Sort(parts)
	return fmt.Sprintf("%s|%d|%d|%d|%s", part, s.nodes, s.cpus, s.memMB, strings.Join(parts, ","))
}

// take removes a placement's GPUs, CPUs and memory from its nodes.
func (in *idleNodes) take(pl placement) {
	for _, r := range pl.nodes {
		for t, n := range pl.perNode {
			r.free.GPUs[t] -= n
			in.free[t] -= n
			for _, part := range r.parts {
				in.idle[part][t] -= n
			}
		}
		r.free.CPUs -= pl.shape.cpus
		r.free.MemoryMB -= pl.shape.memMB
	}
}

// giveBack returns what take removed: what did not fit may fit now.
func (in *idleNodes) giveBack(pl placement) {
	clear(in.unfit)
	for _, r := range pl.nodes {
		for t, n := range pl.perNode {
			r.free.GPUs[t] += n
			in.free[t] += n
			for _, part := range r.parts {
				in.idle[part][t] += n
			}
		}
		r.free.CPUs += pl.shape.cpus
		r.free.MemoryMB += pl.shape.memMB
	}
}

// shares says whether two placements use a node in common.
func (pl placement) sharesNode(other placement) bool {
	for _, a := range pl.nodes {
		for _, b := range other.nodes {
			if a == b {
				return true
			}
		}
	}
	return false
}

// shapeText spells what each node needs free, l.g. "2 nodes with 4 a100, 8 CPUs and 16000 MB
// free each".
func (s shape) text() string {
	nodes := "1 node"
	each := ""
	if s.nodes > 1 {
		nodes, each = fmt.Sprintf("%d nodes", s.nodes), " each"
	}
	return fmt.Sprintf("%s with %s, %d CPUs and %d MB free%s", nodes, gpuList(s.gpus), s.cpus, s.memMB, each)
}

// idleText says why no partition could place the job: the idle GPUs of the types it asks for
// per partition, and the node shape it needs when enough GPUs are idle but on no such nodes.
func (l *ledger) idleText(need map[string]int, s shape, parts []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "not enough idle GPUs for %s:", gpuList(need))
	enoughSomewhere := false
	for i, part := range parts {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, " %s has", part)
		shown, idleTotal := 0, 0
		for _, t := range l.c.types {
			if _, asked := need[t]; asked || need[""] > 0 {
				if shown > 0 {
					b.WriteByte('/')
				}
				n := l.nodes.idleIn(part, t)
				fmt.Fprintf(&b, " %d %s", n, t)
				shown++
				idleTotal += n
			}
		}
		if shown == 0 {
			b.WriteString(" none")
		}
		if idleTotal >= sum(need) && sum(need) > 0 {
			enoughSomewhere = true
		}
	}
	if enoughSomewhere {
		fmt.Fprintf(&b, "; it needs %s, and no usable nodes have that free", s.text())
	}
	return b.String()
}
