package policy

import (
	"slices"
	"strings"
	"testing"
)

// An evaluation pass or a checkpoint write stops training for a moment: every worker reports
// a lower rate for a report or two. A dip shorter than the measurement window (MinSamples
// settled reports) must neither shrink the job nor count as a change of its throughput; a dip
// as long as the window is a real drop.
func TestDipShorterThanTheWindowDoesNotShrink(t *testing.T) {
	dips := []struct {
		name  string
		scale []float64 // the last reports, oldest first; the window is the last 3
		want  Action
		code  Code
	}{
		// A hold is the cooldown's, as without the dip.
		{"one report at a fifth", []float64{1, 1, 0.2}, Hold, CodeCooldown},
		{"two reports paused", []float64{1, 0, 0.1}, Hold, CodeCooldown},
		{"the dip in the middle", []float64{1, 0.1, 1}, Hold, CodeCooldown},
		{"as long as the window", []float64{1, 0.3, 0.3, 0.3}, Shrink, CodeStepDoesNotPay},
	}
	for _, tc := range dips {
		t.Run(tc.name, func(t *testing.T) {
			s, job := afterFailedStep(t, Settings{})
			s.report(len(tc.scale), func(i int) float64 { return tc.scale[i] })
			wantAction(t, Decide(s.input(job, Settings{})), tc.want, tc.code)
		})
	}
}

// A step that paid when its size was first measured (s = 0.55 against 0.5) and whose
// throughput then drifts by less than the noise margin (10%) stays: s now just below the
// threshold is noise. A drop beyond the margin undoes the step.
func TestStepWithinTheNoiseMarginIsNotUndone(t *testing.T) {
	tests := []struct {
		name  string
		scale float64
		want  Action
		code  Code
	}{
		{"down 5%: s = 0.47, within the margin", 0.95, Hold, CodeWithinNoise},
		{"down 8%", 0.92, Hold, CodeWithinNoise},
		{"down 15%: a real drop", 0.85, Shrink, CodeStepDoesNotPay},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(curve(map[int]float64{1: 100, 2: 155}), "a100")
			job := elasticJob(1, 2, 4)
			s.settle(Settings{})
			s.add("a100", 1)
			s.settle(Settings{})
			if d := Decide(s.input(job, Settings{})); d.Action != Hold || d.Code != CodeAtMax {
				t.Fatalf("setup: got %s (%s), want hold at max", d.Action, d.Reason)
			}
			s.report(3, func(int) float64 { return tc.scale })
			wantAction(t, Decide(s.input(job, Settings{})), tc.want, tc.code)
		})
	}
}

// A step that never paid is undone at once, however small the margin by which it fails.
func TestStepThatNeverPaidIsUndoneEvenNearTheThreshold(t *testing.T) {
	s := newSim(curve(map[int]float64{1: 100, 2: 148}), "a100") // s = 0.48
	job := elasticJob(1, 2, 4)
	s.settle(Settings{})
	s.add("a100", 1)
	s.settle(Settings{})
	if d := Decide(s.input(job, Settings{})); d.Action != Shrink || d.Code != CodeStepDoesNotPay {
		t.Fatalf("got %s %s (%s), want shrink %s", d.Action, d.Code, d.Reason, CodeStepDoesNotPay)
	}
}

func TestPinnedSize(t *testing.T) {
	linear := curve(map[int]float64{1: 100, 64: 6400})
	pinned := func(pin int) Job {
		j := elasticJob(1, 8, 4)
		j.Bounds.Pin = pin
		return j
	}
	t.Run("grows to the pin at once", func(t *testing.T) {
		s := newSim(linear, "a100")
		s.report(1, nil)
		d := Decide(s.input(pinned(4), Settings{}))
		if d.Action != Grow || d.Code != CodeBelowTarget || d.Count != 3 {
			t.Fatalf("got %s %d (%s), want grow by 3", d.Action, d.Count, d.Reason)
		}
	})
	t.Run("shrinks to the pin though each step pays", func(t *testing.T) {
		s := newSim(linear, "a100", "a100", "a100")
		s.settle(Settings{})
		d := Decide(s.input(pinned(2), Settings{}))
		if d.Action != Shrink || d.Code != CodePinned || d.Count != 1 {
			t.Fatalf("got %s %d (%s), want shrink by 1", d.Action, d.Count, d.Reason)
		}
	})
	t.Run("shrinks to the pin by a worker, never by the main job though it is the slowest", func(t *testing.T) {
		mainSlowest := func(_ map[GPUType]int, w WorkerRate) float64 {
			if w.Worker == "1000" {
				return 60
			}
			return 100
		}
		s := newSim(mainSlowest, "a100", "a100", "a100")
		s.settle(Settings{})
		in := s.input(pinned(1), Settings{})
		in.Main = "1000"
		d := Decide(in)
		if d.Action != Shrink || d.Count != 2 || slices.Contains(d.Workers, "1000") || len(d.Workers) != 2 {
			t.Fatalf("got %s %d %v (%s), want a shrink by the two workers beside the main job 1000", d.Action, d.Count, d.Workers, d.Reason)
		}
	})
	t.Run("holds at the pin though a step would pay", func(t *testing.T) {
		s := newSim(linear, "a100", "a100")
		s.settle(Settings{})
		d := Decide(s.input(pinned(2), Settings{}))
		if d.Action != Hold || d.Code != CodePinned {
			t.Fatalf("got %s (%s), want hold", d.Action, d.Reason)
		}
	})
	t.Run("grows no more than capacity allows", func(t *testing.T) {
		s := newSim(linear, "a100")
		s.report(1, nil)
		in := s.input(pinned(4), Settings{})
		in.Capacity = map[GPUType]int{"a100": 1}
		if d := Decide(in); d.Action != Grow || d.Count != 1 {
			t.Fatalf("got %s %d (%s), want grow by the 1 worker capacity allows", d.Action, d.Count, d.Reason)
		}
		in.Capacity = map[GPUType]int{"a100": 0}
		if d := Decide(in); d.Action != Hold || d.Code != CodeBelowTarget {
			t.Fatalf("got %s %d (%s), want hold for capacity", d.Action, d.Count, d.Reason)
		}
	})
	t.Run("a pin outside the bounds holds", func(t *testing.T) {
		s := newSim(linear, "a100")
		s.report(1, nil)
		if d := Decide(s.input(pinned(9), Settings{})); d.Action != Hold || d.Code != CodeInvalidDeclaration {
			t.Fatalf("got %s (%s), want hold", d.Action, d.Reason)
		}
	})
}

// A max lowered by the job's batch limit says so when the job reaches it. The words are what
// the test is about: they must quote the batch limit (its figures), which no code carries.
func TestMaxReasonIsShown(t *testing.T) {
	s := newSim(curve(map[int]float64{1: 100, 64: 6400}), "a100", "a100")
	s.settle(Settings{})
	job := elasticJob(1, 2, 4)
	job.Bounds.MaxReason = " (max global batch 256 at 32 per GPU)"
	if d := Decide(s.input(job, Settings{})); d.Action != Hold || d.Code != CodeAtMax || !strings.Contains(d.Reason, "at max 2 workers (max global batch 256") {
		t.Fatalf("got %s (%s)", d.Action, d.Reason)
	}
}
