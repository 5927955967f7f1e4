package reconcile_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestReconcileDoesNoIO fails when the package comes to import anything that reaches outside
// its arguments (files, processes, the network, Slurm, elasticd's state directory) or to read
// the clock: its decisions must follow from the state, the snapshot and the time it is given.
func TestReconcileDoesNoIO(t *testing.T) {
	allowed := map[string]bool{
		"fmt": true, "maps": true, "slices": true, "strconv": true, "time": true,
		"github.com/slurmbridge/slurmbridge/elasticd/policy": true,
	}
	clock := map[string]bool{"Now": true, "Since": true, "Until": true, "Sleep": true, "After": true, "Tick": true, "NewTimer": true, "NewTicker": true, "AfterFunc": true}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	read := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		read++
		for _, imp := range f.Imports {
			if path, _ := strconv.Unquote(imp.Path.Value); !allowed[path] {
				t.Errorf("%s imports %s", name, path)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "time" && clock[sel.Sel.Name] {
					t.Errorf("%s: time.%s reads the clock", fset.Position(sel.Pos()), sel.Sel.Name)
				}
			}
			return true
		})
	}
	if read == 0 {
		t.Fatal("no source file read (run in the wrong directory?)")
	}
}
