package elasticsim

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Paper's headline numbers (Or, Zhang and Freedman, MLSys 2020), printed beside ours.
const (
	PaperCompletionSaving = 0.45
	PaperGPUTimeSaving    = 0.851
)

// CurveRun is one curve's results at one transition time.
type CurveRun struct {
	Curve      Curve
	Transition time.Duration
	Knee       int
	Results    []Result // static min, knee, max, elastic
}

// Elastic is the run's elastic result.
func (r CurveRun) Elastic() Result { return r.Results[len(r.Results)-1] }

// RunAll runs every curve at every transition time with base's other settings.
func RunAll(base Config, curves []Curve, transitions []time.Duration) ([]CurveRun, error) {
	var out []CurveRun
	for _, tr := range transitions {
		for _, cv := range curves {
			c := base
			c.Curve, c.Transition = cv, tr
			res, err := c.Run()
			if err != nil {
				return nil, fmt.Errorf("%s, transition %s: %w", cv.Name, tr, err)
			}
			out = append(out, CurveRun{Curve: cv, Transition: tr, Knee: c.Knee(), Results: res})
		}
	}
	return out, nil
}

// Report prints the setup, one table per transition time and the best savings beside the
// paper's.
func Report(w io.Writer, base Config, runs []CurveRun) {
	s := base.settings()
	fmt.Fprintf(w, "job: %.0f samples, %d GPUs per worker, %d to %d workers (%d to %d GPUs); elastic starts at %d\n",
		base.TotalSamples, base.GPUsPerWorker, base.MinWorkers, base.MaxWorkers,
		base.MinWorkers*base.GPUsPerWorker, base.MaxWorkers*base.GPUsPerWorker, base.MinWorkers)
	step := fmt.Sprintf("+%d worker(s)", s.Step)
	if s.Doubling {
		step = "doubling"
	}
	fmt.Fprintf(w, "policy: elasticd/policy.Decide, threshold %.2f, step %s, cooldown %s, settle %s, min samples %d, noise tolerance %.0f%%; cycle and reports every %s\n",
		s.Threshold, step, s.Cooldown, s.SettleTime, s.MinSamples, 100*s.NoiseTolerance, base.Interval)
	fmt.Fprintf(w, "reports: ±%.0f%% Gaussian noise per worker (seed %d); workers never queue; a change holds max(old, new) GPUs without progress for the transition\n",
		100*base.Noise, base.Seed)
	fmt.Fprintln(w, "knee: the static size the threshold rule picks on the true curve")
	for _, cv := range uniqueCurves(runs) {
		fmt.Fprintf(w, "curve %-12s %s\n", cv.Name, cv.Note)
	}

	var lastTr time.Duration = -1
	var tw *tabwriter.Writer
	flush := func() {
		if tw != nil {
			tw.Flush()
		}
	}
	for _, r := range runs {
		if r.Transition != lastTr {
			flush()
			lastTr = r.Transition
			fmt.Fprintf(w, "\n## transition %s\n\n", r.Transition)
			tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, "curve\tstrategy\tworkers\tmean GPUs\tcompletion\tGPU-hours\telastic: completion\telastic: GPU-time\t")
		}
		e := r.Elastic()
		for _, res := range r.Results {
			workers := fmt.Sprint(res.Workers)
			cmpT, cmpG := "", ""
			if res.Strategy == Elastic {
				workers = fmt.Sprintf("%s (%d grow, %d shrink, idle %s)", sizesText(res.Sizes), res.Grows, res.Shrinks, res.Idle)
			} else {
				cmpT = pct(Saving(e.Completion.Hours(), res.Completion.Hours()))
				cmpG = pct(Saving(e.GPUHours(), res.GPUHours()))
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%.1f\t%s\t%.1f\t%s\t%s\t\n", r.Curve.Name, res.Strategy, workers, res.MeanGPUs,
				hours(res.Completion), res.GPUHours(), cmpT, cmpG)
		}
	}
	flush()

	fmt.Fprintln(w, "\n(elastic columns: elastic's completion time and GPU-time relative to that static strategy; negative = elastic took less)")
	fmt.Fprintln(w, "\n## beside the paper (largest saving of elastic vs a static guess)")
	for _, tr := range transitions(runs) {
		bt, bg := best(runs, tr, func(r Result) float64 { return r.Completion.Hours() }),
			best(runs, tr, func(r Result) float64 { return r.GPUHours() })
		fmt.Fprintf(w, "transition %s: completion time %.1f%% less (%s); paper: up to %.0f%% less\n", tr, 100*bt.saving, bt.where, 100*PaperCompletionSaving)
		fmt.Fprintf(w, "transition %s: GPU-time %.1f%% less (%s); paper: up to %.1f%% less\n", tr, 100*bg.saving, bg.where, 100*PaperGPUTimeSaving)
	}
}

type bestSaving struct {
	saving float64
	where  string
}

func best(runs []CurveRun, tr time.Duration, metric func(Result) float64) bestSaving {
	b := bestSaving{saving: -1e9}
	for _, r := range runs {
		if r.Transition != tr {
			continue
		}
		e := metric(r.Elastic())
		for _, res := range r.Results[:len(r.Results)-1] {
			if s := Saving(e, metric(res)); s > b.saving {
				b = bestSaving{s, fmt.Sprintf("%s curve, vs %s = %d workers", r.Curve.Name, res.Strategy, res.Workers)}
			}
		}
	}
	return b
}

func transitions(runs []CurveRun) []time.Duration {
	var out []time.Duration
	for _, r := range runs {
		if len(out) == 0 || out[len(out)-1] != r.Transition {
			out = append(out, r.Transition)
		}
	}
	return out
}

func uniqueCurves(runs []CurveRun) []Curve {
	var out []Curve
	seen := map[string]bool{}
	for _, r := range runs {
		if !seen[r.Curve.Name] {
			seen[r.Curve.Name] = true
			out = append(out, r.Curve)
		}
	}
	return out
}

// sizesText shortens the elastic run's sizes: the first ones, then how it ended.
func sizesText(sizes []int) string {
	parts := make([]string, len(sizes))
	for i, s := range sizes {
		parts[i] = fmt.Sprint(s)
	}
	if len(parts) > 8 {
		return strings.Join(parts[:6], "→") + fmt.Sprintf("→…(%d more)→", len(parts)-7) + parts[len(parts)-1]
	}
	return strings.Join(parts, "→")
}

func hours(d time.Duration) string { return fmt.Sprintf("%.2f h", d.Hours()) }

func pct(f float64) string { return fmt.Sprintf("%+.1f%%", -100*f) }
