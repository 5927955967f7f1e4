package replay

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

const excerpt = "../testdata/alibaba-gpu-v2023-gpuspec25-excerpt.csv"

var testProjects = []Project{
	{Account: "proj-a", User: "alice", GPUType: "a100", GPUs: 4},
	{Account: "proj-b", User: "bob", GPUType: "a100", GPUs: 4},
	{Account: "proj-c", User: "carol", GPUType: "v100", GPUs: 2},
}

func testParams() Params {
	return Params{Seed: 1, From: 10368000, Span: 24 * 3600, Keep: 1, TimeFactor: 240,
		MinRun: 15 * time.Second, MaxRun: 45 * time.Second, Projects: testProjects, Node: TestbedNode}
}

func readExcerpt(t *testing.T) []Task {
	t.Helper()
	f, err := os.Open(excerpt)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tasks, err := ReadTasks(f)
	if err != nil {
		t.Fatal(err)
	}
	return tasks
}

func TestReadTasks(t *testing.T) {
	tasks := readExcerpt(t)
	if len(tasks) != 250 {
		t.Fatalf("read %d tasks, want the excerpt's 250", len(tasks))
	}
	first := tasks[0]
	if first.Name != "openb-pod-0946" || first.NumGPU != 1 || first.GPUMilli != 470 || first.QoS != "LS" ||
		first.Creation != 10368044 || first.Scheduled != 10368046 || first.Deletion != 10370909 || len(first.GPUSpec) != 0 {
		t.Errorf("first task read as %+v", first)
	}
	_, err := ReadTasks(strings.NewReader("name,cpu_milli\nx,1\n"))
	if err == nil || !strings.Contains(err.Error(), "memory_mib") {
		t.Errorf("a header without memory_mib: %v", err)
	}
	header := strings.Join(traceColumns, ",")
	_, err = ReadTasks(strings.NewReader(header + "\np,1000,1024,x,0,,LS,Running,5,6,5\n"))
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("a bad num_gpu: %v, want an error naming line 2", err)
	}
	tasks, err = ReadTasks(strings.NewReader(header + "\np,1000,1024,2,1000,V100M16|V100M32,BE,Pending,5,,\n"))
	if err != nil || tasks[0].Deletion != -1 || tasks[0].Scheduled != -1 || len(tasks[0].GPUSpec) != 2 {
		t.Errorf("empty times and a spec list: %+v, %v", tasks, err)
	}
}

