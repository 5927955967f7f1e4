package policy

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// epoch is a run of consecutive measurements with the same allocation and the
// same workers: one size of the job, measured once. A straggler replaced at
// the job's max leaves the allocation as it was, but its successor's world
// (restarted, warming up) is measured afresh.
type epoch struct {
	key         string // configKey of alloc
	alloc       map[GPUType]int
	first, last int       // indices into the history
	start, end  time.Time // first and last report at this size
}

// window is the mean of a run of settled reports.
type window struct {
	total      float64
	perType    map[GPUType]float64 // samples/s of all workers of a type
	perWorker  map[string]float64
	workerType map[string]GPUType
	// compute is each worker's mean compute seconds per step, over the
	// reports that carried one; absent when none did.
	compute map[string]float64
}

// configKey spells an allocation in a stable order, e.g. "a100=2,v100=1".
func configKey(alloc map[GPUType]int) string {
	types := make([]string, 0, len(alloc))
	for t, n := range alloc {
		if n > 0 {
			types = append(types, string(t))
		}
	}
	slices.Sort(types)
	var b strings.Builder
	for i, t := range types {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%d", t, alloc[GPUType(t)])
	}
	return b.String()
}

func totalWorkers(alloc map[GPUType]int) int {
	n := 0
	for _, c := range alloc {
		n += c
	}
	return n
}

// incomplete says what is wrong with a report, with its code (CodeIncompleteReport for a
// worker missing, CodeInvalidReport for one reported twice or an unusable rate), or "" when
// every allocated worker reported a usable rate.
func incomplete(m Measurement) (Code, string) {
	reported := map[GPUType]int{}
	seen := map[string]bool{}
	for _, w := range m.Workers {
		if seen[w.Worker] {
			return CodeInvalidReport, fmt.Sprintf("worker %s reported twice", w.Worker)
		}
		seen[w.Worker] = true
		if math.IsNaN(w.SamplesPerSec) || math.IsInf(w.SamplesPerSec, 0) || w.SamplesPerSec < 0 {
			return CodeInvalidReport, fmt.Sprintf("worker %s reported %v samples/s", w.Worker, w.SamplesPerSec)
		}
		if c := w.ComputeSecondsPerStep; math.IsNaN(c) || math.IsInf(c, 0) || c < 0 {
			return CodeInvalidReport, fmt.Sprintf("worker %s reported %v s of compute per step", w.Worker, c)
		}
		reported[w.Type]++
	}
	for _, t := range sortedTypes(m.Allocated, reported) {
		if m.Allocated[t] != reported[t] {
			return CodeIncompleteReport, fmt.Sprintf("%d of %d %s workers reported", reported[t], m.Allocated[t], t)
		}
	}
	return "", ""
}

// complete: every allocated worker reported a usable rate.
func complete(m Measurement) bool {
	code, _ := incomplete(m)
	return code == ""
}

// splitEpochs cuts the history into epochs. It runs over the whole history
// on every decision, so it compares allocations and workers without
// allocating.
func splitEpochs(history []Measurement) []epoch {
	var epochs []epoch
	var members []WorkerRate // the workers of the epoch's latest report from all of them
	for i, m := range history {
		// A report missing a worker is incomplete, not a new world.
		full := len(m.Workers) == totalWorkers(m.Allocated)
		if n := len(epochs); n > 0 && sameAlloc(epochs[n-1].alloc, m.Allocated) && (!full || members == nil || sameWorkers(members, m.Workers)) {
			epochs[n-1].last, epochs[n-1].end = i, m.Time
			if full {
				members = m.Workers
			}
			continue
		}
		epochs = append(epochs, epoch{key: configKey(m.Allocated), alloc: m.Allocated, first: i, last: i, start: m.Time, end: m.Time})
		members = nil
		if full {
			members = m.Workers
		}
	}
	return epochs
}

// sameWorkers: both measurements are of the same workers. Every report of a job's history is
// compared with the one before it each cycle: a set, not a scan per worker, keeps that linear
// in the workers.
func sameWorkers(a, b []WorkerRate) bool {
	if len(a) != len(b) {
		return false
	}
	in := make(map[string]bool, len(b))
	for _, v := range b {
		in[v.Worker] = true
	}
	for _, w := range a {
		if !in[w.Worker] {
			return false
		}
	}
	return true
}

// sameAlloc compares allocations, a zero count being the same as none.
func sameAlloc(a, b map[GPUType]int) bool {
	for t, n := range a {
		if b[t] != n {
			return false
		}
	}
	for t, n := range b {
		if a[t] != n {
			return false
		}
	}
	return true
}

