package bridge

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// maxProseAssertions is how many test assertions in the tree may still match prose. A test
// that looks for words in a message breaks when the message is reworded and passes when the
// figure in it is wrong; one that reads the code or the figure as a field does neither. What
// is left is mostly Slurm's own messages, which the adapter has to recognise as words.
const maxProseAssertions = 20

// threeWords is prose: three plain words in a row (letters only, a trailing ',', '.', ':' or
// ';' allowed), as "cannot run this job" and unlike "gres/gpu=2" or "--qos=borrow".
var threeWords = regexp.MustCompile(`(?:^|\s)[A-Za-z][a-z']*[,.:;]?\s+[A-Za-z][a-z']*[,.:;]?\s+[A-Za-z][a-z']*[,.:;]?(?:\s|$)`)

// proseMatchers are the calls through which a test looks for a string in another.
var proseMatchers = map[string]bool{
	"strings.Contains": true, "strings.HasPrefix": true, "strings.HasSuffix": true, "strings.Index": true,
	"strings.Count": true, "bytes.Contains": true, "regexp.MustCompile": true, "regexp.MatchString": true,
}

// proseAssertions lists, as file:line: "literal", every string literal of three words or more
// that a test in the tree passes to a matcher above or compares with == or !=.
func proseAssertions(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	var found []string
	eachTestFile(t, func(path string) error {
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			var operands []ast.Expr
			switch e := n.(type) {
			case *ast.CallExpr:
				if sel, ok := e.Fun.(*ast.SelectorExpr); ok {
					if pkg, ok := sel.X.(*ast.Ident); ok && proseMatchers[pkg.Name+"."+sel.Sel.Name] {
						operands = e.Args
					}
				}
			case *ast.BinaryExpr:
				if e.Op == token.EQL || e.Op == token.NEQ {
					operands = []ast.Expr{e.X, e.Y}
				}
			}
			for _, o := range operands {
				lit, ok := o.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				if s, err := strconv.Unquote(lit.Value); err == nil && threeWords.MatchString(s) {
					found = append(found, fmt.Sprintf("%s: %q", fset.Position(lit.Pos()), s))
				}
			}
			return true
		})
		return nil
	})
	return found
}

func TestFewAssertionsReadProse(t *testing.T) {
	found := proseAssertions(t)
	if len(found) > maxProseAssertions {
		t.Errorf("%d test assertions match three words or more of a message (at most %d may): assert the code or the figure as a field instead:\n%s",
			len(found), maxProseAssertions, strings.Join(found, "\n"))
	}
	t.Logf("%d assertions match prose (at most %d)", len(found), maxProseAssertions)
}

func TestThreeWordsIsProse(t *testing.T) {
	for s, want := range map[string]bool{
		"pool cpu cannot run this job": true,
		"Invalid generic resource":     true,
		"no such file":                 true,
		"GrpTRES gres/gpu=2":           false,
		"--qos=borrow guar-proj-a":     false,
		"scontrol show nodes --json":   true,
		"cpu=4,mem=8192M":              false,
		"must":                         false,
	} {
		if got := threeWords.MatchString(s); got != want {
			t.Errorf("%q: prose %v, want %v", s, got, want)
		}
	}
}
