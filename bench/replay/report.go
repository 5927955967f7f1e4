package replay

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/slurmbridge/slurmbridge/bridge/slurm"
)

// SacctFields are the sacct fields Records reads (with SLURM_TIME_FORMAT=%s, so times are Unix
// seconds).
var SacctFields = []string{"JobIDRaw", "Account", "QOS", "Partition", "State", "Submit", "Start", "End", "AllocTRES"}

// Record is one run of a job as sacct -D -X lists it: a requeued job has one record per run.
type Record struct {
	JobID, Account, QOS, Partition, State string
	Submit, Start, End                    int64 // Unix seconds; 0 when unknown
	GPUs                                  int
}

// ParseSacct reads `sacct -D -X -n -P -o SacctFields` output.
func ParseSacct(out []byte) ([]Record, error) {
	recs, err := slurm.ParseSacct(out, SacctFields)
	if err != nil {
		return nil, err
	}
	return Records(recs)
}

// Records reads the SacctFields of sacct's records; other fields are ignored.
func Records(in []slurm.SacctRecord) ([]Record, error) {
	recs := make([]Record, 0, len(in))
	for _, f := range in {
		r := Record{JobID: f["JobIDRaw"], Account: f["Account"], QOS: f["QOS"], Partition: f["Partition"], State: firstWord(f["State"])}
		r.Submit, r.Start, r.End = epoch(f["Submit"]), epoch(f["Start"]), epoch(f["End"])
		for kv := range strings.SplitSeq(f["AllocTRES"], ",") {
			if k, v, ok := strings.Cut(kv, "="); ok && k == "gres/gpu" {
				n, err := strconv.Atoi(v)
				if err != nil {
					return nil, fmt.Errorf("sacct record of job %s: gres/gpu=%q", r.JobID, v)
				}
				r.GPUs = n
			}
		}
		recs = append(recs, r)
	}
	return recs, nil
}

// epoch reads a time printed with SLURM_TIME_FORMAT=%s; "Unknown", "None" and the like are 0.
func epoch(s string) int64 {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		return 0
	}
	return v
}

// firstWord: sacct says "CANCELLED by 1001".
func firstWord(s string) string {
	if f := strings.Fields(s); len(f) > 0 {
		return f[0]
	}
	return ""
}

// Submitted is a job the replay submitted.
type Submitted struct {
	JobID string
	Job   Job
}

// Point is the number of GPUs allocated from time T (seconds after the first submission).
type Point struct {
	T    float64
	GPUs int
}

// Report is one mode's outcome, computed from sacct only.
type Report struct {
	Mode                            Mode
	Submitted, Accounted, Completed int
	// Lost are jobs that never completed: "id (last state)". Must be empty.
	Lost         []string
	GPUSeconds   float64
	CapacityGPUs int
	// First submission to last end, Unix seconds.
	Start, End int64
	// AllocRatio is allocated GPU-seconds / (capacity × span).
	AllocRatio float64
	// Waits are seconds from submission to first start, sorted, per class.
	Waits map[Class][]float64
	// JCTs are the completed jobs' completion times, first submission to the end of the run
	// that completed, sorted, per class.
	JCTs map[Class][]float64
	// Preemptions counts runs that ended PREEMPTED or REQUEUED.
	Preemptions int
	// LostGPUSeconds is the work the trace jobs' preempted runs lost: each such run's GPUs times
	// its length, since a requeued job starts over. Elastic workers' preempted runs are not in
	// it: their job goes on with fewer workers.
	LostGPUSeconds float64
	// BorrowRuns counts runs in the borrow QOS, BorrowedJobs the trace jobs with one or more.
	BorrowRuns, BorrowedJobs int
	// PeakGuaranteed is the most GPUs each account held at once outside the borrow QOS.
	PeakGuaranteed map[string]int
	Timeline       []Point
	// Mode elastic. ElasticJobs are the submitted jobs that ran as elastic jobs. Their worker
	// jobs are not trace jobs: they count in nothing above that counts jobs (submitted,
	// completed, lost, waits), and their runs count as their elastic job's allocation (GPU
	// seconds, timeline, peaks) and preemptions.
	ElasticJobs int
	// WorkerJobs elasticd submitted, and WorkerRuns that started.
	WorkerJobs, WorkerRuns int
	WorkerGPUSeconds       float64
	// Grown: elastic jobs with a worker that started before the main job ended.
	Grown int
	// ElasticRunRatio is the elastic jobs' mean run time (main job start to end) over their
	// mapped run time, the time their work takes at one worker: below 1 when growing paid.
	ElasticRunRatio float64
	// Grows and Shrinks are elasticd's actions during the mode (elasticd_actions_total grow and
	// terminate).
	Grows, Shrinks int
	// DaemonSamples are the watched processes sampled throughout the mode (Runner), and RPCs
	// what slurmctld served during it by type and user (sdiag; nil when sdiag failed).
	DaemonSamples []DaemonSample
	RPCs          *slurm.Diag
}

