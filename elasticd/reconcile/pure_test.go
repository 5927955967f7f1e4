package reconcile_test

import (
	"fmt"
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
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	read := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		problems, err := impurities(name, nil)
		if err != nil {
			t.Fatal(err)
		}
		read++
		for _, p := range problems {
			t.Error(p)
		}
	}
	if read == 0 {
		t.Fatal("no source file read (run in the wrong directory?)")
	}
}

// The check itself catches the clock however "time" is imported: plainly, under another name
// or with a dot; time's values and durations are no I/O.
func TestImpuritiesFindTheClockUnderAnyName(t *testing.T) {
	tests := []struct {
		name, src string
		found     string // a part of the one problem found; "": none
	}{
		{name: "plain import", src: `import "time"; func f() time.Time { return time.Now() }`, found: "time.Now reads the clock"},
		{name: "aliased import", src: `import t "time"; func f() t.Time { return t.Now() }`, found: "t.Now reads the clock"},
		{name: "aliased import, method value", src: `import clock "time"; var f = clock.Since`, found: "clock.Since reads the clock"},
		{name: "dot import", src: `import . "time"; func f() Time { return Now() }`, found: "imports time with a dot"},
		{name: "a disallowed import", src: `import "os"; var f = os.Getpid`, found: "imports os"},
		{name: "time's values and durations", src: `import t "time"; func f(a t.Time) t.Time { return a.Add(t.Minute) }`},
		{name: "a method named like a clock function on a value", src: `import "time"; func f(a, b time.Time) bool { return a.After(b) }`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			problems, err := impurities("planted.go", "package reconcile\n"+tc.src+"\n")
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.found == "" && len(problems) > 0:
				t.Errorf("problems %q, want none", problems)
			case tc.found != "" && (len(problems) != 1 || !strings.Contains(problems[0], tc.found)):
				t.Errorf("problems %q, want one saying %q", problems, tc.found)
			}
		})
	}
}

// impurities parses the file name (from src when not nil) and says what in it reaches outside
// the package's arguments: an import not allowed, or a call of time's clock functions. The
// clock is looked for under the name the file gives the import path "time", so an aliased
// import is checked like a plain one, and a dot import, which would hide the calls, is one.
func impurities(name string, src any) ([]string, error) {
	allowed := map[string]bool{
		"fmt": true, "maps": true, "slices": true, "strconv": true, "time": true,
		"github.com/slurmbridge/slurmbridge/elasticd/policy": true,
	}
	clock := map[string]bool{"Now": true, "Since": true, "Until": true, "Sleep": true, "After": true, "Tick": true, "NewTimer": true, "NewTicker": true, "AfterFunc": true}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, 0)
	if err != nil {
		return nil, err
	}
	var problems []string
	timeAs := ""
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		if !allowed[path] {
			problems = append(problems, fmt.Sprintf("%s imports %s", name, path))
		}
		if path != "time" {
			continue
		}
		timeAs = "time"
		if imp.Name != nil {
			timeAs = imp.Name.Name
		}
		if timeAs == "." {
			problems = append(problems, fmt.Sprintf("%s: imports time with a dot: its clock functions could be called unqualified", fset.Position(imp.Pos())))
		}
	}
	if timeAs == "" || timeAs == "_" || timeAs == "." {
		return problems, nil
	}
	ast.Inspect(f, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == timeAs && clock[sel.Sel.Name] {
				problems = append(problems, fmt.Sprintf("%s: %s.%s reads the clock", fset.Position(sel.Pos()), timeAs, sel.Sel.Name))
			}
		}
		return true
	})
	return problems, nil
}
