// Command tracereplay replays the Alibaba GPU trace v2023 on the slurmbridge testbed under
// static quotas, under slurmbridge and under slurmbridge with elastic jobs (elasticd), and
// reports from sacct (see bench/README.md).
//
//	tracereplay [flags] plan   print the mapped window and every scaling choice
//	tracereplay [flags] run    replay it (root, testbed up), write report.txt, CSVs and PNGs
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/slurmbridge/slurmbridge/bench/replay"
	"github.com/slurmbridge/slurmbridge/bench/scale"
	"github.com/slurmbridge/slurmbridge/bridge/testbed"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "tracereplay:", err)
		os.Exit(1)
	}
}

// options are the flags; a preset fills the ones not given.
type options struct {
	preset, trace, modes, out             string
	quotaSettings                         string
	from, span                            int64
	keep, factor                          float64
	minRun, maxRun, limit, quotadInterval time.Duration
	seed                                  int64
	rounds                                int
}

// presets: quick replays 6 h of the excerpt shipped in bench/testdata in a minute of arrivals
// per mode; full replays 12 h of the whole trace in 3 minutes of arrivals per mode. Both load
// the testbed alike (every job started on arrival would allocate about 61% of its GPUs): at
// ÷240 the excerpt's first 4 h allowed at most 0.415, too light for any policy to beat static
// quotas by 1.3x.
var presets = map[string]options{
	"quick": {trace: "bench/testdata/alibaba-gpu-v2023-gpuspec25-excerpt.csv", from: 10368000, span: 6 * 3600,
		keep: 1, factor: 360, minRun: 15 * time.Second, maxRun: 45 * time.Second, limit: 4 * time.Minute, rounds: 1},
	"full": {from: 10368000, span: 12 * 3600,
		keep: 1, factor: 240, minRun: 20 * time.Second, maxRun: 120 * time.Second, limit: 15 * time.Minute, rounds: 1},
	// site: on a testbed of a site's size (make testbed-up PRESET=alibaba NODES=N), the trace's
	// busiest 12 hours (410 pods from hour 3558 of openb_pod_list_default.csv, 399 of them GPU
	// jobs) at ÷120: about 66 submissions a minute, what slurmctld on this 2-core host starts
	// without falling behind. Any window (-from,
	// -span) and the whole trace (-from 0 -span 13000000) map the same way.
	"site": {from: 3558 * 3600, span: 12 * 3600,
		keep: 1, factor: 120, minRun: 20 * time.Second, maxRun: 120 * time.Second, limit: 15 * time.Minute, rounds: 1},
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	o, cmd, err := parseOptions(args)
	if err != nil {
		return err
	}
	root := repoRoot()
	plan, err := mapTrace(o, root)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "trace %s (Alibaba GPU cluster trace v2023, Weng et al., USENIX ATC 2023)\n", o.trace)
	plan.Describe(stdout)
	if cmd == "plan" {
		return nil
	}
	modes, err := parseModes(o.modes)
	if err != nil {
		return err
	}
	if o.out == "" {
		o.out = filepath.Join(root, "bench", "results", fmt.Sprintf("replay-%s-%s", o.preset, time.Now().UTC().Format("20060102T150405Z")))
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	report, err := os.Create(filepath.Join(o.out, "report.txt"))
	if err != nil {
		return err
	}
	defer report.Close()
	w := io.MultiWriter(stdout, report)
	plan.Describe(report)

	cluster, err := testbed.Open(ctx)
	if err != nil {
		return err
	}
	if o.quotadInterval > 0 {
		fmt.Fprintf(w, "quotad: cycle %s during the replay (compressed time: the testbed's 5 s would stand for %s of trace time)\n",
			o.quotadInterval, time.Duration(float64(5*time.Second)*plan.Params.TimeFactor))
	}
	r := &replay.Runner{Cluster: cluster, Log: w, Timeout: o.limit, ElasticdMetrics: cluster.ElasticdURL() + "/metrics",
		QuotadInterval: o.quotadInterval}
	for line := range strings.SplitSeq(o.quotaSettings, ";") {
		if line = strings.TrimSpace(line); line != "" {
			r.QuotaSettings = append(r.QuotaSettings, line)
		}
	}
	if len(r.QuotaSettings) > 0 {
		fmt.Fprintf(w, "quota settings where quotad runs: %s\n", strings.Join(r.QuotaSettings, "; "))
	}
	if strings.Contains(o.modes, string(replay.Elastic)) {
		if r.Elastic, err = elasticSetup(ctx, cluster, o.out, plan.Params.Projects[0].User); err != nil {
			return err
		}
	}
	defer restoreDaemons(ctx, r)()
	reports, labels, capacity, err := replayRounds(ctx, r, w, plan, modes, o)
	if err != nil {
		return err
	}
	if err := replay.Plot(ctx, o.out, labels, capacity); err != nil {
		fmt.Fprintln(w, "plots:", err)
	} else {
		fmt.Fprintf(w, "plots: %s, %s, %s\n", filepath.Join(o.out, "utilisation.png"), filepath.Join(o.out, "waits.png"), filepath.Join(o.out, "daemons.png"))
	}
	fmt.Fprintf(w, "results in %s\n", o.out)
	if lost := lostJobs(reports); lost > 0 {
		return fmt.Errorf("%d jobs lost", lost)
	}
	return nil
}

