// Command scalepreset writes the facts and pools of a testbed of a site's size, from a trace's
// cluster (bench/scale): facts.yaml and pools.yaml in -out, which testbed/testbed.sh brings up
// with TESTBED_FACTS=OUT/facts.yaml. make testbed-up PRESET=alibaba [NODES=N] runs both.
//
//	go run ./bench/cmd/scalepreset -trace ../shared/traces/alibaba-gpu-v2023 -nodes 152 -out /tmp/p
//
// It prints the pools (nodes, GPUs) and the projects' guarantees it wrote.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/slurmbridge/slurmbridge/bench/replay"
	"github.com/slurmbridge/slurmbridge/bench/scale"
	"github.com/slurmbridge/slurmbridge/bridge/testbed/facts"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "scalepreset:", err)
		os.Exit(1)
	}
}

func run() error {
	rule := scale.DefaultRule
	preset := flag.String("preset", "alibaba", "the trace whose cluster to build (alibaba: cluster-trace-gpu-v2023)")
	trace := flag.String("trace", "", "the trace's folder, holding openb_node_list_all_node.csv and openb_pod_list_default.csv")
	nodes := flag.Int("nodes", 0, "nodes in all, in the trace's proportions (0: the trace's own 1,523)")
	out := flag.String("out", "", "folder to write facts.yaml and pools.yaml to")
	flag.Int64Var(&rule.Seed, "seed", rule.Seed, "seed of the pods' assignment to projects")
	flag.IntVar(&rule.Count, "projects", rule.Count, "projects (Slurm accounts), team01 ..")
	flag.Float64Var(&rule.Zipf, "zipf", rule.Zipf, "project k gets pods in proportion to 1/k^zipf")
	flag.Float64Var(&rule.Guaranteed, "guaranteed", rule.Guaranteed, "share of each GPU type's GPUs given out as guarantees")
	flag.Parse()
	switch {
	case *preset != "alibaba":
		return fmt.Errorf("-preset %q: the one preset is alibaba", *preset)
	case *trace == "" || *out == "":
		return fmt.Errorf("-trace and -out are needed")
	case rule.Count < 1 || rule.Count > 999 || rule.Zipf < 0 || rule.Guaranteed < 0 || rule.Guaranteed > 1:
		return fmt.Errorf("-projects from 1 to 999, -zipf at least 0, -guaranteed from 0 to 1")
	}
	f, err := os.Open(filepath.Join(*trace, "openb_node_list_all_node.csv"))
	if err != nil {
		return err
	}
	traceNodes, err := scale.ReadNodes(f)
	f.Close()
	if err != nil {
		return err
	}
	groups := scale.Groups(traceNodes)
	if *nodes == 0 {
		*nodes = len(traceNodes)
	}
	if groups, err = scale.Scale(groups, *nodes); err != nil {
		return err
	}
	f, err = os.Open(filepath.Join(*trace, "openb_pod_list_default.csv"))
	if err != nil {
		return err
	}
	tasks, err := replay.ReadTasks(f)
	f.Close()
	if err != nil {
		return err
	}
	projects := rule.Guarantee(rule.Projects(), tasks, groups)
	base, err := facts.LoadRepo()
	if err != nil {
		return err
	}
	header := fmt.Sprintf(`The %s preset: %d of the trace's %d nodes in its proportions, %d projects.
Written by: go run ./bench/cmd/scalepreset -trace %s -nodes %d -seed %d -projects %d -zipf %g -guaranteed %g
The pods' projects: project k of %d has weight 1/k^%g, drawn by a hash of the pod's name and the
seed; each GPU type's guarantees are %g of its GPUs, split by the GPU-time the projects' pods used.`,
		*preset, *nodes, len(traceNodes), rule.Count, *trace, *nodes, rule.Seed, rule.Count, rule.Zipf, rule.Guaranteed,
		rule.Count, rule.Zipf, rule.Guaranteed)
	factsYAML, err := scale.FactsYAML(base, *preset, groups, projects, header)
	if err != nil {
		return err
	}
	if err := ownDir(filepath.Dir(*out)); err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	for name, data := range map[string][]byte{"facts.yaml": factsYAML, "pools.yaml": scale.PoolsYAML(groups, header)} {
		if err := os.WriteFile(filepath.Join(*out, name), data, 0o644); err != nil {
			return err
		}
	}
	report(groups, projects)
	fmt.Printf("wrote %s and %s\n", filepath.Join(*out, "facts.yaml"), filepath.Join(*out, "pools.yaml"))
	return nil
}

// ownDir makes dir where it is missing, then checks that it is a directory of the caller's (or
// root's) that no one else may write: the testbed's folder, under /tmp, where anyone could
// have made it first, and what is written here root renders and runs (testbed.sh checks the
// same before it reads anything there).
func ownDir(dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || (st.Uid != 0 && int(st.Uid) != os.Geteuid()) || fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s must be a directory of root's that no one else may write (it is %s, owner uid %d): remove it, or choose another TESTBED_DIR", dir, fi.Mode(), st.Uid)
	}
	return nil
}

func report(groups []scale.Group, projects []scale.Project) {
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "pool\tmodel\tnodes\tGPUs/node\tCPUs/node\tMB/node\tGPUs\t")
	nodes, gpus := 0, 0
	for _, g := range groups {
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t\n", g.Pool, g.Model, g.Nodes, g.GPUs, g.CPUs, g.MemoryMB, g.GPUs*g.Nodes)
		nodes += g.Nodes
		gpus += g.GPUs * g.Nodes
	}
	fmt.Fprintf(w, "all\t\t%d\t\t\t\t%d\t\n", nodes, gpus)
	w.Flush()
	fmt.Println()
	for _, p := range projects {
		var parts []string
		for _, t := range slices.Sorted(maps.Keys(p.GPUs)) {
			parts = append(parts, fmt.Sprintf("%s %d", t, p.GPUs[t]))
		}
		fmt.Printf("%s (weight %.3f): %s\n", p.Account, p.Weight, strings.Join(parts, ", "))
	}
}
