// Package policy decides how an elastic training job should change size. It
// is pure: a job's throughput history, bounds, prices and settings go in, a
// Decision with a reason comes out, and the same input always gives the
// same Decision.
//
// The scaling rule follows Or, Zhang and Freedman, "Resource Elasticity in
// Distributed Deep Learning" (MLSys 2020). Scaling efficiency of a step from
// k_old to k_new workers is
//
//	s = ((R_new − R_old) / (k_new − k_old)) / (R_old / k_old)
//
// with R the job's samples/s as the job itself reports it. The job grows in
// steps while s > Threshold and k < max; a step that fails is undone (back
// to the last good size) and the policy holds there; it probes again after
// Cooldown, or sooner if the job's throughput at its current size moves by
// more than NoiseTolerance; it shrinks when the step that led to the current
// size no longer pays (s ≤ Threshold); never below min, never above max.
//
// With several GPU types, a step adds or removes workers of one type and R
// stays the whole job's samples/s, so s measures what the step added to the
// job; R_old/k_old is the per-worker rate of that type (of the new workers
// themselves when the type is new to the job). Growth picks the type with
// the best expected samples/s per worker, per dollar where prices are known.
//
// Stragglers: in synchronous data-parallel training every step waits for the
// slowest worker, so every worker reports the same samples/s and a slow one
// cannot be told from them. Three signals can: a worker's samples/s (where
// workers progress independently), its compute time per step before the
// gradient exchange (reported beside samples/s), and, where the node agent
// reads NVML, a GPU the hardware holds back (thermal or power throttling)
// well below its peers' SM clocks. Utilisation alone only flags. The main
// job is never replaced (it hosts the rendezvous): when it is the slow one
// the job holds and says so.
package policy

import (
	"fmt"
	"math"
	"time"
)

// GPUType is a GPU type as Slurm's gres names it, e.g. "a100".
type GPUType string

// WorkerRate is one worker's reported throughput.
type WorkerRate struct {
	Worker        string // worker id, e.g. the Slurm job id of the worker job or "1234+1"
	Type          GPUType
	SamplesPerSec float64
	// ComputeSecondsPerStep is the worker's mean time per training step spent
	// computing before the gradient exchange (data, forward pass), of its
	// slowest local process; 0 when it reports none. In synchronous training
	// this differs between workers when their samples/s cannot.
	ComputeSecondsPerStep float64
}

// Measurement is one report of a job: the workers Slurm has allocated per
// GPU type and what each reported.
type Measurement struct {
	Time      time.Time
	Allocated map[GPUType]int
	Workers   []WorkerRate
}

// GPUSignal is one GPU of one worker as the node agent read it from NVML.
type GPUSignal struct {
	Time           time.Time
	Worker         string
	GPU            int
	HasUtilization bool
	UtilizationPct float64
	SMClockMHz     uint32
	MaxSMClockMHz  uint32
	// ThermalOrPowerThrottled: NVML names a thermal or power reason for
	// holding the clocks back (api.GPUSample.ThermalOrPowerThrottled).
	ThermalOrPowerThrottled bool
	// PowerCapOnly: the power limit alone holds the clocks back, as it does any datacenter
	// GPU under a dense job (api.GPUSample.PowerCapOnly).
	PowerCapOnly    bool
	ThrottleReasons []string
}

// TypeOption is a GPU type the job's workers may use.
type TypeOption struct {
	Type GPUType
	Pool string
	// PricePerGPUHour from the pools config; 0 when unknown.
	PricePerGPUHour float64
	// MaxWorkers of this type; 0 means only the job's max applies.
	MaxWorkers int
}

// Bounds is what the user declared for the job.
type Bounds struct {
	MinWorkers    int
	MaxWorkers    int
	GPUsPerWorker int
	// Types the job may grow into. Empty: only the types it already runs on.
	Types []TypeOption
	// MaxReason says where MaxWorkers comes from when not from the declared max alone
	// (e.g. " (max global batch 256 at 32 per GPU)"); it is appended to "at max N workers".
	MaxReason string
	// Pin, when above 0, is the size the job's owner chose: the job is brought to it and held
	// there, whatever its throughput says.
	Pin int
}

// Job is an elastic job's identity and declaration.
type Job struct {
	ID      string
	Elastic bool
	Bounds  Bounds
}

// Objective says what growth maximises.
type Objective int

