// Command elastictransition measures the transition idle time of elastic training: how long a
// real PyTorch job (elasticd/examples/train.py, started exactly as examples/torchrun.sbatch
// starts it) stops training when a worker joins or leaves. The idle time is the last step of
// the old world to the first step of the new one, read from the trainer's traces
// (elasticd/transition); the goal is ≤ 3 s in place, the paper (Or, Zhang & Freedman 2020)
// reports ~3-7 s in place and ~72-81 s by checkpoint-restart.
//
// Each run starts one job (--elastic=1:3:1) and waits for a grow and a shrink. Modes, in
// alternating order each round: in-place (the shipped default: the processes stay, the world
// re-forms at the next step) and restart (ELASTIC_TRANSITION=restart: torchrun restarts every
// process, which resume from the checkpoint). Models: small (82,689 parameters) and 10m
// (10,454,401, so that the checkpoint's cost shows).
//
// On the testbed (the default) the job is submitted as alice on a100 and the testbed's own
// elasticd grows it from its samples/s and shrinks it when a step stops paying on these CPUs.
// Run as root with the testbed up, its elasticd running and python3-torch installed:
//
//	go run ./bench/cmd/elastictransition -rounds 2
//
// With -local no Slurm is needed: this command plays elasticd's part on this machine, starting
// the main job's and a worker job's script with the contract's environment, and stopping the
// worker with TERM, as elasticd does. bench/elastictransition-gpu.sh runs it on a GPU machine.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/bridge/stats"
	"github.com/slurmbridge/slurmbridge/bridge/testbed"
	"github.com/slurmbridge/slurmbridge/elasticd/daemon"
	"github.com/slurmbridge/slurmbridge/elasticd/transition"
)

// model is a size of train.py's MLP, with the options that give it.
type model struct {
	name string
	args []string
}

// The 10 M-parameter model trains 32 samples a step, so that a CPU step stays well under a
// second and the idle time is the transition's, not one long step's.
var models = map[string]model{
	"small": {"small (82,689 params)", nil},
	"10m":   {"10m (10,454,401 params)", []string{"--width", "3200", "--batch", "32"}},
}

type options struct {
	rounds   int
	perRun   time.Duration
	local    bool
	examples string
	backend  string
	devices  []string
	settle   time.Duration
}

func main() {
	var o options
	flag.IntVar(&o.rounds, "rounds", 3, "rounds; each runs every mode and model once, the modes in alternating order")
	launchers := flag.String("modes", "in-place,restart", "modes, comma-separated: in-place, restart (torchrun_keepalive.py), restart-plain (plain torchrun)")
	modelList := flag.String("models", "small", "models: small, 10m (comma-separated)")
	flag.DurationVar(&o.perRun, "run-timeout", 5*time.Minute, "give up on a run that has not grown and shrunk by then")
	flag.BoolVar(&o.local, "local", false, "no Slurm: start the jobs' scripts here and play elasticd's part")
	flag.StringVar(&o.examples, "examples", "elasticd/examples", "-local: the examples directory (elasticd/python beside it)")
	flag.StringVar(&o.backend, "backend", "auto", "-local: train.py's --backend (auto: nccl with GPUs, else gloo)")
	devices := flag.String("visible-devices", "", "-local: CUDA_VISIBLE_DEVICES of each job in turn, e.g. 0,1 (empty: unchanged)")
	flag.DurationVar(&o.settle, "settle", 5*time.Second, "-local: how long each world trains before the next change")
	flag.Parse()
	if *devices != "" {
		o.devices = strings.Split(*devices, ",")
	}
	var ls []transition.Launcher
	for _, s := range strings.Split(*launchers, ",") {
		l, err := transition.ParseLauncher(strings.TrimSpace(s))
		if err != nil {
			fmt.Fprintln(os.Stderr, "elastictransition: -modes:", err)
			os.Exit(2)
		}
		ls = append(ls, l)
	}
	var ms []string
	for _, m := range strings.Split(*modelList, ",") {
		if _, ok := models[m]; !ok {
			fmt.Fprintf(os.Stderr, "elastictransition: -models: %q is neither small nor 10m\n", m)
			os.Exit(2)
		}
		ms = append(ms, m)
	}
	if err := run(o, ls, ms); err != nil {
		fmt.Fprintln(os.Stderr, "elastictransition:", err)
		os.Exit(1)
	}
}

type sample struct {
	launcher transition.Launcher
	model    string
	round    int
	trs      []transition.Transition
}

// runner runs one traced job in work and returns its transitions.
type runner func(ctx context.Context, work string, l transition.Launcher, m model) ([]transition.Transition, error)

