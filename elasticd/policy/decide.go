package policy

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Decide returns what the job should do now. The order of the checks is the
// order of trust: a job that is not elastic, bad declarations and missing
// or stale reports all hold; hard bounds come next; then stragglers (a slow
// worker skews every efficiency figure); then shrink, then grow.
func Decide(in Input) Decision {
	s := in.Settings.withDefaults()
	d := decide(in, s)
	if d.Action != Replace && d.Flags == nil {
		d.Flags = signalFlags(in, s) // a replacement brings its own, with throughput flags
	}
	return d
}

func decide(in Input, s Settings) Decision {
	job := in.Job
	if !job.Elastic {
		return hold(CodeNotElastic, "job %s is not elastic; elasticd leaves it alone", job.ID)
	}
	if err := s.validate(); err != nil {
		return hold(CodeInvalidSettings, "invalid settings: %v", err)
	}
	if err := job.Bounds.validate(s); err != nil {
		return hold(CodeInvalidDeclaration, "invalid declaration: %v", err)
	}
	if len(in.History) == 0 {
		return hold(CodeNoReports, "no throughput reported yet")
	}
	latest := in.History[len(in.History)-1]
	if age := in.Now.Sub(latest.Time); age > s.StaleAfter {
		return hold(CodeStaleReport, "last throughput report is %s old (stale after %s); the job's probe may be down", age.Round(time.Second), s.StaleAfter)
	}
	if code, problem := incomplete(latest); code != "" {
		return hold(code, "latest report is incomplete: %s", problem)
	}

	p := newPlanner(in, s, latest)
	if p.total < p.bounds.Target() { // the rooms are sorted and priced only for a job below it
		if d, below := GrowToTarget(p.bounds, "", p.total, p.targetRooms()); below {
			return d
		}
	}
	if job.Bounds.Pin > 0 {
		return p.pinned(latest)
	}
	if p.total > p.bounds.MaxWorkers {
		return p.shrinkToMax(latest)
	}
	if p.settled < s.MinSamples {
		return hold(CodeMeasuring, "measuring %s: %d of %d settled reports", p.size, p.settled, s.MinSamples)
	}
	if !(p.cur.total > 0) {
		return hold(CodeNoProgress, "job reports no progress (0 samples/s) at %s", p.size)
	}

	if d, ok := p.replaceStraggler(signalFlags(in, s)); ok {
		return d
	}
	steps := p.judgeStepsIn()
	if steps.undo != nil {
		return *steps.undo
	}
	if steps.noise != "" {
		return hold(CodeWithinNoise, "%s", steps.noise)
	}
	return p.growOrHold(steps.paid)
}

// planner holds what the checks share for one decision.
type planner struct {
	in     Input
	s      Settings
	bounds Bounds
	alloc  map[GPUType]int
	total  int

	size    string              // the current size (configKey)
	settled int                 // its settled reports, up to MinSamples
	sizes   map[string]measured // each size's latest stable measurement
	// Measured at the current size once it has MinSamples settled reports; empty before.
	cur        window             // its last MinSamples settled reports
	best       window             // the settled report of that window with the most samples/s
	peak       map[string]float64 // each worker's best samples/s in that window
	first      window             // its first MinSamples settled reports
	changed    bool               // throughput at the current size moved beyond noise
	changeText string
}

// newPlanner is the planner of one decision on in's history, whose latest report is complete:
// every field is filled here, before any check runs. The current size's measurements are left
// empty while it has fewer than MinSamples settled reports; decide holds then before any check
// reads them.
func newPlanner(in Input, s Settings, latest Measurement) planner {
	p := planner{in: in, s: s, bounds: in.Job.Bounds, alloc: latest.Allocated, total: totalWorkers(latest.Allocated)}
	epochs := splitEpochs(in.History)
	current := epochs[len(epochs)-1]
	window := current.settled(in.History, s.SettleTime, s.MinSamples, true)
	p.size, p.settled = current.key, len(window)
	p.sizes = latestMeasured(in.History, epochs, s.SettleTime, s.MinSamples)
	if p.settled < s.MinSamples {
		return p
	}
	p.cur = mean(in.History, window)
	p.best = bestOf(in.History, window)
	p.peak = peakPerWorker(in.History, window)
	p.first = mean(in.History, current.settled(in.History, s.SettleTime, s.MinSamples, false))
	// A dip shorter than the window (an evaluation pass, a checkpoint write) leaves its best
	// report where it was: only a move of the best report counts as a change.
	p.changed = math.Abs(p.best.total-p.first.total) > s.NoiseTolerance*p.first.total
	p.changeText = fmt.Sprintf("throughput at this size went from %.0f to %.0f samples/s", p.first.total, p.cur.total)
	return p
}

