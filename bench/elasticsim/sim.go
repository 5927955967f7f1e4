// Package elasticsim is a trace-driven simulation of one elastic training job: a fixed amount
// of work (samples) whose throughput follows a curve of the GPU count, run under static
// allocations and under elasticd's decision policy (elasticd/policy.Decide, the same code the
// daemon runs), in simulated time. It reports GPU-time and completion time per strategy.
//
// The model, all of it in Config:
//
//   - The job holds whole workers of GPUsPerWorker GPUs, between MinWorkers and MaxWorkers.
//     Its total samples/s at g GPUs is the Curve, linear between its points.
//   - Static strategies hold one size from start to end. Elastic starts at MinWorkers (what
//     the job declares and gets at submit) and runs elasticd's cycle every Interval: every
//     worker reports its samples/s (the curve's share, times a seeded Gaussian measurement
//     noise of relative sigma Noise), the reports become a policy.Measurement, and
//     policy.Decide with the daemon's settings says grow, shrink, replace or hold.
//   - A worker change costs Transition: from the decision until training runs again at the
//     new size the job makes no progress and holds the larger of the two sizes' GPUs (new
//     workers start and join the rendezvous, removed ones leave). Workers never wait in the
//     queue: the GPUs are assumed free.
//   - The daemon's rules around the policy are kept: no decision while a change is under way,
//     none until every worker of the current size has reported, and a history of at most
//     HistoryLimit measurements.
//
// GPU-time is the integral of the GPUs held until the last sample; completion time is when the
// last sample is done. Nothing is fitted: every figure comes out of the run.
package elasticsim

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/slurmbridge/slurmbridge/elasticd/policy"
)

// Point is one point of a throughput curve: the job's total samples/s on GPUs GPUs.
type Point struct {
	GPUs          int
	SamplesPerSec float64
}

// Curve is a job's total throughput as a function of its GPU count, linear between points.
type Curve struct {
	Name   string
	Note   string
	Points []Point // by GPUs, ascending
}

// Rate is the job's total samples/s on gpus GPUs: linear between the points, proportional
// to the first point below it and flat beyond the last.
func (c Curve) Rate(gpus int) float64 {
	p := c.Points
	if len(p) == 0 || gpus <= 0 {
		return 0
	}
	if gpus <= p[0].GPUs {
		return p[0].SamplesPerSec * float64(gpus) / float64(p[0].GPUs)
	}
	for i := 1; i < len(p); i++ {
		if gpus <= p[i].GPUs {
			lo, hi := p[i-1], p[i]
			return lo.SamplesPerSec + (hi.SamplesPerSec-lo.SamplesPerSec)*float64(gpus-lo.GPUs)/float64(hi.GPUs-lo.GPUs)
		}
	}
	return p[len(p)-1].SamplesPerSec
}

func (c Curve) validate() error {
	if len(c.Points) == 0 {
		return fmt.Errorf("curve %s has no points", c.Name)
	}
	for i, pt := range c.Points {
		if pt.GPUs < 1 || !(pt.SamplesPerSec > 0) || i > 0 && pt.GPUs <= c.Points[i-1].GPUs {
			return fmt.Errorf("curve %s: points must have GPUs ≥ 1, ascending, and positive rates", c.Name)
		}
	}
	return nil
}

// PaperCurve is Or, Zhang and Freedman's (MLSys 2020) ResNet-50 example: 16, 32, 64 GPUs →
// 2200, 4000, 5000 img/s.
func PaperCurve() Curve {
	return Curve{Name: "paper", Note: "16, 32, 64 GPUs → 2200, 4000, 5000 img/s (Or et al. 2020)",
		Points: []Point{{16, 2200}, {32, 4000}, {64, 5000}}}
}

// Curves are the paper's curve and three stated ones with the same rate at 16 GPUs.
func Curves() []Curve {
	return []Curve{
		PaperCurve(),
		{Name: "near-linear", Note: "16 → 64 GPUs: 2200 → 8400 img/s (96% of linear at 64)",
			Points: []Point{{16, 2200}, {64, 8400}}},
		{Name: "flat-early", Note: "16, 24, 64 GPUs → 2200, 2500, 2900 img/s (communication-bound early)",
			Points: []Point{{16, 2200}, {24, 2500}, {64, 2900}}},
		{Name: "peaked", Note: "16, 40, 64 GPUs → 2200, 4400, 3600 img/s (slower beyond 40 GPUs)",
			Points: []Point{{16, 2200}, {40, 4400}, {64, 3600}}},
	}
}

