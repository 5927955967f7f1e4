package bridge

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// slurmCommands are the commands that talk to slurmctld or slurmdbd. Only the Slurm adapter
// (bridge/slurm) runs them, so that timeouts, environment and output parsing live in one place.
var slurmCommands = []string{"sacct", "sacctmgr", "salloc", "sbatch", "scancel", "scontrol", "sdiag", "sinfo", "sprio", "squeue", "srun", "sshare", "sstat"}

// execUsers are the files outside the Slurm adapter that may start processes, and why. A new
// one must say here what it runs.
var execUsers = map[string]string{
	"bridge/slurm/runner.go":                              "the Slurm adapter's command runner",
	"bridge/deps_test.go":                                 "go list, to read the import graph",
	"bench/cmd/quotadcost/main.go":                        "the quotad binary it measures",
	"bench/replay/plot.go":                                "gnuplot, to draw the replay's figures",
	"cgo-plugins/job_submit_pools/decision_cache_test.go": "the C compiler, to build the decision cache's tests under the sanitizers",
	"doctor/plugin_elf_test.go":                           "the C compiler, to build a real shared object for the ELF reader",
	"elasticd/daemon/life_integration_test.go":            "go build of elasticd, and id(1) for the testbed's user names",
	"elasticd/python/python_test.go":                      "python3, for the probe library's own tests",
	"quotad/neverkilled_integration_test.go":              "the quotad binary under test",
	"quotad/page_integration_test.go":                     "chromium, to render the cluster page",
	"quotad/quotactl_integration_test.go":                 "the quotactl binary under test",
	"quotad/quotad_integration_test.go":                   "go build of quotad and quotactl, and the binaries under test",
}

// TestSlurmCommandsRunOnlyThroughTheAdapter fails when a file outside the list above starts
// processes, or when any file but the adapter names a Slurm command as the program to run.
func TestSlurmCommandsRunOnlyThroughTheAdapter(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") && rel != "." || d.Name() == "testdata" || d.Name() == "bin" || d.Name() == "dist" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		execName := ""
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == "os/exec" {
				execName = "exec"
				if imp.Name != nil {
					execName = imp.Name.Name
				}
			}
		}
		if execName == "" {
			return nil
		}
		seen[rel] = true
		if _, ok := execUsers[rel]; !ok {
			t.Errorf("%s imports os/exec: Slurm's commands run through bridge/slurm's Runner; anything else it runs must be listed, with why, in execUsers", rel)
		}
		if strings.HasPrefix(rel, "bridge/slurm/") {
			return nil
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != execName {
				return true
			}
			arg := call.Args[0]
			if sel.Sel.Name == "CommandContext" && len(call.Args) > 1 {
				arg = call.Args[1]
			}
			if lit, ok := arg.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if name, _ := strconv.Unquote(lit.Value); slices.Contains(slurmCommands, filepath.Base(name)) {
					t.Errorf("%s runs %s itself: Slurm's commands run through bridge/slurm's Runner", rel, name)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for rel := range execUsers {
		if !seen[rel] {
			t.Errorf("execUsers lists %s, which does not import os/exec (moved or gone?)", rel)
		}
	}
}
