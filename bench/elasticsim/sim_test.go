package elasticsim

import (
	"bytes"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestCurveRateInterpolates(t *testing.T) {
	c := PaperCurve()
	for gpus, want := range map[int]float64{8: 1100, 16: 2200, 24: 3100, 32: 4000, 48: 4500, 64: 5000, 80: 5000} {
		if got := c.Rate(gpus); math.Abs(got-want) > 1e-9 {
			t.Errorf("Rate(%d) = %v, want %v", gpus, got, want)
		}
	}
}

func TestKneeFollowsTheThresholdRule(t *testing.T) {
	want := map[string]int{"paper": 4, "near-linear": 8, "flat-early": 2, "peaked": 5}
	for _, cv := range Curves() {
		c := DefaultConfig()
		c.Curve = cv
		if got := c.Knee(); got != want[cv.Name] {
			t.Errorf("%s: knee %d workers, want %d", cv.Name, got, want[cv.Name])
		}
	}
	c := DefaultConfig()
	c.Settings.Doubling = true
	if got := c.Knee(); got != 4 { // 16 → 32 GPUs pays (s = 0.82), 32 → 64 does not (0.25)
		t.Errorf("doubling: knee %d, want 4", got)
	}
}

func TestStaticIsWorkOverRate(t *testing.T) {
	c := DefaultConfig()
	r, err := c.Static(StaticMin, 2)
	if err != nil {
		t.Fatal(err)
	}
	secs := c.TotalSamples / 2200
	if math.Abs(r.Completion.Seconds()-secs) > 1e-3 || math.Abs(r.GPUSeconds-16*secs) > 1 {
		t.Fatalf("static min: %s, %.0f GPU-s; want %.0f s, %.0f GPU-s", r.Completion, r.GPUSeconds, secs, 16*secs)
	}
}

// On the paper's curve the policy grows 2 → 3 → 4 workers, probes 5, goes back to 4 and from
// then on only re-probes 5 after each cooldown; it finishes far sooner than static min and uses far less GPU-time than static max.
func TestElasticSettlesAtThePapersKnee(t *testing.T) {
	c := DefaultConfig()
	c.TotalSamples = 4000 * 2 * 3600 // two hours at the knee
	res, err := c.Run()
	if err != nil {
		t.Fatal(err)
	}
	minR, knee, maxR, e := res[0], res[1], res[2], res[3]
	t.Logf("elastic: sizes %v, %s, %.1f GPU-h, idle %s", e.Sizes, e.Completion, e.GPUHours(), e.Idle)
	if !slices.Equal(e.Sizes[:5], []int{2, 3, 4, 5, 4}) || slices.ContainsFunc(e.Sizes[5:], func(n int) bool { return n != 4 && n != 5 }) {
		t.Fatalf("sizes %v; want 2, 3, 4, 5, 4, then only 4 and 5", e.Sizes)
	}
	// Re-probes come no sooner than a cooldown apart: 2 changes per cooldown at most.
	if probes, most := (len(e.Sizes)-5)/2, int(e.Completion/c.Settings.Cooldown); probes > most {
		t.Errorf("%d re-probes in %s with a %s cooldown", probes, e.Completion, c.Settings.Cooldown)
	}
	if e.Replaces != 0 {
		t.Errorf("%d replacements with 2%% noise", e.Replaces)
	}
	if !(e.Completion > knee.Completion && e.Completion < minR.Completion) {
		t.Errorf("elastic completion %s not between static knee %s and static min %s", e.Completion, knee.Completion, minR.Completion)
	}
	if !(e.GPUSeconds > knee.GPUSeconds && e.GPUSeconds < maxR.GPUSeconds) {
		t.Errorf("elastic GPU-time %.0f not between static knee %.0f and static max %.0f", e.GPUSeconds, knee.GPUSeconds, maxR.GPUSeconds)
	}
	// Idle time is the transitions: one per change.
	if want := time.Duration(len(e.Sizes)-1) * c.Transition; e.Idle != want {
		t.Errorf("idle %s, want %s for %d changes", e.Idle, want, len(e.Sizes)-1)
	}
	again, _ := c.Elastic()
	if again.Completion != e.Completion || again.GPUSeconds != e.GPUSeconds {
		t.Errorf("not deterministic: %s/%.0f then %s/%.0f", e.Completion, e.GPUSeconds, again.Completion, again.GPUSeconds)
	}
}

// Without noise or transitions, a near-linear job grows straight to max and never shrinks.
func TestElasticGrowsToMaxOnANearLinearCurve(t *testing.T) {
	c := DefaultConfig()
	c.Curve, c.Noise, c.Transition = Curves()[1], 0, 0
	c.TotalSamples = 8400 * 3600
	e, err := c.Elastic()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(e.Sizes, []int{2, 3, 4, 5, 6, 7, 8}) || e.Shrinks != 0 || e.Idle != 0 {
		t.Fatalf("sizes %v, %d shrinks, idle %s", e.Sizes, e.Shrinks, e.Idle)
	}
}

func TestReportPrintsThePapersNumbers(t *testing.T) {
	c := DefaultConfig()
	c.TotalSamples = 4000 * 1800
	runs, err := RunAll(c, Curves()[:2], []time.Duration{10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	Report(&b, c, runs)
	out := b.String()
	for _, want := range []string{"paper: up to 45% less", "paper: up to 85.1% less", "static knee", "near-linear"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

func TestBadConfigIsAnError(t *testing.T) {
	c := DefaultConfig()
	c.MaxWorkers = 1
	if _, err := c.Run(); err == nil {
		t.Fatal("max below min accepted")
	}
}