func (p *planner) price(t GPUType) float64 {
	for _, o := range p.bounds.Types {
		if o.Type == t {
			return o.PricePerGPUHour
		}
	}
	return 0
}

// costPerHour of an allocation, in dollars.
func (p *planner) costPerHour(alloc map[GPUType]int) float64 {
	c := 0.0
	for t, n := range alloc {
		c += float64(n*p.bounds.GPUsPerWorker) * p.price(t)
	}
	return c
}

// step is the verdict on one step between two measured sizes that differ
// in the count of one type.
type step struct {
	efficiency float64
	pays       bool
	// costly: the step pays on efficiency, but its samples are worth no more than its GPUs
	// cost (Settings.ValuePerMillionSamples).
	costly bool
	text   string
}

// judge computes s for the step from lo to hi (hi has more workers of t).
func (p *planner) judge(lo, hi window, loAlloc, hiAlloc map[GPUType]int, t GPUType) step {
	added := float64(hiAlloc[t] - loAlloc[t])
	gain := hi.total - lo.total
	var eff float64
	if p.s.Objective == MaxThroughputPerDollar {
		// s on cost: marginal samples/s per dollar over the job's average.
		addedCost := p.costPerHour(hiAlloc) - p.costPerHour(loAlloc)
		eff = (gain / addedCost) / (lo.total / p.costPerHour(loAlloc))
	} else {
		baseline := hi.perType[t] / float64(hiAlloc[t]) // a type new to the job: its own workers
		if loAlloc[t] > 0 {
			baseline = lo.perType[t] / float64(loAlloc[t])
		}
		eff = (gain / added) / baseline
	}
	if math.IsNaN(eff) {
		eff = 0
	}
	st := step{efficiency: eff, pays: eff > p.s.Threshold}
	st.text = fmt.Sprintf("%s → %s: %.0f → %.0f samples/s, s = %.2f (threshold %.2f)",
		configKey(loAlloc), configKey(hiAlloc), lo.total, hi.total, eff, p.s.Threshold)
	if v := p.s.ValuePerMillionSamples; v > 0 && st.pays {
		worth := gain * 3600 / 1e6 * v
		cost := added * float64(p.bounds.GPUsPerWorker) * p.price(t)
		if worth <= cost {
			st.pays, st.costly = false, true
			st.text += fmt.Sprintf("; the gain is worth $%.2f/h, the added GPUs cost $%.2f/h", worth, cost)
		}
	}
	return st
}

// stepsIn is what judging the steps into the current size found.
type stepsIn struct {
	paid  []string  // the steps that still pay, in words (growth and holds name them)
	undo  *Decision // the shrink undoing the step that pays least, when one does not pay
	noise string    // a step that stopped paying within the noise margin: hold, in these words
}