// settled returns up to n settled reports of the epoch (complete, and at
// least settle after the size changed), the latest ones (fromEnd) or the
// earliest, in time order. Only the reports a decision uses are checked.
func (e epoch) settled(history []Measurement, settle time.Duration, n int, fromEnd bool) []int {
	var out []int
	ok := func(i int) bool {
		return history[i].Time.Sub(e.start) >= settle && complete(history[i])
	}
	if fromEnd {
		for i := e.last; i >= e.first && len(out) < n; i-- {
			if ok(i) {
				out = append(out, i)
			}
		}
		slices.Reverse(out)
		return out
	}
	for i := e.first; i <= e.last && len(out) < n; i++ {
		if ok(i) {
			out = append(out, i)
		}
	}
	return out
}

// mean averages the given reports.
func mean(history []Measurement, indices []int) window {
	w := window{perType: map[GPUType]float64{}, perWorker: map[string]float64{}, workerType: map[string]GPUType{},
		compute: map[string]float64{}}
	seen := map[string]int{}
	computed := map[string]int{}
	for _, i := range indices {
		for _, r := range history[i].Workers {
			if r.ComputeSecondsPerStep > 0 {
				w.compute[r.Worker] += r.ComputeSecondsPerStep
				computed[r.Worker]++
			}
			w.total += r.SamplesPerSec
			w.perType[r.Type] += r.SamplesPerSec
			w.perWorker[r.Worker] += r.SamplesPerSec
			w.workerType[r.Worker] = r.Type
			seen[r.Worker]++
		}
	}
	n := float64(len(indices))
	w.total /= n
	for t := range w.perType {
		w.perType[t] /= n
	}
	// A worker that joined mid-way is averaged over its own reports.
	for id, c := range seen {
		w.perWorker[id] /= float64(c)
	}
	for id, c := range computed {
		w.compute[id] /= float64(c)
	}
	return w
}

// bestOf is the report among indices with the most samples/s, as a window.
func bestOf(history []Measurement, indices []int) window {
	best, bestTotal := indices[0], -1.0
	for _, i := range indices {
		total := 0.0
		for _, r := range history[i].Workers {
			total += r.SamplesPerSec
		}
		if total > bestTotal {
			best, bestTotal = i, total
		}
	}
	return mean(history, []int{best})
}

// peakPerWorker is each worker's highest samples/s over the reports at indices. A pause of
// the whole job (an evaluation pass) reaches each worker's reports at a slightly different
// moment, so one worker's window may hold a paused report its peers' windows do not: its best
// report, not its mean, says whether it is slow.
func peakPerWorker(history []Measurement, indices []int) map[string]float64 {
	peak := map[string]float64{}
	for _, i := range indices {
		for _, r := range history[i].Workers {
			peak[r.Worker] = max(peak[r.Worker], r.SamplesPerSec)
		}
	}
	return peak
}

// measured is a size with a stable measurement: its most recent epoch with
// at least MinSamples settled reports, averaged over the last MinSamples.
type measured struct {
	alloc map[GPUType]int
	end   time.Time // when the job left (or last reported at) this size
	rate  window
}

// latestMeasured maps each size to its latest stable measurement.
func latestMeasured(history []Measurement, epochs []epoch, settle time.Duration, minSamples int) map[string]measured {
	out := map[string]measured{}
	for i := len(epochs) - 1; i >= 0; i-- {
		e := epochs[i]
		if _, done := out[e.key]; done {
			continue
		}
		if window := e.settled(history, settle, minSamples, true); len(window) == minSamples {
			out[e.key] = measured{alloc: e.alloc, end: e.end, rate: mean(history, window)}
		}
	}
	return out
}

// neighbour finds the stable size that differs from alloc only in the
// count of type t, nearest below (below=true) or above.
func neighbour(sizes map[string]measured, alloc map[GPUType]int, t GPUType, below bool) (measured, bool) {
	var best measured
	found := false
	for _, m := range sizes {
		if !sameExcept(m.alloc, alloc, t) {
			continue
		}
		n, cur := m.alloc[t], alloc[t]
		if below && n < cur && (!found || n > best.alloc[t]) || !below && n > cur && (!found || n < best.alloc[t]) {
			best, found = m, true
		}
	}
	return best, found
}

func sameExcept(a, b map[GPUType]int, except GPUType) bool {
	for _, t := range sortedTypes(a, b) {
		if t != except && a[t] != b[t] {
			return false
		}
	}
	return true
}

// sortedTypes lists the types with a non-zero count in any of the maps.
func sortedTypes(maps ...map[GPUType]int) []GPUType {
	var types []GPUType
	for _, m := range maps {
		for t, n := range m {
			if n != 0 && !slices.Contains(types, t) {
				types = append(types, t)
			}
		}
	}
	slices.Sort(types)
	return types
}
