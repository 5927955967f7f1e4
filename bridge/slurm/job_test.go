package slurm

import (
	"slices"
	"testing"
)

// The fields only squeue --json has: owner ids, batch host, working directory, output.
func TestParseJSONReadsOwnerAndPlaceOfTheTestbedFixture(t *testing.T) {
	jobs, err := ParseQueue(fixture(t, "squeue-22.05-testbed-mixed.json"), AllFields)
	if err != nil {
		t.Fatal(err)
	}
	j := jobs[3]
	if j.UserID != 1003 || j.GroupID != 1003 || j.WorkDir != "/tmp" || j.StdOut != "/dev/null" || j.BatchHost != "a100-spot-1" || j.Name != "wrap" {
		t.Fatalf("job %d read as %+v", j.ID, j)
	}
	if _, err := ParseQueue(fixture(t, "squeue-22.05-slurmctld-unreachable.json"), AllFields); err == nil {
		t.Fatal("an answer with errors must not parse")
	}
}

func TestGPUIndices(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
		bad  bool
	}{
		{"gpu:a100:1(IDX:0)", []int{0}, false},
		{"gpu:a100:3(IDX:0,2-3)", []int{0, 2, 3}, false},
		{"gpu:0(IDX:N/A)", nil, false},
		{"", nil, false},
		{"gpu:a100:1(IDX:x)", nil, true},
		{"gpu:a100:1(IDX:3-1)", nil, true},
		{"gpu:a100:1(IDX:0", nil, true},
	} {
		got, err := GPUIndices(tc.in)
		if (err != nil) != tc.bad || !slices.Equal(got, tc.want) {
			t.Errorf("GPUIndices(%q) = %v, %v; want %v (error %v)", tc.in, got, err, tc.want, tc.bad)
		}
	}
}

// The request parts a worker asks for again: tasks on every release (22.05's plain numbers,
// later releases' number objects).
func TestParseJSONReadsTasksOnEveryRelease(t *testing.T) {
	for _, release := range []string{"22.05", "24.11", "26.05"} {
		jobs, err := ParseQueue(fixture(t, "squeue-"+release+"-mixed.json"), AllFields)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(jobs, func(j Job) bool { return j.ID == 7 })
		if i < 0 {
			t.Fatalf("%s: no job 7", release)
		}
		if e := jobs[i]; e.Tasks != 2 || e.Features != "" || e.Restarts != 0 {
			t.Errorf("%s: job 7 read as %+v, want 2 tasks", release, e)
		}
	}
}
