package capacity

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestCapacityDoesNoIO fails when the package comes to import anything that reaches outside its
// arguments (files, processes, the network, elasticd's state directory) or the clock: a room
// follows from the snapshot and the job it is given. bridge/slurm and bridge/quotaapi are
// imported for their values (a job, a node, quotad's answer), never to ask Slurm or quotad.
func TestCapacityDoesNoIO(t *testing.T) {
	allowed := map[string]bool{"fmt": true, "maps": true, "slices": true, "strings": true}
	for _, p := range []string{"bridge/gpureq", "bridge/noderoom", "bridge/pools", "bridge/quotaapi", "bridge/slurm", "elasticd/policy"} {
		allowed["github.com/slurmbridge/slurmbridge/"+p] = true
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	read := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		read++
		for _, imp := range f.Imports {
			if path, _ := strconv.Unquote(imp.Path.Value); !allowed[path] {
				t.Errorf("%s imports %s", name, path)
			}
		}
	}
	if read == 0 {
		t.Fatal("no source file read (run in the wrong directory?)")
	}
}
