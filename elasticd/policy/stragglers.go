package policy

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/slurmbridge/slurmbridge/bridge/stats"
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
	likeClock := medianClockByModel(byWorker)

	var flags []Flag
	for _, w := range workers {
		sigs := slices.SortedFunc(slices.Values(byWorker[w]), func(a, b GPUSignal) int { return cmp.Compare(a.GPU, b.GPU) })
		var problems []string
		for _, sig := range sigs {
			if sig.ThermalOrPowerThrottled && sig.MaxSMClockMHz > 0 &&
				float64(sig.SMClockMHz) < s.ThrottleClockRatio*float64(sig.MaxSMClockMHz) &&
				!(sig.PowerCapOnly && float64(sig.SMClockMHz) >= s.ThrottleClockRatio*likeClock[sig.MaxSMClockMHz]) {
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
			if len(peers) > 0 && stats.Median(peers) >= s.PeerUtilizationPct {
				problems = append(problems, fmt.Sprintf("GPU utilisation %.0f%% while peers' median is %.0f%%", own, stats.Median(peers)))
			}
		}
		if len(problems) > 0 {
			flags = append(flags, Flag{Worker: w, Reason: "NVML: " + strings.Join(problems, "; ")})
		}
	}
	return flags
}

// medianClockByModel is the median SM clock of the fresh signals (byWorker) of each GPU
// model, a model known by its max SM clock: GPUs alike enough to compare clocks. A GPU that
// its power limit alone holds back is flagged only below ThrottleClockRatio of this (a node
// with a lower power limit, a GPU that draws more for the same work), never for the cap:
// a healthy datacenter GPU under a dense job runs at its power limit.
func medianClockByModel(byWorker map[string][]GPUSignal) map[uint32]float64 {
	clocks := map[uint32][]float64{}
	for _, sigs := range byWorker {
		for _, sig := range sigs {
			if sig.SMClockMHz > 0 && sig.MaxSMClockMHz > 0 {
				clocks[sig.MaxSMClockMHz] = append(clocks[sig.MaxSMClockMHz], float64(sig.SMClockMHz))
			}
		}
	}
	out := make(map[uint32]float64, len(clocks))
	for max, mhz := range clocks {
		out[max] = stats.Median(mhz)
	}
	return out
}

// straggler is a worker found slow by one or more signals: ratio is its
// speed relative to its type's median (the lowest any signal gives), text
// says what each signal saw.
type straggler struct {
	worker string
	t      GPUType
	ratio  float64
	texts  []string
	kinds  []string // "throughput", "compute", "NVML"
}

// findStragglers compares the workers of each type (types differ in speed,
// so a V100 is no straggler beside A100s) on each signal they all carry:
//   - best samples/s of the window below StragglerRatio × the type's median
//     (a worker slow in every report, not one whose window caught a pause of
//     the whole job a report before its peers'; workers that
//     progress independently; not where every worker of the type reports
//     compute times, since then they train synchronously and their samples/s
//     differ only by when each report's window fell);
//   - compute seconds per step above the type's median / StragglerRatio:
//     in synchronous training every worker waits for the slowest at the
//     gradient exchange and reports the same samples/s, but the slow one
//     spends longer computing before it;
//   - NVML: a GPU the hardware holds back for a thermal or power reason
//     below ThrottleClockRatio of its max SM clock, whose worker's mean SM
//     clock is below StragglerRatio × the type's median.
//
// Smoothing comes from the window: each compute time is a mean over
// MinSamples reports, each rate the best of them. Stragglers come out slowest
// first.
func (p *planner) findStragglers() []straggler {
	found := stragglerSet{}
	clocks := p.clocks()
	for _, t := range sortedTypes(p.alloc) {
		ids := p.workersOfType(t)
		if len(ids) < 2 {
			continue // nobody to compare with
		}
		var rates, compute, mhz []float64
		for _, id := range ids {
			rates = append(rates, p.peak[id])
			if c, ok := p.cur.compute[id]; ok {
				compute = append(compute, c)
			}
			if c, ok := clocks[id]; ok {
				mhz = append(mhz, c.mhz)
			}
		}
		// Workers that report compute times train synchronously: their samples/s are the
		// job's, alike but for when each report's window fell, so only compute compares them.
		if len(compute) < len(ids) {
			p.slowByThroughput(found, t, ids, rates)
		} else {
			p.slowByCompute(found, t, ids, compute)
		}
		if len(mhz) >= 2 {
			p.slowByClock(found, t, ids, clocks, stats.Median(mhz))
		}
	}
	return found.slowestFirst()
}

