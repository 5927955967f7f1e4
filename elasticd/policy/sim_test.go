package policy

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

const reportEvery = 10 * time.Second

// sim is a training job that reports every 10 s. rate gives each worker's
// samples/s from the job's current allocation.
type sim struct {
	now     time.Time
	history []Measurement
	workers []WorkerRate // ids and types; SamplesPerSec is filled per report
	nextID  int
	rate    func(alloc map[GPUType]int, w WorkerRate) float64
	// compute, when set, gives each worker's compute seconds per step.
	compute func(w WorkerRate) float64
}

func newSim(rate func(alloc map[GPUType]int, w WorkerRate) float64, types ...GPUType) *sim {
	s := &sim{now: t0, nextID: 1000, rate: rate}
	for _, t := range types {
		s.add(t, 1)
	}
	return s
}

// curve makes a homogeneous job whose total samples/s at k workers is
// total[k], split evenly; sizes missing from the map interpolate linearly.
func curve(total map[int]float64) func(map[GPUType]int, WorkerRate) float64 {
	sizes := slices.Sorted(maps.Keys(total))
	return func(alloc map[GPUType]int, _ WorkerRate) float64 {
		k := totalWorkers(alloc)
		if r, ok := total[k]; ok {
			return r / float64(k)
		}
		i, _ := slices.BinarySearch(sizes, k)
		if i == 0 || i == len(sizes) {
			panic(fmt.Sprintf("curve has no value near %d workers", k))
		}
		lo, hi := sizes[i-1], sizes[i]
		r := total[lo] + (total[hi]-total[lo])*float64(k-lo)/float64(hi-lo)
		return r / float64(k)
	}
}

func (s *sim) alloc() map[GPUType]int {
	a := map[GPUType]int{}
	for _, w := range s.workers {
		a[w.Type]++
	}
	return a
}

func (s *sim) add(t GPUType, n int) []string {
	var ids []string
	for range n {
		id := strconv.Itoa(s.nextID)
		s.nextID++
		s.workers = append(s.workers, WorkerRate{Worker: id, Type: t})
		ids = append(ids, id)
	}
	return ids
}

func (s *sim) remove(ids ...string) {
	s.workers = slices.DeleteFunc(s.workers, func(w WorkerRate) bool { return slices.Contains(ids, w.Worker) })
}

// report appends n reports; scale, when set, multiplies report i's rates.
func (s *sim) report(n int, scale func(i int) float64) {
	alloc := s.alloc()
	for i := range n {
		m := Measurement{Time: s.now, Allocated: alloc}
		for _, w := range s.workers {
			w.SamplesPerSec = s.rate(alloc, w)
			if s.compute != nil {
				w.ComputeSecondsPerStep = s.compute(w)
			}
			if scale != nil {
				w.SamplesPerSec *= scale(i)
			}
			m.Workers = append(m.Workers, w)
		}
		s.history = append(s.history, m)
		s.now = s.now.Add(reportEvery)
	}
}

// settle reports enough for a stable measurement with the given settings.
func (s *sim) settle(st Settings) {
	st = st.withDefaults()
	s.report(int(st.SettleTime/reportEvery)+st.MinSamples, nil)
}

func (s *sim) input(job Job, st Settings) Input {
	return Input{Now: s.now.Add(-reportEvery + time.Second), Job: job, History: s.history, Settings: st}
}

// apply carries a decision out the way elasticd would.
func (s *sim) apply(t *testing.T, d Decision) {
	t.Helper()
	switch d.Action {
	case Grow:
		s.add(d.Type, d.Count)
	case Shrink:
		if len(d.Workers) != d.Count {
			t.Fatalf("shrink by %d names %v", d.Count, d.Workers)
		}
		s.remove(d.Workers...)
	case Replace:
		s.add(d.Type, 1)
		s.remove(d.Workers...)
	}
}

// drive lets the policy run the job until it holds, returning the total
// worker count after each decision and every decision, the hold last.
func (s *sim) drive(t *testing.T, job Job, st Settings, maxSteps int) ([]int, []Decision) {
	t.Helper()
	var sizes []int
	var decisions []Decision
	for range maxSteps {
		s.settle(st)
		d := Decide(s.input(job, st))
		t.Logf("%-7s %s", d.Action, d.Reason)
		decisions = append(decisions, d)
		if d.Action == Hold {
			return sizes, decisions
		}
		s.apply(t, d)
		sizes = append(sizes, len(s.workers))
	}
	t.Fatalf("no hold after %d steps: %v", maxSteps, sizes)
	return nil, nil
}

func elasticJob(minW, maxW, gpusPerWorker int, types ...TypeOption) Job {
	return Job{ID: "4242", Elastic: true, Bounds: Bounds{MinWorkers: minW, MaxWorkers: maxW, GPUsPerWorker: gpusPerWorker, Types: types}}
}

// wantAction stops the test unless d is action, of the kind code.
func wantAction(t *testing.T, d Decision, action Action, code Code) {
	t.Helper()
	if d.Action != action || d.Code != code {
		t.Fatalf("got %s %s (%s), want %s %s", d.Action, d.Code, d.Reason, action, code)
	}
}
