package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The plugin's C runs on slurmctld's RPC threads: its tests (testdata) are built with the
// system's C compiler and run under AddressSanitizer (with UndefinedBehaviorSanitizer), and the
// decision cache's also under ThreadSanitizer, so a leak, an overflow, a read outside a field or
// a data race fails the test. (This file is the package's one that starts processes:
// bridge/layout_test.go lists it.)

// The decision cache answers repeated submissions without entering Go.
func TestDecisionCache(t *testing.T) {
	for _, sanitize := range []string{"address,undefined", "thread"} {
		t.Run(sanitize, func(t *testing.T) {
			runCTest(t, sanitize, "testdata/decision_cache_test.c", "decision_cache.c")
		})
	}
}

// The job record reader follows pointers inside slurmctld's memory: its test lays out fake
// records per job_record_layout.h for each release and checks what is read and what is refused.
func TestJobRecordReader(t *testing.T) {
	runCTest(t, "address,undefined", "testdata/job_record_test.c", "job_record.c")
}

func runCTest(t *testing.T, sanitize string, sources ...string) {
	t.Helper()
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Fatalf("gcc is needed to build the plugin and its C tests: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "c_test")
	args := append([]string{"-O1", "-g", "-Wall", "-Werror", "-pthread", "-fno-omit-frame-pointer",
		"-fsanitize=" + sanitize, "-fno-sanitize-recover=all", "-o", bin}, sources...)
	build := exec.Command(cc, args...)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(build.Args, " "), err, out)
	}
	run := exec.Command(bin)
	run.Env = []string{"ASAN_OPTIONS=detect_leaks=1", "UBSAN_OPTIONS=halt_on_error=1", "TSAN_OPTIONS=halt_on_error=1"}
	out, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Logf("%s", out)
}