// judgeStepsIn judges each step that led to the current size, one per GPU type, and plans the
// undoing of the worst one whose efficiency, with today's throughput, is at or below the
// threshold. This is both "a step failed: back to the last good size" and "shrink when s falls
// below threshold".
func (p *planner) judgeStepsIn() stepsIn {
	var out stepsIn
	type candidate struct {
		t     GPUType
		lower measured
		step  step
		count int
	}
	var worst *candidate
	for _, t := range sortedTypes(p.alloc) {
		lower, ok := neighbour(p.sizes, p.alloc, t, true)
		if !ok {
			continue
		}
		st := p.judge(lower.rate, p.cur, lower.alloc, p.alloc, t)
		count := min(p.alloc[t]-lower.alloc[t], p.total-p.bounds.MinWorkers)
		if !st.pays {
			// Hysteresis: a step undone must fail in every report of the window (its best
			// one too), so a dip shorter than the window never shrinks the job.
			if best := p.judge(lower.rate, p.best, lower.alloc, p.alloc, t); best.pays {
				st = best
				st.text += fmt.Sprintf(" at its best report of the window (%.0f samples/s on average: a dip shorter than the window)", p.cur.total)
			}
		}
		if st.pays {
			out.paid = append(out.paid, st.text)
		}
		if st.pays || count <= 0 {
			continue
		}
		if atFirst := p.judge(lower.rate, p.first, lower.alloc, p.alloc, t); atFirst.pays && !p.changed {
			// The step paid when this size was first measured and the throughput has moved
			// less than the noise margin since: noise, not a reason to shrink (nor to grow).
			if out.noise == "" {
				out.noise = fmt.Sprintf("step %s, but it paid when first measured (s = %.2f) and throughput moved less than %.0f%% since: within the noise margin, not shrinking",
					st.text, atFirst.efficiency, 100*p.s.NoiseTolerance)
			}
			continue
		}
		if worst == nil || st.efficiency < worst.step.efficiency {
			worst = &candidate{t: t, lower: lower, step: st, count: count}
		}
	}
	if worst == nil {
		return out
	}
	workers := p.pickToRemove(worst.t, worst.count, worst.lower.rate)
	reason := fmt.Sprintf("step %s does not pay; back to %d workers", worst.step.text, p.total-worst.count)
	if p.total-worst.count > totalWorkers(worst.lower.alloc) {
		reason += fmt.Sprintf(" (min is %d)", p.bounds.MinWorkers)
	}
	code := CodeStepDoesNotPay
	if worst.step.costly {
		code = CodeStepNotWorthCost
	}
	out.undo = &Decision{Action: Shrink, Code: code, Type: worst.t, Count: worst.count, Workers: workers, Reason: reason}
	return out
}

