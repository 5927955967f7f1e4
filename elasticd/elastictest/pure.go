package elastictest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// CheckNoIO fails t when a source file of the package in the current directory imports
// anything but allowed (a path, or a standard package's name) or reads the clock: the pure
// packages' decisions follow from what they are given.
func CheckNoIO(t *testing.T, allowed ...string) {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	read := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		problems, err := Impurities(name, nil, allowed)
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

// Impurities parses the file name (from src when not nil) and says what in it reaches outside
// the package's arguments: an import not in allowed, or a call of time's clock functions. The
// clock is looked for under the name the file gives the import path "time", so an aliased
// import is checked like a plain one, and a dot import, which would hide the calls, is one.
func Impurities(name string, src any, allowed []string) ([]string, error) {
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
		if !slices.Contains(allowed, path) {
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
