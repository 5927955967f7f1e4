package policy

import (
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestScalingRuns(t *testing.T) {
	linear := curve(map[int]float64{1: 100, 64: 6400})
	tests := []struct {
		name      string
		rate      func(map[GPUType]int, WorkerRate) float64
		job       Job
		settings  Settings
		wantSizes []int
		wantCodes []Code // of every decision, in order: the last one holds
	}{
		{
			// The paper's curve: 16, 32, 64 GPUs → 2200, 4000, 5000 img/s;
			// s = 0.82 from 16 to 32 GPUs, 0.25 from 32 to 64.
			name:      "paper's curve settles at the knee",
			rate:      curve(map[int]float64{1: 2200, 2: 4000, 4: 5000}),
			job:       elasticJob(1, 4, 16),
			settings:  Settings{Doubling: true},
			wantSizes: []int{2, 4, 2},
			wantCodes: []Code{CodeGrowth, CodeGrowth, CodeStepDoesNotPay, CodeCooldown},
		},
		{
			name:      "linear scaling grows to max",
			rate:      linear,
			job:       elasticJob(1, 6, 4),
			wantSizes: []int{2, 3, 4, 5, 6},
			wantCodes: []Code{CodeGrowth, CodeGrowth, CodeGrowth, CodeGrowth, CodeGrowth, CodeAtMax},
		},
		{
			name:      "doubling stops at max",
			rate:      linear,
			job:       elasticJob(1, 6, 4),
			settings:  Settings{Doubling: true},
			wantSizes: []int{2, 4, 6},
			wantCodes: []Code{CodeGrowth, CodeGrowth, CodeGrowth, CodeAtMax},
		},
		{
			// s(2→3) = (200−190)/1 / (190/2) = 0.11
			name:      "sublinear step below threshold reverts to last good size",
			rate:      curve(map[int]float64{1: 100, 2: 190, 3: 200}),
			job:       elasticJob(1, 8, 4),
			wantSizes: []int{2, 3, 2},
			wantCodes: []Code{CodeGrowth, CodeGrowth, CodeStepDoesNotPay, CodeCooldown},
		},
		{
			// s(1→2) = 0.70, below a threshold of 0.75: back to 1 worker.
			name:      "higher threshold stops earlier",
			rate:      curve(map[int]float64{1: 100, 2: 170, 3: 230}),
			job:       elasticJob(1, 8, 4),
			settings:  Settings{Threshold: 0.75},
			wantSizes: []int{2, 1},
			wantCodes: []Code{CodeGrowth, CodeStepDoesNotPay, CodeCooldown},
		},
	}

	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(tc.rate, "a100")
			sizes, decisions := s.drive(t, tc.job, tc.settings, 20)
			if !slices.Equal(sizes, tc.wantSizes) {
				t.Errorf("sizes = %v, want %v", sizes, tc.wantSizes)
			}
			var codes []Code
			for _, d := range decisions {
				codes = append(codes, d.Code)
			}
			if !slices.Equal(codes, tc.wantCodes) {
				t.Errorf("codes = %v, want %v", codes, tc.wantCodes)
			}
		})
	}
}

func TestRevertRemovesTheWorkersTheStepAdded(t *testing.T) {
	// At 3 workers the added worker 1002 is the fastest, yet the step does
	// not pay (190 → 200 samples/s): undoing it removes 1002, not the
	// slowest.
	s := newSim(func(alloc map[GPUType]int, w WorkerRate) float64 {
		if alloc["a100"] < 3 {
			return 95
		}
		return map[string]float64{"1000": 60, "1001": 60, "1002": 80}[w.Worker]
	}, "a100", "a100")
	job := elasticJob(1, 8, 4)
	s.settle(Settings{})
	grow := Decide(s.input(job, Settings{}))
	if grow.Action != Grow {
		t.Fatalf("want grow, got %s: %s", grow.Action, grow.Reason)
	}
	s.apply(t, grow)
	s.settle(Settings{})
	d := Decide(s.input(job, Settings{}))
	if d.Action != Shrink || d.Count != 1 || !slices.Equal(d.Workers, []string{"1002"}) || d.Type != "a100" {
		t.Fatalf("got %s %d %v (%s), want shrink of 1002", d.Action, d.Count, d.Workers, d.Reason)
	}
}

func TestRegrowAfterLeavingASize(t *testing.T) {
	// The job ran at 2 then 3 workers, and is back at 2 (a worker was
	// lost). Within the cooldown it goes back to 3 only if that step
	// clearly paid: s above threshold × (1 + noise tolerance) = 0.55.
	tests := []struct {
		name string
		s    float64 // efficiency of 2 → 3
		want Action
	}{
		{"clearly paid: grow at once", 0.9, Grow},
		{"paid within noise of the threshold: wait for the cooldown", 0.52, Hold},
		{"did not pay: wait for the cooldown", 0.3, Hold},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(curve(map[int]float64{2: 190, 3: 190 + tc.s*95}), "a100", "a100")
			s.settle(Settings{})
			s.add("a100", 1)
			s.settle(Settings{})
			s.remove("1002")
			s.settle(Settings{})
			d := Decide(s.input(elasticJob(1, 8, 4), Settings{}))
			if d.Action != tc.want {
				t.Fatalf("got %s (%s), want %s", d.Action, d.Reason, tc.want)
			}
		})
	}
}

// afterFailedStep leaves a job back at 2 workers after its step to 3 did
// not pay, with the last report at 2 workers just settled.
func afterFailedStep(t *testing.T, st Settings) (*sim, Job) {
	t.Helper()
	s := newSim(curve(map[int]float64{1: 100, 2: 190, 3: 200}), "a100")
	job := elasticJob(1, 8, 4)
	if sizes, _ := s.drive(t, job, st, 10); !slices.Equal(sizes, []int{2, 3, 2}) {
		t.Fatalf("setup: sizes %v", sizes)
	}
	return s, job
}