const (
	// MaxThroughput grows while each step adds enough samples/s per worker.
	MaxThroughput Objective = iota
	// MaxThroughputPerDollar grows while each step adds enough samples/s per
	// dollar: s is computed on cost instead of worker count, so a cheap slow
	// type can win over a fast dear one. Needs a price for every type.
	MaxThroughputPerDollar
)

// ParseObjective reads an objective as elasticd's --objective spells it.
func ParseObjective(s string) (Objective, error) {
	switch s {
	case "throughput":
		return MaxThroughput, nil
	case "throughput-per-dollar":
		return MaxThroughputPerDollar, nil
	}
	return 0, fmt.Errorf("unknown objective %q: want throughput or throughput-per-dollar", s)
}

// Settings tune the policy. A zero field takes the value of
// DefaultSettings.
type Settings struct {
	// Threshold on scaling efficiency: a step pays while s > Threshold.
	Threshold float64
	// Step is the number of workers a grow adds; Doubling instead adds as
	// many workers as the job has (the paper's 16→32→64 GPU steps).
	Step     int
	Doubling bool
	// Cooldown after leaving a size whose step did not pay, before probing
	// it again.
	Cooldown time.Duration
	// MinSamples settled reports make a stable measurement of a size; the
	// rate of a size is their mean.
	MinSamples int
	// SettleTime after a size change during which reports are ignored
	// (rendezvous, warm-up).
	SettleTime time.Duration
	// StaleAfter: a latest report older than this means the probe is not
	// working; the policy holds.
	StaleAfter time.Duration
	// NoiseTolerance is the relative change in the job's throughput that is
	// still noise. Larger changes at the current size allow an early
	// re-probe; re-growing into a size left less than Cooldown ago needs s
	// above Threshold × (1 + NoiseTolerance), so noise cannot make the job
	// flap.
	NoiseTolerance float64
	Objective      Objective
	// ValuePerMillionSamples (dollars), when set, adds the utility test: a
	// step must bring samples worth more than the GPUs it adds cost.
	ValuePerMillionSamples float64
	// StragglerRatio: a worker below this fraction of the median samples/s
	// of the workers of its type is replaced.
	StragglerRatio float64
	// ThrottleClockRatio: a GPU under this fraction of its max SM clock
	// with a thermal or power throttle reason is flagged.
	ThrottleClockRatio float64
	// LowUtilizationPct / PeerUtilizationPct: a worker whose GPUs average
	// below LowUtilizationPct while the median of the other workers is at
	// least PeerUtilizationPct is flagged (input-bound or stalled).
	LowUtilizationPct  float64
	PeerUtilizationPct float64
}

// DefaultSettings are the values a zero Settings field takes. Threshold 0.5
// settles the paper's curve (16, 32, 64 GPUs → 2200, 4000, 5000 img/s,
// s = 0.82 then 0.25) at its knee, 32 GPUs; 0.8 for stragglers flags a
// worker below 80% of its type's median, the slow-worker scenario's rule;
// the rest are sized for reports every 10 s.
func DefaultSettings() Settings {
	return Settings{
		Threshold:          0.5,
		Step:               1,
		Cooldown:           10 * time.Minute,
		MinSamples:         3,
		SettleTime:         30 * time.Second,
		StaleAfter:         2 * time.Minute,
		NoiseTolerance:     0.10,
		Objective:          MaxThroughput,
		StragglerRatio:     0.8,
		ThrottleClockRatio: 0.85,
		LowUtilizationPct:  50,
		PeerUtilizationPct: 80,
	}
}

func (s Settings) withDefaults() Settings {
	d := DefaultSettings()
	setIfZero(&s.Threshold, d.Threshold)
	setIfZero(&s.Step, d.Step)
	setIfZero(&s.Cooldown, d.Cooldown)
	setIfZero(&s.MinSamples, d.MinSamples)
	setIfZero(&s.SettleTime, d.SettleTime)
	setIfZero(&s.StaleAfter, d.StaleAfter)
	setIfZero(&s.NoiseTolerance, d.NoiseTolerance)
	setIfZero(&s.StragglerRatio, d.StragglerRatio)
	setIfZero(&s.ThrottleClockRatio, d.ThrottleClockRatio)
	setIfZero(&s.LowUtilizationPct, d.LowUtilizationPct)
	setIfZero(&s.PeerUtilizationPct, d.PeerUtilizationPct)
	return s
}

