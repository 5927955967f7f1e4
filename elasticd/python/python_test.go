// Package python holds the slurmbridge_elastic Python helper (not Go): this test runs its
// unit tests with the system's python3, as the trainers on the nodes would import it.
package python

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// systemPython is the distribution's python3, which has the testbed's python3-torch: a
// python3 earlier in PATH (pyenv's, a virtualenv's) may have no torch, and the in-place test
// would see its workers fail at their import.
const systemPython = "/usr/bin/python3"

func TestPythonHelper(t *testing.T) {
	python := systemPython
	if _, err := os.Stat(python); err != nil {
		python = "python3"
	}
	out, err := exec.Command(python, "-m", "unittest", "discover", "-s", "tests", "-v").CombinedOutput()
	t.Logf("%s", out)
	// Each failure's exception again, one t.Error each, so that CI's summary (which keeps only
	// the lines a t.Error starts) says why a test failed and not only that it did.
	for _, f := range failures(string(out)) {
		t.Errorf("%s", f)
	}
	if err != nil {
		t.Fatalf("python3 -m unittest: %v", err)
	}
}

// failures returns, for each FAIL or ERROR section of unittest's report, the test's name and
// the last line of its traceback (the exception and its message), shortened in the middle.
func failures(report string) []string {
	var found []string
	sections := strings.Split(report, "\n"+strings.Repeat("=", 70)+"\n")
	for _, s := range sections[1:] {
		lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
		if len(lines) == 0 || !(strings.HasPrefix(lines[0], "FAIL: ") || strings.HasPrefix(lines[0], "ERROR: ")) {
			continue
		}
		body := lines[1:]
		if len(body) > 0 && strings.HasPrefix(body[0], strings.Repeat("-", 70)) {
			body = body[1:] // the rule under the test's name
		}
		last := ""
		for _, l := range body {
			if strings.HasPrefix(l, strings.Repeat("-", 70)) {
				break
			}
			if l != "" && !strings.HasPrefix(l, " ") && !strings.HasPrefix(l, "Traceback") {
				last = l // the exception line; a multi-line message keeps its last line
			}
		}
		const head, tail = 1500, 3000
		if len(last) > head+tail {
			last = last[:head] + " [...] " + last[len(last)-tail:]
		}
		found = append(found, lines[0]+": "+last)
	}
	return found
}