func TestCooldown(t *testing.T) {
	st := Settings{Cooldown: 10 * time.Minute}
	tests := []struct {
		name  string
		after time.Duration // more steady reports at 2 workers
		want  Action
		code  Code
	}{
		{"just reverted: hold", 0, Hold, CodeCooldown},
		{"within cooldown: hold", 8 * time.Minute, Hold, CodeCooldown},
		{"cooldown over: probe again", 10 * time.Minute, Grow, CodeGrowth},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, job := afterFailedStep(t, st)
			s.report(int(tc.after/reportEvery), nil)
			wantAction(t, Decide(s.input(job, st)), tc.want, tc.code)
		})
	}
}

func TestNoiseAndThroughputChange(t *testing.T) {
	tests := []struct {
		name  string
		scale func(i int) float64
		want  Action
	}{
		{"jitter within 10% holds", func(i int) float64 { return []float64{1.04, 0.96, 1.03, 0.97, 1.02, 0.98}[i%6] }, Hold},
		{"throughput up 25% re-probes before the cooldown", func(int) float64 { return 1.25 }, Grow},
		// 2 workers now do 142.5 samples/s against 100 at 1: s = 0.43.
		{"throughput down 25% makes the last step not pay", func(int) float64 { return 0.75 }, Shrink},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, job := afterFailedStep(t, Settings{})
			s.report(12, tc.scale)
			d := Decide(s.input(job, Settings{}))
			if d.Action != tc.want {
				t.Fatalf("got %s (%s), want %s", d.Action, d.Reason, tc.want)
			}
		})
	}
}

func TestShrinkWhenEfficiencyFalls(t *testing.T) {
	fast := true
	s := newSim(func(alloc map[GPUType]int, _ WorkerRate) float64 {
		k := float64(totalWorkers(alloc))
		if fast || k < 3 {
			return 100
		}
		return 210.0 / 3 // the job at 3 workers now does 210 samples/s: s(2→3) = 0.1
	}, "a100")
	job := elasticJob(1, 3, 4)
	if sizes, ds := s.drive(t, job, Settings{}, 10); !slices.Equal(sizes, []int{2, 3}) || ds[len(ds)-1].Code != CodeAtMax {
		t.Fatalf("setup: sizes %v", sizes)
	}
	fast = false
	s.report(6, nil)
	d := Decide(s.input(job, Settings{}))
	// The words are checked for the figure the test is about, s = 0.10, which no code carries.
	if d.Action != Shrink || d.Code != CodeStepDoesNotPay || d.Count != 1 || !strings.Contains(d.Reason, "s = 0.10") {
		t.Fatalf("got %s %d (%s), want shrink by 1 with s = 0.10", d.Action, d.Count, d.Reason)
	}
}

func TestBounds(t *testing.T) {
	linear := curve(map[int]float64{1: 100, 64: 6400})
	t.Run("below min grows to min", func(t *testing.T) {
		s := newSim(linear, "a100", "a100")
		// No report yet: a job whose probe says nothing is not touched.
		if d := Decide(s.input(elasticJob(4, 8, 4), Settings{})); d.Action != Hold {
			t.Fatalf("without reports: got %s (%s), want hold", d.Action, d.Reason)
		}
		s.report(1, nil) // one unsettled report is enough to restore min
		d := Decide(s.input(elasticJob(4, 8, 4), Settings{}))
		if d.Action != Grow || d.Count != 2 || d.Type != "a100" {
			t.Fatalf("got %s %d %s (%s), want grow by 2 a100", d.Action, d.Count, d.Type, d.Reason)
		}
	})
	t.Run("above max removes the slowest", func(t *testing.T) {
		s := newSim(func(_ map[GPUType]int, w WorkerRate) float64 {
			return map[string]float64{"1000": 100, "1001": 90, "1002": 100, "1003": 80}[w.Worker]
		}, "a100", "a100", "a100", "a100")
		s.report(1, nil)
		d := Decide(s.input(elasticJob(1, 2, 4), Settings{}))
		if d.Action != Shrink || !slices.Equal(d.Workers, []string{"1003", "1001"}) {
			t.Fatalf("got %s %v (%s), want shrink of 1003, 1001", d.Action, d.Workers, d.Reason)
		}
	})
	t.Run("never shrinks below min", func(t *testing.T) {
		// Measured at 1 and 2 workers, the step does not pay, but min is 2.
		s := newSim(curve(map[int]float64{1: 100, 2: 110}), "a100")
		s.settle(Settings{})
		s.add("a100", 1)
		s.settle(Settings{})
		d := Decide(s.input(elasticJob(2, 2, 4), Settings{}))
		if d.Action != Hold {
			t.Fatalf("got %s (%s), want hold", d.Action, d.Reason)
		}
		d = Decide(s.input(elasticJob(1, 2, 4), Settings{}))
		if d.Action != Shrink {
			t.Fatalf("with min 1: got %s (%s), want shrink", d.Action, d.Reason)
		}
	})
	t.Run("type max and capacity cap a step", func(t *testing.T) {
		s := newSim(linear, "a100")
		s.settle(Settings{})
		job := elasticJob(1, 16, 4, TypeOption{Type: "a100", MaxWorkers: 3})
		in := s.input(job, Settings{Step: 4})
		if d := Decide(in); d.Action != Grow || d.Count != 2 {
			t.Fatalf("type max: got %s %d (%s), want grow by 2", d.Action, d.Count, d.Reason)
		}
		in.Capacity = map[GPUType]int{"a100": 1}
		if d := Decide(in); d.Action != Grow || d.Count != 1 {
			t.Fatalf("capacity: got %s %d (%s), want grow by 1", d.Action, d.Count, d.Reason)
		}
		in.Capacity = map[GPUType]int{}
		if d := Decide(in); d.Action != Hold || d.Code != CodeNoCapacity {
			t.Fatalf("no capacity: got %s %s (%s), want hold %s", d.Action, d.Code, d.Reason, CodeNoCapacity)
		}
		in.Capacity = nil
		in.Job = elasticJob(1, 16, 4, TypeOption{Type: "a100", MaxWorkers: 1})
		if d := Decide(in); d.Action != Hold || d.Code != CodeTypeAtMax {
			t.Fatalf("type at its max: got %s %s (%s), want hold %s", d.Action, d.Code, d.Reason, CodeTypeAtMax)
		}
		// One type at its max, the other without room: no one reason holds both.
		in.Job = elasticJob(1, 16, 4, TypeOption{Type: "a100", MaxWorkers: 1}, TypeOption{Type: "v100"})
		in.Capacity = map[GPUType]int{"a100": 4}
		if d := Decide(in); d.Action != Hold || d.Code != CodeNoGrowth {
			t.Fatalf("two types held for two reasons: got %s %s (%s), want hold %s", d.Action, d.Code, d.Reason, CodeNoGrowth)
		}
	})
}