// pickToRemove chooses n workers of type t: first those absent from the
// smaller size (the ones the failed step added), then the slowest, then by
// id from the highest (newest worker jobs first).
func (p *planner) pickToRemove(t GPUType, n int, smaller window) []string {
	var ids []string
	for id, wt := range p.cur.workerType {
		// The main job hosts the rendezvous: never removed. n still fits, since every size the
		// job was measured at, the smaller one too, holds the main job.
		if wt == t && id != p.in.Main {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(a, b string) int {
		_, aOld := smaller.perWorker[a]
		_, bOld := smaller.perWorker[b]
		if aOld != bOld {
			if aOld {
				return 1
			}
			return -1
		}
		if c := cmp.Compare(p.cur.perWorker[a], p.cur.perWorker[b]); c != 0 {
			return c
		}
		return -compareIDs(a, b)
	})
	return ids[:n]
}

// compareIDs orders worker ids numerically where they are Slurm job ids of
// different lengths ("999" < "1000"), else as text.
func compareIDs(a, b string) int {
	if c := cmp.Compare(len(a), len(b)); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

// growthOption is a type the job could grow by now.
type growthOption struct {
	t        GPUType
	count    int
	known    bool    // rate comes from a measurement
	rate     float64 // expected samples/s of one new worker
	score    float64 // rate, per $/GPU-hour when every type has a price
	price    float64 // per GPU-hour
	estimate string
}

// growOrHold grows by the best type whose next step is allowed, or holds
// and says why nothing is; paid are the steps into the current size that pay.
func (p *planner) growOrHold(paid []string) Decision {
	if p.total >= p.bounds.MaxWorkers {
		d := hold(CodeAtMax, "at max %d workers%s (%s)", p.bounds.MaxWorkers, p.bounds.MaxReason, configKey(p.alloc))
		for _, st := range paid {
			d.Reason += "; step " + st + " pays"
		}
		return d
	}
	var options []growthOption
	var blocked []string
	var code Code // what blocks every type, when one reason does; else CodeNoGrowth
	for _, t := range p.allowedTypes() {
		o, c, why, ok := p.growthOption(t)
		if !ok {
			blocked = append(blocked, why)
			if len(blocked) > 1 && c != code {
				c = CodeNoGrowth
			}
			code = c
			continue
		}
		options = append(options, o)
	}
	if len(options) == 0 {
		return hold(code, "no growth: %s", strings.Join(blocked, "; "))
	}
	slices.SortFunc(options, betterGrowth)
	best := options[0]
	reason := fmt.Sprintf("grow %s by %d %s worker(s): %s", configKey(p.alloc), best.count, best.t, best.estimate)
	for _, st := range paid {
		reason += "; step " + st + " pays"
	}
	if p.changed {
		reason += "; " + p.changeText
	}
	return Decision{Action: Grow, Code: CodeGrowth, Type: best.t, Count: best.count, Reason: reason}
}

// growthOption is growth by workers of type t, or why there is none, with its code: no room,
// a larger size of t that did not pay left less than a cooldown ago, or samples worth less
// than the GPUs cost.
func (p *planner) growthOption(t GPUType) (o growthOption, code Code, why string, ok bool) {
	count, code, why := p.growthRoom(t)
	if count == 0 {
		return growthOption{}, code, why, false
	}
	if upper, ok := neighbour(p.sizes, p.alloc, t, false); ok && upper.alloc[t] <= p.alloc[t]+count {
		// Judged from the window's best report: a dip at this size must not make the
		// larger one look worth going back to.
		st := p.judge(p.best, upper.rate, p.alloc, upper.alloc, t)
		// Left that size less than a cooldown ago: go back only on
		// clear evidence, so noise cannot make the job flap.
		clearlyPays := st.pays && st.efficiency > p.s.Threshold*(1+p.s.NoiseTolerance)
		if reprobe := upper.end.Add(p.s.Cooldown); !clearlyPays && p.in.Now.Before(reprobe) && !p.changed {
			return growthOption{}, CodeCooldown, fmt.Sprintf("step %s did not pay; holding, re-probe at %s or when throughput moves more than %.0f%%",
				st.text, reprobe.UTC().Format(time.RFC3339), 100*p.s.NoiseTolerance), false
		}
	}
	o = p.expected(t, count)
	if v := p.s.ValuePerMillionSamples; v > 0 && o.known {
		worth := o.rate * 3600 / 1e6 * v
		cost := float64(p.bounds.GPUsPerWorker) * o.price
		if worth <= cost {
			return growthOption{}, CodeNotWorthCost, fmt.Sprintf("a %s worker (%s) would bring samples worth at most $%.2f/h for $%.2f/h",
				t, o.estimate, worth, cost), false
		}
	}
	return o, "", "", true
}

// betterGrowth orders growth options best first: an estimate from measurements before a
// guess, then the higher score, the lower price, the type's name.
func betterGrowth(a, b growthOption) int {
	if a.known != b.known {
		if a.known {
			return -1
		}
		return 1
	}
	if c := cmp.Compare(b.score, a.score); c != 0 {
		return c
	}
	if c := cmp.Compare(a.price, b.price); c != 0 {
		return c
	}
	return cmp.Compare(a.t, b.t)
}

// capacityLimit quotes the limit that caps t's capacity, as " (LIMIT)", or "" when free nodes
// alone do.
func (p *planner) capacityLimit(t GPUType) string {
	if why := p.in.CapacityLimit[t]; why != "" {
		return " (" + why + ")"
	}
	return ""
}

// allPriced: every declared type has a price, so types compare per dollar.
func (p *planner) allPriced() bool {
	for _, o := range p.bounds.Types {
		if o.PricePerGPUHour <= 0 {
			return false
		}
	}
	return len(p.bounds.Types) > 0
}

// allowedTypes are the declared types, or the job's own when none are
// declared.
func (p *planner) allowedTypes() []GPUType {
	if len(p.bounds.Types) == 0 {
		return sortedTypes(p.alloc)
	}
	types := make([]GPUType, 0, len(p.bounds.Types))
	for _, o := range p.bounds.Types {
		types = append(types, o.Type)
	}
	slices.Sort(types)
	return types
}

// growthRoom is how many workers of t the next step adds, within max, the
// type's own max and the free capacity; with 0 it says what stops it, with its code.
func (p *planner) growthRoom(t GPUType) (int, Code, string) {
	n := p.s.Step
	if p.s.Doubling {
		n = p.total
	}
	n = min(n, p.bounds.MaxWorkers-p.total)
	for _, o := range p.bounds.Types {
		if o.Type == t && o.MaxWorkers > 0 {
			n = min(n, o.MaxWorkers-p.alloc[t])
			if n <= 0 {
				return 0, CodeTypeAtMax, fmt.Sprintf("%s at its max of %d workers", t, o.MaxWorkers)
			}
		}
	}
	if p.in.Capacity != nil {
		n = min(n, p.in.Capacity[t])
		if n <= 0 {
			return 0, CodeNoCapacity, fmt.Sprintf("no free %s capacity%s", t, p.capacityLimit(t))
		}
	}
	if g, ok := p.in.GrowthCapacity[t]; ok {
		n = min(n, g)
		if n <= 0 {
			why := ""
			if w := p.in.GrowthLimit[t]; w != "" {
				why = " (" + w + ")"
			}
			return 0, CodeYieldsToWaiting, fmt.Sprintf("no free %s capacity%s", t, why)
		}
	}
	return n, "", ""
}

// expected estimates what a new worker of t brings: the per-worker rate of
// t now, else at the latest size that had t; optimistic (s = 1), which the
// next measurement corrects.
func (p *planner) expected(t GPUType, count int) growthOption {
	o := growthOption{t: t, count: count, price: p.price(t)}
	rate, from := 0.0, ""
	if n := p.alloc[t]; n > 0 {
		rate, from = p.cur.perType[t]/float64(n), "now"
	} else {
		var latest measured
		for _, m := range p.sizes {
			if m.alloc[t] > 0 && (from == "" || m.end.After(latest.end)) {
				latest, from = m, "at "+configKey(m.alloc)
			}
		}
		if from != "" {
			rate = latest.rate.perType[t] / float64(latest.alloc[t])
		}
	}
	if from == "" {
		o.estimate = fmt.Sprintf("no %s throughput measured yet, probing", t)
		return o
	}
	o.known, o.rate, o.score = true, rate, rate
	o.estimate = fmt.Sprintf("%s workers do %.0f samples/s each (%s)", t, rate, from)
	if p.allPriced() {
		o.score = rate / o.price
		o.estimate += fmt.Sprintf(", %.0f samples/s per $/GPU-hour", o.score)
	}
	return o
}

// targetRooms are the types a job below its target grows by (GrowToTarget), in the order it
// prefers them: the type it runs most of, then the cheapest; restoring the target is not the
// time to explore. Each has the capacity the caller found for it (Unlimited when none was).
func (p *planner) targetRooms() []TypeRoom {
	types := p.allowedTypes()
	slices.SortStableFunc(types, func(a, b GPUType) int {
		if c := cmp.Compare(p.alloc[b], p.alloc[a]); c != 0 {
			return c
		}
		return cmp.Compare(p.price(a), p.price(b))
	})
	rooms := make([]TypeRoom, 0, len(types))
	for _, t := range types {
		r := TypeRoom{Type: t, Workers: Unlimited}
		if p.in.Capacity != nil {
			r.Workers = p.in.Capacity[t]
			r.Why = fmt.Sprintf("room for %d %s worker(s) now%s", r.Workers, t, p.capacityLimit(t))
		}
		rooms = append(rooms, r)
	}
	return rooms
}

// shrinkToMax removes the slowest workers of the latest report.
func (p *planner) shrinkToMax(latest Measurement) Decision {
	n := p.total - p.bounds.MaxWorkers
	// The main job hosts the rendezvous and is never removed, however slow. n still fits: the
	// latest report is complete (Decide holds otherwise) and a max of 1 or more leaves room
	// for the main job.
	workers := slices.DeleteFunc(slices.Clone(latest.Workers), func(w WorkerRate) bool { return w.Worker == p.in.Main })
	slices.SortStableFunc(workers, func(a, b WorkerRate) int {
		if c := cmp.Compare(a.SamplesPerSec, b.SamplesPerSec); c != 0 {
			return c
		}
		return -compareIDs(a.Worker, b.Worker)
	})
	d := Decision{Action: Shrink, Code: CodeAboveMax, Count: n, Type: workers[0].Type,
		Reason: fmt.Sprintf("above max: %d of %d workers; removing the %d slowest", p.total, p.bounds.MaxWorkers, n)}
	for _, w := range workers[:n] {
		d.Workers = append(d.Workers, w.Worker)
		if w.Type != d.Type {
			d.Type = ""
		}
	}
	return d
}

// pinned holds a job at the size its owner pinned, or brings it down to it (GrowToTarget
// brings it up): throughput neither grows nor shrinks a pinned job.
func (p *planner) pinned(latest Measurement) Decision {
	pin := p.bounds.Pin
	if p.total > pin {
		bounds := p.bounds
		bounds.MaxWorkers = pin
		q := *p
		q.bounds = bounds
		d := q.shrinkToMax(latest)
		d.Code, d.Reason = CodePinned, fmt.Sprintf("pinned at %d workers by its owner: %d running; removing the %d slowest", pin, p.total, d.Count)
		return d
	}
	return hold(CodePinned, "pinned at %d workers by its owner (elasticd unpin to let throughput decide)", pin)
}
