package bridge

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The promises every route's section of docs/promises.md has a line for, in this order.
var promises = []string{"guarantee", "never killed", "limits", "minimal reclaim", "work survives", "no forged text", "daemons stay up"}

var (
	promiseLine  = regexp.MustCompile(`^- \*\*([a-z ]+)\*\*:(.*)$`)
	refusalName  = regexp.MustCompile(`refused: ([a-z][a-z0-9-]+)`)
	refusalConst = regexp.MustCompile(`(?m)^\s+Refused[A-Za-z]+\s+Refusal = "([a-z0-9-]+)"`)
)

// TestPromisesNameRealTests keeps docs/promises.md true: every route's section has a line for
// each promise, in order, none empty or open; every test it names exists; every refusal code it names
// is one the job_submit plugin gives (bridge/pools/route.go).
func TestPromisesNameRealTests(t *testing.T) {
	doc, err := os.ReadFile("../docs/promises.md")
	if err != nil {
		t.Fatal(err)
	}
	route, err := os.ReadFile("pools/route.go")
	if err != nil {
		t.Fatal(err)
	}
	var codes []string
	for _, m := range refusalConst.FindAllStringSubmatch(string(route), -1) {
		codes = append(codes, m[1])
	}
	if len(codes) == 0 {
		t.Fatal("bridge/pools/route.go declares no refusal codes")
	}
	funcs := testFuncs(t)

	sections := map[string][][2]string{} // route → its promise lines (promise, text)
	var order []string
	current := ""
	lines := strings.Split(string(doc), "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if r, ok := strings.CutPrefix(l, "## Route: "); ok {
			current = r
			order = append(order, r)
			continue
		}
		m := promiseLine.FindStringSubmatch(l)
		if current == "" || m == nil {
			continue
		}
		text := m[2]
		for i+1 < len(lines) && strings.HasPrefix(lines[i+1], "  ") { // the line's continuation
			i++
			text += " " + strings.TrimSpace(lines[i])
		}
		sections[current] = append(sections[current], [2]string{m[1], strings.TrimSpace(text)})
	}
	if len(order) < 15 {
		t.Fatalf("docs/promises.md has %d routes; the matrix lists at least 15", len(order))
	}
	for _, r := range order {
		var got []string
		for _, line := range sections[r] {
			got = append(got, line[0])
			if line[1] == "" {
				t.Errorf("route %q: promise %q has an empty cell", r, line[0])
			}
			// A cell that says what is missing is a hole, not a promise.
			if strings.Contains(line[1], "open:") {
				t.Errorf("route %q: promise %q is open: %s", r, line[0], line[1])
			}
		}
		if !slices.Equal(got, promises) {
			t.Errorf("route %q has promise lines %q, want %q", r, got, promises)
		}
	}
	for _, m := range docTestName.FindAllStringSubmatch(string(doc), -1) {
		if !slices.Contains(funcs, m[1]) {
			t.Errorf("docs/promises.md names %s, but no test of that name exists", m[1])
		}
	}
	for _, m := range refusalName.FindAllStringSubmatch(string(doc), -1) {
		if !slices.Contains(codes, m[1]) {
			t.Errorf("docs/promises.md names the refusal %q, which bridge/pools/route.go does not declare", m[1])
		}
	}
}