func TestMapRules(t *testing.T) {
	tasks := readExcerpt(t)
	pl, err := Map(tasks, testParams())
	if err != nil {
		t.Fatal(err)
	}
	if len(pl.Jobs) == 0 || pl.CPUOnly == 0 {
		t.Fatalf("plan has %d jobs, %d CPU-only skipped", len(pl.Jobs), pl.CPUOnly)
	}
	if pl.InWindow != len(pl.Jobs)+pl.CPUOnly+pl.Thinned+pl.NoEnd {
		t.Errorf("window of %d tasks does not add up: %d jobs, %d cpu-only, %d thinned, %d without end", pl.InWindow, len(pl.Jobs), pl.CPUOnly, pl.Thinned, pl.NoEnd)
	}
	byName := map[string]Task{}
	for _, tk := range tasks {
		byName[tk.Name] = tk
	}
	quota := map[string]int{}
	for _, p := range testProjects {
		quota[p.Account] = p.GPUs
	}
	for i, j := range pl.Jobs {
		tk := byName[j.Task]
		if j.GPUType != j.Project.GPUType {
			t.Errorf("%s asks for %s, its project %s is guaranteed %s", j.Task, j.GPUType, j.Project.Account, j.Project.GPUType)
		}
		if types := testbedTypes(tk.GPUSpec); len(types) == 1 && types[0] != j.GPUType {
			t.Errorf("%s allows only %s and was given %s", j.Task, types[0], j.GPUType)
		}
		if j.GPUs < 1 || j.GPUs > quota[j.Project.Account] || j.GPUs > tk.NumGPU {
			t.Errorf("%s: %d GPUs for a task of %d in %s", j.Task, j.GPUs, tk.NumGPU, j.Project.Account)
		}
		if j.CPUs < 1 || j.CPUs > 2*j.GPUs || j.MemoryMB < 100 || j.MemoryMB > 8000*j.GPUs {
			t.Errorf("%s: %d CPUs, %d MB for %d GPUs is outside its share of a node", j.Task, j.CPUs, j.MemoryMB, j.GPUs)
		}
		if j.Runtime < 15*time.Second || j.Runtime > 45*time.Second {
			t.Errorf("%s: run time %s outside the clamp", j.Task, j.Runtime)
		}
		if want := time.Duration(float64(tk.Creation-10368000) / 240 * float64(time.Second)); (j.Arrival - want).Abs() > time.Microsecond {
			t.Errorf("%s arrives at %s, want %s", j.Task, j.Arrival, want)
		}
		if (tk.QoS == "BE") != (j.Class == Opportunistic) {
			t.Errorf("%s of QoS %s is %s", j.Task, tk.QoS, j.Class)
		}
		if i > 0 && j.Arrival < pl.Jobs[i-1].Arrival {
			t.Errorf("jobs not in arrival order at %s", j.Task)
		}
	}
	// Same seed, same plan; another seed moves projects.
	again, _ := Map(tasks, testParams())
	p2 := testParams()
	p2.Seed = 2
	other, _ := Map(tasks, p2)
	same, moved := true, false
	for i := range pl.Jobs {
		same = same && again.Jobs[i].Project.Account == pl.Jobs[i].Project.Account
		moved = moved || other.Jobs[i].Project.Account != pl.Jobs[i].Project.Account
	}
	if !same || !moved {
		t.Errorf("seeded assignment: same seed reproduces %v, another seed changes it %v", same, moved)
	}
	// Thinning keeps about the fraction asked for.
	p3 := testParams()
	p3.Keep = 0.5
	half, _ := Map(tasks, p3)
	if n, all := len(half.Jobs), len(pl.Jobs); n < all/4 || n > 3*all/4 {
		t.Errorf("keep 0.5 kept %d of %d jobs", n, all)
	}
	var b strings.Builder
	pl.Describe(&b)
	for _, want := range []string{"divided by 240", "clamped to [15s, 45s]", "proj-c (carol, 2 v100 guaranteed)", "P100->v100", "seed 1"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("Describe does not say %q:\n%s", want, b.String())
		}
	}
}

func TestMapRefusesBadParams(t *testing.T) {
	p := testParams()
	p.TimeFactor = 0.5
	if _, err := Map(nil, p); err == nil {
		t.Error("a time factor below 1 was accepted")
	}
	p = testParams()
	p.MaxRun = time.Second
	if _, err := Map(nil, p); err == nil {
		t.Error("max-run below min-run was accepted")
	}
}

func TestSbatchArgs(t *testing.T) {
	j := Job{Task: "openb-pod-1", TraceQoS: "BE", Class: Opportunistic, Project: testProjects[2], GPUType: "v100", GPUs: 2, CPUs: 3, MemoryMB: 5000, Runtime: 30 * time.Second}
	static := strings.Join(j.SbatchArgs(Static, "r"), " ")
	sb := strings.Join(j.SbatchArgs(Slurmbridge, "r"), " ")
	for _, want := range []string{"--gres=gpu:v100:2", "--account=proj-c", "--cpus-per-task=3", "--mem=5000", "--wrap=sleep 30"} {
		if !strings.Contains(static, want) {
			t.Errorf("args %q lack %q", static, want)
		}
	}
	if strings.Contains(static, "--requeue") || strings.Contains(sb, "--qos=") || !strings.Contains(sb, "--requeue") {
		t.Errorf("opportunistic job: static %q, slurmbridge %q; want only slurmbridge's with --requeue, and neither naming a QOS (quotad lends)", static, sb)
	}
	j.Class = InQuota
	if strings.Contains(strings.Join(j.SbatchArgs(Slurmbridge, "r"), " "), "--qos=") {
		t.Error("an in-quota job was sent to a QOS other than its default")
	}
}

