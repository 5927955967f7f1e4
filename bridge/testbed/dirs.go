package testbed

import (
	"os"
	"testing"
)

// SharedDir is a new directory of mode (0o1777, 0o777, 0o755) under the system's temporary
// directory, for what root and the testbed's users must both reach: a script a user submits, the
// output of a job. t.TempDir's parent is root's alone. It is removed when the test ends.
func SharedDir(t testing.TB, prefix string, mode os.FileMode) string {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
	return dir
}