func TestHoldsWithReason(t *testing.T) {
	steady := func() *sim {
		s := newSim(curve(map[int]float64{1: 100, 64: 6400}), "a100", "a100")
		s.settle(Settings{})
		return s
	}
	job := elasticJob(1, 8, 4)
	tests := []struct {
		name  string
		input func() Input
		code  Code
	}{
		{"not elastic", func() Input {
			in := steady().input(job, Settings{})
			in.Job.Elastic = false
			return in
		}, CodeNotElastic},
		{"no reports", func() Input { return newSim(nil, "a100").input(job, Settings{}) }, CodeNoReports},
		{"stale report", func() Input {
			in := steady().input(job, Settings{})
			in.Now = in.Now.Add(5 * time.Minute)
			return in
		}, CodeStaleReport},
		{"a worker did not report", func() Input {
			s := steady()
			last := &s.history[len(s.history)-1]
			last.Workers = last.Workers[:1]
			return s.input(job, Settings{})
		}, CodeIncompleteReport},
		{"rate is NaN", func() Input {
			s := steady()
			s.history[len(s.history)-1].Workers = []WorkerRate{{Worker: "1000", Type: "a100", SamplesPerSec: math.NaN()}, {Worker: "1001", Type: "a100", SamplesPerSec: 50}}
			return s.input(job, Settings{})
		}, CodeInvalidReport},
		{"a report twice from a worker", func() Input {
			s := steady()
			last := &s.history[len(s.history)-1]
			last.Workers = append(last.Workers[:1], last.Workers[0])
			return s.input(job, Settings{})
		}, CodeInvalidReport},
		{"not settled after a change", func() Input {
			s := steady()
			s.add("a100", 1)
			s.report(4, nil)
			return s.input(job, Settings{})
		}, CodeMeasuring},
		{"no progress", func() Input {
			s := newSim(func(map[GPUType]int, WorkerRate) float64 { return 0 }, "a100")
			s.settle(Settings{})
			return s.input(job, Settings{})
		}, CodeNoProgress},
		{"min above max", func() Input { return steady().input(elasticJob(4, 2, 4), Settings{}) }, CodeInvalidDeclaration},
		{"per-dollar objective without prices", func() Input {
			return steady().input(elasticJob(1, 4, 4, TypeOption{Type: "a100"}), Settings{Objective: MaxThroughputPerDollar})
		}, CodeInvalidDeclaration},
		{"bad threshold", func() Input { return steady().input(job, Settings{Threshold: -1}) }, CodeInvalidSettings},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.input())
			if d.Action != Hold || d.Count != 0 || d.Workers != nil {
				t.Fatalf("got %s %d %v (%s), want a plain hold", d.Action, d.Count, d.Workers, d.Reason)
			}
			if d.Code != tc.code {
				t.Errorf("hold %s (%q), want %s", d.Code, d.Reason, tc.code)
			}
		})
	}
}

// While it measures a size the job holds and counts the settled reports; an incomplete report
// is not one. The count is the figure these cases are about, and no code carries it: the
// words are checked for it.
func TestMeasuringCountsOnlySettledCompleteReports(t *testing.T) {
	job := elasticJob(1, 8, 4)
	for _, tc := range []struct {
		name       string
		reports    int // at the new size, settled from the 4th on
		incomplete int // of the last reports but one, so many miss a worker
		count      string
	}{
		{"not settled after a change", 4, 0, "measuring a100=3: 1 of 3 settled reports"},
		{"incomplete reports are not counted as settled", 7, 2, "measuring a100=3: 2 of 3 settled reports"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(curve(map[int]float64{1: 100, 64: 6400}), "a100", "a100")
			s.settle(Settings{})
			s.add("a100", 1)
			s.report(tc.reports, nil)
			for i := range tc.incomplete {
				last := &s.history[len(s.history)-2-i]
				last.Workers = last.Workers[:2]
			}
			d := Decide(s.input(job, Settings{}))
			if d.Action != Hold || d.Code != CodeMeasuring || !strings.Contains(d.Reason, tc.count) {
				t.Fatalf("got %s %s (%q), want a hold %s saying %q", d.Action, d.Code, d.Reason, CodeMeasuring, tc.count)
			}
		})
	}
}

// heterogeneous is a job where an a100 worker does 200 samples/s and a v100
// worker 100, scaling linearly, unless slowdown says otherwise.
func heterogeneous(slowdown func(alloc map[GPUType]int) float64) func(map[GPUType]int, WorkerRate) float64 {
	return func(alloc map[GPUType]int, w WorkerRate) float64 {
		r := map[GPUType]float64{"a100": 200, "v100": 100}[w.Type]
		if slowdown != nil {
			r *= slowdown(alloc)
		}
		return r
	}
}

