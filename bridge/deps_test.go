package bridge

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
)

// module is this repository's module path.
const module = "github.com/slurmbridge/slurmbridge/"

// buildTags are every build tag the repository's files use, so that a file behind any of them
// is in the graph too: integration (the testbed's tests) and nvml (tests on a real GPU).
const buildTags = "integration,nvml"

// TestBridgeImportsNothingAbove fails when a package under bridge/, its tests included, comes to
// depend on a component built on top of it.
func TestBridgeImportsNothingAbove(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-test", "-tags", buildTags, "-f", "{{.ImportPath}}", "./...").Output()
	if err != nil {
		// go list says on stderr which package or import it could not load.
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			t.Fatalf("go list: %v\n%s", err, exit.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	var bridged int
	for _, pkg := range strings.Fields(string(out)) {
		rel, ok := strings.CutPrefix(pkg, module)
		if !ok {
			continue
		}
		// A test binary lists itself as "pkg.test" and its variant as "pkg [pkg.test]".
		rel, _, _ = strings.Cut(rel, " ")
		rel = strings.TrimSuffix(rel, ".test")
		if rel == "bridge" || strings.HasPrefix(rel, "bridge/") {
			bridged++
			continue
		}
		t.Errorf("bridge depends on %s: the ground floor must import nothing above it", rel)
	}
	if bridged == 0 {
		t.Fatalf("go list named no package of bridge/ (ran in the wrong directory?):\n%s", out)
	}
}
