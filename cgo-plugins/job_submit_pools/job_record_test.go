package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The job record reader follows pointers inside slurmctld's memory: its tests (testdata) lay
// out fake records per job_record_layout.h and run under AddressSanitizer and
// UndefinedBehaviorSanitizer, so a read outside a field or a misaligned one fails the test.
func TestJobRecordReader(t *testing.T) {
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Fatalf("gcc is needed to build the plugin and its C tests: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "job_record_test")
	build := exec.Command(cc, "-O1", "-g", "-Wall", "-Werror", "-fno-omit-frame-pointer",
		"-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-o", bin, "testdata/job_record_test.c", "job_record.c")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(build.Args, " "), err, out)
	}
	run := exec.Command(bin)
	run.Env = []string{"ASAN_OPTIONS=detect_leaks=1", "UBSAN_OPTIONS=halt_on_error=1"}
	out, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Logf("%s", out)
}