func run(o options, launchers []transition.Launcher, ms []string) error {
	ctx := context.Background()
	var one runner
	if o.local {
		examples, err := filepath.Abs(o.examples)
		if err != nil {
			return err
		}
		one = func(ctx context.Context, work string, l transition.Launcher, m model) ([]transition.Transition, error) {
			return localRun(ctx, o, examples, work, l, m)
		}
	} else {
		c, err := testbed.Open(ctx)
		if err != nil {
			return err
		}
		if out, err := c.Run(ctx, "bash", "testbed/elasticd.sh", "status"); err != nil || !strings.Contains(string(out), "elasticd running") {
			return fmt.Errorf("the testbed's elasticd is not running (bash testbed/elasticd.sh start): %s", out)
		}
		one = func(ctx context.Context, work string, l transition.Launcher, m model) ([]transition.Transition, error) {
			return testbedRun(ctx, c, c.Examples(), work, l, m, o.perRun)
		}
	}
	var samples []sample
	for r := range o.rounds {
		for _, mname := range ms {
			order := slices.Clone(launchers)
			if r%2 == 1 {
				slices.Reverse(order)
			}
			for _, l := range order {
				trs, err := withWorkDir(func(work string) ([]transition.Transition, error) { return one(ctx, work, l, models[mname]) })
				fmt.Printf("round %d, %s, %s:\n", r+1, l, models[mname].name)
				for _, t := range trs {
					fmt.Printf("  %s\n", t)
				}
				if err != nil {
					fmt.Printf("  (incomplete: %v)\n", err)
				}
				samples = append(samples, sample{l, mname, r, trs})
			}
		}
	}
	report(samples, launchers, ms, o.rounds)
	// A mode and model with no grow or no shrink measured is a failed benchmark, not a row.
	var missing []string
	for _, l := range launchers {
		for _, m := range ms {
			if len(idles(samples, l, m, -1, "grow")) == 0 || len(idles(samples, l, m, -1, "shrink")) == 0 {
				missing = append(missing, l.String()+" "+m)
			}
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("no grow or no shrink measured for %s", strings.Join(missing, ", "))
	}
	return nil
}

func withWorkDir(f func(work string) ([]transition.Transition, error)) ([]transition.Transition, error) {
	work, err := os.MkdirTemp("", "elastictransition-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	if err := os.Chmod(work, 0o777); err != nil {
		return nil, err
	}
	return f(work)
}

// testbedRun submits one traced job as alice, waits for a grow and a shrink by the testbed's
// elasticd, then cancels it and its workers and waits until they are gone.
func testbedRun(ctx context.Context, c *testbed.Cluster, examples, work string, l transition.Launcher, m model, limit time.Duration) ([]transition.Transition, error) {
	body, err := transition.Script(examples, work, "1:3:1", "a100", l, m.args...)
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
	return awaitShrink(ctx, work, limit, nil)
}

// awaitShrink polls the traces in work until the world formed after a shrink has trained for
// 3 s, calling step (when not nil) with the transitions so far at each poll.
func awaitShrink(ctx context.Context, work string, limit time.Duration, step func([]transition.Transition, []transition.World) error) ([]transition.Transition, error) {
	deadline := time.Now().Add(limit)
	var trs []transition.Transition
	for time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(500 * time.Millisecond)
		records, err := transition.ReadDir(work)
		if err != nil {
			return nil, err
		}
		trs = transition.Transitions(records)
		if n := len(trs); n > 0 && trs[n-1].Kind() == "shrink" && trs[n-1].To.LastStep-trs[n-1].To.FirstStep > 3 {
			return trs, nil
		}
		if step != nil {
			if err := step(trs, transition.Worlds(records)); err != nil {
				return trs, err
			}
		}
	}
	return trs, errors.New("no grow and shrink within the run's time limit")
}

