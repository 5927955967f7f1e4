package bridge

import (
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// module is this repository's module path.
const module = "github.com/slurmbridge/slurmbridge/"

// buildTags are every build tag the repository's files use, so that a file behind any of them
// is in the graph too: integration (the testbed's tests) and nvml (tests on a real GPU).
const buildTags = "integration,nvml"

// listedPackage is a package of this module in the import graph, a test or test variant
// included, with the packages of this module it imports; paths are relative to the module.
type listedPackage struct {
	Path    string
	Imports []string
}

// importGraph is `go list -deps -test` of pattern (relative to bridge/): the module's packages
// among them and their tests, and what each imports of the module.
func importGraph(t *testing.T, pattern string) []listedPackage {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-test", "-tags", buildTags,
		"-f", "{{.ImportPath}}{{range .Imports}}\t{{.}}{{end}}", pattern).Output()
	if err != nil {
		// go list says on stderr which package or import it could not load.
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			t.Fatalf("go list: %v\n%s", err, exit.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	return parseGraph(string(out))
}

// parseGraph reads importGraph's listing: per line a package, then a tab before each import.
func parseGraph(listing string) []listedPackage {
	var graph []listedPackage
	for line := range strings.Lines(listing) {
		fields := strings.Split(strings.TrimRight(line, "\n"), "\t")
		path, ok := modulePath(fields[0])
		if !ok {
			continue
		}
		p := listedPackage{Path: path}
		for _, imp := range fields[1:] {
			if rel, ok := modulePath(imp); ok {
				p.Imports = append(p.Imports, rel)
			}
		}
		graph = append(graph, p)
	}
	return graph
}

// modulePath is the module-relative path of the package a listed path stands for, if it is
// this module's: a test binary lists itself as "pkg.test", a test variant as
// "pkg [pkg.test]", and an external test package as "pkg_test".
func modulePath(listed string) (string, bool) {
	p, _, _ := strings.Cut(listed, " ")
	p = strings.TrimSuffix(p, ".test")
	p = strings.TrimSuffix(p, "_test")
	return strings.CutPrefix(p, module)
}

// under says whether path p is dir or lies below it.
func under(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// TestBridgeImportsNothingAbove fails when a package under bridge/, its tests included, comes to
// depend on a component built on top of it.
func TestBridgeImportsNothingAbove(t *testing.T) {
	var bridged int
	for _, p := range importGraph(t, "./...") {
		if under(p.Path, "bridge") {
			bridged++
			continue
		}
		t.Errorf("bridge depends on %s: the ground floor must import nothing above it", p.Path)
	}
	if bridged == 0 {
		t.Fatal("go list named no package of bridge/ (ran in the wrong directory?)")
	}
}

// component is a part of slurmbridge built on bridge/, and what of the module it may import
// besides bridge/ and itself.
type component struct {
	dir string
	// mayImport are other components' directories it imports, with why; "*": any.
	mayImport map[string]string
}

// components are every directory above bridge/ that holds Go packages. A daemon imports no
// other component, so that its binary holds its own policy only and each can be read, changed
// and released without the others; the admin tools import no daemon.
var components = []component{
	{dir: "quotad"},
	{dir: "elasticd"},
	{dir: "doctor"},
	{dir: "poolctl", mayImport: map[string]string{"doctor": "poolctl doctor runs doctor's checks"}},
	// The two plugins are loaded by different Slurm daemons and share nothing but bridge.
	{dir: "cgo-plugins/job_submit_pools"},
	{dir: "cgo-plugins/spank_elastic"},
	// The site cluster's suite and the testbed's renderer set up Slurm from bridge's facts.
	{dir: "site"},
	{dir: "testbed"},
	// The benchmarks drive every component: replays run elasticd's and quotad's own decisions.
	{dir: "bench", mayImport: map[string]string{"*": "bench drives every component"}},
	// The attacker's suite is end to end across the components: it sends one daemon's
	// credential to the other, and reads their APIs' wire types.
	{dir: "attacks", mayImport: map[string]string{"*": "attacks is the end-to-end attacker's suite"}},
	// The docs' test (nothing but a test) reads each component's settings and flags to check
	// the settings reference against them.
	{dir: "docs", mayImport: map[string]string{"*": "docs checks every component's settings"}},
}

// crossImports are the imports in graph that break the components' rules, as
// "importer imports imported" lines, and the packages that fall under no component.
func crossImports(graph []listedPackage) []string {
	var bad []string
	seen := map[string]bool{}
	for _, p := range graph {
		if under(p.Path, "bridge") {
			continue // TestBridgeImportsNothingAbove
		}
		i := slices.IndexFunc(components, func(c component) bool { return under(p.Path, c.dir) })
		if i < 0 {
			if !seen[p.Path] {
				bad = append(bad, fmt.Sprintf("%s is under no component of bridge/deps_test.go: add its directory with what it may import", p.Path))
				seen[p.Path] = true
			}
			continue
		}
		c := components[i]
		if _, any := c.mayImport["*"]; any {
			continue
		}
		for _, imp := range p.Imports {
			allowed := under(imp, "bridge") || under(imp, c.dir)
			for dir := range c.mayImport {
				allowed = allowed || under(imp, dir)
			}
			line := fmt.Sprintf("%s imports %s: %s may import only bridge/ and its own packages", p.Path, imp, c.dir)
			if !allowed && !seen[line] {
				bad = append(bad, line)
				seen[line] = true
			}
		}
	}
	return bad
}

// TestComponentsImportOnlyBridgeAndThemselves fails when a component's package, its tests
// included (a test binary links what it imports too), imports another component's, outside
// the exceptions in components.
func TestComponentsImportOnlyBridgeAndThemselves(t *testing.T) {
	graph := importGraph(t, "../...")
	for _, line := range crossImports(graph) {
		t.Error(line)
	}
	for _, c := range components {
		if !slices.ContainsFunc(graph, func(p listedPackage) bool { return under(p.Path, c.dir) }) {
			t.Errorf("go list named no package under %s: a component that is gone leaves components", c.dir)
		}
	}
}

// The rule catches an import in a test file, of a test variant, and a package no component
// claims, and lets the exceptions through.
func TestCrossImportsNamesTheOffendingImport(t *testing.T) {
	listing := strings.Join([]string{
		module + "elasticd/daemon [" + module + "elasticd/daemon.test]\tnet/http\t" + module + "quotad/view [" + module + "elasticd/daemon.test]\t" + module + "bridge/auth",
		module + "elasticd/daemon_test [" + module + "elasticd/daemon.test]\t" + module + "elasticd/daemon [" + module + "elasticd/daemon.test]",
		module + "poolctl\t" + module + "doctor\t" + module + "bridge/pools",
		module + "doctor\t" + module + "quotad/policy",
		module + "bench/replay\t" + module + "quotad/policy\t" + module + "elasticd/daemon",
		module + "newtool\t" + module + "bridge/pools",
		"github.com/rs/zerolog\tio",
	}, "\n") + "\n"
	got := crossImports(parseGraph(listing))
	want := []string{
		"elasticd/daemon imports quotad/view: elasticd may import only bridge/ and its own packages",
		"doctor imports quotad/policy: doctor may import only bridge/ and its own packages",
		"newtool is under no component of bridge/deps_test.go: add its directory with what it may import",
	}
	if !slices.Equal(got, want) {
		t.Errorf("crossImports:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
