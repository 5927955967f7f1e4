// Package slurmtest gives tests of every package what Slurm was captured saying: what squeue,
// sinfo, scontrol and sacctmgr printed on each release's testbed (bridge/slurm/testdata), and
// the job_descs slurmctld passed to job_submit (bridge/testdata), so that no test reaches into
// another package's directory. Only tests import it.
package slurmtest

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// Dir is bridge/slurm/testdata in this source tree, found from this file so that a test of any
// package reads the same captures.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata")
}

// Fixture reads one capture, e.g. "sinfo-22.05-testbed-idle.json" or "squeue-24.11-requeue.json".
func Fixture(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(Dir(), name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}
