package poolctl

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/pools"
)

// runs makes n completed runs of class in partition, each lasting secs seconds.
func runs(partition, class string, n int, secs ...int64) []JobRun {
	var out []JobRun
	for i := range n {
		line := "sbatch -p " + partition + " --wrap sleep"
		if class != "" {
			line = "sbatch --comment=class=" + class + " " + line[len("sbatch "):]
		}
		d := secs[i%len(secs)]
		out = append(out, JobRun{Partition: partition, SubmitLine: line, Start: 1000, End: 1000 + d})
	}
	return out
}

// The testbed's prices: a100-spot 1.2, v100 1.5, a100 3.0 per GPU-hour. The "lstm" class runs
// 3x longer on A100s than on V100s, so the pool cheapest per hour (a100-spot) is the dearest per
// job; for "bert" the A100s are 4x faster and keep their lead.
func TestLearnCheapestPerHourLosesForOneClass(t *testing.T) {
	cfg, err := pools.Load(testbedPools)
	if err != nil {
		t.Fatal(err)
	}
	var history []JobRun
	history = append(history, runs("a100-spot", "lstm", 5, 290, 300, 310)...)
	history = append(history, runs("a100", "lstm", 3, 300)...)
	history = append(history, runs("v100", "lstm", 4, 90, 100, 110, 500)...) // one straggler: the median ignores it
	history = append(history, runs("a100-spot", "bert", 3, 100)...)
	history = append(history, runs("a100", "bert", 3, 100)...)
	history = append(history, runs("v100", "bert", 3, 400)...)
	history = append(history, runs("a100", "", 2, 50)...)     // below --min-jobs: left out
	history = append(history, runs("other", "lstm", 5, 1)...) // not a pool
	prof := Learn(cfg, history, 3)

	if got := prof.Median["v100"]["lstm"]; got != 105*time.Second {
		t.Errorf("median of v100 lstm = %s, want 1m45s (90,100,110,500)", got)
	}
	if _, ok := prof.Median["a100"][pools.DefaultSpeedClass]; ok {
		t.Error("2 runs of the default class were learned despite --min-jobs 3")
	}
	if prof.Skipped != 5 {
		t.Errorf("skipped %d runs, want the 5 outside any pool", prof.Skipped)
	}
	speeds := prof.Speeds()
	want := map[string]map[string]float64{
		"a100-spot": {"lstm": 1, "bert": 4},
		"a100":      {"lstm": 1, "bert": 4},
		"v100":      {"lstm": 2.86, "bert": 1},
	}
	for pool, classes := range want {
		for class, v := range classes {
			if speeds[pool][class] != v {
				t.Errorf("speed of %s for %s = %v, want %v", pool, class, speeds[pool][class], v)
			}
		}
	}

	src, err := os.ReadFile(testbedPools)
	if err != nil {
		t.Fatal(err)
	}
	updated, err := ApplySpeeds(src, speeds)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(src)) {
		if comment := strings.TrimSpace(line); strings.HasPrefix(comment, "#") && !strings.Contains(string(updated), comment) {
			t.Errorf("ApplySpeeds dropped the comment %q", comment)
		}
	}
	if !strings.Contains(string(updated), "speed: {bert: 1.0, lstm: 2.86}") || strings.Contains(string(updated), "!!") {
		t.Errorf("v100's learned speeds are not written as plain floats:\n%s", updated)
	}
	learned, err := pools.Parse(updated, "updated")
	if err != nil {
		t.Fatalf("updated file does not load: %v\n%s", err, updated)
	}
	if s := learned.Pool("a100").SpeedFor("resnet"); s != 1.5 {
		t.Errorf("a class not learned lost its configured speed: resnet on a100 = %v, want 1.5", s)
	}
	first := func(cfg *pools.Config, class string) string {
		t.Helper()
		req, err := requestFromFlags(func(name string) string {
			return map[string]string{"gres": "gpu:1", "comment": "class=" + class}[name]
		})
		if err != nil {
			t.Fatal(err)
		}
		d := cfg.Route(&req)
		if d.Err != nil || d.Partition == "" {
			t.Fatalf("route %s: %+v", class, d)
		}
		first, _, _ := strings.Cut(d.Partition, ",")
		return first
	}
	// Before learning, lstm uses the configured default speeds and goes to the spot pool.
	if got := first(cfg, "lstm"); got != "a100-spot" {
		t.Errorf("configured speeds send lstm first to %s, want a100-spot", got)
	}
	if got := first(learned, "lstm"); got != "v100" {
		t.Errorf("learned speeds send lstm first to %s, want v100 (1.5/h x 105 s beats 1.2/h x 300 s)", got)
	}
	if got := first(learned, "bert"); got != "a100-spot" {
		t.Errorf("learned speeds send bert first to %s, want a100-spot", got)
	}
}

func TestClassFromCommentOrSubmitLine(t *testing.T) {
	for _, tc := range []struct {
		run  JobRun
		want string
	}{
		{JobRun{Comment: "class=bert"}, "bert"},
		{JobRun{Comment: "team x; class=bert", SubmitLine: "sbatch --comment=class=lstm x.sh"}, "bert"},
		{JobRun{SubmitLine: "sbatch -N 1 --comment=class=lstm x.sh"}, "lstm"},
		{JobRun{SubmitLine: "sbatch --comment class=lstm,team=x x.sh"}, "lstm"},
		{JobRun{SubmitLine: "sbatch --comment=owner=x x.sh"}, ""},
		{JobRun{SubmitLine: "sbatch --wrap class=lstm"}, ""},
	} {
		if got := tc.run.Class(); got != tc.want {
			t.Errorf("%+v: class %q, want %q", tc.run, got, tc.want)
		}
	}
}