func TestHeterogeneousTypes(t *testing.T) {
	a100 := TypeOption{Type: "a100", Pool: "gpu-a100", PricePerGPUHour: 3}
	v100 := TypeOption{Type: "v100", Pool: "gpu-v100", PricePerGPUHour: 1}
	tests := []struct {
		name     string
		start    []GPUType
		history  [][]GPUType // earlier sizes, each settled, before start
		types    []TypeOption
		settings Settings
		wantType GPUType // of the growth each case makes
	}{
		{"fastest per worker without prices", []GPUType{"a100", "v100"}, nil,
			[]TypeOption{{Type: "a100"}, {Type: "v100"}}, Settings{}, "a100"},
		{"best per dollar with prices", []GPUType{"a100", "v100"}, nil,
			[]TypeOption{a100, v100}, Settings{}, "v100"},
		{"a type never measured is probed when the measured one is full", []GPUType{"a100"}, nil,
			[]TypeOption{{Type: "a100", MaxWorkers: 1}, {Type: "v100"}}, Settings{}, "v100"},
		// Unmeasured, v100 would come after the measured a100 (an estimate before a guess).
		{"a type measured earlier keeps its rate", []GPUType{"a100"}, [][]GPUType{{"a100", "v100"}},
			[]TypeOption{a100, v100}, Settings{}, "v100"},
		{"types the job is not allowed are ignored", []GPUType{"a100", "v100"}, nil,
			[]TypeOption{{Type: "v100"}}, Settings{}, "v100"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(heterogeneous(nil))
			for _, size := range append(tc.history, tc.start) {
				s.remove(idsOf(s.workers)...)
				for _, ty := range size {
					s.add(ty, 1)
				}
				s.settle(tc.settings)
			}
			d := Decide(s.input(elasticJob(1, 8, 4, tc.types...), tc.settings))
			if d.Action != Grow || d.Code != CodeGrowth || d.Type != tc.wantType {
				t.Fatalf("got %s %s %s (%s), want grow %s by %s", d.Action, d.Code, d.Type, d.Reason, CodeGrowth, tc.wantType)
			}
		})
	}
}

func idsOf(ws []WorkerRate) []string {
	var ids []string
	for _, w := range ws {
		ids = append(ids, w.Worker)
	}
	return ids
}

func TestHeterogeneousStepIsJudgedOnTheAddedType(t *testing.T) {
	tests := []struct {
		name     string
		slowdown func(map[GPUType]int) float64
		want     Action
	}{
		// 2 a100 (400) + 1 v100 (100) = 500: the v100 added its own rate, s = 1.
		{"added v100 adds its own rate", nil, Grow},
		// Synchronous training runs at the slowest worker's pace: with a
		// v100 in, every worker does half its rate: 2×100 + 50 = 250 < 400.
		{"added v100 slows the a100s", func(alloc map[GPUType]int) float64 {
			if alloc["v100"] > 0 {
				return 0.5
			}
			return 1
		}, Shrink},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(heterogeneous(tc.slowdown), "a100", "a100")
			job := elasticJob(1, 8, 4, TypeOption{Type: "a100", MaxWorkers: 2}, TypeOption{Type: "v100"})
			s.settle(Settings{})
			d := Decide(s.input(job, Settings{}))
			if d.Action != Grow || d.Type != "v100" {
				t.Fatalf("setup: %s %s (%s)", d.Action, d.Type, d.Reason)
			}
			s.apply(t, d)
			s.settle(Settings{})
			d = Decide(s.input(job, Settings{}))
			if d.Action != tc.want {
				t.Fatalf("got %s (%s), want %s", d.Action, d.Reason, tc.want)
			}
			if d.Action == Shrink && (d.Type != "v100" || len(d.Workers) != 1) {
				t.Fatalf("shrink %s %v, want the v100 worker", d.Type, d.Workers)
			}
		})
	}
}

func TestPricesAndUtility(t *testing.T) {
	priced := []TypeOption{{Type: "a100", PricePerGPUHour: 3}, {Type: "v100", PricePerGPUHour: 1}}
	t.Run("per-dollar objective rejects a step that pays per worker", func(t *testing.T) {
		// a100+v100 do 200+100 for $16/h. A second a100 brings 150 for
		// $12/h: per worker s = 150/200 = 0.75; per dollar
		// s = (150/12) / (300/16) = 0.67. Threshold 0.7 between the two.
		s := newSim(func(alloc map[GPUType]int, w WorkerRate) float64 {
			if w.Type == "v100" {
				return 100
			}
			if alloc["a100"] == 2 {
				return 175
			}
			return 200
		}, "a100", "v100")
		s.settle(Settings{})
		s.add("a100", 1)
		s.settle(Settings{})
		job := elasticJob(1, 8, 4, priced...)
		if d := Decide(s.input(job, Settings{Threshold: 0.7})); d.Action != Grow {
			t.Fatalf("per worker: got %s (%s), want grow", d.Action, d.Reason)
		}
		d := Decide(s.input(job, Settings{Threshold: 0.7, Objective: MaxThroughputPerDollar}))
		// The words are checked for the figure the case is about, s on cost (0.67), which no
		// code carries.
		if d.Action != Shrink || d.Code != CodeStepDoesNotPay || d.Type != "a100" || !strings.Contains(d.Reason, "s = 0.67") {
			t.Fatalf("per dollar: got %s %s (%s), want shrink of an a100 at s = 0.67", d.Action, d.Type, d.Reason)
		}
	})
	t.Run("utility below cost blocks growth and undoes a step", func(t *testing.T) {
		// One a100 worker: 4 GPUs × $3 = $12/h. At $0.01 per million
		// samples, 200 samples/s is worth $0.0072/h: never worth it.
		s := newSim(curve(map[int]float64{1: 200, 64: 12800}), "a100")
		s.settle(Settings{})
		job := elasticJob(1, 8, 4, priced[0])
		cheap := Settings{ValuePerMillionSamples: 0.01}
		if d := Decide(s.input(job, cheap)); d.Action != Hold || d.Code != CodeNotWorthCost {
			t.Fatalf("got %s %s (%s), want hold %s", d.Action, d.Code, d.Reason, CodeNotWorthCost)
		}
		valuable := Settings{ValuePerMillionSamples: 100} // 200 samples/s is worth $72/h
		if d := Decide(s.input(job, valuable)); d.Action != Grow {
			t.Fatalf("got %s (%s), want grow", d.Action, d.Reason)
		}
		s.add("a100", 1)
		s.settle(Settings{})
		if d := Decide(s.input(job, cheap)); d.Action != Shrink || d.Code != CodeStepNotWorthCost {
			t.Fatalf("got %s %s (%s), want shrink %s", d.Action, d.Code, d.Reason, CodeStepNotWorthCost)
		}
	})
}