func setIfZero[T comparable](field *T, value T) {
	var zero T
	if *field == zero {
		*field = value
	}
}

func (s Settings) validate() error {
	switch {
	case !(s.Threshold > 0) || math.IsInf(s.Threshold, 0):
		return fmt.Errorf("threshold %v must be a positive number", s.Threshold)
	case s.Step < 1:
		return fmt.Errorf("step %d must be at least 1", s.Step)
	case s.MinSamples < 1:
		return fmt.Errorf("min samples %d must be at least 1", s.MinSamples)
	case s.Cooldown < 0 || s.SettleTime < 0 || s.StaleAfter <= 0:
		return fmt.Errorf("cooldown, settle time and stale-after must be positive")
	case !(s.NoiseTolerance > 0 && s.NoiseTolerance < 1):
		return fmt.Errorf("noise tolerance %v must be in (0, 1)", s.NoiseTolerance)
	case !(s.StragglerRatio > 0 && s.StragglerRatio < 1), !(s.ThrottleClockRatio > 0 && s.ThrottleClockRatio < 1):
		return fmt.Errorf("straggler ratio %v and throttle clock ratio %v must be in (0, 1)", s.StragglerRatio, s.ThrottleClockRatio)
	case s.ValuePerMillionSamples < 0:
		return fmt.Errorf("value per million samples %v must not be negative", s.ValuePerMillionSamples)
	case s.Objective != MaxThroughput && s.Objective != MaxThroughputPerDollar:
		return fmt.Errorf("unknown objective %d", s.Objective)
	}
	return nil
}

func (b Bounds) validate(s Settings) error {
	switch {
	case b.MinWorkers < 1:
		return fmt.Errorf("min workers %d must be at least 1", b.MinWorkers)
	case b.MaxWorkers < b.MinWorkers:
		return fmt.Errorf("max workers %d is below min workers %d", b.MaxWorkers, b.MinWorkers)
	case b.GPUsPerWorker < 1:
		return fmt.Errorf("GPUs per worker %d must be at least 1", b.GPUsPerWorker)
	case b.Pin != 0 && (b.Pin < b.MinWorkers || b.Pin > b.MaxWorkers):
		return fmt.Errorf("pinned size %d is outside %d to %d workers", b.Pin, b.MinWorkers, b.MaxWorkers)
	}
	seen := map[GPUType]bool{}
	for _, t := range b.Types {
		if t.Type == "" || seen[t.Type] {
			return fmt.Errorf("GPU type %q is empty or listed twice", t.Type)
		}
		seen[t.Type] = true
		if t.PricePerGPUHour < 0 || t.MaxWorkers < 0 {
			return fmt.Errorf("GPU type %s: negative price or max workers", t.Type)
		}
		if (s.Objective == MaxThroughputPerDollar || s.ValuePerMillionSamples > 0) && t.PricePerGPUHour == 0 {
			return fmt.Errorf("GPU type %s has no price; the objective needs one", t.Type)
		}
	}
	if (s.Objective == MaxThroughputPerDollar || s.ValuePerMillionSamples > 0) && len(b.Types) == 0 {
		return fmt.Errorf("the objective needs prices: list the job's GPU types with their prices")
	}
	return nil
}

// Input is everything one decision depends on.
type Input struct {
	Now time.Time
	Job Job
	// History of the job, oldest first.
	History []Measurement
	// Signals from the node agents; none when no NVML is on the nodes.
	Signals []GPUSignal
	// Main is the worker id of the main job, which hosts the rendezvous and is
	// never replaced; "" when unknown.
	Main string
	// Capacity is how many more workers of each type could start now; nil
	// when unknown (then it is no limit).
	Capacity map[GPUType]int
	// CapacityLimit says, per type, which limit other than free nodes caps Capacity (an
	// association's GrpTRES, say); the policy quotes it where that stops a step.
	CapacityLimit map[GPUType]string
	// GrowthCapacity caps, per type, the workers growth may add beyond what the job needs to
	// run (MIN) or to replace a straggler: room left once the jobs waiting for the same GPUs
	// are counted, to which growth yields. A type absent from it is capped by Capacity alone.
	GrowthCapacity map[GPUType]int
	// GrowthLimit says why, per type, GrowthCapacity caps growth; quoted like CapacityLimit.
	GrowthLimit map[GPUType]string
	Settings    Settings
}

// Action is what the Decision asks for.
type Action int

