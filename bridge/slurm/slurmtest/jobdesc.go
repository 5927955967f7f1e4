package slurmtest

import (
	"bufio"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// JobDescCapture is bridge/testdata/job_desc-22.05.8.txt in this source tree: what slurmctld
// 22.05.8 passed to a logging job_submit.lua for each command written above its JOBDESC line.
func JobDescCapture() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "testdata", "job_desc-22.05.8.txt")
}

// JobDesc is one JOBDESC line of the capture, as printed: gpureq's tests read its TRES fields,
// poolstest builds the cgo layer's whole request from it. It imports neither, so both can.
type JobDesc struct {
	Command string            // "sbatch --gpus=3", as typed
	Op      string            // "submit" or "modify"
	Fields  map[string]string // job_desc field → value; Lua's "nil" already turned into ""
}

// JobDescs reads the capture's "# sbatch|srun|scontrol ..." comment lines and its JOBDESC
// lines, paired in order.
func JobDescs(t testing.TB) []JobDesc {
	t.Helper()
	f, err := os.Open(JobDescCapture())
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
