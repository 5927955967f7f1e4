package replay

import (
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Class is how a job is treated by quotas.
type Class string

const (
	// InQuota is the trace's LS, Guaranteed and Burstable work: it runs in its project's
	// guaranteed QOS.
	InQuota Class = "in-quota"
	// Opportunistic is the trace's BE work: under slurmbridge it is submitted with --requeue,
	// as a site's users submit work that may borrow, and quotad lends it idle GPUs once it is
	// over its project's guarantee (a user may not submit into the borrow QOS itself).
	Opportunistic Class = "opportunistic"
)

// Classes in report order.
var Classes = []Class{InQuota, Opportunistic}

// Project is a testbed account with its guaranteed GPUs of one type.
type Project struct {
	Account string
	User    string
	GPUType string
	GPUs    int
	// ByType is the guarantee by GPU type, as the quota table gives it.
	ByType map[string]int
	// GuaranteedQOS is the account's guaranteed QOS as the quota table names it.
	GuaranteedQOS string
}

// Shape is one testbed node: what CPU and memory requests are scaled to.
type Shape struct {
	CPUs     int
	MemoryMB int
	GPUs     int
}

// Trace node shape the requests are scaled from: the trace's most common GPU node
// (openb_node_list_gpu_node.csv: 549 of 1213 nodes are G2 with 96 CPUs, 393216 MiB, 8 GPUs).
const (
	traceNodeCPUs      = 96
	traceNodeMemoryMiB = 393216
	traceNodeGPUs      = 8
)

// ModelTypes maps the trace's GPU models to the testbed's GPU types by generation: Pascal and
// Volta cards to v100, Turing, Ampere and Alibaba's G2/G3 to a100.
var ModelTypes = map[string]string{
	"P100": "v100", "V100M16": "v100", "V100M32": "v100",
	"T4": "a100", "A10": "a100", "G2": "a100", "G3": "a100",
}

// Params are the scaling choices of one replay.
type Params struct {
	Seed int64
	// From and Span select tasks by creation_time: [From, From+Span) in trace seconds.
	From, Span int64
	// Keep is the fraction of the window's GPU tasks kept (seeded by task name), to scale the
	// trace cluster's load down to the testbed.
	Keep float64
	// TimeFactor divides trace time: arrivals and run times are this many times shorter.
	TimeFactor float64
	// MinRun and MaxRun clamp the compressed run time: sbatch and slurmctld need seconds to
	// start a job, and tasks still running at the trace's end have no real end.
	MinRun, MaxRun time.Duration
	Projects       []Project
	Node           Shape
	// Assign, when set, gives each task its project and GPU type ("" asks for any type) in
	// place of the testbed's rule (a task of one type to a project of that type, any other to a
	// project drawn by guaranteed GPUs): a cluster of a site's size has rules of its own
	// (bench/scale).
	Assign func(Task) (Project, string)
	// AssignRule says in words what Assign does, for the plan's description.
	AssignRule string
	// Elastic picks the jobs that mode elastic runs as elastic training jobs.
	Elastic ElasticRule
}

// ElasticRule says which in-quota jobs become elastic training jobs in mode elastic and what
// they do: a task that ran at least MinTraceRun of trace time, kept with probability Share
// (seeded by task name), is `--elastic=1:MaxWorkers:GPUS` (its own GPUs per worker) running the
// synthetic trainer with total throughput Curve (samples/s by world size) and a fixed amount of
// work: its mapped run time at one worker's rate, so at one worker it runs as long as in modes
// static and slurmbridge, and growing shortens it. In the other modes these jobs sleep their
// run time like every other job.
type ElasticRule struct {
	MinTraceRun time.Duration
	Share       float64
	MaxWorkers  int // 0: no elastic jobs
	Curve       string
}

// DefaultElastic is the rule of the presets.
var DefaultElastic = ElasticRule{MinTraceRun: time.Hour, Share: 1, MaxWorkers: 4, Curve: "1:100,2:190,3:270,4:340"}

// OneWorkerRate is the curve's samples/s at world size 1 (the first point must be K=1).
func (e ElasticRule) OneWorkerRate() (float64, error) {
	first, _, _ := strings.Cut(e.Curve, ",")
	k, r, ok := strings.Cut(first, ":")
	rate, err := strconv.ParseFloat(r, 64)
	if !ok || k != "1" || err != nil || rate <= 0 {
		return 0, fmt.Errorf("elastic curve %q: want 1:SAMPLES_PER_SEC,K:SAMPLES_PER_SEC,...", e.Curve)
	}
	for _, pt := range strings.Split(e.Curve, ",") {
		k, r, ok := strings.Cut(pt, ":")
		n, err1 := strconv.Atoi(k)
		v, err2 := strconv.ParseFloat(r, 64)
		if !ok || err1 != nil || err2 != nil || n < 1 || v <= 0 {
			return 0, fmt.Errorf("elastic curve %q: bad point %q", e.Curve, pt)
		}
	}
	return rate, nil
}

// Job is one trace task as a testbed job.
type Job struct {
	Task     string
	TraceQoS string
	Class    Class
	Project  Project
	GPUType  string
	GPUs     int
	CPUs     int
	MemoryMB int
	Arrival  time.Duration // after the replay starts
	Runtime  time.Duration
	// TraceRuntime is the uncompressed run time, for the record.
	TraceRuntime time.Duration
	// Elastic: in mode elastic, an elastic training job of Samples samples (see ElasticRule).
	Elastic bool
	Samples int
}

// Plan is the mapped window: the jobs and what was left out or changed, and why.
type Plan struct {
	Params Params
	Jobs   []Job
	// Counters of the choices made (see Describe).
	InWindow, Thinned, CPUOnly, NoEnd             int
	Shared, CappedGPUs, ClampedShort, ClampedLong int
	// By account: jobs asking for one GPU type (Typed[account][type]), for any, and in all.
	Typed                     map[string]map[string]int
	AnyType, ByProjectAccount map[string]int
	OfferedGPUSeconds         float64
	ElasticJobs               int
}

// Map applies the rules to tasks; it is deterministic for a given Params.Seed.
func Map(tasks []Task, p Params) (*Plan, error) {
	if err := p.validate(); err != nil {
		return nil, err
	}
	var oneWorker float64
	if p.Elastic.MaxWorkers > 0 {
		r, err := p.Elastic.OneWorkerRate()
		if err != nil {
			return nil, err
		}
		oneWorker = r
	}
	pl := &Plan{Params: p, Typed: map[string]map[string]int{}, AnyType: map[string]int{}, ByProjectAccount: map[string]int{}}
	byType := map[string][]Project{}
	for _, pr := range p.Projects {
		byType[pr.GPUType] = append(byType[pr.GPUType], pr)
	}
	for _, t := range tasks {
		if t.Creation < p.From || t.Creation >= p.From+p.Span {
			continue
		}
		pl.InWindow++
		if t.NumGPU == 0 {
			pl.CPUOnly++
			continue
		}
		if Unit(p.Seed, t.Name, "keep") >= p.Keep {
			pl.Thinned++
			continue
		}
		start := t.Scheduled
		if start < 0 {
			start = t.Creation
		}
		if t.Deletion < 0 || t.Deletion < start {
			pl.NoEnd++
			continue
		}
		j := Job{Task: t.Name, TraceQoS: t.QoS, Class: InQuota, TraceRuntime: time.Duration(t.Deletion-start) * time.Second}
		if t.QoS == "BE" {
			j.Class = Opportunistic
		}
		var typed bool
		j.Project, j.GPUType, typed = p.assign(t, byType)
		if !typed {
			pl.AnyType[j.Project.Account]++
		} else {
			if pl.Typed[j.Project.Account] == nil {
				pl.Typed[j.Project.Account] = map[string]int{}
			}
			pl.Typed[j.Project.Account][j.GPUType]++
		}
		pl.ByProjectAccount[j.Project.Account]++
		// GPUs: Slurm does not share a GPU without MPS/shard, so a fraction is one GPU; more
		// than the project's quota (or a node) could never run under static quotas.
		j.GPUs = t.NumGPU
		if t.GPUMilli > 0 && t.GPUMilli < 1000 {
			pl.Shared++
		}
		if limit := min(j.Project.GPUs, p.Node.GPUs); j.GPUs > limit {
			j.GPUs = limit
			pl.CappedGPUs++
		}
		// CPU and memory: the trace node's share per GPU scaled to the testbed node's, kept
		// within the job's GPU share of a node so they never strand GPUs.
		cpuScale := float64(p.Node.CPUs*traceNodeGPUs) / float64(p.Node.GPUs*traceNodeCPUs)
		memScale := float64(p.Node.MemoryMB*traceNodeGPUs) / float64(p.Node.GPUs*traceNodeMemoryMiB)
		cpuShare := p.Node.CPUs * j.GPUs / p.Node.GPUs
		memShare := p.Node.MemoryMB * j.GPUs / p.Node.GPUs
		j.CPUs = clamp(int(math.Ceil(float64(t.CPUMilli)/1000*cpuScale)), 1, max(cpuShare, 1))
		j.MemoryMB = clamp(int(math.Ceil(float64(t.MemoryMiB)*memScale)), 100, max(memShare, 100))
		// Times.
		j.Arrival = scale(time.Duration(t.Creation-p.From)*time.Second, p.TimeFactor)
		run := scale(j.TraceRuntime, p.TimeFactor).Round(time.Second)
		switch {
		case run < p.MinRun:
			run = p.MinRun
			pl.ClampedShort++
		case run > p.MaxRun:
			run = p.MaxRun
			pl.ClampedLong++
		}
		j.Runtime = run
		if e := p.Elastic; e.MaxWorkers > 0 && j.Class == InQuota && j.TraceRuntime >= e.MinTraceRun && Unit(p.Seed, t.Name, "elastic") < e.Share {
			j.Elastic = true
			j.Samples = int(math.Round(run.Seconds() * oneWorker))
			pl.ElasticJobs++
		}
		pl.OfferedGPUSeconds += float64(j.GPUs) * run.Seconds()
		pl.Jobs = append(pl.Jobs, j)
	}
	slices.SortStableFunc(pl.Jobs, func(a, b Job) int { return int(a.Arrival - b.Arrival) })
	return pl, nil
}

// assign is the task's project and GPU type, and whether the type is the task's own (typed)
// rather than any: Assign's, or the testbed's rule. There a task that allows one testbed type
// only goes to a project guaranteed that type; any other task picks a project weighted by
// guaranteed GPUs and asks for that project's type, so no job asks for a type its project has
// no quota for.
func (p *Params) assign(t Task, byType map[string][]Project) (pr Project, gpuType string, typed bool) {
	if p.Assign != nil {
		pr, gpuType = p.Assign(t)
		return pr, gpuType, gpuType != ""
	}
	if types := testbedTypes(t.GPUSpec); len(types) == 1 && len(byType[types[0]]) > 0 {
		pr = pick(p.Seed, t.Name, byType[types[0]])
		return pr, pr.GPUType, true
	}
	pr = pick(p.Seed, t.Name, p.Projects)
	return pr, pr.GPUType, false
}

func (p *Params) validate() error {
	switch {
	case p.Span <= 0:
		return fmt.Errorf("span must be positive, got %d s", p.Span)
	case p.Keep <= 0 || p.Keep > 1:
		return fmt.Errorf("keep must be in (0, 1], got %g", p.Keep)
	case p.TimeFactor < 1:
		return fmt.Errorf("time factor must be at least 1, got %g", p.TimeFactor)
	case p.MinRun <= 0 || p.MaxRun < p.MinRun:
		return fmt.Errorf("need 0 < min-run <= max-run, got %s and %s", p.MinRun, p.MaxRun)
	case len(p.Projects) == 0:
		return fmt.Errorf("no projects")
	case p.Elastic.MaxWorkers < 0 || p.Elastic.Share < 0 || p.Elastic.Share > 1:
		return fmt.Errorf("elastic rule %+v: want max workers >= 0 and share in [0, 1]", p.Elastic)
	case p.Node.CPUs <= 0 || p.Node.MemoryMB <= 0 || p.Node.GPUs <= 0:
		return fmt.Errorf("node shape %+v: every field must be positive", p.Node)
	}
	for _, pr := range p.Projects {
		if pr.GPUs <= 0 || (pr.GPUType == "" && p.Assign == nil) || pr.User == "" {
			return fmt.Errorf("project %s needs a user, a GPU type and a guarantee", pr.Account)
		}
	}
	return nil
}

// testbedTypes is the set of testbed GPU types the task allows (sorted); empty: any.
func testbedTypes(spec []string) []string {
	var out []string
	for _, model := range spec {
		t, ok := ModelTypes[model]
		if !ok {
			return nil // an unknown model: treat the task as any-type
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out
}

// pick chooses a project with probability proportional to its guaranteed GPUs.
func pick(seed int64, name string, projects []Project) Project {
	total := 0
	for _, p := range projects {
		total += p.GPUs
	}
	x := Unit(seed, name, "project") * float64(total)
	for _, p := range projects {
		if x < float64(p.GPUs) {
			return p
		}
		x -= float64(p.GPUs)
	}
	return projects[len(projects)-1]
}

// Unit is a number in [0, 1) fixed by seed, task name and purpose: FNV-1a, then splitmix64's
// finaliser, because FNV's high bits barely change between names that differ in the last digit.
func Unit(seed int64, name, purpose string) float64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%s/%s", seed, purpose, name)
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return float64(x>>11) / (1 << 53)
}

func scale(d time.Duration, factor float64) time.Duration {
	return time.Duration(float64(d) / factor)
}

func clamp(v, lo, hi int) int { return max(lo, min(v, hi)) }

// Span is the arrival span of the plan.
func (pl *Plan) Span() time.Duration {
	if len(pl.Jobs) == 0 {
		return 0
	}
	return pl.Jobs[len(pl.Jobs)-1].Arrival
}

// Describe prints every scaling choice and what it did to this window.
func (pl *Plan) Describe(w io.Writer) {
	p := pl.Params
	var classes [2]int
	for _, j := range pl.Jobs {
		if j.Class == InQuota {
			classes[0]++
		} else {
			classes[1]++
		}
	}
	fmt.Fprintf(w, "trace window: creation_time in [%d, %d) s (%.1f h of trace), %d tasks\n",
		p.From, p.From+p.Span, float64(p.Span)/3600, pl.InWindow)
	fmt.Fprintf(w, "  CPU-only tasks skipped (the measures are about GPUs): %d\n", pl.CPUOnly)
	fmt.Fprintf(w, "  GPU tasks kept with probability %g, seeded by task name (seed %d): %d thinned out\n", p.Keep, p.Seed, pl.Thinned)
	fmt.Fprintf(w, "  tasks without a deletion_time after their start skipped: %d\n", pl.NoEnd)
	fmt.Fprintf(w, "jobs: %d (%d in-quota: LS/Guaranteed/Burstable; %d opportunistic: BE)\n", len(pl.Jobs), classes[0], classes[1])
	fmt.Fprintf(w, "time: trace seconds divided by %g; run time = deletion - scheduled (creation if never scheduled), clamped to [%s, %s]: %d raised, %d cut\n",
		p.TimeFactor, p.MinRun, p.MaxRun, pl.ClampedShort, pl.ClampedLong)
	fmt.Fprintf(w, "  arrivals span %s\n", pl.Span().Round(time.Second))
	if p.Assign == nil {
		fmt.Fprintf(w, "GPU types: models %s; a task allowing one testbed type goes to a project guaranteed it, any other to a project drawn by guaranteed GPUs (seeded) and asks for its type\n", modelTypesString())
	} else {
		fmt.Fprintln(w, p.AssignRule)
	}
	for _, pr := range p.Projects {
		guarantee := fmt.Sprintf("%d %s", pr.GPUs, pr.GPUType)
		if pr.GPUType == "" {
			guarantee = fmt.Sprintf("%d GPUs", pr.GPUs)
		}
		var typed []string
		for _, t := range slices.Sorted(maps.Keys(pl.Typed[pr.Account])) {
			typed = append(typed, fmt.Sprintf("%d typed %s", pl.Typed[pr.Account][t], t))
		}
		typed = append(typed, fmt.Sprintf("%d any-type", pl.AnyType[pr.Account]))
		fmt.Fprintf(w, "  %s (%s, %s guaranteed): %d jobs (%s)\n", pr.Account, pr.User, guarantee,
			pl.ByProjectAccount[pr.Account], strings.Join(typed, ", "))
	}
	fmt.Fprintf(w, "GPUs: a shared GPU (gpu_milli < 1000) is one whole GPU (%d tasks); counts above the project's quota or a node are capped (%d tasks)\n", pl.Shared, pl.CappedGPUs)
	fmt.Fprintf(w, "CPU/memory: trace node %d CPUs, %d MiB, %d GPUs -> testbed node %d CPUs, %d MB, %d GPUs per GPU share; at least 1 CPU and 100 MB, at most the job's GPU share of a node\n",
		traceNodeCPUs, traceNodeMemoryMiB, traceNodeGPUs, p.Node.CPUs, p.Node.MemoryMB, p.Node.GPUs)
	if e := p.Elastic; e.MaxWorkers > 0 {
		rate, _ := e.OneWorkerRate()
		fmt.Fprintf(w, "elastic (mode elastic only): in-quota tasks that ran >= %s of trace time, kept with probability %g (seeded): %d jobs;\n", e.MinTraceRun, e.Share, pl.ElasticJobs)
		fmt.Fprintf(w, "  each is --elastic=1:%d with its own GPUs per worker, workers in the pools of its GPU type; the synthetic trainer with curve %s samples/s\n", e.MaxWorkers, e.Curve)
		fmt.Fprintf(w, "  and a fixed work of run time x %g samples (its run time at one worker: growing shortens it); in modes static and slurmbridge they sleep like the others\n", rate)
	} else {
		fmt.Fprintln(w, "elastic: no elastic jobs (max workers 0)")
	}
	fmt.Fprintf(w, "offered: %.0f GPU-seconds; if every job started on arrival, the last would end %s after the first arrival\n",
		pl.OfferedGPUSeconds, pl.ArrivalBoundSpan().Round(100*time.Millisecond))
}

// ArrivalBoundSpan is the shortest span any scheduler can give the window: every job starting
// the moment it arrives. With the offered GPU-seconds it bounds the allocation ratio
// (MaxAllocRatio), so a mode's ratio reads against what the window's load allows.
func (pl *Plan) ArrivalBoundSpan() time.Duration {
	var first, last time.Duration
	for i, j := range pl.Jobs {
		if i == 0 || j.Arrival < first {
			first = j.Arrival
		}
		last = max(last, j.Arrival+j.Runtime)
	}
	return last - first
}

// MaxAllocRatio is the allocation ratio of the arrival-bound span on capacity GPUs: above it no
// mode can go (up to a second or two of Slurm's own start-up per job).
func (pl *Plan) MaxAllocRatio(capacityGPUs int) float64 {
	span := pl.ArrivalBoundSpan().Seconds()
	if span <= 0 || capacityGPUs <= 0 {
		return 0
	}
	return pl.OfferedGPUSeconds / (float64(capacityGPUs) * span)
}

func modelTypesString() string {
	var parts []string
	for _, m := range slices.Sorted(maps.Keys(ModelTypes)) {
		parts = append(parts, m+"->"+ModelTypes[m])
	}
	return strings.Join(parts, " ")
}

// SbatchArgs are the job's sbatch options under mode; tag names the replay in job names.
func (j *Job) SbatchArgs(mode Mode, tag string) []string {
	secs := int(j.Runtime.Seconds())
	// Generous limit: a job killed by its time limit would count as lost.
	limitMin := (2*secs+120)/60 + 1
	gres := "--gres=gpu:" + strconv.Itoa(j.GPUs)
	if j.GPUType != "" {
		gres = "--gres=gpu:" + j.GPUType + ":" + strconv.Itoa(j.GPUs)
	}
	args := []string{
		"--job-name=" + tag + "-" + j.Task,
		"--account=" + j.Project.Account,
		gres,
		"--ntasks=1",
		"--cpus-per-task=" + strconv.Itoa(j.CPUs),
		"--mem=" + strconv.Itoa(j.MemoryMB),
		"--time=" + strconv.Itoa(limitMin),
		"--comment=replay=" + tag + " trace_qos=" + j.TraceQoS,
	}
	if mode != Static && j.Class == Opportunistic {
		args = append(args, "--requeue")
	}
	return append(args, "--wrap=sleep "+strconv.Itoa(secs))
}

// ElasticSetup is what an elastic job's submission needs beyond the job.
type ElasticSetup struct {
	Rule    ElasticRule
	Trainer string // absolute path of elasticd/examples/synthetic_trainer.py, readable by the users
	WorkDir string // where the jobs' output goes (writable by the users)
	Pools   map[string][]string
}

// ElasticSbatchArgs are the sbatch options of an elastic job in mode elastic: SbatchArgs with
// the declaration, and the trainer instead of sleep. Worker jobs run the same script.
func (j *Job) ElasticSbatchArgs(tag string, e ElasticSetup) []string {
	args := j.SbatchArgs(Elastic, tag)
	args = args[:len(args)-1] // the --wrap=sleep
	limitSecs := int(j.Runtime.Seconds())*2 + 120
	return append(args,
		fmt.Sprintf("--elastic=1:%d:%d", e.Rule.MaxWorkers, j.GPUs),
		"--elastic-pools="+strings.Join(e.Pools[j.GPUType], ","),
		"--chdir="+e.WorkDir,
		"--output="+filepath.Join(e.WorkDir, tag+"-%j.out"),
		// The duration only bounds a job whose work never completes, inside its time limit.
		fmt.Sprintf("--wrap=exec python3 %s --curve %s --interval 1 --samples %d --duration %d", e.Trainer, e.Rule.Curve, j.Samples, limitSecs))
}

// TestbedNode is every GPU node of the testbed (slurm-conf/testbed/slurm.conf.in).
var TestbedNode = Shape{CPUs: 8, MemoryMB: 32000, GPUs: 4}
