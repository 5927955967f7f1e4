// Command elastictransition measures the transition idle time of elastic training on the
// running testbed: how long a real PyTorch job (elasticd/examples/train.py under torchrun's c10d
// rendezvous, exactly as examples/torchrun.sbatch starts it) stops training when elasticd adds
// or removes a worker. The idle time is the last step of the old world to the first step of the
// new one, read from the trainer's traces (elasticd/transition); the goal is ≤ 10 s, the paper
// (Or, Zhang & Freedman 2020) reports ~3-7 s in place and ~72-81 s by checkpoint-restart.
//
// Each run submits one job (--elastic=1:3:1 on a100) and lets the testbed's own elasticd grow
// it from its samples/s until a step stops paying on these CPUs and it shrinks it; the run ends
// once the world formed after the shrink has trained for a few seconds. Two launchers, in
// alternating order each round: the shipped one (torchrun_keepalive.py: heartbeats every 1 s)
// and plain torchrun (on torch releases that fix the keep-alive at 5 s x 3).
//
// Run as root with the testbed up, its elasticd running and python3-torch installed:
//
//	go run ./bench/cmd/elastictransition -rounds 3
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/bridge/stats"
	"github.com/slurmbridge/slurmbridge/bridge/testbed"
	"github.com/slurmbridge/slurmbridge/elasticd/daemon"
	"github.com/slurmbridge/slurmbridge/elasticd/transition"
)

func main() {
	rounds := flag.Int("rounds", 3, "rounds; each runs every launcher once, in alternating order")
	perRun := flag.Duration("run-timeout", 5*time.Minute, "give up on a run that has not grown and shrunk by then")
	flag.Parse()
	if err := run(*rounds, *perRun); err != nil {
		fmt.Fprintln(os.Stderr, "elastictransition:", err)
		os.Exit(1)
	}
}

type sample struct {
	launcher transition.Launcher
	round    int
	trs      []transition.Transition
}

func run(rounds int, perRun time.Duration) error {
	ctx := context.Background()
	c, err := testbed.Open(ctx)
	if err != nil {
		return err
	}
	if out, err := c.Run(ctx, "bash", "testbed/elasticd.sh", "status"); err != nil || !strings.Contains(string(out), "elasticd running") {
		return fmt.Errorf("the testbed's elasticd is not running (bash testbed/elasticd.sh start): %s", out)
	}
	examples := c.Examples()
	launchers := []transition.Launcher{transition.KeepAlive, transition.PlainTorchrun}
	var samples []sample
	for r := range rounds {
		order := slices.Clone(launchers)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, l := range order {
			trs, err := oneRun(ctx, c, examples, l, perRun)
			fmt.Printf("round %d, %s:\n", r+1, l)
			for _, t := range trs {
				fmt.Printf("  %s\n", t)
			}
			if err != nil {
				fmt.Printf("  (incomplete: %v)\n", err)
			}
			samples = append(samples, sample{l, r, trs})
		}
	}
	report(samples, launchers)
	return nil
}

// oneRun submits one traced job as alice, waits for a grow and a shrink, then cancels it and
// its workers and waits until they are gone.
func oneRun(ctx context.Context, c *testbed.Cluster, examples string, l transition.Launcher, limit time.Duration) ([]transition.Transition, error) {
	work, err := os.MkdirTemp("", "elastictransition-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	if err := os.Chmod(work, 0o777); err != nil {
		return nil, err
	}
	body, err := transition.Script(examples, work, "1:3:1", "a100", l)
	if err != nil {
		return nil, err
	}
	script := filepath.Join(work, "job.sh")
	if err := os.WriteFile(script, []byte(body), 0o644); err != nil {
		return nil, err
	}
	id, err := c.Submit(ctx, "alice", "-p", "a100", "--gres=gpu:a100:1", "-J", "elastictransition",
		"--output="+filepath.Join(work, "%j.out"), script)
	if err != nil {
		return nil, err
	}
	var main uint32
	fmt.Sscan(id, &main)
	defer func() {
		c.Cancel(id)
		_ = c.Slurm().CancelNamed(ctx, daemon.WorkerName(main))
		for range 60 {
			rows, err := c.Slurm().Queue(ctx, slurm.QueueRead{Fields: slurm.SummaryFields, Names: []string{"elastictransition", daemon.WorkerName(main)}})
			if err == nil && len(rows) == 0 {
				return
			}
			time.Sleep(time.Second)
		}
	}()

	deadline := time.Now().Add(limit)
	var trs []transition.Transition
	for time.Now().Before(deadline) {
		time.Sleep(time.Second)
		records, err := transition.ReadDir(work)
		if err != nil {
			return nil, err
		}
		trs = transition.Transitions(records)
		if n := len(trs); n > 0 && trs[n-1].Kind() == "shrink" && trs[n-1].To.LastStep-trs[n-1].To.FirstStep > 3 {
			return trs, nil
		}
	}
	return trs, errors.New("no grow and shrink within the run's time limit")
}

func report(samples []sample, launchers []transition.Launcher) {
	fmt.Println()
	fmt.Println("transition idle time (last step of the old world -> first step of the new), medians:")
	fmt.Printf("| launcher | grow idle | new worker's start -> training | shrink idle |\n|---|---|---|---|\n")
	shrinkBy := map[transition.Launcher]map[int][]float64{}
	for _, l := range launchers {
		var grow, join, shrink []float64
		shrinkBy[l] = map[int][]float64{}
		for _, s := range samples {
			if s.launcher != l {
				continue
			}
			for _, t := range s.trs {
				switch t.Kind() {
				case "grow":
					grow = append(grow, t.Idle.Seconds())
					if t.Join > 0 {
						join = append(join, t.Join.Seconds())
					}
				case "shrink":
					shrink = append(shrink, t.Idle.Seconds())
					shrinkBy[l][s.round] = append(shrinkBy[l][s.round], t.Idle.Seconds())
				}
			}
		}
		fmt.Printf("| %s | %s | %s | %s |\n", l, med(grow), med(join), med(shrink))
	}
	// Side by side: the shrink idle of plain torchrun over the shipped launcher, per round.
	var ratios []float64
	for r := range shrinkBy[launchers[0]] {
		a, b := shrinkBy[launchers[0]][r], shrinkBy[launchers[1]][r]
		if len(a) > 0 && len(b) > 0 {
			ratios = append(ratios, stats.Median(b)/stats.Median(a))
		}
	}
	if len(ratios) > 0 {
		fmt.Printf("\nshrink idle, %s / %s: median of per-round ratios %.2f (%d rounds)\n",
			launchers[1], launchers[0], stats.Median(ratios), len(ratios))
	}
	fmt.Println("goal: ≤ 10 s; the paper: ~3-7 s in place, ~72-81 s by checkpoint-restart")
}

func med(xs []float64) string {
	if len(xs) == 0 {
		return "none measured"
	}
	return fmt.Sprintf("%.1f s (n=%d, %.1f-%.1f)", stats.Median(xs), len(xs), slices.Min(xs), slices.Max(xs))
}
