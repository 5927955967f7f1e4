package spankelastic

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fuzzSecondsEnv bounds how long TestSpankFuzz mutates inputs (default 10 s; CI may give it
// more, a developer hunting a bug much more).
const fuzzSecondsEnv = "SPANK_FUZZ_SECONDS"

// fuzzEngineEnv picks the engine: "libfuzzer" (clang), "gcc" (testdata/driver.c), or unset
// for libFuzzer where clang can link it and gcc elsewhere.
const fuzzEngineEnv = "SPANK_FUZZ_ENGINE"

// TestSpankFuzz builds the plugin's own source into testdata/fuzz.c's harness, with stubs of
// the spank_* and slurm_* functions, under AddressSanitizer and UndefinedBehaviorSanitizer, and
// runs it over testdata/corpus and inputs mutated from it: option values of any length and any
// bytes, each context, the job's directory as a requeued job or a user's links leave it. It
// fails on any sanitizer report and on a broken invariant, above all a callback that returns an
// error in slurmstepd (with `required` in plugstack.conf that drains the node). Every
// declaration the runs left must be JSON elasticd can read.
func TestSpankFuzz(t *testing.T) {
	seconds := 10.0
	if s := os.Getenv(fuzzSecondsEnv); s != "" {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || v < 0 {
			t.Fatalf("%s=%q: want a number of seconds", fuzzSecondsEnv, s)
		}
		seconds = v
	}
	tmp := t.TempDir()
	// The harness runs as root in the release containers: what it creates must be reachable
	// whatever the umask.
	if err := os.Chmod(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(tmp, "fuzz")
	if err := os.Mkdir(state, 0o755); err != nil {
		t.Fatal(err)
	}
	engine, bin := buildHarness(t, tmp)
	var run *exec.Cmd
	crash := filepath.Join(tmp, "crash")
	if engine == "libfuzzer" {
		work := filepath.Join(tmp, "corpus")
		if err := os.Mkdir(work, 0o755); err != nil {
			t.Fatal(err)
		}
		run = exec.Command(bin, fmt.Sprintf("-max_total_time=%d", int(seconds+0.5)), "-max_len=70000", "-timeout=60",
			"-rss_limit_mb=2048", "-print_final_stats=1", "-artifact_prefix="+crash+"-", work, "testdata/corpus")
	} else {
		run = exec.Command(bin, "testdata/corpus")
	}
	run.Env = []string{
		"SPANK_FUZZ_DIR=" + state,
		"SPANK_FUZZ_SECONDS=" + strconv.FormatFloat(seconds, 'f', -1, 64),
		"SPANK_FUZZ_CRASH=" + crash,
		"ASAN_OPTIONS=detect_leaks=1:abort_on_error=1",
		"UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1",
		"PATH=/usr/bin:/bin",
	}
	start := time.Now()
	out, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v after %v (the input is saved beside %s)\n%s", engine, strings.Join(run.Args, " "), err,
			time.Since(start).Round(time.Millisecond), crash, tail(out, 8000))
	}
	t.Logf("%s: %s", engine, summary(out))
	checkDeclarations(t, filepath.Join(state, "recorded"))
}