func TestStragglers(t *testing.T) {
	slow := func(ids ...string) func(map[GPUType]int, WorkerRate) float64 {
		return func(_ map[GPUType]int, w WorkerRate) float64 {
			r := map[GPUType]float64{"a100": 200, "v100": 100}[w.Type]
			if slices.Contains(ids, w.Worker) {
				return r * 0.6
			}
			return r
		}
	}
	throttled := GPUSignal{Worker: "1002", GPU: 1, HasUtilization: true, UtilizationPct: 99, SMClockMHz: 900, MaxSMClockMHz: 1410,
		ThermalOrPowerThrottled: true, ThrottleReasons: []string{"hw_thermal_slowdown"}}
	busy := func(worker string) GPUSignal {
		return GPUSignal{Worker: worker, HasUtilization: true, UtilizationPct: 98, SMClockMHz: 1410, MaxSMClockMHz: 1410}
	}
	idle := GPUSignal{Worker: "1001", HasUtilization: true, UtilizationPct: 20, SMClockMHz: 1410, MaxSMClockMHz: 1410}
	// An H200 under a dense job, as NVML read it: 100% busy at 690 of 700 W, its clock held
	// back by the power limit alone.
	powerCapped := func(worker string, mhz uint32) GPUSignal {
		return GPUSignal{Worker: worker, HasUtilization: true, UtilizationPct: 100, SMClockMHz: mhz, MaxSMClockMHz: 1980,
			ThermalOrPowerThrottled: true, PowerCapOnly: true, ThrottleReasons: []string{"sw_power_cap"}}
	}
	hot := func(worker string) GPUSignal {
		sig := powerCapped(worker, 1440)
		sig.PowerCapOnly, sig.ThrottleReasons = false, []string{"sw_power_cap", "hw_thermal_slowdown"}
		return sig
	}

	tests := []struct {
		name        string
		rate        func(map[GPUType]int, WorkerRate) float64
		types       []GPUType
		signals     []GPUSignal
		capacity    map[GPUType]int
		want        Action
		wantWorkers []string
		code        Code
		flags       map[string]string // worker → part of its flag
	}{
		{"slow worker is replaced", slow("1002"), []GPUType{"a100", "a100", "a100", "a100"}, nil, nil,
			Replace, []string{"1002"}, CodeStraggler, map[string]string{"1002": "throughput"}},
		{"NVML explains the replacement", slow("1002"), []GPUType{"a100", "a100", "a100", "a100"},
			[]GPUSignal{busy("1000"), busy("1001"), throttled, busy("1003")}, nil,
			Replace, []string{"1002"}, CodeStraggler, map[string]string{"1002": "NVML: GPU 1 throttled"}},
		{"the slowest of two is replaced first", slow("1001", "1003"), []GPUType{"a100", "a100", "a100", "a100", "a100"}, nil, nil,
			Replace, []string{"1001"}, CodeStraggler, map[string]string{"1001": "throughput", "1003": "throughput"}},
		{"utilisation alone never replaces", slow(), []GPUType{"a100", "a100", "a100", "a100"},
			[]GPUSignal{busy("1000"), idle, busy("1002"), busy("1003")}, nil,
			Grow, nil, CodeGrowth, map[string]string{"1001": "GPU utilisation 20% while peers' median is 98%"}},
		{"synchronous training: a throttled GPU well below its peers' clocks is replaced at equal samples/s", slow(),
			[]GPUType{"a100", "a100", "a100", "a100"}, []GPUSignal{busy("1000"), busy("1001"), throttled, busy("1003")}, nil,
			Replace, []string{"1002"}, CodeStraggler,
			map[string]string{"1002": "NVML: GPU 1 throttled"}},
		{"a throttled GPU still near its peers' clocks is only flagged", slow(), []GPUType{"a100", "a100", "a100", "a100"},
			[]GPUSignal{busy("1000"), busy("1001"), {Worker: "1002", GPU: 1, SMClockMHz: 1180, MaxSMClockMHz: 1410,
				ThermalOrPowerThrottled: true, PowerCapOnly: true, ThrottleReasons: []string{"sw_power_cap"}}, busy("1003")}, nil,
			Grow, nil, CodeGrowth, map[string]string{"1002": "NVML: GPU 1 throttled to 1180 of 1410 MHz (sw_power_cap)"}},
		{"every GPU at its power limit, as H200s run a dense job, is no sign of trouble", slow(), []GPUType{"a100", "a100", "a100", "a100"},
			[]GPUSignal{powerCapped("1000", 1440), powerCapped("1001", 1425), powerCapped("1002", 1440), powerCapped("1003", 1440)}, nil,
			Grow, nil, CodeGrowth, nil},
		{"one GPU at its power limit well below its like peers is flagged", slow(), []GPUType{"a100", "a100", "a100", "a100"},
			[]GPUSignal{powerCapped("1000", 1440), powerCapped("1001", 1440), powerCapped("1002", 1180), powerCapped("1003", 1440)}, nil,
			Grow, nil, CodeGrowth, map[string]string{"1002": "NVML: GPU 0 throttled to 1180 of 1980 MHz (sw_power_cap)"}},
		{"a thermal slowdown is flagged even where every GPU shares it", slow(), []GPUType{"a100", "a100", "a100", "a100"},
			[]GPUSignal{hot("1000"), hot("1001"), hot("1002"), hot("1003")}, nil,
			Grow, nil, CodeGrowth, map[string]string{"1000": "(sw_power_cap,hw_thermal_slowdown)", "1001": "(sw_power_cap,hw_thermal_slowdown)",
				"1002": "(sw_power_cap,hw_thermal_slowdown)", "1003": "NVML: GPU 0 throttled to 1440 of 1980 MHz (sw_power_cap,hw_thermal_slowdown)"}},
		{"a slower type is no straggler", slow(), []GPUType{"a100", "a100", "v100", "v100"}, nil, nil,
			Grow, nil, CodeGrowth, nil},
		{"no capacity to replace: hold", slow("1002"), []GPUType{"a100", "a100", "a100", "a100"}, nil, map[GPUType]int{"a100": 0},
			Hold, nil, CodeStraggler, map[string]string{"1002": "throughput"}},
		{"stale NVML signals are ignored", slow(), []GPUType{"a100", "a100", "a100", "a100"},
			[]GPUSignal{{Worker: "1002", Time: t0.Add(-time.Hour), SMClockMHz: 900, MaxSMClockMHz: 1410, ThermalOrPowerThrottled: true}}, nil,
			Grow, nil, CodeGrowth, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(tc.rate, tc.types...)
			s.settle(Settings{})
			in := s.input(elasticJob(1, 16, 4), Settings{})
			for _, sig := range tc.signals {
				if sig.Time.IsZero() {
					sig.Time = in.Now.Add(-5 * time.Second)
				}
				in.Signals = append(in.Signals, sig)
			}
			in.Capacity = tc.capacity
			d := Decide(in)
			wantStraggler(t, d, tc.want, tc.wantWorkers, tc.code)
			if d.Action == Replace && (d.Count != 1 || d.Type != "a100") {
				t.Errorf("replace %d %s, want 1 a100", d.Count, d.Type)
			}
			wantFlags(t, d, tc.flags)
		})
	}
}