// localRun plays elasticd's part without Slurm: the main job's script, then, once its world
// has trained for o.settle, a worker job's; once the world of two has trained as long, TERM to
// the worker (elasticd's shrink). Each job's script runs in its own process group, with the
// environment elasticd and its SPANK plugin give.
func localRun(ctx context.Context, o options, examples, work string, l transition.Launcher, m model) ([]transition.Transition, error) {
	args := slices.Clone(m.args)
	if o.backend != "auto" {
		args = append(args, "--backend", o.backend)
	}
	body, err := transition.Script(examples, work, "1:3:1", "a100", l, args...)
	if err != nil {
		return nil, err
	}
	script := filepath.Join(work, "job.sh")
	if err := os.WriteFile(script, []byte(body), 0o644); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	const mainID = 1001
	env := append(os.Environ(),
		"SLURM_SUBMIT_DIR="+work, "ELASTIC_JOB_ID="+strconv.Itoa(mainID), "ELASTIC_MIN=1", "ELASTIC_MAX=3",
		"ELASTIC_NNODES=1:3", "ELASTIC_GPUS_PER_WORKER=1", fmt.Sprintf("ELASTIC_RDZV_ENDPOINT=127.0.0.1:%d", port),
		"ELASTIC_REPORT_DIR="+work, "ELASTIC_HOSTS_FILE="+filepath.Join(work, "hosts"))
	var jobs []*exec.Cmd
	start := func(id int, role string) error {
		out, err := os.Create(filepath.Join(work, fmt.Sprintf("%d.out", id)))
		if err != nil {
			return err
		}
		defer out.Close()
		cmd := exec.Command("bash", script)
		cmd.Env = append(slices.Clone(env), "SLURM_JOB_ID="+strconv.Itoa(id), "ELASTIC_ROLE="+role)
		if len(o.devices) > 0 {
			cmd.Env = append(cmd.Env, "CUDA_VISIBLE_DEVICES="+o.devices[len(jobs)%len(o.devices)])
		}
		cmd.Stdout, cmd.Stderr = out, out
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			return err
		}
		jobs = append(jobs, cmd)
		return nil
	}
	stop := func(cmd *exec.Cmd) { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	defer func() {
		for _, cmd := range jobs {
			stop(cmd)
		}
		done := make(chan struct{})
		go func() {
			for _, cmd := range jobs {
				_ = cmd.Wait()
			}
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			for _, cmd := range jobs {
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			}
			<-done
		}
	}()
	if err := start(mainID, "main"); err != nil {
		return nil, err
	}
	trained := func(w transition.World) bool { return w.LastStep-w.FirstStep >= o.settle.Seconds() }
	grown, shrunk := false, false
	return awaitShrink(ctx, work, o.perRun, func(trs []transition.Transition, ws []transition.World) error {
		if len(ws) == 0 {
			return nil
		}
		last := ws[len(ws)-1]
		switch {
		case !grown && last.Size == 1 && trained(last):
			grown = true
			return start(mainID+1, "worker")
		case grown && !shrunk && last.Size == 2 && trained(last):
			shrunk = true
			stop(jobs[1])
		}
		return nil
	})
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func idles(samples []sample, l transition.Launcher, m string, round int, kind string) []float64 {
	var out []float64
	for _, s := range samples {
		if s.launcher != l || s.model != m || (round >= 0 && s.round != round) {
			continue
		}
		for _, t := range s.trs {
			if t.Kind() == kind {
				out = append(out, t.Idle.Seconds())
			}
		}
	}
	return out
}

func report(samples []sample, launchers []transition.Launcher, ms []string, rounds int) {
	fmt.Println()
	fmt.Println("transition idle time (last step of the old world -> first step of the new), medians:")
	fmt.Printf("| mode | model | grow idle | new worker's start -> training | shrink idle |\n|---|---|---|---|---|\n")
	for _, l := range launchers {
		for _, m := range ms {
			var join []float64
			for _, s := range samples {
				if s.launcher == l && s.model == m {
					for _, t := range s.trs {
						if t.Kind() == "grow" && t.Join > 0 {
							join = append(join, t.Join.Seconds())
						}
					}
				}
			}
			fmt.Printf("| %s | %s | %s | %s | %s |\n", l, models[m].name, med(idles(samples, l, m, -1, "grow")), med(join),
				med(idles(samples, l, m, -1, "shrink")))
		}
	}
	// Side by side: in place against each other mode, round by round.
	if !slices.Contains(launchers, transition.InPlace) {
		return
	}
	fmt.Println()
	for _, other := range launchers {
		if other == transition.InPlace {
			continue
		}
		for _, m := range ms {
			for _, kind := range []string{"grow", "shrink"} {
				var ratios []float64
				better, compared := 0, 0
				for r := range rounds {
					a, b := idles(samples, transition.InPlace, m, r, kind), idles(samples, other, m, r, kind)
					if len(a) == 0 || len(b) == 0 {
						continue
					}
					compared++
					if stats.Median(a) < stats.Median(b) {
						better++
					}
					ratios = append(ratios, stats.Median(b)/stats.Median(a))
				}
				if compared == 0 {
					fmt.Printf("%s idle, %s, %s / in-place: no round measured both\n", kind, models[m].name, other)
					continue
				}
				fmt.Printf("%s idle, %s, %s / in-place: median of per-round ratios %.1f; in-place shorter in %d of %d rounds\n",
					kind, models[m].name, other, stats.Median(ratios), better, compared)
			}
		}
	}
	fmt.Println("goal: in place, median grow and shrink idle each ≤ 3 s and shorter than restart in every round;")
	fmt.Println("the paper: ~3-7 s in place, ~72-81 s by checkpoint-restart")
}

func med(xs []float64) string {
	if len(xs) == 0 {
		return "none measured"
	}
	return fmt.Sprintf("%.2f s (n=%d, %.2f-%.2f)", stats.Median(xs), len(xs), slices.Min(xs), slices.Max(xs))
}
