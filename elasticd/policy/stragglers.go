package policy

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// signalFlags flags workers from fresh NVML signals: a GPU held below
// ThrottleClockRatio of its max SM clock for a thermal or power reason, or a
// worker whose GPUs idle while its peers are busy (input-bound or stalled).
// Flags explain; they never decide on their own.
func signalFlags(in Input, s Settings) []Flag {
	byWorker := map[string][]GPUSignal{}
	for _, sig := range in.Signals {
		if in.Now.Sub(sig.Time) <= s.StaleAfter {
			byWorker[sig.Worker] = append(byWorker[sig.Worker], sig)
		}
	}
	workers := make([]string, 0, len(byWorker))
	utilization := map[string]float64{}
	for w, sigs := range byWorker {
		workers = append(workers, w)
		sum, n := 0.0, 0
		for _, sig := range sigs {
			if sig.HasUtilization {
				sum += sig.UtilizationPct
				n++
			}
		}
		if n > 0 {
			utilization[w] = sum / float64(n)
		}
	}
	slices.Sort(workers)

	var flags []Flag
	for _, w := range workers {
		sigs := slices.SortedFunc(slices.Values(byWorker[w]), func(a, b GPUSignal) int { return cmp.Compare(a.GPU, b.GPU) })
		var problems []string
		for _, sig := range sigs {
			if sig.ThermalOrPowerThrottled && sig.MaxSMClockMHz > 0 &&
				float64(sig.SMClockMHz) < s.ThrottleClockRatio*float64(sig.MaxSMClockMHz) {
				problems = append(problems, fmt.Sprintf("GPU %d throttled to %d of %d MHz (%s)",
					sig.GPU, sig.SMClockMHz, sig.MaxSMClockMHz, strings.Join(sig.ThrottleReasons, ",")))
			}
		}
		if own, ok := utilization[w]; ok && own < s.LowUtilizationPct {
			var peers []float64
			for _, other := range workers {
				if u, ok := utilization[other]; ok && other != w {
					peers = append(peers, u)
				}
			}
			if len(peers) > 0 && median(peers) >= s.PeerUtilizationPct {
				problems = append(problems, fmt.Sprintf("GPU utilisation %.0f%% while peers' median is %.0f%%", own, median(peers)))
			}
		}
		if len(problems) > 0 {
			flags = append(flags, Flag{Worker: w, Reason: "NVML: " + strings.Join(problems, "; ")})
		}
	}
	return flags
}

// replaceStraggler proposes replacing the worker furthest below
// StragglerRatio × the median samples/s of the workers of its type (types
// differ in speed, so a V100 is no straggler beside A100s). Smoothing comes
// from the window: each rate is a mean over MinSamples reports.
func (p *planner) replaceStraggler(flags []Flag) (Decision, bool) {
	type straggler struct {
		worker string
		t      GPUType
		ratio  float64
		text   string
	}
	var stragglers []straggler
	for _, t := range sortedTypes(p.alloc) {
		var ids []string
		var rates []float64
		for id, wt := range p.cur.workerType {
			if wt == t {
				ids = append(ids, id)
				rates = append(rates, p.cur.perWorker[id])
			}
		}
		if len(ids) < 2 {
			continue // nobody to compare with
		}
		m := median(rates)
		for i, id := range ids {
			if rates[i] < p.s.StragglerRatio*m {
				stragglers = append(stragglers, straggler{worker: id, t: t, ratio: rates[i] / m,
					text: fmt.Sprintf("%.0f samples/s, below %.2f × the median %.0f of %s workers", rates[i], p.s.StragglerRatio, m, t)})
			}
		}
	}
	if len(stragglers) == 0 {
		return Decision{}, false
	}
	slices.SortFunc(stragglers, func(a, b straggler) int {
		if c := cmp.Compare(a.ratio, b.ratio); c != 0 {
			return c
		}
		return cmp.Compare(a.worker, b.worker)
	})
	for _, st := range stragglers {
		flags = append(flags, Flag{Worker: st.worker, Reason: "throughput: " + st.text})
	}
	slices.SortStableFunc(flags, func(a, b Flag) int { return cmp.Compare(a.Worker, b.Worker) })

	worst := stragglers[0]
	reason := fmt.Sprintf("worker %s does %s", worst.worker, worst.text)
	for _, f := range flags {
		if f.Worker == worst.worker && strings.HasPrefix(f.Reason, "NVML: ") {
			reason += "; " + f.Reason
		}
	}
	if p.in.Capacity != nil && p.in.Capacity[worst.t] < 1 {
		return Decision{Action: Hold, Flags: flags,
			Reason: reason + fmt.Sprintf("; no free %s worker to replace it with", worst.t)}, true
	}
	return Decision{Action: Replace, Type: worst.t, Count: 1, Workers: []string{worst.worker}, Flags: flags,
		Reason: reason + fmt.Sprintf("; a new %s worker joins before it leaves", worst.t)}, true
}
