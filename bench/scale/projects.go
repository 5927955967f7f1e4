package scale

import (
	"fmt"
	"math"
	"slices"

	"github.com/slurmbridge/slurmbridge/bench/replay"
)

// Project is a preset project: a Slurm account with one user of the same name, its weight in
// the rule that assigns pods to projects, and its guaranteed GPUs by type.
type Project struct {
	Account string
	Weight  float64
	GPUs    map[string]int
}

// Rule assigns the trace's pods to projects. The trace has no tenant column, so project k of
// Count (from 1) gets a pod with probability proportional to 1/k^Zipf, drawn from a hash of the
// pod's name and Seed: tenants of unequal sizes, the same on every run.
type Rule struct {
	Seed  int64
	Count int
	Zipf  float64
	// Guaranteed is the share of each GPU type's GPUs given out as guarantees, each project's
	// part in proportion to the GPU-time its pods of that type used in the trace.
	Guaranteed float64
}

// DefaultRule: 40 projects, Zipf exponent 1 (the largest has about 23 % of the pods, the
// smallest 0.6 %), every GPU guaranteed to someone.
var DefaultRule = Rule{Seed: 1, Count: 40, Zipf: 1, Guaranteed: 1}

// Projects are the rule's projects, team01 .. teamNN, without guarantees.
func (r Rule) Projects() []Project {
	ps := make([]Project, r.Count)
	for k := range ps {
		ps[k] = Project{Account: fmt.Sprintf("team%02d", k+1), Weight: 1 / math.Pow(float64(k+1), r.Zipf)}
	}
	return ps
}

// ProjectOf is the index in projects of the project the rule gives the pod named name.
func (r Rule) ProjectOf(name string, projects []Project) int {
	total := 0.0
	for _, p := range projects {
		total += p.Weight
	}
	x := replay.Unit(r.Seed, name, "scale-project") * total
	for i, p := range projects {
		if x < p.Weight {
			return i
		}
		x -= p.Weight
	}
	return len(projects) - 1
}

// Guarantee sets each project's guaranteed GPUs from what its pods used: a pod's GPU-time is
// its whole GPUs (Slurm does not share a GPU between jobs) times the seconds it ran
// (scheduled to deleted; a pod never scheduled, or never deleted, used nothing). A pod that names GPU models
// spreads it evenly over those the preset has; one that names none, over every type in
// proportion to its GPUs. Of each type's GPUs, Guaranteed is apportioned to the projects by
// their GPU-time of that type. A project left with no GPU at all (its pods' GPU-time rounds to
// nothing in every type, as on a small cluster) is given one GPU of the type with the most,
// taken from the project that holds the most of it: a site admits no project that could
// never run a GPU job under its quotas.
func (r Rule) Guarantee(projects []Project, tasks []replay.Task, groups []Group) []Project {
	capacity := map[string]int{}
	var types []string
	modelType := map[string]string{}
	for _, g := range groups {
		if g.GPUs == 0 {
			continue
		}
		if _, ok := capacity[g.Type]; !ok {
			types = append(types, g.Type)
		}
		capacity[g.Type] += g.GPUs * g.Nodes
		modelType[g.Model] = g.Type
	}
	slices.Sort(types)
	allGPUs := 0
	for _, n := range capacity {
		allGPUs += n
	}
	used := make([]map[string]float64, len(projects))
	for i := range used {
		used[i] = map[string]float64{}
	}
	for _, t := range tasks {
		if t.NumGPU == 0 || t.Scheduled < 0 || t.Deletion <= t.Scheduled {
			continue
		}
		gpuTime := float64(t.NumGPU) * float64(t.Deletion-t.Scheduled)
		p := r.ProjectOf(t.Name, projects)
		var allowed []string
		for _, m := range t.GPUSpec {
			if tp, ok := modelType[m]; ok && !slices.Contains(allowed, tp) {
				allowed = append(allowed, tp)
			}
		}
		if len(allowed) > 0 {
			for _, tp := range allowed {
				used[p][tp] += gpuTime / float64(len(allowed))
			}
			continue
		}
		for _, tp := range types {
			used[p][tp] += gpuTime * float64(capacity[tp]) / float64(allGPUs)
		}
	}
	out := slices.Clone(projects)
	for i := range out {
		out[i].GPUs = map[string]int{}
	}
	for _, tp := range types {
		weights := make([]float64, len(out))
		for i := range out {
			weights[i] = used[i][tp]
		}
		for i, n := range apportion(weights, int(math.Floor(r.Guaranteed*float64(capacity[tp]))), 0) {
			if n > 0 {
				out[i].GPUs[tp] = n
			}
		}
	}
	if len(types) == 0 {
		return out
	}
	largest := types[0]
	for _, tp := range types {
		if capacity[tp] > capacity[largest] {
			largest = tp
		}
	}
	for i := range out {
		if len(out[i].GPUs) > 0 {
			continue
		}
		donor := -1
		for j := range out {
			if out[j].GPUs[largest] > 1 && (donor < 0 || out[j].GPUs[largest] > out[donor].GPUs[largest]) {
				donor = j
			}
		}
		if donor < 0 {
			break // fewer GPUs of the type than projects
		}
		out[donor].GPUs[largest]--
		out[i].GPUs[largest] = 1
	}
	return out
}