// workersOfType are the measured workers of type t, in id order.
func (p *planner) workersOfType(t GPUType) []string {
	var ids []string
	for id, wt := range p.cur.workerType {
		if wt == t {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, compareIDs)
	return ids
}

// slowByThroughput finds the workers of type t (ids, with their samples/s) below
// StragglerRatio × the type's median.
func (p *planner) slowByThroughput(found stragglerSet, t GPUType, ids []string, rates []float64) {
	m := stats.Median(rates)
	if !(m > 0) {
		return
	}
	for i, id := range ids {
		if rates[i] < p.s.StragglerRatio*m {
			found.add(id, t, rates[i]/m, "throughput", fmt.Sprintf("%.0f samples/s, below %.2f × the median %.0f of %s workers",
				rates[i], p.s.StragglerRatio, m, t))
		}
	}
}

// slowByCompute finds the workers of type t (ids, with their compute seconds per step)
// above the type's median / StragglerRatio.
func (p *planner) slowByCompute(found stragglerSet, t GPUType, ids []string, compute []float64) {
	m := stats.Median(compute)
	for i, id := range ids {
		if c := compute[i]; c*p.s.StragglerRatio > m {
			found.add(id, t, m/c, "compute", fmt.Sprintf("%s of compute per step, %.1f × the median %s of %s workers (straggler above %.2f ×)",
				seconds(c), c/m, seconds(m), t, 1/p.s.StragglerRatio))
		}
	}
}

// slowByClock finds the workers of type t whose GPUs the hardware holds back with a mean SM
// clock below StragglerRatio × the type's median m.
func (p *planner) slowByClock(found stragglerSet, t GPUType, ids []string, clocks map[string]workerClock, m float64) {
	for _, id := range ids {
		c, ok := clocks[id]
		if ok && c.held != "" && c.mhz < p.s.StragglerRatio*m {
			found.add(id, t, c.mhz/m, "NVML", fmt.Sprintf("SM clock %.0f MHz, below %.2f × the median %.0f of %s workers: %s",
				c.mhz, p.s.StragglerRatio, m, t, c.held))
		}
	}
}

// stragglerSet is the stragglers found so far, by worker.
type stragglerSet map[string]*straggler

// add counts one signal that finds worker id slow, at ratio of its type's median.
func (f stragglerSet) add(id string, t GPUType, ratio float64, kind, text string) {
	st := f[id]
	if st == nil {
		st = &straggler{worker: id, t: t, ratio: ratio}
		f[id] = st
	}
	st.ratio = min(st.ratio, ratio)
	st.kinds = append(st.kinds, kind)
	st.texts = append(st.texts, text)
}

// slowestFirst lists the stragglers by ratio, then id.
func (f stragglerSet) slowestFirst() []straggler {
	out := make([]straggler, 0, len(f))
	for _, st := range f {
		out = append(out, *st)
	}
	slices.SortFunc(out, func(a, b straggler) int {
		if c := cmp.Compare(a.ratio, b.ratio); c != 0 {
			return c
		}
		return compareIDs(a.worker, b.worker)
	})
	return out
}

// seconds spells a per-step time in milliseconds.
func seconds(s float64) string { return fmt.Sprintf("%.0f ms", 1000*s) }

// workerClock is a worker's mean SM clock over its fresh GPU signals, and
// what holds any of its GPUs back ("" when nothing does).
type workerClock struct {
	mhz  float64
	held string
}

func (p *planner) clocks() map[string]workerClock {
	sum, n := map[string]float64{}, map[string]int{}
	held := map[string][]string{}
	for _, sig := range p.in.Signals {
		if p.in.Now.Sub(sig.Time) > p.s.StaleAfter || sig.SMClockMHz == 0 {
			continue
		}
		sum[sig.Worker] += float64(sig.SMClockMHz)
		n[sig.Worker]++
		if sig.ThermalOrPowerThrottled && sig.MaxSMClockMHz > 0 &&
			float64(sig.SMClockMHz) < p.s.ThrottleClockRatio*float64(sig.MaxSMClockMHz) {
			held[sig.Worker] = append(held[sig.Worker], fmt.Sprintf("GPU %d throttled to %d of %d MHz (%s)",
				sig.GPU, sig.SMClockMHz, sig.MaxSMClockMHz, strings.Join(sig.ThrottleReasons, ",")))
		}
	}
	out := map[string]workerClock{}
	for w, total := range sum {
		slices.Sort(held[w])
		out[w] = workerClock{mhz: total / float64(n[w]), held: strings.Join(held[w], ", ")}
	}
	return out
}

// replaceStraggler proposes replacing the slowest straggler. The main job
// is never replaced: when it is the only straggler the job holds, and says
// so, rather than asking every cycle for what elasticd will not do.
func (p *planner) replaceStraggler(flags []Flag) (Decision, bool) {
	stragglers := p.findStragglers()
	if len(stragglers) == 0 {
		return Decision{}, false
	}
	for _, st := range stragglers {
		for i, kind := range st.kinds {
			if kind != "NVML" { // signalFlags already flags a throttled GPU
				flags = append(flags, Flag{Worker: st.worker, Reason: kind + ": " + st.texts[i]})
			}
		}
	}
	slices.SortStableFunc(flags, func(a, b Flag) int { return compareIDs(a.Worker, b.Worker) })

	i := slices.IndexFunc(stragglers, func(st straggler) bool { return st.worker != p.in.Main })
	if i < 0 {
		main := stragglers[0]
		return Decision{Action: Hold, Code: CodeMainStraggler, Flags: flags, MainStraggler: true,
			Reason: fmt.Sprintf("the main job %s is the straggler (%s); elasticd never replaces the main job, which hosts the rendezvous: holding at %s until it recovers",
				main.worker, strings.Join(main.texts, "; "), configKey(p.alloc))}, true
	}
	worst := stragglers[i]
	reason := fmt.Sprintf("worker %s does %s", worst.worker, strings.Join(worst.texts, "; "))
	if !slices.Contains(worst.kinds, "NVML") {
		for _, f := range flags {
			if f.Worker == worst.worker && strings.HasPrefix(f.Reason, "NVML: ") {
				reason += "; " + f.Reason
			}
		}
	}
	if p.in.Capacity != nil && p.in.Capacity[worst.t] < 1 {
		return Decision{Action: Hold, Code: CodeStraggler, Flags: flags,
			Reason: reason + fmt.Sprintf("; no free %s worker to replace it with%s", worst.t, p.capacityLimit(worst.t))}, true
	}
	if p.total >= p.bounds.MaxWorkers {
		// A rendezvous at its max admits no one more: the successor would wait beside the
		// straggler for ever.
		return Decision{Action: Replace, Code: CodeStragglerLeaves, Type: worst.t, Count: 1, Workers: []string{worst.worker}, Flags: flags, LeaveFirst: true,
			Reason: reason + fmt.Sprintf("; at max %d workers no successor can join beside it: it leaves first, then a new %s worker joins",
				p.bounds.MaxWorkers, worst.t)}, true
	}
	return Decision{Action: Replace, Code: CodeStraggler, Type: worst.t, Count: 1, Workers: []string{worst.worker}, Flags: flags,
		Reason: reason + fmt.Sprintf("; a new %s worker joins before it leaves", worst.t)}, true
}