const (
	Hold Action = iota
	Grow
	Shrink
	// Replace starts a new worker of the same type, then stops the old one
	// once the new one has joined; with LeaveFirst, the other way round.
	Replace
)

func (a Action) String() string {
	switch a {
	case Hold:
		return "hold"
	case Grow:
		return "grow"
	case Shrink:
		return "shrink"
	case Replace:
		return "replace"
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// Flag is a worker that looks unwell, and why.
type Flag struct {
	Worker string
	Reason string
}

// Decision is the policy's answer.
type Decision struct {
	Action Action
	// Type of the workers to add (Grow), replace (Replace), or remove
	// (Shrink, when all named workers are of one type).
	Type GPUType
	// Count of workers to add or remove.
	Count int
	// Workers to remove (Shrink) or replace (Replace), in order.
	Workers []string
	// Code is the kind of decision, for tests, logs and the API to compare; Reason says it in
	// words with the figures, which may change wording from one version to the next.
	Code   Code
	Reason string
	// Flags from NVML signals and throughput, whatever the Action.
	Flags []Flag
	// LeaveFirst (Replace): the job is at its max, and torchrun's rendezvous
	// (--nnodes MIN:MAX) admits no successor beside the straggler, so the
	// straggler leaves first and its successor joins once it has gone.
	LeaveFirst bool
	// MainStraggler: a Hold because the main job, which is never replaced, is
	// the slowest worker. The Reason's figures change every cycle; this does
	// not, so the job's log says it once.
	MainStraggler bool
}

func hold(code Code, format string, args ...any) Decision {
	return Decision{Action: Hold, Code: code, Reason: fmt.Sprintf(format, args...)}
}

// Code names a kind of decision. The codes are stable: elasticd's API and logs carry them
// beside the reason's words.
type Code string

// The kinds of decision, by the check that makes them (see Decide's order).
const (
	CodeNotElastic         Code = "not-elastic"         // hold: no elastic declaration
	CodeInvalidSettings    Code = "invalid-settings"    // hold
	CodeInvalidDeclaration Code = "invalid-declaration" // hold: bounds or types the job declared are wrong
	CodeNoReports          Code = "no-reports"          // hold: no throughput reported yet
	CodeStaleReport        Code = "stale-report"        // hold: the last report is too old
	CodeIncompleteReport   Code = "incomplete-report"   // hold: the last report misses a worker
	CodeInvalidReport      Code = "invalid-report"      // hold: the last report names a worker twice, or a rate that is no number ≥ 0
	CodeBelowTarget        Code = "below-target"        // grow (or hold without room) to the min or the pinned size
	CodePinned             Code = "pinned"              // hold at, or shrink to, the size the owner pinned
	CodeAboveMax           Code = "above-max"           // shrink: more workers than the max
	CodeMeasuring          Code = "measuring"           // hold: too few settled reports at this size
	CodeNoProgress         Code = "no-progress"         // hold: 0 samples/s
	CodeStraggler          Code = "straggler"           // replace a slow worker (its successor joins first), or hold without a free one
	CodeStragglerLeaves    Code = "straggler-leaves"    // replace at the max: the slow worker leaves before its successor joins
	CodeMainStraggler      Code = "main-straggler"      // hold: the main job is the slowest, never replaced
	CodeStepDoesNotPay     Code = "step-does-not-pay"   // shrink: the step into this size is at or below the threshold
	CodeStepNotWorthCost   Code = "step-not-worth-cost" // shrink: the step into this size pays, but its samples are worth no more than its GPUs cost
	CodeWithinNoise        Code = "within-noise"        // hold: a step stopped paying within the noise margin
	CodeAtMax              Code = "at-max"              // hold: at the max
	CodeNoGrowth           Code = "no-growth"           // hold: no type may grow now, not all for one of the reasons below
	CodeTypeAtMax          Code = "type-at-max"         // hold: each type the job may grow by is at its own max
	CodeNoCapacity         Code = "no-capacity"         // hold: no room for a worker of any type (free nodes, or a limit the hold quotes)
	CodeYieldsToWaiting    Code = "yields-to-waiting"   // hold: the free GPUs go to the jobs waiting for them
	CodeCooldown           Code = "cooldown"            // hold: a larger size did not pay; re-probed after the cooldown
	CodeNotWorthCost       Code = "not-worth-cost"      // hold: a new worker would bring samples worth no more than it costs
	CodeGrowth             Code = "growth"              // grow: the best next step
)