// Analyze computes the report of the submitted jobs from their sacct records; workers are the
// runs of elastic jobs' worker jobs by main job id (mode elastic).
func Analyze(mode Mode, subs []Submitted, recs []Record, workers map[string][]Record, capacityGPUs int) Report {
	rep := Report{Mode: mode, Submitted: len(subs), CapacityGPUs: capacityGPUs, Waits: map[Class][]float64{}, JCTs: map[Class][]float64{}, PeakGuaranteed: map[string]int{}}
	byJob := recordsByJob(recs)
	var alloc allocations
	countElastic(&rep, subs, byJob, workers, &alloc)
	countJobs(&rep, subs, byJob, &alloc)
	rep.GPUSeconds = alloc.gpuSeconds
	for _, w := range rep.Waits {
		slices.Sort(w)
	}
	for _, d := range rep.JCTs {
		slices.Sort(d)
	}
	if span := rep.End - rep.Start; span > 0 && capacityGPUs > 0 {
		rep.AllocRatio = rep.GPUSeconds / (float64(capacityGPUs) * float64(span))
	}
	alloc.timeline(&rep)
	return rep
}

// recordsByJob groups sacct records by job id: a requeued job has one per run.
func recordsByJob(recs []Record) map[string][]Record {
	byJob := map[string][]Record{}
	for _, r := range recs {
		byJob[r.JobID] = append(byJob[r.JobID], r)
	}
	return byJob
}

// allocations collects the GPUs that runs held, as GPU seconds and as start and end events.
type allocations struct {
	gpuSeconds float64
	events     []allocEvent
}

type allocEvent struct {
	t       int64
	delta   int
	account string // "" for borrow runs
}

// add counts one run's allocation.
func (a *allocations) add(r Record) {
	if r.Start > 0 && r.End > r.Start && r.GPUs > 0 {
		a.gpuSeconds += float64(r.GPUs) * float64(r.End-r.Start)
		acct := r.Account
		if IsBorrowQOS(r.QOS) {
			acct = ""
		}
		a.events = append(a.events, allocEvent{r.Start, r.GPUs, acct}, allocEvent{r.End, -r.GPUs, acct})
	}
}

// countElastic counts the elastic jobs among subs, their workers' runs (whose allocation counts
// as their job's), how many grew, and their run time against their mapped run time.
func countElastic(rep *Report, subs []Submitted, byJob, workers map[string][]Record, alloc *allocations) {
	var elasticRatios float64
	elasticDone := 0
	for _, s := range subs {
		ws, ok := workers[s.JobID]
		if !ok && (rep.Mode != Elastic || !s.Job.Elastic) {
			continue
		}
		rep.ElasticJobs++
		var mainEnd int64
		for _, r := range byJob[s.JobID] {
			mainEnd = max(mainEnd, r.End)
		}
		grown := false
		for _, w := range ws {
			rep.WorkerJobs++
			if w.Start > 0 {
				rep.WorkerRuns++
				// A worker that started only as its main job ended never trained.
				grown = grown || mainEnd == 0 || w.Start < mainEnd
			}
			if w.State == "PREEMPTED" || w.State == "REQUEUED" {
				rep.Preemptions++
			}
			if w.Start > 0 && w.End > w.Start {
				rep.WorkerGPUSeconds += float64(w.GPUs) * float64(w.End-w.Start)
			}
			alloc.add(w)
			rep.End = max(rep.End, w.End)
		}
		if grown {
			rep.Grown++
		}
		for _, r := range byJob[s.JobID] {
			if r.State == "COMPLETED" && r.End > r.Start && r.Start > 0 && s.Job.Runtime > 0 {
				elasticRatios += float64(r.End-r.Start) / s.Job.Runtime.Seconds()
				elasticDone++
			}
		}
	}
	if elasticDone > 0 {
		rep.ElasticRunRatio = elasticRatios / float64(elasticDone)
	}
}

