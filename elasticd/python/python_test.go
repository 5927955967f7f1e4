// Package python holds the slurmbridge_elastic Python helper (not Go): this test runs its
// unit tests with the system's python3, as the trainers on the nodes would import it.
package python

import (
	"os/exec"
	"testing"
)

func TestPythonHelper(t *testing.T) {
	out, err := exec.Command("python3", "-m", "unittest", "discover", "-s", "tests", "-v").CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("python3 -m unittest: %v", err)
	}
}