// A sacct -D capture shape: job 11 was preempted once and requeued.
const sacctOut = `10|proj-a|guar-proj-a|a100|COMPLETED|100|100|130|billing=1,cpu=1,gres/gpu:a100=2,gres/gpu=2,mem=1000M,node=1
11|proj-b|borrow-proj-b|a100-spot|PREEMPTED|105|110|125|billing=1,cpu=1,gres/gpu:a100=1,gres/gpu=1,mem=1000M,node=1
11|proj-b|guar-proj-b|a100|COMPLETED|125|140|160|billing=1,cpu=1,gres/gpu:a100=1,gres/gpu=1,mem=1000M,node=1
12|proj-c|guar-proj-c|v100|CANCELLED by 0|110|Unknown|120|
`

func TestAnalyze(t *testing.T) {
	recs, err := ParseSacct([]byte(sacctOut))
	if err != nil {
		t.Fatal(err)
	}
	subs := []Submitted{
		{JobID: "10", Job: Job{Class: InQuota}},
		{JobID: "11", Job: Job{Class: Opportunistic}},
		{JobID: "12", Job: Job{Class: InQuota}},
		{JobID: "13", Job: Job{Class: InQuota}},
	}
	rep := Analyze(Slurmbridge, subs, recs, nil, 20)
	if rep.Accounted != 3 || rep.Completed != 2 || len(rep.Lost) != 2 {
		t.Errorf("accounted %d, completed %d, lost %v", rep.Accounted, rep.Completed, rep.Lost)
	}
	if rep.Preemptions != 1 || rep.BorrowRuns != 1 {
		t.Errorf("preemptions %d, borrow runs %d, want 1 and 1", rep.Preemptions, rep.BorrowRuns)
	}
	// 2x30 + 1x15 + 1x20 GPU-seconds over [100, 160] on 20 GPUs.
	if rep.GPUSeconds != 95 || math.Abs(rep.AllocRatio-95.0/1200) > 1e-9 {
		t.Errorf("GPU-seconds %v, ratio %v", rep.GPUSeconds, rep.AllocRatio)
	}
	if w := rep.Waits[Opportunistic]; len(w) != 1 || w[0] != 5 {
		t.Errorf("opportunistic waits %v, want [5] (first start - first submit)", w)
	}
	if w := rep.Waits[InQuota]; len(w) != 1 || w[0] != 0 {
		t.Errorf("in-quota waits %v, want only the completed job's 0", w)
	}
	// Job 11: submitted at 105, its completing run ended at 160; job 10 ran 100 to 130.
	if d := rep.JCTs[Opportunistic]; len(d) != 1 || d[0] != 55 {
		t.Errorf("opportunistic JCTs %v, want [55] (end of the completing run - first submit)", d)
	}
	if d := rep.JCTs[InQuota]; len(d) != 1 || d[0] != 30 {
		t.Errorf("in-quota JCTs %v, want only the completed job's 30", d)
	}
	// The preempted run of job 11 held 1 GPU from 110 to 125.
	if rep.LostGPUSeconds != 15 {
		t.Errorf("lost work %v GPU-s, want 15", rep.LostGPUSeconds)
	}
	if rep.PeakGuaranteed["proj-a"] != 2 || rep.PeakGuaranteed["proj-b"] != 1 {
		t.Errorf("peaks %v", rep.PeakGuaranteed)
	}
	want := []Point{{0, 2}, {10, 3}, {25, 2}, {30, 0}, {40, 1}, {60, 0}}
	if len(rep.Timeline) != len(want) {
		t.Fatalf("timeline %v, want %v", rep.Timeline, want)
	}
	for i := range want {
		if rep.Timeline[i] != want[i] {
			t.Errorf("timeline %v, want %v", rep.Timeline, want)
			break
		}
	}
}