// countJobs accounts every submitted job from its runs: lost or completed, its wait from first
// submit to first start, preemptions and borrow runs, and the span of the mode.
func countJobs(rep *Report, subs []Submitted, byJob map[string][]Record, alloc *allocations) {
	for _, s := range subs {
		runs := byJob[s.JobID]
		if len(runs) == 0 {
			rep.Lost = append(rep.Lost, s.JobID+" (no accounting record)")
			continue
		}
		rep.Accounted++
		var submit, start, done int64
		completed, borrowed := false, false
		last := runs[0]
		for _, r := range runs {
			if r.Submit > 0 && (submit == 0 || r.Submit < submit) {
				submit = r.Submit
			}
			if r.Start > 0 && (start == 0 || r.Start < start) {
				start = r.Start
			}
			if r.Start >= last.Start {
				last = r
			}
			switch r.State {
			case "COMPLETED":
				completed, done = true, r.End
			case "PREEMPTED", "REQUEUED":
				rep.Preemptions++
				if r.Start > 0 && r.End > r.Start {
					rep.LostGPUSeconds += float64(r.GPUs) * float64(r.End-r.Start)
				}
			}
			if IsBorrowQOS(r.QOS) {
				rep.BorrowRuns++
				borrowed = true
			}
			alloc.add(r)
			if r.Submit > 0 && (rep.Start == 0 || r.Submit < rep.Start) {
				rep.Start = r.Submit
			}
			rep.End = max(rep.End, r.End)
		}
		if borrowed {
			rep.BorrowedJobs++
		}
		if !completed {
			rep.Lost = append(rep.Lost, s.JobID+" ("+last.State+")")
			continue
		}
		rep.Completed++
		if submit > 0 && start >= submit {
			rep.Waits[s.Job.Class] = append(rep.Waits[s.Job.Class], float64(start-submit))
		}
		if submit > 0 && done >= submit {
			rep.JCTs[s.Job.Class] = append(rep.JCTs[s.Job.Class], float64(done-submit))
		}
	}
}

// timeline fills the report's GPUs-in-use timeline and each account's peak outside the borrow
// QOS from the allocation events.
func (a *allocations) timeline(rep *Report) {
	// Ends before starts at the same second, so a GPU handed over is not counted twice.
	slices.SortStableFunc(a.events, func(x, y allocEvent) int {
		if x.t != y.t {
			return int(x.t - y.t)
		}
		return x.delta - y.delta
	})
	total, held := 0, map[string]int{}
	for _, e := range a.events {
		total += e.delta
		if e.account != "" {
			held[e.account] += e.delta
			rep.PeakGuaranteed[e.account] = max(rep.PeakGuaranteed[e.account], held[e.account])
		}
		t := float64(e.t - rep.Start)
		if n := len(rep.Timeline); n > 0 && rep.Timeline[n-1].T == t {
			rep.Timeline[n-1].GPUs = total
		} else {
			rep.Timeline = append(rep.Timeline, Point{T: t, GPUs: total})
		}
	}
}

// Percentile is the nearest-rank percentile of sorted values; NaN when there are none.
func Percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[clamp(rank, 1, len(sorted))-1]
}

// Mean of values; NaN when there are none.
func Mean(values []float64) float64 {
	if len(values) == 0 {
		return math.NaN()
	}
	sum := 0.0
	for _, v := range values {
		sum += v
	}
	return sum / float64(len(values))
}

