package transition

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// rec builds one process incarnation: job, world size, formed, first and last step.
func rec(job string, size int, formed, first, last float64) Record {
	return Record{Job: job, WorldSize: size, Formed: formed, FirstStep: first, LastStep: last, Steps: 10}
}

func TestTransitions(t *testing.T) {
	for _, tc := range []struct {
		name    string
		records []Record
		want    []string // kind and sizes
		idle    []float64
		join    []float64
	}{
		{
			name:    "one world: no transition",
			records: []Record{rec("1", 1, 100, 101, 150)},
		},
		{
			name: "grow 1->2 then shrink 2->1",
			records: []Record{
				rec("1", 1, 100, 101, 150),
				rec("1", 2, 154, 155.5, 200), rec("2", 2, 154.2, 155.4, 200.1),
				{Job: "2", WorldSize: 2, Started: 148, Formed: 154.2, FirstStep: 155.4, LastStep: 200.1, Steps: 3}, // same job, other rank
				rec("1", 1, 203, 204, 260),
			},
			want: []string{"grow 1 2", "shrink 2 1"},
			idle: []float64{5.4, 3.9},
			join: []float64{7.4, 0},
		},
		{
			name: "records in any order, a world re-formed at its size after a failure",
			records: []Record{
				rec("1", 2, 310, 311, 330), rec("1", 2, 100, 101, 300), rec("2", 2, 100.5, 101, 300.2), rec("2", 2, 310.1, 311.2, 330),
			},
			want: []string{"same 2 2"},
			idle: []float64{10.8},
			join: []float64{0},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Transitions(tc.records)
			if len(got) != len(tc.want) {
				t.Fatalf("%d transitions %v, want %v", len(got), got, tc.want)
			}
			for i, tr := range got {
				if s := tr.Kind() + " " + strconv.Itoa(tr.From.Size) + " " + strconv.Itoa(tr.To.Size); s != tc.want[i] {
					t.Errorf("transition %d: %s, want %s", i, s, tc.want[i])
				}
				if d := tr.Idle.Seconds() - tc.idle[i]; d > 1e-6 || d < -1e-6 {
					t.Errorf("transition %d: idle %v, want %vs", i, tr.Idle, tc.idle[i])
				}
				if d := tr.Join.Seconds() - tc.join[i]; d > 1e-6 || d < -1e-6 {
					t.Errorf("transition %d: join %v, want %vs", i, tr.Join, tc.join[i])
				}
			}
		})
	}
}

func TestReadDirSkipsHalfWrittenRecords(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"1.100.json": `{"job": "1", "rank": 0, "world_size": 1, "formed": 1, "first_step": 2, "last_step": 3, "steps": 5}` + "      ",
		"1.101.json": `{"job": "1", "rank": 0, "world_si`,
		"1.102.json": `{"job": "1", "rank": 0, "world_size": 2, "formed": 4, "steps": 0}`,
		"notes.txt":  "not a record",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].WorldSize != 1 || got[0].LastStep != 3 {
		t.Fatalf("records %+v, want the one complete record", got)
	}
	if w := Worlds(got); len(w) != 1 || len(w[0].Jobs) != 1 || w[0].Jobs[0] != "1" {
		t.Fatalf("worlds %+v, want one of job 1", w)
	}
}

func TestScriptFromTheShippedExample(t *testing.T) {
	examples, err := filepath.Abs("../examples")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []Launcher{InPlace, KeepAlive, PlainTorchrun} {
		s, err := Script(examples, "/tmp/tr", "1:3:1", "a100", l, "--width", "3200")
		if err != nil {
			t.Fatal(err)
		}
		mode := map[Launcher]string{InPlace: "in-place", KeepAlive: "restart", PlainTorchrun: "restart"}[l]
		for _, want := range []string{"#SBATCH --elastic=1:3:1\n", "#SBATCH --elastic-pools=a100\n", "--rdzv_backend=c10d",
			"\nELASTIC_TRANSITION=" + mode + "\n", examples + "/elastic_launch.py",
			examples + `/train.py" --total-samples`, "--trace-dir /tmp/tr --checkpoint /tmp/tr/ckpt --width 3200"} {
			if !strings.Contains(s, want) {
				t.Errorf("%s: script lacks %q:\n%s", l, want, s)
			}
		}
		if strings.Contains(s, "--elastic=2:8:4") || strings.Contains(s, "$SLURM_SUBMIT_DIR") {
			t.Errorf("%s: the example's own declaration or paths left in:\n%s", l, s)
		}
		if got := strings.Contains(s, "exec torchrun "); got != (l == PlainTorchrun) {
			t.Errorf("%s: plain torchrun launcher = %v:\n%s", l, got, s)
		}
		if back, err := ParseLauncher(l.String()); err != nil || back != l {
			t.Errorf("ParseLauncher(%q) = %v, %v", l.String(), back, err)
		}
	}
	if _, err := Render("#!/bin/bash\nexec torchrun train.py\n", "/x", "/tmp/tr", "1:3:1", "a100", InPlace); err == nil {
		t.Error("a script without the in-place launcher rendered without error")
	}
}