// Job 20 is elastic: worker 21 ran beside it, worker 22 was cancelled while pending, worker 23
// started as the main job ended. The workers add to allocation and peaks, never to the job
// counts or waits.
func TestAnalyzeElasticWorkers(t *testing.T) {
	recs, err := ParseSacct([]byte("20|proj-a|guar-proj-a|a100|COMPLETED|100|100|120|gres/gpu=1\n"))
	if err != nil {
		t.Fatal(err)
	}
	workers, err := ParseSacct([]byte("21|proj-a|guar-proj-a|a100|CANCELLED|104|105|121|gres/gpu=1\n" +
		"22|proj-a|guar-proj-a|a100|CANCELLED|110|Unknown|115|\n" +
		"23|proj-a|guar-proj-a|a100|CANCELLED|119|120|121|gres/gpu=1\n"))
	if err != nil {
		t.Fatal(err)
	}
	subs := []Submitted{{JobID: "20", Job: Job{Class: InQuota, Elastic: true, Runtime: 40 * time.Second}}}
	rep := Analyze(Elastic, subs, recs, map[string][]Record{"20": workers}, 4)
	if rep.Submitted != 1 || rep.Completed != 1 || len(rep.Lost) != 0 || len(rep.Waits[InQuota]) != 1 {
		t.Errorf("jobs: submitted %d, completed %d, lost %v, waits %v: workers counted as jobs", rep.Submitted, rep.Completed, rep.Lost, rep.Waits)
	}
	if rep.ElasticJobs != 1 || rep.Grown != 1 || rep.WorkerJobs != 3 || rep.WorkerRuns != 2 || rep.WorkerGPUSeconds != 17 {
		t.Errorf("elastic %d, grown %d, worker jobs %d, runs %d, worker GPU-s %v", rep.ElasticJobs, rep.Grown, rep.WorkerJobs, rep.WorkerRuns, rep.WorkerGPUSeconds)
	}
	// 20 + 16 + 1 GPU-seconds over [100, 121]; two GPUs at once from 105.
	if rep.GPUSeconds != 37 || rep.End != 121 || rep.PeakGuaranteed["proj-a"] != 2 {
		t.Errorf("GPU-s %v, end %d, peaks %v", rep.GPUSeconds, rep.End, rep.PeakGuaranteed)
	}
	if math.Abs(rep.ElasticRunRatio-0.5) > 1e-9 {
		t.Errorf("run ratio %v, want 20 s / 40 s", rep.ElasticRunRatio)
	}
	late := map[string][]Record{"20": workers[2:]}
	if rep := Analyze(Elastic, subs, recs, late, 4); rep.Grown != 0 || rep.WorkerRuns != 1 {
		t.Errorf("a worker that started as its main job ended: grown %d, worker runs %d", rep.Grown, rep.WorkerRuns)
	}
}

func TestParseActions(t *testing.T) {
	page := "# HELP elasticd_actions_total Slurm actions\n# TYPE elasticd_actions_total counter\n" +
		"elasticd_actions_total{action=\"grow\"} 3\nelasticd_actions_total{action=\"terminate\"} 1\nelasticd_decisions_total{action=\"grow\"} 9\n"
	got := ParseActions([]byte(page))
	if len(got) != 2 || got["grow"] != 3 || got["terminate"] != 1 {
		t.Errorf("actions %v", got)
	}
}