// parseOptions reads the flags and the command (plan or run), and fills what the flags leave
// open from the preset, the testbed and the repository.
func parseOptions(args []string) (options, string, error) {
	fs := flag.NewFlagSet("tracereplay", flag.ContinueOnError)
	var o options
	fs.StringVar(&o.preset, "preset", "quick", "quick (bench/testdata excerpt, CI), full (needs -trace) or site (needs -trace and a testbed of a site's size)")
	fs.StringVar(&o.trace, "trace", "", "openb_pod_list_*.csv of the trace (full: ../shared/traces/alibaba-gpu-v2023/openb_pod_list_gpuspec25.csv; site: openb_pod_list_default.csv, every pod)")
	fs.Int64Var(&o.from, "from", 0, "window start, trace seconds (creation_time)")
	fs.Int64Var(&o.span, "span", 0, "window length, trace seconds")
	fs.Float64Var(&o.keep, "keep", 0, "fraction of the window's GPU tasks kept, seeded")
	fs.Float64Var(&o.factor, "factor", 0, "time compression: trace seconds per replay second")
	fs.DurationVar(&o.minRun, "min-run", 0, "shortest job run time after compression")
	fs.DurationVar(&o.maxRun, "max-run", 0, "longest job run time after compression")
	fs.Int64Var(&o.seed, "seed", 1, "seed of thinning and project assignment")
	fs.StringVar(&o.modes, "modes", "", "modes, in the order each round runs them (default static,slurmbridge, and elastic when bin/elasticd is built and the testbed has the SPANK plugin)")
	fs.IntVar(&o.rounds, "rounds", 0, "rounds of all modes (alternating)")
	fs.DurationVar(&o.limit, "timeout", 0, "how long one mode may run after its last submission")
	fs.DurationVar(&o.quotadInterval, "quotad-interval", time.Second, "quotad's cycle during the replay (time is compressed; 0: the testbed's own, 5 s)")
	fs.StringVar(&o.quotaSettings, "quota-settings", "", "settings added to the testbed's quota table where quotad runs, ';' between them, e.g. 'reclaimBackoff: 15s; lendOrder: decayed-usage'")
	fs.StringVar(&o.out, "out", "", "output directory (default bench/results/replay-<preset>-<time>)")
	if err := fs.Parse(args); err != nil {
		return o, "", err
	}
	if fs.NArg() != 1 || (fs.Arg(0) != "plan" && fs.Arg(0) != "run") {
		return o, "", fmt.Errorf("usage: tracereplay [flags] plan|run")
	}
	base, ok := presets[o.preset]
	if !ok {
		return o, "", fmt.Errorf("unknown preset %q (quick, full, site)", o.preset)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	o = withDefaults(o, base, set)
	root := repoRoot()
	if o.modes == "" {
		o.modes = "static,slurmbridge"
		if elasticBuilt(root) {
			o.modes += ",elastic"
		}
	}
	if o.trace == "" {
		return o, "", fmt.Errorf("preset %s needs -trace FILE (the trace's full files are not in the repository)", o.preset)
	}
	if !filepath.IsAbs(o.trace) && base.trace == o.trace {
		o.trace = filepath.Join(root, o.trace)
	}
	return o, fs.Arg(0), nil
}

// mapTrace reads the trace and maps its window onto the testbed's projects and nodes.
func mapTrace(o options, root string) (*replay.Plan, error) {
	f, err := os.Open(o.trace)
	if err != nil {
		return nil, err
	}
	tasks, err := replay.ReadTasks(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.trace, err)
	}
	params := replay.Params{
		Seed: o.seed, From: o.from, Span: o.span, Keep: o.keep, TimeFactor: o.factor,
		MinRun: o.minRun, MaxRun: o.maxRun, Node: replay.TestbedNode, Elastic: replay.DefaultElastic,
	}
	if o.preset == "site" {
		if err := siteParams(&params); err != nil {
			return nil, err
		}
	} else if params.Projects, err = replay.TestbedProjects(filepath.Join(root, "slurm-conf", "testbed", "quotas.yaml")); err != nil {
		return nil, err
	}
	return replay.Map(tasks, params)
}

