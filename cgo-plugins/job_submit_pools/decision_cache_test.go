package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The decision cache is C that runs on slurmctld's RPC threads: its tests (testdata) are built
// with the system's C compiler and run under AddressSanitizer (with UndefinedBehaviorSanitizer)
// and under ThreadSanitizer, so a leak, an overflow or a data race fails the test.
func TestDecisionCache(t *testing.T) {
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Fatalf("gcc is needed to build the plugin and its C tests: %v", err)
	}
	for _, sanitize := range []string{"address,undefined", "thread"} {
		t.Run(sanitize, func(t *testing.T) {
			bin := filepath.Join(t.TempDir(), "decision_cache_test")
			build := exec.Command(cc, "-O1", "-g", "-Wall", "-Werror", "-pthread", "-fno-omit-frame-pointer",
				"-fsanitize="+sanitize, "-o", bin, "testdata/decision_cache_test.c", "decision_cache.c")
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
		})
	}
}