// Config is one simulated job and how elasticd treats it.
type Config struct {
	Curve         Curve
	TotalSamples  float64
	GPUsPerWorker int
	MinWorkers    int
	MaxWorkers    int
	// Settings are the policy's (zero fields take policy.DefaultSettings, as in the daemon).
	Settings policy.Settings
	// Interval of the daemon's cycle and of the workers' reports.
	Interval time.Duration
	// Transition: from a worker change until training runs again.
	Transition time.Duration
	// Noise: relative standard deviation of each report (measurement noise only; the job's
	// true progress follows the curve).
	Noise float64
	Seed  uint64
	// HistoryLimit: measurements kept (the daemon's default 1000).
	HistoryLimit int
	// Step of the simulation clock; 1 s unless set.
	Step time.Duration
}

// DefaultConfig is the paper's job: ResNet-50 for 90 epochs of ImageNet (1,281,167 images),
// 8 GPUs per worker (one node), 2 to 8 workers (16 to 64 GPUs), elasticd's default settings
// and 10 s cycle, a 10 s transition (the goal for a grow or shrink on the testbed; the paper measured 3-7 s in place) and
// 2% report noise.
func DefaultConfig() Config {
	return Config{
		Curve:         PaperCurve(),
		TotalSamples:  90 * 1281167,
		GPUsPerWorker: 8,
		MinWorkers:    2,
		MaxWorkers:    8,
		Settings:      policy.DefaultSettings(),
		Interval:      10 * time.Second,
		Transition:    10 * time.Second,
		Noise:         0.02,
		Seed:          1,
		HistoryLimit:  1000,
		Step:          time.Second,
	}
}

func (c Config) validate() error {
	if err := c.Curve.validate(); err != nil {
		return err
	}
	switch {
	case !(c.TotalSamples > 0):
		return fmt.Errorf("total samples %v must be positive", c.TotalSamples)
	case c.GPUsPerWorker < 1, c.MinWorkers < 1, c.MaxWorkers < c.MinWorkers:
		return fmt.Errorf("need 1 ≤ min ≤ max workers and at least 1 GPU per worker")
	case c.Interval <= 0, c.Step <= 0, c.Transition < 0, c.Noise < 0:
		return fmt.Errorf("interval and step must be positive, transition and noise not negative")
	case c.Interval%c.Step != 0:
		return fmt.Errorf("interval %s must be a multiple of the step %s", c.Interval, c.Step)
	}
	return nil
}

// Strategy names.
const (
	StaticMin  = "static min"
	StaticKnee = "static knee"
	StaticMax  = "static max"
	Elastic    = "elastic"
)

// Result is one strategy's run.
type Result struct {
	Strategy   string
	Workers    int // static: the size held; elastic: the size at the end
	Completion time.Duration
	GPUSeconds float64
	MeanGPUs   float64 // time-weighted
	// Elastic only.
	Grows, Shrinks, Replaces int
	Idle                     time.Duration // time spent in transitions
	Sizes                    []int         // size after each change, starting with the first
}

// GPUHours is the run's GPU-time.
func (r Result) GPUHours() float64 { return r.GPUSeconds / 3600 }

// Knee is the static size the policy's rule picks with perfect knowledge of the curve: from
// MinWorkers, take Step (or doubling) steps while the step's scaling efficiency
// s = ((R_new − R_old) / (k_new − k_old)) / (R_old / k_old) exceeds the threshold.
func (c Config) Knee() int {
	s := c.settings()
	k := c.MinWorkers
	for k < c.MaxWorkers {
		next := min(k+s.Step, c.MaxWorkers)
		if s.Doubling {
			next = min(2*k, c.MaxWorkers)
		}
		r0, r1 := c.Curve.Rate(k*c.GPUsPerWorker), c.Curve.Rate(next*c.GPUsPerWorker)
		if eff := ((r1 - r0) / float64(next-k)) / (r0 / float64(k)); !(eff > s.Threshold) {
			break
		}
		k = next
	}
	return k
}

// settings fills the zero fields it reports from policy.DefaultSettings, as Decide does.
func (c Config) settings() policy.Settings {
	s, d := c.Settings, policy.DefaultSettings()
	s.Threshold = cmp.Or(s.Threshold, d.Threshold)
	s.Step = cmp.Or(s.Step, d.Step)
	s.Cooldown = cmp.Or(s.Cooldown, d.Cooldown)
	s.SettleTime = cmp.Or(s.SettleTime, d.SettleTime)
	s.MinSamples = cmp.Or(s.MinSamples, d.MinSamples)
	s.NoiseTolerance = cmp.Or(s.NoiseTolerance, d.NoiseTolerance)
	return s
}

// Static runs the job at a fixed size.
func (c Config) Static(name string, workers int) (Result, error) {
	if err := c.validate(); err != nil {
		return Result{}, err
	}
	rate := c.Curve.Rate(workers * c.GPUsPerWorker)
	if !(rate > 0) {
		return Result{}, fmt.Errorf("no progress at %d workers", workers)
	}
	secs := c.TotalSamples / rate
	gpus := float64(workers * c.GPUsPerWorker)
	return Result{Strategy: name, Workers: workers, Completion: seconds(secs), GPUSeconds: gpus * secs,
		MeanGPUs: gpus, Sizes: []int{workers}}, nil
}

