package scale

import (
	"fmt"
	"testing"

	"github.com/slurmbridge/slurmbridge/bench/replay"
)

// The replay sends each pod to the project the guarantees were computed for, untyped pods ask
// for any type, typed ones for a type the preset has among those they name.
func TestReplayAssignsPodsByTheGuaranteesRule(t *testing.T) {
	rule := Rule{Seed: 1, Count: 3, Zipf: 1, Guaranteed: 1}
	var projects []replay.Project
	for _, p := range rule.Projects() {
		projects = append(projects, replay.Project{Account: p.Account, User: p.Account, GPUs: 4,
			ByType: map[string]int{"t4": 1, "v100m16": 1, "v100m32": 1}})
	}
	assign, err := rule.Assign(projects, GroupsOfTypes([]string{"t4", "v100m16", "v100m32"}))
	if err != nil {
		t.Fatal(err)
	}
	seenTypes := map[string]int{}
	for i := range 200 {
		name := fmt.Sprintf("openb-pod-%04d", i)
		want := rule.Projects()[rule.ProjectOf(name, rule.Projects())].Account
		pr, tp := assign(replay.Task{Name: name})
		if pr.Account != want || tp != "" {
			t.Fatalf("%s: %s %q, want %s and any type", name, pr.Account, tp, want)
		}
		_, tp = assign(replay.Task{Name: name, GPUSpec: []string{"V100M16", "V100M32", "A100"}})
		seenTypes[tp]++
		if _, tp = assign(replay.Task{Name: name, GPUSpec: []string{"T4"}}); tp != "t4" {
			t.Fatalf("%s: a T4 pod asks for %q", name, tp)
		}
	}
	if len(seenTypes) != 2 || seenTypes["v100m16"] < 50 || seenTypes["v100m32"] < 50 {
		t.Errorf("pods naming V100M16|V100M32 asked for %v: want both types, drawn by name", seenTypes)
	}
	// A type the pod's project has no guarantee of is not asked for: under static quotas it
	// would never start.
	projects[0].ByType = map[string]int{"v100m16": 2}
	assign, err = rule.Assign(projects, GroupsOfTypes([]string{"t4", "v100m16", "v100m32"}))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		name := fmt.Sprintf("openb-pod-%04d", i)
		pr, tp := assign(replay.Task{Name: name, GPUSpec: []string{"V100M32", "V100M16"}})
		if pr.Account == projects[0].Account && tp != "v100m16" {
			t.Fatalf("%s of %s (guaranteed v100m16 only): asks for %q", name, pr.Account, tp)
		}
		if pr, tp := assign(replay.Task{Name: name, GPUSpec: []string{"T4"}}); pr.Account == projects[0].Account && tp != "" {
			t.Fatalf("%s: a T4 pod of a project without T4 asks for %q, want any type", name, tp)
		}
	}
	if _, err := rule.Assign(projects[:2], nil); err == nil {
		t.Error("a testbed missing one of the rule's projects was accepted")
	}
}