// An evaluation pass pauses every worker at once, but each reports on its own clock: one
// worker's window can hold a paused report while its peers' reports fell before the pause.
// That worker is no straggler; one slow in every report of the window is.
func TestAPauseOneWorkerReportedFirstMakesNoStraggler(t *testing.T) {
	paused := func(history []Measurement, worker string) {
		last := history[len(history)-1].Workers
		for i := range last {
			if last[i].Worker == worker {
				last[i].SamplesPerSec = 0
			}
		}
	}
	s := newSim(curve(map[int]float64{1: 100, 2: 190}), "a100", "a100")
	s.settle(Settings{})
	in := s.input(elasticJob(1, 2, 4), Settings{})
	paused(in.History, "1001")
	if d := Decide(in); d.Action == Replace {
		t.Fatalf("replaced %v for a paused report: %s", d.Workers, d.Reason)
	}

	slowWorker := func(_ map[GPUType]int, w WorkerRate) float64 {
		if w.Worker == "1001" {
			return 50
		}
		return 95
	}
	s = newSim(slowWorker, "a100", "a100")
	s.settle(Settings{})
	in = s.input(elasticJob(1, 2, 4), Settings{})
	paused(in.History, "1000")
	wantStraggler(t, Decide(in), Replace, []string{"1001"}, CodeStragglerLeaves) // at its max of 2
}

// wantStraggler stops the test unless d is action on workers, of the kind code (a
// replacement or a hold for a straggler, the main job as the straggler, or growth when nobody
// is one).
func wantStraggler(t *testing.T, d Decision, action Action, workers []string, code Code) {
	t.Helper()
	if d.Action != action || d.Code != code || !slices.Equal(d.Workers, workers) {
		t.Fatalf("got %s %s %v (%s), want %s %s %v", d.Action, d.Code, d.Workers, d.Reason, action, code, workers)
	}
}

// wantFlags fails the test unless d flags exactly the workers of flags, each with a reason
// that contains its part.
func wantFlags(t *testing.T, d Decision, flags map[string]string) {
	t.Helper()
	got := map[string]string{}
	for _, f := range d.Flags {
		got[f.Worker] += f.Reason
	}
	if len(got) != len(flags) {
		t.Errorf("flags %v, want flags for %v", got, flags)
	}
	for w, part := range flags {
		if !strings.Contains(got[w], part) {
			t.Errorf("flag of %s = %q, want it to contain %q", w, got[w], part)
		}
	}
}

