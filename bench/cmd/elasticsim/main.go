// Command elasticsim simulates one elastic training job under static allocations (min, knee,
// max) and under elasticd's policy (elasticd/policy.Decide) on the paper's throughput curve
// and three stated ones, and prints GPU-time and completion time beside the paper's headline
// numbers (see bench/README.md). No Slurm needed.
//
//	elasticsim [-transitions 10s,75s] [-noise 0.02] [-seed 1] [-samples N] ...
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/slurmbridge/slurmbridge/bench/elasticsim"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "elasticsim:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	c := elasticsim.DefaultConfig()
	fs := flag.NewFlagSet("elasticsim", flag.ContinueOnError)
	fs.Float64Var(&c.TotalSamples, "samples", c.TotalSamples, "the job's work in samples (default: 90 epochs of ImageNet)")
	fs.IntVar(&c.GPUsPerWorker, "gpus-per-worker", c.GPUsPerWorker, "GPUs per worker")
	fs.IntVar(&c.MinWorkers, "min", c.MinWorkers, "min workers (static min; elastic starts here)")
	fs.IntVar(&c.MaxWorkers, "max", c.MaxWorkers, "max workers (static max)")
	fs.Float64Var(&c.Settings.Threshold, "threshold", c.Settings.Threshold, "policy: scaling efficiency threshold")
	fs.IntVar(&c.Settings.Step, "step", c.Settings.Step, "policy: workers per grow step")
	fs.BoolVar(&c.Settings.Doubling, "doubling", false, "policy: grow by doubling (the paper's 16→32→64 steps)")
	fs.DurationVar(&c.Settings.Cooldown, "cooldown", c.Settings.Cooldown, "policy: cooldown before re-probing a size that did not pay")
	fs.DurationVar(&c.Settings.SettleTime, "settle", c.Settings.SettleTime, "policy: settle time after a size change")
	fs.IntVar(&c.Settings.MinSamples, "min-samples", c.Settings.MinSamples, "policy: settled reports per measurement")
	fs.DurationVar(&c.Interval, "interval", c.Interval, "elasticd's cycle and the workers' report interval")
	fs.Float64Var(&c.Noise, "noise", c.Noise, "relative standard deviation of each report")
	fs.Uint64Var(&c.Seed, "seed", c.Seed, "seed of the report noise")
	transitions := fs.String("transitions", "10s,75s", "comma-separated transition times (worker change → training again); "+
		"10s is the goal for a transition on the testbed, 75s the paper's checkpoint-restart")
	curves := fs.String("curves", "", "comma-separated curve names (default: all of paper, near-linear, flat-early, peaked)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %v", fs.Args())
	}
	var trs []time.Duration
	for _, t := range strings.Split(*transitions, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(t))
		if err != nil {
			return fmt.Errorf("-transitions: %w", err)
		}
		trs = append(trs, d)
	}
	all := elasticsim.Curves()
	chosen := all
	if *curves != "" {
		chosen = nil
		for _, name := range strings.Split(*curves, ",") {
			found := false
			for _, cv := range all {
				if cv.Name == strings.TrimSpace(name) {
					chosen, found = append(chosen, cv), true
				}
			}
			if !found {
				return fmt.Errorf("-curves: unknown curve %q", name)
			}
		}
	}
	runs, err := elasticsim.RunAll(c, chosen, trs)
	if err != nil {
		return err
	}
	elasticsim.Report(stdout, c, runs)
	return nil
}