// Print writes the report as the results file shows it.
func (r *Report) Print(w io.Writer) {
	fmt.Fprintf(w, "mode %s: %d jobs submitted, %d accounted, %d completed, %d lost\n", r.Mode, r.Submitted, r.Accounted, r.Completed, len(r.Lost))
	for _, l := range r.Lost {
		fmt.Fprintf(w, "  LOST %s\n", l)
	}
	fmt.Fprintf(w, "  GPU allocation ratio %.3f (%.0f GPU-s / (%d GPUs x %d s))\n", r.AllocRatio, r.GPUSeconds, r.CapacityGPUs, r.End-r.Start)
	for _, c := range Classes {
		ws, jct := r.Waits[c], r.JCTs[c]
		fmt.Fprintf(w, "  wait %-13s n=%-4d p50 %6.1f s  p95 %6.1f s  p99 %6.1f s;  JCT mean %6.1f s  p99 %6.1f s\n",
			c, len(ws), Percentile(ws, 50), Percentile(ws, 95), Percentile(ws, 99), Mean(jct), Percentile(jct, 99))
	}
	perRequeue := 0.0
	if r.Preemptions > 0 {
		perRequeue = r.LostGPUSeconds / float64(r.Preemptions)
	}
	perBorrowed := 0.0
	if r.BorrowedJobs > 0 {
		perBorrowed = float64(r.Preemptions) / float64(r.BorrowedJobs)
	}
	fmt.Fprintf(w, "  preemptions %d (work lost %.0f GPU-s, %.0f per preemption), runs in the borrow QOS %d by %d jobs (%.2f requeues per borrowed job)\n",
		r.Preemptions, r.LostGPUSeconds, perRequeue, r.BorrowRuns, r.BorrowedJobs, perBorrowed)
	var peaks []string
	for _, a := range slices.Sorted(maps.Keys(r.PeakGuaranteed)) {
		peaks = append(peaks, fmt.Sprintf("%s %d", a, r.PeakGuaranteed[a]))
	}
	fmt.Fprintf(w, "  peak GPUs held outside the borrow QOS: %s\n", strings.Join(peaks, ", "))
	for _, d := range SummarizeDaemons(r.DaemonSamples) {
		if d.SamplesAlive == 0 {
			continue
		}
		fmt.Fprintf(w, "  %-9s RSS %.1f MB at the start, %.1f MB at most", d.Name, d.RSSFirstMB, d.RSSMaxMB)
		if d.Cycles > 0 {
			fmt.Fprintf(w, "; cycles' mean per %d-s sample: median %.3f s, worst %.3f s (%d samples)", int(sampleSpacing(r.DaemonSamples)), d.CycleP50, d.CycleMax, d.Cycles)
		}
		fmt.Fprintln(w)
	}
	if r.RPCs != nil {
		n, us := slurm.Total(r.RPCs.ByType)
		fmt.Fprintf(w, "  slurmctld RPCs during the mode: %d, %.1f s of its time; by user:", n, float64(us)/1e6)
		for _, u := range slurm.Top(r.RPCs.ByUser, 6) {
			fmt.Fprintf(w, " %s %d", u.Name, u.Count)
		}
		fmt.Fprint(w, "; by type:")
		for _, t := range slurm.Top(r.RPCs.ByType, 8) {
			fmt.Fprintf(w, " %s %d", strings.TrimPrefix(t.Name, "REQUEST_"), t.Count)
		}
		fmt.Fprintln(w)
	}
	if r.Mode == Elastic {
		fmt.Fprintf(w, "  elastic: %d jobs, %d grown; elasticd %d grows, %d shrinks; %d worker jobs (%d ran, %.0f GPU-s, counted in the allocation above, not as jobs); run time %.2f x one worker's\n",
			r.ElasticJobs, r.Grown, r.Grows, r.Shrinks, r.WorkerJobs, r.WorkerRuns, r.WorkerGPUSeconds, r.ElasticRunRatio)
	}
}

// Comparison is a mode against static quotas, side by side.
type Comparison struct {
	Mode             Mode    // the mode compared
	AllocGain        float64 // its allocation ratio / static's
	InQuotaP95       float64 // its in-quota p95 wait / static's
	StaticP95, SBP95 float64
}

// Goals of the trace replay for slurmbridge against static quotas: GPU allocation ratio at least
// x1.3 theirs, in-quota p95 wait at most x1.1.
const (
	GoalAllocGain  = 1.3
	GoalInQuotaP95 = 1.1
)

// Compare puts two reports of the same plan side by side.
func Compare(static, sb *Report) Comparison {
	c := Comparison{Mode: sb.Mode, StaticP95: Percentile(static.Waits[InQuota], 95), SBP95: Percentile(sb.Waits[InQuota], 95)}
	if static.AllocRatio > 0 {
		c.AllocGain = sb.AllocRatio / static.AllocRatio
	}
	switch {
	case c.StaticP95 > 0:
		c.InQuotaP95 = c.SBP95 / c.StaticP95
	case c.SBP95 == 0:
		c.InQuotaP95 = 1 // both waited 0 s: equal
	default:
		c.InQuotaP95 = math.Inf(1)
	}
	return c
}

// Print says whether the goals are met.
func (c Comparison) Print(w io.Writer) {
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "NOT met"
	}
	fmt.Fprintf(w, "%s vs static: allocation ratio x%.2f (goal >= %.1f: %s); in-quota p95 wait %.1f s vs %.1f s, x%.2f (goal <= %.1f: %s)\n",
		c.Mode, c.AllocGain, GoalAllocGain, verdict(c.AllocGain >= GoalAllocGain), c.SBP95, c.StaticP95, c.InQuotaP95, GoalInQuotaP95, verdict(c.InQuotaP95 <= GoalInQuotaP95))
}
