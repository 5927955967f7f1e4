package slurmtest

import (
	"bufio"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// JobDescCaptures are the captures in bridge/testdata, job_desc-VERSION.txt, one per Slurm
// release (22.05.8, 24.11.x, 26.05.x), oldest first: what slurmctld passed to a logging
// job_submit.lua for each command written above its JOBDESC line (capture-jobdesc.sh).
func JobDescCaptures(t testing.TB) []string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	paths, err := filepath.Glob(filepath.Join(filepath.Dir(file), "..", "..", "testdata", "job_desc-*.txt"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no job_desc capture in bridge/testdata (%v)", err)
	}
	slices.SortFunc(paths, func(a, b string) int { return compareVersions(CaptureVersion(a), CaptureVersion(b)) })
	return paths
}

// CaptureVersion is the Slurm version a capture's name gives: "22.05.8".
func CaptureVersion(path string) string {
	return strings.TrimSuffix(strings.TrimPrefix(filepath.Base(path), "job_desc-"), ".txt")
}

// compareVersions orders "22.05.8" before "24.11.5" before "26.05.0", number by number.
func compareVersions(a, b string) int {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < min(len(as), len(bs)); i++ {
		x, _ := strconv.Atoi(as[i])
		y, _ := strconv.Atoi(bs[i])
		if x != y {
			return x - y
		}
	}
	return len(as) - len(bs)
}

// JobDesc is one JOBDESC line of the capture, as printed: gpureq's tests read its TRES fields,
// poolstest builds the cgo layer's whole request from it. It imports neither, so both can.
type JobDesc struct {
	Command string            // "sbatch --gpus=3", as typed
	Op      string            // "submit" or "modify"
	Fields  map[string]string // job_desc field → value; Lua's "nil" already turned into ""
}

// JobDescs reads one capture's "# sbatch|srun|scontrol ..." comment lines and its JOBDESC
// lines, paired in order.
func JobDescs(t testing.TB, capture string) []JobDesc {
	t.Helper()
	f, err := os.Open(capture)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var commands []string
	var descs []JobDesc
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		switch line := sc.Text(); {
		case strings.HasPrefix(line, "# sbatch ") || strings.HasPrefix(line, "# srun ") || strings.HasPrefix(line, "# scontrol "):
			command, _, _ := strings.Cut(strings.TrimPrefix(line, "# "), "   ") // drop "(job_modify)" notes
			commands = append(commands, strings.TrimSpace(command))
		case strings.HasPrefix(line, "JOBDESC "):
			op, rest, _ := strings.Cut(strings.TrimPrefix(line, "JOBDESC "), " ")
			fields := map[string]string{}
			for kv := range strings.SplitSeq(rest, " | ") {
				k, v, _ := strings.Cut(kv, "=")
				if v == "nil" {
					v = ""
				}
				fields[k] = v
			}
			descs = append(descs, JobDesc{Op: op, Fields: fields})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(commands) != len(descs) || len(descs) == 0 {
		t.Fatalf("job_desc capture: %d commands and %d JOBDESC lines", len(commands), len(descs))
	}
	for i := range descs {
		descs[i].Command = commands[i]
	}
	return descs
}