// siteParams maps onto the testbed of a site's size in $TESTBED_DIR: its projects with their
// whole guarantees, pods assigned by the rule the guarantees were set by (scalepreset's
// default), requests kept as the trace's node shape gives them.
func siteParams(p *replay.Params) error {
	dir := testbed.Dir()
	if _, err := os.Stat(testbed.PresetFacts(dir)); err != nil {
		return fmt.Errorf("preset site replays onto a testbed of a site's size, and %s is not one: make testbed-up PRESET=alibaba [NODES=N], with TESTBED_DIR set as make sets it (/tmp/slurmbridge-alibaba)", dir)
	}
	f, err := testbed.Facts()
	if err != nil {
		return err
	}
	if p.Projects, err = replay.AnyTypeProjects(filepath.Join(dir, "etc", "quotas.yaml")); err != nil {
		return err
	}
	if p.Assign, err = scale.DefaultRule.Assign(p.Projects, scale.GroupsOfTypes(f.GPUTypes())); err != nil {
		return err
	}
	p.Node = scale.TraceNodeShape
	p.AssignRule = fmt.Sprintf("projects: the rule the preset's guarantees were set by (project k of %d with weight 1/k^%g, drawn by a hash of the pod's name, seed %d); a pod naming GPU models asks for one of them its project is guaranteed, any other for any type",
		scale.DefaultRule.Count, scale.DefaultRule.Zipf, scale.DefaultRule.Seed)
	return nil
}

// parseModes reads the comma-separated -modes list.
func parseModes(list string) ([]replay.Mode, error) {
	var modes []replay.Mode
	for _, s := range strings.Split(list, ",") {
		m, err := replay.ParseMode(strings.TrimSpace(s))
		if err != nil {
			return nil, err
		}
		modes = append(modes, m)
	}
	return modes, nil
}

// elasticSetup prepares mode elastic: a directory under out for the jobs' output that the
// testbed's users can write, and the pools elastic jobs grow in.
func elasticSetup(ctx context.Context, cluster *testbed.Cluster, out, user string) (*replay.ElasticSetup, error) {
	// The jobs' output, where the testbed users can write it.
	work, err := filepath.Abs(filepath.Join(out, "elastic-jobs"))
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		return nil, err
	}
	if err := os.Chmod(work, 0o777); err != nil {
		return nil, err
	}
	// The elastic jobs run as the testbed's users and write here: a -out under a directory
	// they cannot enter (a 0700 home, /root) would fail every one of them at its start.
	if _, err := cluster.RunAs(ctx, user, "test", "-w", work); err != nil {
		return nil, fmt.Errorf("the testbed's users cannot write the elastic jobs' directory %s (is -out under a directory they cannot enter, such as a 0700 home or /root?): choose an -out they can reach, e.g. under /tmp", work)
	}
	poolsByType, err := replay.ElasticPools(filepath.Join(cluster.Dir, "etc", "pools.yaml"))
	if err != nil {
		return nil, err
	}
	return &replay.ElasticSetup{Rule: replay.DefaultElastic, WorkDir: work, Pools: poolsByType,
		Trainer: filepath.Join(cluster.Examples(), "synthetic_trainer.py")}, nil
}

// restoreDaemons notes whether quotad and elasticd run now and returns what puts them back so,
// the last noted first.
func restoreDaemons(ctx context.Context, r *replay.Runner) func() {
	var restores []func(context.Context) error
	for _, d := range replay.Daemons {
		restores = append(restores, r.Cluster.KeepDaemon(ctx, d))
	}
	return func() {
		for _, restore := range slices.Backward(restores) {
			if err := restore(context.Background()); err != nil {
				fmt.Fprintf(os.Stderr, "tracereplay: restoring %v\n", err)
			}
		}
	}
}

