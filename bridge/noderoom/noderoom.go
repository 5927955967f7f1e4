// Package noderoom is the one rule for what a node has free for a new job and how many jobs
// of a given shape fit there now. quotad uses it to find idle GPUs it may lend (a borrower
// must be able to start), elasticd to count the workers a job could grow by; both read the
// same node through it, so they cannot disagree about a node.
package noderoom

import "math"

// AnyType in a Shape's GPUs asks for GPUs of any type: every GPU free on the node counts.
const AnyType = ""

// Free is what a node has unallocated now: GPUs by type ("" for GPUs configured without a
// type), CPUs and memory. Whether Slurm starts new jobs there at all is the node's own
// question (bridge/slurm: Node.WhyNoNewJobs).
type Free struct {
	GPUs     map[string]int
	CPUs     int
	MemoryMB int64
}

// Shape is what one job (or one elastic worker) needs on each of its nodes: GPUs by type
// (AnyType: of any type), CPUs and memory. A job always takes at least one CPU.
type Shape struct {
	GPUs     []GPUCount // a slice, not a map: it is read for every node of every scan
	CPUs     int
	MemoryMB int64
}

// GPUCount is Count GPUs of Type (AnyType: of any type).
type GPUCount struct {
	Type  string
	Count int
}

// Fits is how many jobs of shape s the free room holds at once, bounded by each of GPUs (per
// type asked), CPUs and memory; 0 when one does not fit.
func (f Free) Fits(s Shape) int {
	n := max(f.CPUs, 0) / max(s.CPUs, 1)
	if s.MemoryMB > 0 {
		n = min(n, int(min(max(f.MemoryMB, 0)/s.MemoryMB, math.MaxInt32)))
	}
	for _, g := range s.GPUs {
		if g.Count > 0 {
			n = min(n, f.GPUsOf(g.Type)/g.Count)
		}
	}
	return n
}

// Holds says whether one job of shape s fits: Fits(s) > 0, by comparisons alone, for the scans
// that ask it of every node.
func (f Free) Holds(s Shape) bool {
	if f.CPUs < max(s.CPUs, 1) || f.MemoryMB < s.MemoryMB {
		return false
	}
	for _, g := range s.GPUs {
		if g.Count > 0 && f.GPUsOf(g.Type) < g.Count {
			return false
		}
	}
	return true
}

// GPUsOf is the free GPUs of type t (AnyType: of every type).
func (f Free) GPUsOf(t string) int {
	if t != AnyType {
		return max(f.GPUs[t], 0)
	}
	all := 0
	for _, c := range f.GPUs {
		all += max(c, 0)
	}
	return all
}