const gpuType = policy.GPUType("gpu")

// Elastic runs the job under elasticd's policy.
func (c Config) Elastic() (Result, error) {
	if err := c.validate(); err != nil {
		return Result{}, err
	}
	rng := rand.New(rand.NewPCG(c.Seed, 0x5eed))
	job := policy.Job{ID: "1", Elastic: true, Bounds: policy.Bounds{
		MinWorkers: c.MinWorkers, MaxWorkers: c.MaxWorkers, GPUsPerWorker: c.GPUsPerWorker}}
	limit := c.HistoryLimit
	if limit <= 0 {
		limit = 1000
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	step := c.Step.Seconds()
	nextID := 1000
	newWorkers := func(n int) []string {
		ids := make([]string, n)
		for i := range ids {
			ids[i] = strconv.Itoa(nextID)
			nextID++
		}
		return ids
	}

	res := Result{Strategy: Elastic}
	workers := newWorkers(c.MinWorkers)
	res.Sizes = []int{len(workers)}
	var history []policy.Measurement
	var pending []string  // the size being moved to, while a transition runs
	var busyUntil float64 // transition end, seconds
	held := len(workers)  // workers whose GPUs are held
	done, now := 0.0, 0.0 // samples, seconds
	ticks := c.Interval / c.Step
	for tick := int64(1); ; tick++ {
		// Advance one step at the current state.
		running := pending == nil
		gpus := float64(held * c.GPUsPerWorker)
		if running {
			rate := c.Curve.Rate(len(workers) * c.GPUsPerWorker)
			if left := c.TotalSamples - done; rate*step >= left {
				dt := left / rate
				now += dt
				res.GPUSeconds += gpus * dt
				break
			}
			done += rate * step
		} else {
			res.Idle += c.Step
		}
		now += step
		res.GPUSeconds += gpus * step
		if now > 1e8 {
			return Result{}, fmt.Errorf("no completion after %.0f s", now)
		}
		if pending != nil && now >= busyUntil {
			workers, pending = pending, nil
			held = len(workers)
		}
		if tick%int64(ticks) != 0 {
			continue
		}

		// elasticd's cycle: reports, then (nothing under way) a decision.
		if pending != nil {
			continue
		}
		t := start.Add(seconds(now))
		k := len(workers)
		m := policy.Measurement{Time: t, Allocated: map[policy.GPUType]int{gpuType: k}}
		share := c.Curve.Rate(k*c.GPUsPerWorker) / float64(k)
		for _, w := range workers {
			r := share * (1 + c.Noise*rng.NormFloat64())
			m.Workers = append(m.Workers, policy.WorkerRate{Worker: w, Type: gpuType, SamplesPerSec: max(r, 0)})
		}
		history = append(history, m)
		if over := len(history) - limit; over > 0 {
			history = slices.Delete(history, 0, over)
		}
		d := policy.Decide(policy.Input{Now: t, Job: job, History: history, Settings: c.Settings})
		next := slices.Clone(workers)
		switch d.Action {
		case policy.Hold:
			continue
		case policy.Grow:
			next = append(next, newWorkers(d.Count)...)
			res.Grows++
		case policy.Shrink:
			next = slices.DeleteFunc(next, func(w string) bool { return slices.Contains(d.Workers, w) })
			res.Shrinks++
		case policy.Replace:
			next = slices.DeleteFunc(next, func(w string) bool { return slices.Contains(d.Workers, w) })
			next = append(next, newWorkers(len(workers)-len(next))...)
			res.Replaces++
		}
		pending, busyUntil = next, now+c.Transition.Seconds()
		held = max(len(workers), len(next))
		res.Sizes = append(res.Sizes, len(next))
		if c.Transition == 0 {
			workers, pending = next, nil
			held = len(workers)
		}
	}
	res.Completion = seconds(now)
	res.Workers = len(workers)
	res.MeanGPUs = res.GPUSeconds / now
	return res, nil
}

func seconds(s float64) time.Duration { return time.Duration(math.Round(s * float64(time.Second))) }

// Run is one curve under every strategy: static min, knee and max, then elastic.
func (c Config) Run() ([]Result, error) {
	var out []Result
	for _, s := range []struct {
		name    string
		workers int
	}{{StaticMin, c.MinWorkers}, {StaticKnee, c.Knee()}, {StaticMax, c.MaxWorkers}} {
		r, err := c.Static(s.name, s.workers)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	e, err := c.Elastic()
	if err != nil {
		return nil, err
	}
	return append(out, e), nil
}

// Saving is how much less elastic used than a static run: 1 − elastic/static (negative when
// elastic used more).
func Saving(elastic, static float64) float64 { return 1 - elastic/static }