// replayRounds runs every mode in each round, writing each mode's report and data, and after
// each round the comparisons with static and how much the window's load allows.
func replayRounds(ctx context.Context, r *replay.Runner, w io.Writer, plan *replay.Plan, modes []replay.Mode, o options) (reports map[replay.Mode][]replay.Report, labels []string, capacity int, err error) {
	reports = map[replay.Mode][]replay.Report{}
	for round := 1; round <= o.rounds; round++ {
		for _, m := range modes {
			tag := fmt.Sprintf("replay-%s-r%d", m, round)
			rep, _, err := r.Run(ctx, m, plan, tag)
			if err != nil {
				return nil, nil, 0, fmt.Errorf("round %d, mode %s: %w", round, m, err)
			}
			rep.Print(w)
			label := fmt.Sprintf("%s-r%d", m, round)
			if err := replay.WriteData(o.out, label, &rep); err != nil {
				return nil, nil, 0, err
			}
			labels = append(labels, label)
			capacity = rep.CapacityGPUs
			reports[m] = append(reports[m], rep)
		}
		compareRound(w, round, reports)
		printLoadBound(w, round, plan, capacity, modes, reports)
	}
	return reports, labels, capacity, nil
}

// compareRound compares each mode's report of the round with static's.
func compareRound(w io.Writer, round int, reports map[replay.Mode][]replay.Report) {
	for _, m := range []replay.Mode{replay.Slurmbridge, replay.Elastic} {
		if s, b := reports[replay.Static], reports[m]; len(s) == round && len(b) == round {
			fmt.Fprintf(w, "round %d: ", round)
			replay.Compare(&s[round-1], &b[round-1]).Print(w)
		}
	}
}

// printLoadBound says how much of the window's best allocation ratio each mode reached. The
// gain over static is capped by the window's load: a mode that starts every job on arrival
// cannot do better. Said beside the goal so a "not met" reads right.
func printLoadBound(w io.Writer, round int, plan *replay.Plan, capacity int, modes []replay.Mode, reports map[replay.Mode][]replay.Report) {
	bound := plan.MaxAllocRatio(capacity)
	if bound <= 0 {
		return
	}
	fmt.Fprintf(w, "round %d: the window allows an allocation ratio of at most %.3f (every job started on arrival, %s span):", round, bound, plan.ArrivalBoundSpan().Round(100*time.Millisecond))
	for _, m := range modes {
		if reps := reports[m]; len(reps) == round {
			fmt.Fprintf(w, " %s %.0f%% of it", m, 100*reps[round-1].AllocRatio/bound)
		}
	}
	if s := reports[replay.Static]; len(s) == round && s[round-1].AllocRatio > 0 {
		fmt.Fprintf(w, "; no mode can beat static by more than x%.2f here", bound/s[round-1].AllocRatio)
	}
	fmt.Fprintln(w)
}

// lostJobs counts the jobs lost in every report.
func lostJobs(reports map[replay.Mode][]replay.Report) int {
	lost := 0
	for _, reps := range reports {
		for _, rep := range reps {
			lost += len(rep.Lost)
		}
	}
	return lost
}

// elasticBuilt: mode elastic needs elasticd and the SPANK plugin (make build), installed in the
// testbed's plugstack.conf (testbed.sh up does it once the plugin is built).
func elasticBuilt(root string) bool {
	if _, err := os.Stat(filepath.Join(root, "bin", "elasticd")); err != nil {
		return false
	}
	dir := testbed.Dir()
	conf, err := os.ReadFile(filepath.Join(dir, "etc", "plugstack.conf"))
	return err == nil && strings.Contains(string(conf), "spank_elastic.so")
}

// withDefaults takes from the preset base every option whose flag was not set.
func withDefaults(o, base options, set map[string]bool) options {
	presetUnlessSet(set, "trace", &o.trace, base.trace)
	presetUnlessSet(set, "from", &o.from, base.from)
	presetUnlessSet(set, "span", &o.span, base.span)
	presetUnlessSet(set, "keep", &o.keep, base.keep)
	presetUnlessSet(set, "factor", &o.factor, base.factor)
	presetUnlessSet(set, "min-run", &o.minRun, base.minRun)
	presetUnlessSet(set, "max-run", &o.maxRun, base.maxRun)
	presetUnlessSet(set, "rounds", &o.rounds, base.rounds)
	presetUnlessSet(set, "timeout", &o.limit, base.limit)
	return o
}

// presetUnlessSet sets *v to the preset's value unless flag name was given.
func presetUnlessSet[T any](set map[string]bool, name string, v *T, preset T) {
	if !set[name] {
		*v = preset
	}
}

// repoRoot is the source tree: the working directory when it is one, else where this file
// was built from.
func repoRoot() string {
	if _, err := os.Stat("slurm-conf/testbed/quotas.yaml"); err == nil {
		wd, _ := os.Getwd()
		return wd
	}
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}
