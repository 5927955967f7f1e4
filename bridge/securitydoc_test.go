package bridge

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var (
	// A test named in the threat model: `TestX`, or `TestX*` for every test whose name starts
	// so; "TestAttack..." in prose names the suite, not a test.
	docTestName = regexp.MustCompile("`((?:Test|Fuzz)[A-Z][A-Za-z0-9_]*)(\\*?)`")
	testFunc    = regexp.MustCompile(`(?m)^func ((?:Test|Fuzz)[A-Z][A-Za-z0-9_]*)\(`)
)

// TestThreatModelNamesRealTests keeps docs/security.md true: every test it names as proof
// exists, and every attacker's test (TestAttack...) in the tree is named there, so that an
// entry point never loses its proof unnoticed and a new attack is never left out of the model.
func TestThreatModelNamesRealTests(t *testing.T) {
	doc, err := os.ReadFile("../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	funcs := testFuncs(t)
	named := map[string]bool{}
	for _, m := range docTestName.FindAllStringSubmatch(string(doc), -1) {
		name, prefix := m[1], m[2] == "*"
		named[name] = true
		found := slices.ContainsFunc(funcs, func(f string) bool {
			return f == name || prefix && strings.HasPrefix(f, name)
		})
		if !found {
			t.Errorf("docs/security.md names %s%s as proof, but no test of that name exists", name, m[2])
		}
	}
	if len(named) == 0 {
		t.Fatal("docs/security.md names no test")
	}
	for _, f := range funcs {
		if strings.HasPrefix(f, "TestAttack") && !named[f] {
			t.Errorf("%s is an attacker's test that docs/security.md does not name: add it to its entry point", f)
		}
	}
}

// testFuncs lists every Test and Fuzz function of the module's _test.go files.
func testFuncs(t *testing.T) []string {
	t.Helper()
	var funcs []string
	eachTestFile(t, func(path string) error {
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range testFunc.FindAllStringSubmatch(string(src), -1) {
			funcs = append(funcs, m[1])
		}
		return nil
	})
	return funcs
}

// eachTestFile calls read with the path of every _test.go file of the module, outside hidden
// folders and testdata.
func eachTestFile(t *testing.T, read func(path string) error) {
	t.Helper()
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != ".." || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		return read(path)
	})
	if err != nil {
		t.Fatal(err)
	}
}