// buildHarness compiles the harness with the engine asked for, or the best one there is.
func buildHarness(t *testing.T, dir string) (engine, bin string) {
	t.Helper()
	sources := []string{"testdata/fuzz.c", "testdata/stubs.c"}
	flags := []string{"-O1", "-g", "-Wall", "-Wextra", "-Werror", "-fno-omit-frame-pointer", "-fno-sanitize-recover=all"}
	want := os.Getenv(fuzzEngineEnv)
	if want != "" && want != "libfuzzer" && want != "gcc" {
		t.Fatalf("%s=%q: want libfuzzer or gcc", fuzzEngineEnv, want)
	}
	if want != "gcc" {
		if clang, err := exec.LookPath("clang"); err == nil {
			bin = filepath.Join(dir, "spank_fuzz_libfuzzer")
			args := append(append(slicesClone(flags), "-fsanitize=fuzzer,address,undefined", "-o", bin), sources...)
			build := exec.Command(clang, args...)
			out, err := build.CombinedOutput()
			if err == nil {
				return "libfuzzer", bin
			}
			if want == "libfuzzer" {
				t.Fatalf("%s: %v\n%s", strings.Join(build.Args, " "), err, out)
			}
			t.Logf("clang cannot link libFuzzer here (%v), so gcc's driver runs instead:\n%s", err, tail(out, 2000))
		} else if want == "libfuzzer" {
			t.Fatalf("%s=libfuzzer, but there is no clang: %v", fuzzEngineEnv, err)
		}
	}
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Fatalf("gcc is needed to build the plugin and its fuzz harness: %v", err)
	}
	bin = filepath.Join(dir, "spank_fuzz_gcc")
	args := append(append(slicesClone(flags), "-fsanitize=address,undefined", "-o", bin), append(sources, "testdata/driver.c")...)
	build := exec.Command(gcc, args...)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(build.Args, " "), err, out)
	}
	return "gcc", bin
}

// declaration is what elasticd's registry reads from declaration.json (elasticd/registry).
type declaration struct {
	Version      *int     `json:"version"`
	JobID        *uint32  `json:"job_id"`
	UID          *uint32  `json:"uid"`
	GID          *uint32  `json:"gid"`
	MinWorkers   *int     `json:"min_workers"`
	MaxWorkers   *int     `json:"max_workers"`
	GPUsPer      *int     `json:"gpus_per_worker"`
	Value        *float64 `json:"value_per_million_samples"`
	MaxBatch     *int     `json:"max_batch"`
	BatchPer     *int     `json:"batch_per_device"`
	RdzvEndpoint *string  `json:"rdzv_endpoint"`
	Pools        []string `json:"pools"`
	Recorded     *int64   `json:"recorded"`
}

// checkDeclarations reads the declarations the harness kept (the last 64 recorded) as JSON
// with every field elasticd needs, in range.
func checkDeclarations(t *testing.T, dir string) {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		n++
		dec := json.NewDecoder(strings.NewReader(string(data)))
		dec.DisallowUnknownFields()
		var decl declaration
		if err := dec.Decode(&decl); err != nil {
			t.Errorf("%s: %v\n%s", path, err, data)
			return nil
		}
		if decl.Version == nil || *decl.Version != 1 || decl.JobID == nil || decl.UID == nil || decl.GID == nil || decl.MinWorkers == nil ||
			decl.MaxWorkers == nil || decl.GPUsPer == nil || decl.Value == nil || decl.MaxBatch == nil || decl.BatchPer == nil ||
			decl.RdzvEndpoint == nil || decl.Recorded == nil {
			t.Errorf("%s: a field is missing: %s", path, data)
			return nil
		}
		if *decl.MinWorkers < 1 || *decl.MaxWorkers < *decl.MinWorkers || *decl.GPUsPer < 1 || *decl.GPUsPer > 64 ||
			*decl.Value < 0 || *decl.Value > 1e9 || len(decl.Pools) > 16 || !strings.Contains(*decl.RdzvEndpoint, ":") {
			t.Errorf("%s: out of range: %s", path, data)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The seeds alone record jobs (testdata/corpus/main-job-recorded): none means the harness
	// no longer reaches record().
	if n == 0 {
		t.Fatal("no run recorded a declaration")
	}
	t.Logf("%d declarations recorded by the runs read back as JSON", n)
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }

// summary is the engine's last words: the driver's count of runs, or libFuzzer's final stats.
func summary(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var keep []string
	for _, l := range lines {
		if strings.HasPrefix(l, "spank fuzz:") || strings.HasPrefix(l, "stat::number_of_executed_units") ||
			strings.HasPrefix(l, "Done ") || strings.HasPrefix(l, "stat::peak_rss_mb") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "; ")
}

func tail(out []byte, n int) string {
	if len(out) > n {
		return "..." + string(out[len(out)-n:])
	}
	return string(out)
}
