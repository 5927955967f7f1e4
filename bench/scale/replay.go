package scale

import (
	"fmt"
	"slices"
	"strings"

	"github.com/slurmbridge/slurmbridge/bench/replay"
)

// TraceNodeShape is the trace's most common GPU node (G2: 96 CPUs, 393,216 MiB, 8 GPUs). The
// preset's replay gives it as replay.Params.Node, so pods keep the CPUs and memory they asked
// for, within their GPU share of such a node.
var TraceNodeShape = replay.Shape{CPUs: 96, MemoryMB: 393216, GPUs: 8}

// Assign is the preset's replay rule (replay.Params.Assign): each pod goes to the project this
// rule gives it, the rule that set the guarantees, and asks for a GPU type only where the pod
// names models: of those the preset has and its project is guaranteed, the one or one drawn
// by the pod's name (Slurm's --gres names one type); with none such it asks for any type, as
// a type its project has no guarantee of would never start under static quotas. projects are
// the testbed's (replay.AnyTypeProjects); every project of the rule must be among them.
func (r Rule) Assign(projects []replay.Project, groups []Group) (func(replay.Task) (replay.Project, string), error) {
	byAccount := map[string]replay.Project{}
	for _, p := range projects {
		byAccount[p.Account] = p
	}
	ruled := r.Projects()
	mine := make([]replay.Project, len(ruled))
	for i, p := range ruled {
		pr, ok := byAccount[p.Account]
		if !ok {
			return nil, fmt.Errorf("project %s of the rule (%d projects) has no user or no guarantee on the testbed: was it brought up with another -projects?", p.Account, r.Count)
		}
		mine[i] = pr
	}
	if len(projects) != len(ruled) {
		return nil, fmt.Errorf("the testbed has %d projects, the rule %d: was it brought up with another -projects?", len(projects), len(ruled))
	}
	modelType := map[string]string{}
	for _, g := range groups {
		if g.GPUs > 0 {
			modelType[g.Model] = g.Type
		}
	}
	return func(t replay.Task) (replay.Project, string) {
		pr := mine[r.ProjectOf(t.Name, ruled)]
		var types []string
		for _, m := range t.GPUSpec {
			if tp, ok := modelType[m]; ok && pr.ByType[tp] > 0 && !slices.Contains(types, tp) {
				types = append(types, tp)
			}
		}
		if len(types) == 0 {
			return pr, ""
		}
		slices.Sort(types)
		return pr, types[int(replay.Unit(r.Seed, t.Name, "scale-type")*float64(len(types)))]
	}, nil
}

// GroupsOfTypes are groups standing for a running preset's GPU types (what Assign needs of
// them: each type's model), when its facts are all there is: Groups made each type its model
// lower-cased.
func GroupsOfTypes(types []string) []Group {
	var out []Group
	for _, t := range types {
		out = append(out, Group{Model: strings.ToUpper(t), Type: t, GPUs: 1})
	}
	return out
}