// In synchronous data-parallel training every worker reports the job's samples/s (each step
// waits for the slowest at the gradient exchange); the compute time per step before the
// exchange is what tells the slow worker apart.
func TestStragglersInSynchronousTraining(t *testing.T) {
	same := func(map[GPUType]int, WorkerRate) float64 { return 150 }
	compute := func(slow map[string]float64) func(WorkerRate) float64 {
		return func(w WorkerRate) float64 {
			if c, ok := slow[w.Worker]; ok {
				return c
			}
			return 0.100
		}
	}
	throttledMain := GPUSignal{Worker: "1000", GPU: 0, SMClockMHz: 700, MaxSMClockMHz: 1410,
		ThermalOrPowerThrottled: true, ThrottleReasons: []string{"hw_slowdown"}}
	clock := func(w string) GPUSignal { return GPUSignal{Worker: w, SMClockMHz: 1410, MaxSMClockMHz: 1410} }
	// Report windows fall differently in each worker: the main job's samples/s reads 30% low,
	// though every step waited for all.
	reportWindowsApart := func(_ map[GPUType]int, w WorkerRate) float64 {
		if w.Worker == "1000" {
			return 105
		}
		return 150
	}
	tests := []struct {
		name        string
		compute     func(WorkerRate) float64
		main        string
		signals     []GPUSignal
		capacity    map[GPUType]int
		want        Action
		wantWorkers []string
		code        Code
		flags       map[string]string
		rate        func(map[GPUType]int, WorkerRate) float64 // samples/s each reports; nil: the same for all
	}{
		{"the worker computing longest is replaced", compute(map[string]float64{"1002": 0.250}), "1000", nil, nil,
			Replace, []string{"1002"}, CodeStraggler,
			map[string]string{"1002": "compute: 250 ms"}, nil},
		{"within 1/0.8 of the median is no straggler", compute(map[string]float64{"1002": 0.120}), "1000", nil, nil,
			Grow, nil, CodeGrowth, nil, nil},
		{"a worker without compute times: compute is not compared", compute(map[string]float64{"1001": 0, "1002": 0.300}), "1000", nil, nil,
			Grow, nil, CodeGrowth, nil, nil},
		{"of two slow workers the slower goes first", compute(map[string]float64{"1001": 0.200, "1003": 0.300}), "1000", nil, nil,
			Replace, []string{"1003"}, CodeStraggler, map[string]string{"1001": "compute: 200 ms", "1003": "compute: 300 ms"}, nil},
		{"a slow main job is never replaced: the job holds and says so", compute(map[string]float64{"1000": 0.250}), "1000", nil, nil,
			Hold, nil, CodeMainStraggler,
			map[string]string{"1000": "compute: 250 ms"}, nil},
		{"a slow main job beside a slow worker: the worker is replaced", compute(map[string]float64{"1000": 0.400, "1002": 0.250}), "1000", nil, nil,
			Replace, []string{"1002"}, CodeStraggler, map[string]string{"1000": "compute: 400 ms", "1002": "compute: 250 ms"}, nil},
		{"a main job on a throttled GPU: hold", compute(nil), "1000",
			[]GPUSignal{throttledMain, clock("1001"), clock("1002"), clock("1003")}, nil,
			Hold, nil, CodeMainStraggler, map[string]string{"1000": "NVML: GPU 0 throttled to 700 of 1410 MHz (hw_slowdown)"}, nil},
		{"compute and NVML agree: both are said", compute(map[string]float64{"1003": 0.200}), "1000",
			[]GPUSignal{clock("1000"), clock("1001"), clock("1002"), {Worker: "1003", SMClockMHz: 705, MaxSMClockMHz: 1410,
				ThermalOrPowerThrottled: true, ThrottleReasons: []string{"hw_thermal_slowdown"}}}, nil,
			Replace, []string{"1003"}, CodeStraggler,
			map[string]string{"1003": "compute: 200 ms"}, nil},
		{"with compute times, samples/s that differ by report windows name nobody", func(w WorkerRate) float64 { return 0.100 }, "1000", nil, nil,
			Grow, nil, CodeGrowth, nil, reportWindowsApart},
		{"no capacity for a successor: hold", compute(map[string]float64{"1002": 0.250}), "1000", nil, map[GPUType]int{"a100": 0},
			Hold, nil, CodeStraggler, map[string]string{"1002": "compute"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rate := same
			if tc.rate != nil {
				rate = tc.rate
			}
			s := newSim(rate, "a100", "a100", "a100", "a100")
			s.compute = tc.compute
			s.settle(Settings{})
			in := s.input(elasticJob(1, 16, 4), Settings{})
			in.Main = tc.main
			for _, sig := range tc.signals {
				sig.Time = in.Now.Add(-5 * time.Second)
				in.Signals = append(in.Signals, sig)
			}
			in.Capacity = tc.capacity
			d := Decide(in)
			wantStraggler(t, d, tc.want, tc.wantWorkers, tc.code)
			if want := tc.code == CodeMainStraggler; d.MainStraggler != want {
				t.Errorf("MainStraggler = %v, want %v", d.MainStraggler, want)
			}
			wantFlags(t, d, tc.flags)
		})
	}
}

// At its max a job's rendezvous (torchrun's --nnodes MIN:MAX) admits no successor beside the
// straggler: the straggler leaves first. Below the max the successor joins first, as before;
// a limit on capacity is quoted where it stops the replacement.
func TestStragglerAtMaxLeavesFirst(t *testing.T) {
	compute := func(w WorkerRate) float64 {
		if w.Worker == "1002" {
			return 0.300
		}
		return 0.100
	}
	input := func(max int, capacity map[GPUType]int, limit map[GPUType]string) Input {
		s := newSim(func(map[GPUType]int, WorkerRate) float64 { return 150 }, "a100", "a100", "a100", "a100")
		s.compute = compute
		s.settle(Settings{})
		in := s.input(elasticJob(2, max, 1), Settings{})
		in.Main, in.Capacity, in.CapacityLimit = "1000", capacity, limit
		return in
	}
	limit := map[GPUType]string{"a100": "account proj-a has GrpTRES gres/gpu=4"}
	for _, tc := range []struct {
		name     string
		max      int
		capacity map[GPUType]int
		want     Action
		code     Code
		leave    bool
		workers  []string
	}{
		{"at max: leaves first", 4, nil, Replace, CodeStragglerLeaves, true, []string{"1002"}},
		{"below max: joins first", 5, nil, Replace, CodeStraggler, false, []string{"1002"}},
		{"at max without a free worker: hold", 4, map[GPUType]int{"a100": 0}, Hold, CodeStraggler, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(input(tc.max, tc.capacity, limit))
			if d.Action != tc.want || d.Code != tc.code || d.LeaveFirst != tc.leave || !slices.Equal(d.Workers, tc.workers) {
				t.Fatalf("got %s %s leave-first %v %v (%s), want %s %s leave-first %v %v", d.Action, d.Code, d.LeaveFirst, d.Workers, d.Reason,
					tc.want, tc.code, tc.leave, tc.workers)
			}
		})
	}
	// The hold quotes the limit that leaves no free worker: the words are checked for the
	// limit's figures, which no code carries.
	if d := Decide(input(4, map[GPUType]int{"a100": 0}, limit)); !strings.Contains(d.Reason, "(account proj-a has GrpTRES gres/gpu=4)") {
		t.Fatalf("hold %q does not quote the limit", d.Reason)
	}
}