func TestElasticRule(t *testing.T) {
	tasks := readExcerpt(t)
	p := testParams()
	p.Elastic = DefaultElastic
	pl, err := Map(tasks, p)
	if err != nil {
		t.Fatal(err)
	}
	if pl.ElasticJobs == 0 {
		t.Fatal("no elastic job in the excerpt's day")
	}
	n := 0
	for _, j := range pl.Jobs {
		if !j.Elastic {
			continue
		}
		n++
		if j.Class != InQuota || j.TraceRuntime < time.Hour || j.Samples != int(j.Runtime.Seconds()*100) {
			t.Errorf("elastic job %+v: want in-quota, >= 1 h of trace, run time x 100 samples", j)
		}
	}
	if n != pl.ElasticJobs {
		t.Errorf("%d elastic jobs marked, plan says %d", n, pl.ElasticJobs)
	}
	j := pl.Jobs[slices.IndexFunc(pl.Jobs, func(j Job) bool { return j.Elastic })]
	args := strings.Join(j.ElasticSbatchArgs("r", ElasticSetup{Rule: DefaultElastic, Trainer: "/t.py", WorkDir: "/w",
		Pools: map[string][]string{"a100": {"a100", "a100-spot"}, "v100": {"v100"}}}), " ")
	for _, want := range []string{fmt.Sprintf("--elastic=1:4:%d", j.GPUs), "--elastic-pools=" + map[string]string{"a100": "a100,a100-spot", "v100": "v100"}[j.GPUType],
		"--chdir=/w", fmt.Sprintf("--samples %d", j.Samples), "--curve 1:100,2:190,3:270,4:340", "--account=" + j.Project.Account} {
		if !strings.Contains(args, want) {
			t.Errorf("args %q lack %q", args, want)
		}
	}
	if strings.Contains(args, "sleep") || strings.Contains(args, "--qos=") {
		t.Errorf("args %q: an elastic job runs the trainer in its default QOS", args)
	}
	// Without the rule, no elastic jobs; a bad curve is refused.
	p.Elastic = ElasticRule{}
	if pl, _ := Map(tasks, p); pl.ElasticJobs != 0 {
		t.Errorf("%d elastic jobs without a rule", pl.ElasticJobs)
	}
	p.Elastic = DefaultElastic
	p.Elastic.Curve = "2:190"
	if _, err := Map(tasks, p); err == nil {
		t.Error("a curve without K=1 was accepted")
	}
}

func TestPercentileAndCompare(t *testing.T) {
	v := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if Percentile(v, 50) != 5 || Percentile(v, 95) != 10 || !math.IsNaN(Percentile(nil, 50)) {
		t.Error("nearest-rank percentiles wrong")
	}
	s := Report{AllocRatio: 0.4, Waits: map[Class][]float64{InQuota: {0, 10}}}
	b := Report{AllocRatio: 0.6, Waits: map[Class][]float64{InQuota: {0, 11}}}
	c := Compare(&s, &b)
	if math.Abs(c.AllocGain-1.5) > 1e-9 || math.Abs(c.InQuotaP95-1.1) > 1e-9 {
		t.Errorf("comparison %+v", c)
	}
}

func TestArrivalBoundSpanAndMaxAllocRatio(t *testing.T) {
	pl := &Plan{Jobs: []Job{
		{GPUs: 2, Arrival: 5 * time.Second, Runtime: 20 * time.Second},  // ends 25 s
		{GPUs: 1, Arrival: 10 * time.Second, Runtime: 40 * time.Second}, // ends 50 s: the last
		{GPUs: 4, Arrival: 30 * time.Second, Runtime: 10 * time.Second}, // ends 40 s
	}, OfferedGPUSeconds: 2*20 + 1*40 + 4*10}
	if got := pl.ArrivalBoundSpan(); got != 45*time.Second {
		t.Fatalf("ArrivalBoundSpan = %s, want 45s (first arrival 5 s, last end 50 s)", got)
	}
	// 120 GPU-s over 45 s on 8 GPUs.
	if got, want := pl.MaxAllocRatio(8), 120.0/(8*45); math.Abs(got-want) > 1e-12 {
		t.Fatalf("MaxAllocRatio(8) = %v, want %v", got, want)
	}
	if got := (&Plan{}).MaxAllocRatio(8); got != 0 {
		t.Fatalf("empty plan: MaxAllocRatio = %v, want 0", got)
	}
}
