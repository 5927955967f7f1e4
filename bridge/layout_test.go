package bridge

import (
	"fmt"
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
	"bench/cmd/elastictransition/main.go":                 "-local: the example job's script (bash torchrun.sbatch), playing elasticd's part without Slurm",
	"bench/replay/plot.go":                                "gnuplot, to draw the replay's figures",
	"cgo-plugins/job_submit_pools/decision_cache_test.go": "the C compiler, to build the decision cache's tests under the sanitizers",
	"bridge/testbed/testbed.go":                           "UserCommand: what a test starts as a testbed user and waits on itself (a salloc waiting for its allocation, a user's slurmrestd)",
	"cgo-plugins/job_submit_pools/layout_test.go":         "testdata/gen-layout.sh, which unpacks a Slurm tarball and compiles its job record's offsets",
	"cgo-plugins/spank_elastic/fuzz_test.go":              "clang or gcc, to build the SPANK plugin's fuzz harness under the sanitizers, and the harness",
	"doctor/plugin_elf_test.go":                           "the C compiler, to build a real shared object for the ELF reader",
	"elasticd/daemon/life_integration_test.go":            "go build of elasticd, and id(1) for the testbed's user names",
	"elasticd/python/python_test.go":                      "python3, for the probe library's own tests",
	"quotad/page_integration_test.go":                     "chromium, to render the cluster page",
	"quotad/quotactl_integration_test.go":                 "the quotactl binary under test",
	"quotad/quotad_integration_test.go":                   "go build of quotad and quotactl, and the binaries under test",
	"site/sitetest/site.go":                               "docker, to run commands on the site cluster's hosts and to kill and start them; dpkg-deb, to read the packages' dependencies",
}

// harnessDirs drive Slurm on purpose: the adapter itself, the testbed harness, the
// benchmarks, which set up the testbed through the harness as the integration tests do, and the
// site cluster's fault suite, which acts as a site's admin and users on each host.
var harnessDirs = []string{"bridge/slurm/", "bridge/testbed/", "bench/", "site/sitetest/"}

// TestSlurmCommandsRunOnlyThroughTheAdapter fails when a file outside the list above starts
// processes (os/exec, os.StartProcess, syscall's exec and fork), when any file but the adapter
// names a Slurm command as the program to run (a literal, a constant, or the first word of a
// shell line), or when a component's own code hands a Slurm command's name to any call: a
// component asks bridge/slurm's Client, which knows each release's flags and output.
func TestSlurmCommandsRunOnlyThroughTheAdapter(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	files := 0
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
		files++
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		for _, problem := range processProblems(f, rel) {
			t.Error(problem)
		}
		if startsProcesses(f) {
			seen[rel] = true
			if _, ok := execUsers[rel]; !ok {
				t.Errorf("%s starts processes: Slurm's commands run through bridge/slurm's Runner; anything else it runs must be listed, with why, in execUsers", rel)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("read %d Go files under %s: the walk missed the tree", files, root)
	}
	for rel := range execUsers {
		if !seen[rel] {
			t.Errorf("execUsers lists %s, which starts no process (moved or gone?)", rel)
		}
	}
}

// importName is the name file f uses for the package at path ("" when it does not import it).
func importName(f *ast.File, path string) string {
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == path {
			if imp.Name != nil {
				return imp.Name.Name
			}
			return filepath.Base(path)
		}
	}
	return ""
}

// processStarters are the calls that start a program, by package: the argument that names it
// is the program (for exec.CommandContext the one after the context).
var processStarters = map[string][]string{
	"os/exec": {"Command", "CommandContext", "LookPath"},
	"os":      {"StartProcess"},
	"syscall": {"Exec", "ForkExec", "StartProcess"},
}

// starterCalls visits every call in f that starts a program.
func starterCalls(f *ast.File, visit func(call *ast.CallExpr)) {
	names := map[string][]string{}
	for path, funcs := range processStarters {
		if name := importName(f, path); name != "" && name != "_" {
			names[name] = funcs
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		if sel, ok := call.Fun.(*ast.SelectorExpr); ok {
			if pkg, ok := sel.X.(*ast.Ident); ok && slices.Contains(names[pkg.Name], sel.Sel.Name) {
				visit(call)
			}
		}
		return true
	})
}

func startsProcesses(f *ast.File) bool {
	found := false
	starterCalls(f, func(*ast.CallExpr) { found = true })
	return found || importName(f, "os/exec") != ""
}

// processProblems lists where file rel runs a Slurm command outside the adapter.
func processProblems(f *ast.File, rel string) []string {
	if strings.HasPrefix(rel, "bridge/slurm/") {
		return nil
	}
	consts := stringConsts(f)
	slurmName := func(e ast.Expr) string {
		// A shell line ("scontrol show job 7") runs its first word.
		if fields := strings.Fields(bareString(e, consts)); len(fields) > 0 && slices.Contains(slurmCommands, filepath.Base(fields[0])) {
			return fields[0]
		}
		return ""
	}
	var problems []string
	starterCalls(f, func(call *ast.CallExpr) {
		for _, arg := range call.Args {
			if name := slurmName(arg); name != "" {
				problems = append(problems, fmt.Sprintf("%s runs %s itself: Slurm's commands run through bridge/slurm's Runner", rel, name))
			}
		}
	})
	if strings.HasSuffix(rel, "_test.go") || slices.ContainsFunc(harnessDirs, func(d string) bool { return strings.HasPrefix(rel, d) }) {
		return problems
	}
	ast.Inspect(f, func(n ast.Node) bool {
		if call, ok := n.(*ast.CallExpr); ok {
			for _, arg := range call.Args {
				// Only the bare name: "scontrol show config failed" is a message, not a command.
				if name := slurmName(arg); name != "" && bareString(arg, consts) == name {
					problems = append(problems, fmt.Sprintf("%s hands %q to a call: a component asks bridge/slurm's Client, which runs Slurm's commands", rel, name))
				}
			}
		}
		return true
	})
	return problems
}

// bareString is e's value when it is a string literal or one of consts, else "".
func bareString(e ast.Expr, consts map[string]string) string {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind == token.STRING {
			s, _ := strconv.Unquote(e.Value)
			return s
		}
	case *ast.Ident:
		return consts[e.Name]
	}
	return ""
}

// stringConsts are file f's string constants by name.
func stringConsts(f *ast.File) map[string]string {
	out := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		spec, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		for i, name := range spec.Names {
			if i < len(spec.Values) {
				if lit, ok := spec.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					out[name.Name], _ = strconv.Unquote(lit.Value)
				}
			}
		}
		return true
	})
	return out
}