// A straggler replaced at the max leaves the allocation as it was: its successor's world is
// measured afresh (settle time, then a window of its own reports), so the old straggler's
// reports never name it again, and the job holds at its max once the new world is healthy.
func TestAfterALeaveFirstReplacementTheNewWorldIsMeasuredAfresh(t *testing.T) {
	slow := "1002"
	s := newSim(func(map[GPUType]int, WorkerRate) float64 { return 150 }, "a100", "a100", "a100", "a100")
	s.compute = func(w WorkerRate) float64 {
		if w.Worker == slow {
			return 0.300
		}
		return 0.100
	}
	s.settle(Settings{})
	job := elasticJob(2, 4, 1)
	d := Decide(s.input(job, Settings{}))
	if d.Action != Replace || d.Code != CodeStragglerLeaves || !d.LeaveFirst {
		t.Fatalf("got %s %s leave-first %v (%s), want a replacement that leaves first", d.Action, d.Code, d.LeaveFirst, d.Reason)
	}
	s.apply(t, d) // 1002 gone, 1004 in its place: the same allocation
	s.report(2, nil)
	if d := Decide(s.input(job, Settings{})); d.Action != Hold || d.Code != CodeMeasuring {
		t.Fatalf("right after the replacement: %s (%s), want a hold while the new world settles", d.Action, d.Reason)
	}
	s.settle(Settings{})
	if d := Decide(s.input(job, Settings{})); d.Action != Hold || d.Code != CodeAtMax || len(d.Flags) != 0 {
		t.Fatalf("once settled: %s (%s, flags %v), want a hold at max with nothing flagged", d.Action, d.Reason, d.Flags)
	}
}

// An association limit that holds growth is named in the hold. The words are checked for the
// limit's figures, which no code carries.
func TestCapacityLimitIsQuotedWhenItStopsGrowth(t *testing.T) {
	s := newSim(curve(map[int]float64{1: 100, 2: 200, 3: 300}), "a100", "a100")
	s.settle(Settings{})
	in := s.input(elasticJob(1, 4, 1), Settings{})
	in.Capacity = map[GPUType]int{"a100": 0}
	limit := "the association of user alice in account proj-a has GrpTRES gres/gpu=2, and its jobs hold or wait for 2"
	in.CapacityLimit = map[GPUType]string{"a100": limit}
	d := Decide(in)
	if d.Action != Hold || d.Code != CodeNoCapacity || !strings.Contains(d.Reason, "("+limit) {
		t.Fatalf("decision %s %q, want a hold naming the association limit", d.Action, d.Reason)
	}
}

// Growth yields to waiting jobs (GrowthCapacity); replacing a straggler is not growth and
// needs only a free worker (Capacity).
func TestGrowthCapacityHoldsGrowthButNotAReplacement(t *testing.T) {
	s := newSim(curve(map[int]float64{1: 100, 2: 200, 3: 300}), "a100", "a100")
	s.settle(Settings{})
	in := s.input(elasticJob(1, 4, 1), Settings{})
	in.Capacity = map[GPUType]int{"a100": 2}
	in.GrowthCapacity = map[GPUType]int{"a100": 0}
	in.GrowthLimit = map[GPUType]string{"a100": "jobs waiting in a100 ask for 4 GPUs, 2 of a100 free there: growth yields to them"}
	if d := Decide(in); d.Action != Hold || d.Code != CodeYieldsToWaiting {
		t.Fatalf("decision %s %s %q, want a hold %s", d.Action, d.Code, d.Reason, CodeYieldsToWaiting)
	}

	st := newSim(func(map[GPUType]int, WorkerRate) float64 { return 150 }, "a100", "a100", "a100", "a100")
	st.compute = func(w WorkerRate) float64 {
		if w.Worker == "1002" {
			return 0.300
		}
		return 0.100
	}
	st.settle(Settings{})
	in = st.input(elasticJob(2, 5, 1), Settings{})
	in.Main, in.Capacity, in.GrowthCapacity = "1000", map[GPUType]int{"a100": 1}, map[GPUType]int{"a100": 0}
	if d := Decide(in); d.Action != Replace || d.Code != CodeStraggler || !slices.Equal(d.Workers, []string{"1002"}) {
		t.Fatalf("decision %s %v (%s), want straggler 1002 replaced while growth yields", d.Action, d.Workers, d.Reason)
	}
}

func TestDeterministic(t *testing.T) {
	s := newSim(heterogeneous(nil), "a100", "v100", "a100", "v100")
	s.settle(Settings{})
	in := s.input(elasticJob(1, 8, 4, TypeOption{Type: "a100", PricePerGPUHour: 2}, TypeOption{Type: "v100", PricePerGPUHour: 1}), Settings{})
	first := Decide(in)
	for range 50 {
		if d := Decide(in); !reflect.DeepEqual(d, first) {
			t.Fatalf("decision changed: %+v then %+v", first, d)
		}
	}
}

func TestDefaultsApplyToZeroFields(t *testing.T) {
	got := Settings{Threshold: 0.7}.withDefaults()
	want := DefaultSettings()
	want.Threshold = 0.7
	if got != want {
		t.Errorf("withDefaults = %+v, want %+v", got, want)
	}
	if err := DefaultSettings().validate(); err != nil {
		t.Errorf("defaults invalid: %v", err)
	}
}

func TestActionString(t *testing.T) {
	for a, want := range map[Action]string{Hold: "hold", Grow: "grow", Shrink: "shrink", Replace: "replace", Action(9): "Action(9)"} {
		if a.String() != want {
			t.Errorf("%d.String() = %q, want %q", int(a), a.String(), want)
		}
	}
}

func TestParseObjective(t *testing.T) {
	for in, want := range map[string]Objective{"throughput": MaxThroughput, "throughput-per-dollar": MaxThroughputPerDollar} {
		if got, err := ParseObjective(in); err != nil || got != want {
			t.Errorf("ParseObjective(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "Throughput", "per-dollar", "throughput "} {
		if _, err := ParseObjective(bad); err == nil {
			t.Errorf("ParseObjective(%q) accepted", bad)
		}
	}
}
