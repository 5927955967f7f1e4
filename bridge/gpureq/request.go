package gpureq

import (
	"fmt"
	"math"
	"math/bits"
	"strings"
)

// Scope says what a GPU count applies to, after the job_desc field it came from.
type Scope uint8

const (
	PerJob    Scope = iota + 1 // tres_per_job: --gpus
	PerNode                    // tres_per_node: --gres, --gpus-per-node
	PerSocket                  // tres_per_socket: --gpus-per-socket
	PerTask                    // tres_per_task: --gpus-per-task
)

var scopeNames = [...]string{PerJob: "job", PerNode: "node", PerSocket: "socket", PerTask: "task"}

var scopeFields = [...]string{
	PerJob: "tres_per_job", PerNode: "tres_per_node", PerSocket: "tres_per_socket", PerTask: "tres_per_task",
}

func (s Scope) String() string {
	if s >= PerJob && s <= PerTask {
		return scopeNames[s]
	}
	return fmt.Sprintf("Scope(%d)", uint8(s))
}

// Field is the job_desc field that holds counts of this scope.
func (s Scope) Field() string {
	if s >= PerJob && s <= PerTask {
		return scopeFields[s]
	}
	return s.String()
}

// Count is a number of GPUs of one type ("" = any type) for one scope.
type Count struct {
	Scope Scope
	Type  string
	N     uint64
}

// Request is the GPU part of a job: every GPU count from the four tres_per_* fields, in the
// order given, and the other GRES apart (pools route on GPUs only).
type Request struct {
	GPUs  []Count
	Other []Gres // non-GPU GRES, e.g. {Name: "mps", Count: 100}
}

// Fields are job_desc's four GRES fields as the cgo layer copies them (NULL = "").
type Fields struct {
	PerJob, PerNode, PerSocket, PerTask string
}

// Parse reads the four fields into one Request. The error is a *SyntaxError naming the field
// and the token.
func Parse(f Fields) (Request, error) {
	var r Request
	for _, in := range [...]struct {
		scope Scope
		value string
	}{{PerJob, f.PerJob}, {PerNode, f.PerNode}, {PerSocket, f.PerSocket}, {PerTask, f.PerTask}} {
		err := eachGres(in.scope.Field(), in.value, func(g Gres) {
			if g.IsGPU() {
				r.GPUs = append(r.GPUs, Count{Scope: in.scope, Type: g.Type, N: g.Count})
			} else {
				r.Other = append(r.Other, g)
			}
		})
		if err != nil {
			return Request{}, err
		}
	}
	return r, nil
}

// IsGPU reports whether the job asks for at least one GPU.
func (r *Request) IsGPU() bool {
	for _, c := range r.GPUs {
		if c.N > 0 {
			return true
		}
	}
	return false
}

// NamedTypes returns the first GPU type the job names and the first other one, "" when there
// is none: second != "" means the job wants several types at once, which no single-type node
// holds. Counts of zero name nothing.
func (r *Request) NamedTypes() (first, second string) {
	for _, c := range r.GPUs {
		if c.N == 0 || c.Type == "" {
			continue
		}
		if first == "" {
			first = c.Type
		} else if c.Type != first {
			return first, c.Type
		}
	}
	return first, ""
}

// Sum is the number of GPUs, all types together, the job asks for in one scope.
func (r *Request) Sum(s Scope) uint64 {
	var n uint64
	for _, c := range r.GPUs {
		if c.Scope == s {
			n = addSat(n, c.N)
		}
	}
	return n
}

// GPUsPerNode is the least number of GPUs one node must hold for the job to run on nodes that
// carry one GPU type, given the job spreads over at most nodes nodes, runs tasksPerNode tasks on
// its fullest node and uses socketsPerNode sockets per node. Zero arguments count as 1; pass
// math.MaxUint64 for "as many nodes as it takes". Every scope is a lower bound; the largest wins.
func (r *Request) GPUsPerNode(nodes, tasksPerNode, socketsPerNode uint64) uint64 {
	nodes, tasksPerNode, socketsPerNode = atLeast1(nodes), atLeast1(tasksPerNode), atLeast1(socketsPerNode)
	need := r.Sum(PerNode)
	need = max(need, MulSat(r.Sum(PerSocket), socketsPerNode))
	need = max(need, MulSat(r.Sum(PerTask), tasksPerNode))
	need = max(need, CeilDiv(r.Sum(PerJob), nodes))
	return need
}

// TotalGPUs is the least number of GPUs the whole job holds on nodes nodes running tasks
// tasks with socketsPerNode sockets each. Zero arguments count as 1.
func (r *Request) TotalGPUs(nodes, tasks, socketsPerNode uint64) uint64 {
	nodes, tasks, socketsPerNode = atLeast1(nodes), atLeast1(tasks), atLeast1(socketsPerNode)
	total := r.Sum(PerJob)
	total = max(total, MulSat(r.Sum(PerNode), nodes))
	total = max(total, MulSat(r.Sum(PerTask), tasks))
	total = max(total, MulSat(MulSat(r.Sum(PerSocket), socketsPerNode), nodes))
	return total
}

// String describes the GPU request for people: "2 a100 GPUs per node + 1 GPU per job".
func (r *Request) String() string {
	var b strings.Builder
	for _, c := range r.GPUs {
		if c.N == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteString(" + ")
		}
		fmt.Fprintf(&b, "%d ", c.N)
		if c.Type != "" {
			b.WriteString(c.Type)
			b.WriteByte(' ')
		}
		b.WriteString("GPU")
		if c.N != 1 {
			b.WriteByte('s')
		}
		b.WriteString(" per ")
		b.WriteString(c.Scope.String())
	}
	if b.Len() == 0 {
		return "no GPUs"
	}
	return b.String()
}

func atLeast1(n uint64) uint64 { return max(n, 1) }

// CeilDiv is n/d rounded up; dividing by MaxUint64 ("unbounded") gives 1 for any positive n.
// d must not be 0. The pools package sizes a job's per-node share with it too.
func CeilDiv(n, d uint64) uint64 {
	if n == 0 {
		return 0
	}
	return (n-1)/d + 1
}

// MulSat is a*b, saturated at MaxUint64 instead of wrapping around: counts come from users
// (gpu:16g is legal syntax), and the pools package multiplies their CPU and memory figures too.
func MulSat(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	if hi != 0 {
		return math.MaxUint64
	}
	return lo
}

func addSat(a, b uint64) uint64 {
	s, carry := bits.Add64(a, b, 0)
	if carry != 0 {
		return math.MaxUint64
	}
	return s
}
