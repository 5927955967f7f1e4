// Command quotadcost measures one quotad cycle at scale on the running testbed: slurmdbd's job
// table seeded (through its real schema) to --rows rows of recent history, --pending GPU jobs
// pending over quota and --running jobs running in slurmctld, then `quotad --once --dry-run`
// run --runs times, printing each run's wall time, peak RSS and planned lends, and their
// medians against the goals (<= 1 s, <= 200 MB); then quotad run as the daemon it is
// (--dry-run, a cycle every 2 s) for --runs cycles after its first, each followed by one bare
// squeue. The last line is "cycle_s=... rss_mb=... lends=..." (medians): cycle_s, squeue_s and
// floor_ratio are the running daemon's, once_cycle_s and once_floor_ratio quotad --once's
// (whose cycle opens its database connections and reads every table). With --apply one acting cycle follows
// (`quotad --once`: read, plan, the QOS changes its lends bring, the project that lends going
// over its guarantee and into the reclaim order, and the batched moves), timed from quotad's
// own "cycle applied" line (acting_s=, with the sacctmgr and scontrol runs and slurmdbd's
// ACCOUNTING_UPDATE_MSG to slurmctld counted). --projects N gives the quota table N projects
// (the testbed's and accounts qcb001... guaranteed nothing, made for the run and removed).
//
// Shapes, from the testbed's facts and quota table: bob (quota 4 a100) runs 4 one-GPU jobs in
// his guarantee; the pending jobs are his one-GPU jobs, over quota, in the first pool of his
// GPU type (a100), so each cycle plans to lend that pool's GPUs that stay idle (4 of 8). On a
// testbed of a site's size the project with the smallest guarantee takes bob's part and
// another project's user alice's. Each round also times one bare squeue of the same queue,
// the floor of any cycle: the goal is the running daemon's cycle within 1.3 times it.
// --array N submits them as arrays of N tasks (sbatch --array, MaxArraySize permitting), which
// fills slurmctld in seconds; 0 submits single jobs. The running jobs are alice's one-CPU
// allocations without a shell (salloc --no-shell: no process on any node) in a hidden partition
// that this tool creates over the default (CPU) pool's nodes with OverSubscribe=FORCE, and
// removes.
//
// It pauses the testbed's quotad (so the pending jobs stay pending) and puts everything back:
// the seeded rows are deleted, the jobs cancelled, the partition removed. Run as root:
// go run ./bench/cmd/quotadcost -pending 50000 -running 5000 -array 1000
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/slurmbridge/slurmbridge/bench/internal/fanout"
	"github.com/slurmbridge/slurmbridge/bench/replay"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/bridge/slurmdbd"
	"github.com/slurmbridge/slurmbridge/bridge/stats"
	"github.com/slurmbridge/slurmbridge/bridge/testbed"
	"github.com/slurmbridge/slurmbridge/bridge/testbed/facts"
)

// seedName marks the rows this tool inserts, so it can remove exactly those.
const seedName = "slurmbridge-bench-seed"

// benchPartition holds the running allocations.
const benchPartition = "qcbench"

// The testbed users the jobs run as: bob's pend over his quota, alice's hold the allocations.
// A testbed of a site's size (make testbed-up PRESET=...) has neither: its smallest guarantee's
// user pends, and another project's user holds the allocations.
const (
	gpuUser = "bob"
	cpuUser = "alice"
)

type options struct {
	rows, pending, running, array, runs int
	launch                              bool
	projects                            int
	quotad, quotactl, baseline          string
	apply, json                         bool
}

func main() {
	var o options
	flag.IntVar(&o.rows, "rows", 100_000, "job rows in slurmdbd's job table")
	flag.IntVar(&o.pending, "pending", 2000, "GPU jobs pending over quota")
	flag.IntVar(&o.running, "running", 0, "one-CPU allocations running (no process)")
	flag.IntVar(&o.array, "array", 0, "submit the pending jobs as arrays of this many tasks (0: single jobs)")
	flag.IntVar(&o.runs, "runs", 5, "quotad cycles to measure")
	flag.IntVar(&o.projects, "projects", 0, "projects in the quota table: the testbed's, and accounts added (qcb001...) up to this many, each guaranteed no GPU (0: the table as it is)")
	flag.StringVar(&o.quotad, "quotad", "bin/quotad", "quotad binary")
	flag.StringVar(&o.quotactl, "quotactl", "bin/quotactl", "quotactl binary (-projects imports the widened table with it)")
	flag.StringVar(&o.baseline, "baseline", "", "another quotad binary (an older build) run before -quotad in every round, on the same queue; prints both and the median of per-round ratios")
	flag.BoolVar(&o.apply, "apply", false, "after the dry runs, run one acting cycle and time it")
	flag.BoolVar(&o.launch, "launch", false, "with -apply, let the lent jobs start during the acting cycle (by default their partition is DOWN for it: on one host their launches would land inside the cycle)")
	flag.BoolVar(&o.json, "json", false, "also time one squeue --json read, for comparison")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "quotadcost:", err)
		if errors.Is(err, errNothingToAct) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// errNothingToAct ends a run asked to time an acting cycle (-apply) whose dry runs planned no
// lend: the read and plan were measured and reported, but there was no acting cycle to time.
// It exits with status 2, so that a script measuring many sizes can go on past it.
var errNothingToAct = errors.New("no acting cycle to time: the dry runs planned no lend, so an acting quotad would change nothing (quotactl explain JOB says why a pending job is not lent)")

// shape is what the benchmark takes from the testbed's facts and quota table.
type shape struct {
	users      []string // every project's user: the seeded rows are theirs
	gpuProject replay.Project
	gpuUser    string
	cpuUser    string
	gpuPool    string // the first pool of gpuProject's GPU type
	cpuNodes   string // the default pool's nodes, as a host list
	cpuCores   int    // and their cores
}

// readShape reads the facts and quota table of the testbed in $TESTBED_DIR (a preset's own
// where it is one).
func readShape() (shape, error) {
	f, err := testbed.Facts()
	if err != nil {
		return shape{}, err
	}
	var sh shape
	for _, p := range f.Projects {
		sh.users = append(sh.users, p.User)
	}
	dir := testbed.Dir()
	quotas := filepath.Join(dir, "etc", "quotas.yaml")
	if _, err := os.Stat(quotas); err != nil {
		quotas = filepath.Join(facts.RepoDir(), "quotas.yaml")
	}
	projects, err := replay.TestbedProjects(quotas)
	if err != nil {
		return shape{}, err
	}
	i := slices.IndexFunc(projects, func(p replay.Project) bool { return p.User == gpuUser })
	if i < 0 {
		// The smallest guarantee: the fewest of its jobs run, the most pend over quota.
		i = 0
		for j, p := range projects {
			if p.GPUs < projects[i].GPUs {
				i = j
			}
		}
	}
	sh.gpuProject, sh.gpuUser = projects[i], projects[i].User
	sh.cpuUser = cpuUser
	if !slices.Contains(sh.users, cpuUser) {
		sh.cpuUser = projects[(i+1)%len(projects)].User
	}
	for _, p := range f.Pools {
		if p.GPU == sh.gpuProject.GPUType && sh.gpuPool == "" {
			sh.gpuPool = p.Name
		}
		if p.Default {
			shape := f.ShapeOf(p)
			sh.cpuNodes, sh.cpuCores = p.HostList(), p.Nodes*shape.Sockets*shape.CoresPerSocket
		}
	}
	if sh.gpuPool == "" || sh.cpuNodes == "" {
		return shape{}, fmt.Errorf("the testbed's facts have no pool of %s GPUs or no default pool", sh.gpuProject.GPUType)
	}
	return sh, nil
}

// bench is one run on the testbed.
type bench struct {
	o     options
	c     *testbed.Cluster
	sh    shape
	env   []string // quotad's: the testbed's environment and TESTBED_DIR
	acct  *slurmdbd.Reader
	jobs  string // the name of every job this run submits
	admin slurm.Client
}

func run(o options) error {
	ctx := context.Background()
	b, err := open(ctx, o)
	if err != nil {
		return err
	}
	// Right after the testbed comes up its quotad may not have synced QOS and accounts yet:
	// without them bob's jobs would not be over quota.
	if err := b.waitSynced(ctx); err != nil {
		return err
	}
	restore, err := b.pause(ctx)
	defer restore()
	if err != nil {
		return err
	}
	if o.projects > 0 {
		unwiden, err := b.widen(ctx)
		defer unwiden()
		if err != nil {
			return err
		}
	}
	// What quotad's first cycles had left to apply, applied now: with QOS or account changes
	// outstanding a plan moves no job, and the cycle measured would lend nothing.
	// With -quotactl's own binary, so that an older build (-quotad and -quotactl of one commit)
	// acts on what it synced itself.
	syncStart := time.Now()
	if out, err := command(b.env, o.quotactl, "sync").CombinedOutput(); err != nil {
		return fmt.Errorf("quotactl sync: %w (%s)", err, tail(out))
	}
	fmt.Printf("synced in %s (quotactl sync: the QOS, accounts and users of the table)\n", time.Since(syncStart).Round(100*time.Millisecond))
	db, err := b.c.OpenDB(ctx, b.c.Vars["SLURMBRIDGE_DB_NAME"])
	if err != nil {
		return err
	}
	defer db.Close()
	if b.acct, err = slurmdbd.NewReader(db, b.c.Vars["SLURMBRIDGE_CLUSTER"]); err != nil {
		return err
	}
	seeded, err := b.seed(ctx)
	defer b.unseed()
	if err != nil {
		return err
	}
	defer b.clear()
	if err := b.fill(ctx); err != nil {
		return err
	}
	if err := b.describe(ctx, seeded); err != nil {
		return err
	}
	before, diagErr := b.admin.Diag(ctx)
	m, err := b.measure()
	if err != nil {
		return err
	}
	if diagErr == nil {
		var after slurm.Diag
		if after, diagErr = b.admin.Diag(ctx); diagErr == nil {
			printRPCs(after.Since(before), o)
		}
	}
	if diagErr != nil {
		fmt.Println("sdiag:", diagErr)
	}
	m.report(o)
	if o.apply && !m.actingRan {
		return errNothingToAct
	}
	return nil
}

func open(ctx context.Context, o options) (*bench, error) {
	sh, err := readShape()
	if err != nil {
		return nil, err
	}
	c, err := testbed.Open(ctx)
	if err != nil {
		return nil, err
	}
	return &bench{o: o, c: c, sh: sh, env: append(c.Env(), "TESTBED_DIR="+c.Dir), admin: c.Slurm(),
		jobs: fmt.Sprintf("quotadcost-%d", time.Now().UnixNano())}, nil
}

// pausedDaemons are the testbed's daemons paused while the benchmark runs.
var pausedDaemons = []string{"quotad", "elasticd"}

// pause stops the testbed's quotad, which would lend the pending jobs away, and elasticd, whose
// squeue --json poll would load the machine and hold slurmctld's job lock while the cycle is
// measured. restore starts again those that ran, the last paused first.
func (b *bench) pause(ctx context.Context) (restore func(), err error) {
	var restores []func(context.Context) error
	restore = func() {
		for i, r := range slices.Backward(restores) {
			if err := r(context.Background()); err != nil {
				fmt.Fprintf(os.Stderr, "quotadcost: restarting the testbed's %s: %v\n", pausedDaemons[i], err)
			}
		}
	}
	for _, daemon := range pausedDaemons {
		r, err := b.c.Pause(ctx, daemon)
		if err != nil {
			return restore, fmt.Errorf("pausing the testbed's %s: %w", daemon, err)
		}
		restores = append(restores, r)
	}
	return restore, nil
}

// unseed deletes the seeded rows and rolls their hours up again without them.
func (b *bench) unseed() {
	if _, err := b.acct.DB.Exec("DELETE FROM "+b.acct.Cluster+"_job_table WHERE job_name = ?", seedName); err != nil {
		fmt.Fprintln(os.Stderr, "quotadcost: removing the seeded rows:", err)
	}
	if err := b.rollup(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "quotadcost:", err)
	}
}

// rollup has slurmdbd sum the seeded week into its usage tables again (testbed.RollUp), as its
// hourly rollup had done for rows that arrived when their jobs ended: quotad reads those.
func (b *bench) rollup(ctx context.Context) error {
	from := time.Now().Add(-8 * 24 * time.Hour)
	start := time.Now()
	if err := b.c.RollUp(ctx, b.acct.DB, from); err != nil {
		return err
	}
	fmt.Printf("rolled up the usage since %s in %s\n", from.UTC().Format(time.RFC3339), time.Since(start).Round(100*time.Millisecond))
	return nil
}

// clear cancels the run's jobs and removes the partition of the allocations.
func (b *bench) clear() {
	_ = b.admin.CancelNamed(context.Background(), b.jobs)
	if b.o.running > 0 {
		b.removePartition()
	}
}

// fill queues the pending GPU jobs and the running allocations, and waits until slurmctld
// lists them all.
func (b *bench) fill(ctx context.Context) error {
	fillStart := time.Now()
	if err := b.submitPending(ctx); err != nil {
		return err
	}
	pendingTook := time.Since(fillStart)
	if b.o.running > 0 {
		if err := b.submitRunning(ctx); err != nil {
			return err
		}
	}
	fmt.Printf("filled in %s (pending jobs %s)\n", time.Since(fillStart).Round(100*time.Millisecond), pendingTook.Round(100*time.Millisecond))
	return b.waitQueue(ctx)
}

// describe prints what the cycles will read: the job table and the queue, and how long the
// queue reads take alone.
func (b *bench) describe(ctx context.Context, seeded int) error {
	total, err := b.acct.JobRowCount(ctx)
	if err != nil {
		return err
	}
	shape := "single jobs"
	if b.o.array > 0 {
		shape = fmt.Sprintf("arrays of %d tasks", b.o.array)
	}
	fmt.Printf("job table: %d rows (%d seeded); %d GPU jobs pending over quota (%s); %d allocations running\n", total, seeded, b.o.pending, shape, b.o.running)
	b.readQueue(ctx)
	return nil
}

// measures are the measured cycles' numbers, one per run.
type measures struct {
	walls, cycles, rss, lends, baseCycles, ratios []float64
	// squeues are one bare squeue of the same queue per round (quotad's own command, not
	// parsed): reading the queue is the floor of a cycle; floorRatios are cycle / squeue.
	squeues, floorRatios []float64
	pending, running     int
	projects             int
	// warmCycles and warmRatios are a running quotad's cycles (after its first) and each
	// over the bare squeue run right after it: what a cycle costs the daemon, its database
	// connections open and what it read before still known.
	warmCycles, warmSqueues, warmRatios []float64
	// acting is the acting cycle's own time (-apply), in seconds.
	acting    float64
	actingRan bool
}

// measure runs quotad --once --dry-run o.runs times (each after the baseline's, if any),
// printing each run, then the acting cycle if asked.
func (b *bench) measure() (measures, error) {
	o := b.o
	m := measures{pending: o.pending, running: o.running, projects: o.projects}
	fmt.Println("run  process_s  cycle_s  max_rss_MB  lends  squeue_s  (in the cycle, s: accounting nodes queue plan)")
	for i := 1; i <= o.runs; i++ {
		if o.baseline != "" {
			_, bmb, bt, _, err := b.dryRun(o.baseline, "the baseline quotad")
			if err != nil {
				return m, err
			}
			m.baseCycles = append(m.baseCycles, bt.Cycle/1000)
			fmt.Printf("%3d  baseline    %7.3f  %10.1f         %.3f %.3f %.3f %.3f\n", i, bt.Cycle/1000, bmb, bt.Accounting/1000, bt.Nodes/1000, bt.Queue/1000, bt.Plan/1000)
		}
		wall, mb, t, n, err := b.dryRun(o.quotad, "quotad")
		if err != nil {
			return m, err
		}
		m.walls, m.cycles, m.rss, m.lends = append(m.walls, wall), append(m.cycles, t.Cycle/1000), append(m.rss, mb), append(m.lends, float64(n))
		if o.baseline != "" {
			m.ratios = append(m.ratios, t.Cycle/1000/m.baseCycles[len(m.baseCycles)-1])
		}
		start := time.Now()
		if _, err := b.admin.QueueOutput(context.Background(), slurm.QueueVariant{}); err != nil {
			return m, fmt.Errorf("bare squeue: %w", err)
		}
		sq := time.Since(start).Seconds()
		m.squeues, m.floorRatios = append(m.squeues, sq), append(m.floorRatios, t.Cycle/1000/sq)
		fmt.Printf("%3d  %9.3f  %7.3f  %10.1f  %5d  %8.3f  %.3f %.3f %.3f %.3f\n", i, wall, t.Cycle/1000, mb, n, sq, t.Accounting/1000, t.Nodes/1000, t.Queue/1000, t.Plan/1000)
	}
	if b.o.baseline == "" {
		if err := b.warm(&m); err != nil {
			return m, err
		}
	}
	if o.apply && stats.Median(m.lends) == 0 {
		// Nothing was lendable: on 22.05 an array is lent whole or not at all, and an array of
		// more tasks than the idle GPUs never is. Reported as such (acting_s=none).
		return m, nil
	}
	if o.apply {
		if !o.launch {
			// The lent jobs would start at once, and on this one host each launch (slurmd,
			// slurmstepd, the script) takes the CPUs slurmctld and quotad's moves need; on a
			// cluster they run on the nodes. DOWN: jobs may be queued and updated, none is
			// allocated (INACTIVE refuses the QOS update: "Requested partition configuration not
			// available now"), and quotad, which reads nodes, not partitions, lends as before.
			restore, err := b.partitionDown(b.sh.gpuPool)
			if err != nil {
				return m, err
			}
			defer restore()
		}
		before, diagErr := b.admin.Diag(context.Background())
		wall, mb, out, err := cycle(b.env, o.quotad, "--once", "--log-level", "debug")
		if err != nil {
			return m, err
		}
		cycles := actingOf(out)
		if len(cycles) == 0 {
			return m, fmt.Errorf("the acting quotad printed no \"cycle applied\" line:\n%s", tail([]byte(out)))
		}
		updates := int64(-1)
		if diagErr == nil {
			if after, err := b.admin.Diag(context.Background()); err == nil {
				updates = int64(after.Since(before).ByType["ACCOUNTING_UPDATE_MSG"].Count)
			}
		}
		// quotad --once runs the cycles that follow at once for the moves the first left past
		// its budget (--move-budget): acting_s is the longest of them, each timed alone.
		var all applied
		for i, a := range cycles {
			m.acting = max(m.acting, a.Took/1000)
			all.QOS, all.Accounts, all.Lends, all.Returns = all.QOS+a.QOS, all.Accounts+a.Accounts, all.Lends+a.Lends, all.Returns+a.Returns
			fmt.Printf("acting cycle %d of %d: %.3f s in the cycle (read and plan, then sacctmgr %.3f s, scontrol moves %.3f s, their audit %.3f s); %d QOS and %d accounts changed, %d lends, %d returns, %d moves left for the next\n",
				i+1, len(cycles), a.Took/1000, a.Commands/1000, a.Moves/1000, a.Audit/1000, a.QOS, a.Accounts, a.Lends, a.Returns, a.Deferred)
		}
		m.actingRan = true
		fmt.Printf("acting: %d cycle(s), the longest %.3f s; %.3f s for the process, %.1f MB; %d sacctmgr commands of up to %d QOS or one account, %d scontrol target QOS; %d QOS and %d accounts changed, %d lends, %d returns in all; %d ACCOUNTING_UPDATE_MSG from slurmdbd\n",
			len(cycles), m.acting, wall, mb, strings.Count(out, `"message":"modify qos"`)+strings.Count(out, `"message":"modify account"`)+strings.Count(out, `"message":"add user qos"`),
			slurm.MaxQOSPerRun, moveRuns(out), all.QOS, all.Accounts, all.Lends, all.Returns, updates)
	}
	return m, nil
}

// partitionDown sets partition State=DOWN until restore sets it UP again.
func (b *bench) partitionDown(partition string) (restore func(), err error) {
	set := func(state string) error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if out, err := b.c.Run(ctx, "scontrol", "update", "PartitionName="+partition, "State="+state); err != nil {
			return fmt.Errorf("scontrol update PartitionName=%s State=%s: %w: %s", partition, state, err, out)
		}
		return nil
	}
	if err := set("DOWN"); err != nil {
		return nil, err
	}
	fmt.Printf("partition %s DOWN for the acting cycle: the lent jobs stay queued (-launch lets them start)\n", partition)
	return func() {
		if err := set("UP"); err != nil {
			fmt.Fprintln(os.Stderr, "quotadcost:", err)
		}
	}, nil
}

// warmInterval is the running quotad's interval while its cycles are measured: room after
// each cycle for one bare squeue alone.
const warmInterval = 2 * time.Second

// warm runs quotad as a daemon (--dry-run, a cycle every warmInterval) and measures o.runs of
// its cycles after the first (which opens its connections and reads everything, like quotad
// --once), each followed at once by one bare squeue, while quotad waits for its next cycle.
func (b *bench) warm(m *measures) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(b.o.runs+3)*warmInterval+2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, b.o.quotad, "--dry-run", "--interval", warmInterval.String(), "--log-level", "debug", "--listen", "")
	cmd.Env = b.env
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("quotad --dry-run: %w", err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	fmt.Printf("running quotad (--dry-run --interval %s): %d cycles after its first\n", warmInterval, b.o.runs)
	fmt.Println("cycle  cycle_s  squeue_s  ratio  (in the cycle, s: accounting nodes queue plan)")
	lines := bufio.NewScanner(stderr)
	lines.Buffer(make([]byte, 0, 1<<20), 1<<24)
	seen := 0
	for lines.Scan() && len(m.warmCycles) < b.o.runs {
		line := lines.Text()
		var t timings
		if !strings.Contains(line, "cycle timings") || json.Unmarshal([]byte(line), &t) != nil {
			if strings.Contains(line, `"level":"error"`) {
				return fmt.Errorf("the running quotad: %s", line)
			}
			continue
		}
		if seen++; seen == 1 {
			continue
		}
		// After its timings line quotad still prints the dry run's plan: the squeue waits for
		// that, to run alone, as the rounds of quotad --once do.
		time.Sleep(warmInterval / 4)
		start := time.Now()
		if _, err := b.admin.QueueOutput(ctx, slurm.QueueVariant{}); err != nil {
			return fmt.Errorf("bare squeue: %w", err)
		}
		sq := time.Since(start).Seconds()
		m.warmCycles, m.warmSqueues, m.warmRatios = append(m.warmCycles, t.Cycle/1000), append(m.warmSqueues, sq), append(m.warmRatios, t.Cycle/1000/sq)
		fmt.Printf("%5d  %7.3f  %8.3f  %5.2f  %.3f %.3f %.3f %.3f\n", seen-1, t.Cycle/1000, sq, t.Cycle/1000/sq, t.Accounting/1000, t.Nodes/1000, t.Queue/1000, t.Plan/1000)
	}
	if len(m.warmCycles) < b.o.runs {
		return fmt.Errorf("the running quotad gave %d of %d cycles (%v)", len(m.warmCycles), b.o.runs, lines.Err())
	}
	return nil
}

// applied is quotad's "cycle applied" line: what one acting cycle changed and how long it took
// (milliseconds, zerolog's unit), from the cycle's start to its last action.
type applied struct {
	QOS, Accounts, Lends, Returns, Deferred int
	Took                                    float64
	// Where it went: sacctmgr runs, scontrol moves, the moves' audit rows.
	Commands, Moves, Audit float64
}

// actingOf reads every "cycle applied" line of quotad's output, in order.
func actingOf(out string) []applied {
	var cycles []applied
	for line := range strings.SplitSeq(out, "\n") {
		var a applied
		if strings.Contains(line, "cycle applied") && json.Unmarshal([]byte(line), &a) == nil {
			cycles = append(cycles, a)
		}
	}
	return cycles
}

// moveRuns counts the distinct target QOS of the cycle's moves: one scontrol run each (up to
// 1,000 jobs).
func moveRuns(out string) int {
	targets := map[string]bool{}
	for line := range strings.SplitSeq(out, "\n") {
		var m struct{ Message, To string }
		if strings.Contains(line, `"moved job"`) && json.Unmarshal([]byte(line), &m) == nil {
			targets[m.To] = true
		}
	}
	return len(targets)
}

// dryRun runs one quotad --once --dry-run and reads its cycle timings and planned lends.
func (b *bench) dryRun(bin, what string) (wall, mb float64, t timings, lends int, err error) {
	wall, mb, out, err := cycle(b.env, bin, "--once", "--dry-run", "--log-level", "debug")
	if err != nil {
		return 0, 0, timings{}, 0, err
	}
	t, ok := phases(out)
	if !ok {
		return 0, 0, timings{}, 0, fmt.Errorf("%s printed no cycle timings:\n%s", what, tail([]byte(out)))
	}
	lends = strings.Count(out, "\nlend job ")
	if strings.HasPrefix(out, "lend job ") {
		lends++
	}
	return wall, mb, t, lends, nil
}

// report prints the medians; the last line is the one to compare runs by.
func (m measures) report(o options) {
	// cycle_s is what a running quotad spends per cycle (read and plan); process_s adds a
	// process's start: Go, two database connections, the schema check.
	fmt.Printf("median: %.3f s per cycle (goal <= 1 s; %.3f s for the whole quotad --once process), %.1f MB peak RSS (goal <= 200 MB), %.0f lends planned\n",
		stats.Median(m.cycles), stats.Median(m.walls), stats.Median(m.rss), stats.Median(m.lends))
	if o.baseline != "" {
		fmt.Printf("baseline: median %.3f s per cycle; median of per-round ratios (-quotad / -baseline) %.3f\n", stats.Median(m.baseCycles), stats.Median(m.ratios))
	}
	fmt.Printf("floor, quotad --once: one bare squeue of the same queue %.3f s (median); cycle / squeue, median of per-round ratios: %.2f\n",
		stats.Median(m.squeues), stats.Median(m.floorRatios))
	// The figures of the last line: the running daemon's cycles where they were measured (not
	// beside a -baseline), else quotad --once's.
	cycle, squeue, ratio := stats.Median(m.cycles), stats.Median(m.squeues), stats.Median(m.floorRatios)
	if len(m.warmCycles) > 0 {
		cycle, squeue, ratio = stats.Median(m.warmCycles), stats.Median(m.warmSqueues), stats.Median(m.warmRatios)
		fmt.Printf("floor, the running quotad: one bare squeue %.3f s (median); cycle %.3f s; cycle / squeue, median of per-cycle ratios: %.2f (goal <= 1.3)\n", squeue, cycle, ratio)
	}
	last := fmt.Sprintf("cycle_s=%.3f rss_mb=%.1f process_s=%.3f lends=%.0f pending=%d running=%d squeue_s=%.3f floor_ratio=%.2f", cycle, stats.Median(m.rss), stats.Median(m.walls), stats.Median(m.lends), m.pending, m.running,
		squeue, ratio)
	if len(m.warmCycles) > 0 {
		last += fmt.Sprintf(" once_cycle_s=%.3f once_floor_ratio=%.2f", stats.Median(m.cycles), stats.Median(m.floorRatios))
	}
	if m.projects > 0 {
		last += fmt.Sprintf(" projects=%d", m.projects)
	}
	switch {
	case m.actingRan:
		last += fmt.Sprintf(" acting_s=%.3f", m.acting)
	case o.apply:
		last += " acting_s=none"
	}
	fmt.Println(last)
}

// printRPCs prints what slurmctld served while the cycles were measured: quotad's reads (each
// cycle reads nodes, partitions and the queue), the bare squeues beside them, and the rest of
// the testbed's traffic (slurmd pings and registrations).
func printRPCs(d slurm.Diag, o options) {
	n, us := slurm.Total(d.ByType)
	what := fmt.Sprintf("%d quotad cycles", o.runs)
	if o.baseline != "" {
		what += fmt.Sprintf(", %d of the baseline's", o.runs)
	}
	what += fmt.Sprintf(", %d bare squeues", o.runs)
	if o.apply {
		what += ", one acting cycle"
	}
	fmt.Printf("slurmctld RPCs while measuring (%s): %d, %.3f s of slurmctld's time; by type:", what, n, float64(us)/1e6)
	for _, t := range slurm.Top(d.ByType, 8) {
		fmt.Printf(" %s %d (%.3f s)", strings.TrimPrefix(t.Name, "REQUEST_"), t.Count, float64(t.TotalMicros)/1e6)
	}
	fmt.Print("; by user:")
	for _, u := range slurm.Top(d.ByUser, 4) {
		fmt.Printf(" %s %d", u.Name, u.Count)
	}
	fmt.Println()
}

// cycle runs quotad once and returns its wall time, peak RSS and output.
func cycle(env []string, bin string, args ...string) (wall, mb float64, out string, err error) {
	cmd := command(env, bin, args...)
	start := time.Now()
	b, err := cmd.CombinedOutput()
	wall = time.Since(start).Seconds()
	if err != nil {
		return 0, 0, "", fmt.Errorf("quotad %s: %v: %s", strings.Join(args, " "), err, tail(b))
	}
	mb = float64(cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss) / 1024
	return wall, mb, string(b), nil
}

// timings are quotad's "cycle timings" debug line, in milliseconds (zerolog's unit).
type timings struct{ Accounting, Nodes, Queue, Plan, Cycle float64 }

func phases(out string) (timings, bool) {
	for line := range strings.SplitSeq(out, "\n") {
		var t timings
		if strings.Contains(line, "cycle timings") && json.Unmarshal([]byte(line), &t) == nil {
			return t, true
		}
	}
	return timings{}, false
}

// readQueue times the queue reads alone: the fast one quotad uses, for the record.
func (b *bench) readQueue(ctx context.Context) {
	start := time.Now()
	jobs, err := b.admin.Queue(ctx, slurm.QueueRead{Fields: slurm.SchedulingFields})
	if err != nil {
		fmt.Println("fast queue read:", err)
		return
	}
	tasks := 0
	for i := range jobs {
		tasks += jobs[i].TaskCount()
	}
	fmt.Printf("fast queue read (squeue --Format, parsed): %.3f s for %d records, %d jobs\n", time.Since(start).Seconds(), len(jobs), tasks)
	// The same command alone, without --array (one line per array record), and without TZ (then
	// glibc stat()s /etc/localtime for each time printed): what squeue itself costs, what printing
	// each pending task costs, and what the environment saves.
	for _, v := range []struct {
		name string
		v    slurm.QueueVariant
	}{
		{"squeue alone", slurm.QueueVariant{}},
		{"squeue alone, without --array", slurm.QueueVariant{PerRecord: true}},
		{"squeue alone, TZ unset", slurm.QueueVariant{LocalTime: true}},
	} {
		start = time.Now()
		out, err := b.admin.QueueOutput(ctx, v.v)
		fmt.Printf("%s: %.3f s, %d lines (err %v)\n", v.name, time.Since(start).Seconds(), strings.Count(string(out), "\n"), err)
	}
	if !b.o.json {
		return
	}
	start = time.Now()
	jobs, err = b.admin.Queue(ctx, slurm.QueueRead{Fields: slurm.AllFields})
	fmt.Printf("squeue --json read (parsed): %.3f s for %d records (err %v)\n", time.Since(start).Seconds(), len(jobs), err)
}

// waitSynced waits until quotad has given the GPU user's project (proj-b) its guaranteed QOS
// as default. On a testbed of a site's size its first cycles have a few hundred QOS and
// account changes to make, one sacctmgr each, a bounded number per cycle: minutes.
func (b *bench) waitSynced(ctx context.Context) error {
	p := b.sh.gpuProject
	deadline := time.Now().Add(5 * time.Minute)
	for {
		assocs, err := b.admin.Associations(ctx, slurm.AssociationFilter{Accounts: []string{p.Account}})
		synced := err == nil && len(assocs) > 0
		for _, a := range assocs {
			synced = synced && a.DefaultQOS == p.GuaranteedQOS
		}
		if synced {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s's associations have no default QOS %s after 5 minutes (is the testbed's quotad running?): %v %v", p.Account, p.GuaranteedQOS, assocs, err)
		}
		time.Sleep(time.Second)
	}
}

// waitQueue waits until slurmctld lists every job: submissions return before the last
// array is fully known to squeue, and the allocations until each is granted.
func (b *bench) waitQueue(ctx context.Context) error {
	o := b.o
	deadline := time.Now().Add(5 * time.Minute)
	for {
		jobs, err := b.admin.Queue(ctx, slurm.QueueRead{Fields: slurm.SchedulingFields})
		if err != nil {
			return err
		}
		bob, running := 0, 0
		for i := range jobs {
			j := &jobs[i]
			switch {
			case j.Account == b.sh.gpuProject.Account:
				bob += j.TaskCount()
			case j.Running() && j.Partition == benchPartition:
				running++
			}
		}
		if bob >= o.pending && running >= o.running {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("queue not filled: %d of %d GPU jobs, %d of %d allocations running", bob, o.pending, running, o.running)
		}
		time.Sleep(2 * time.Second)
	}
}

func command(env []string, name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Env = env
	return cmd
}

// seed inserts completed GPU jobs of the testbed's projects, spread over the last week, until
// the job table holds at least o.rows rows. TRES ids come from tres_table, as slurmdbd writes
// them.
func (b *bench) seed(ctx context.Context) (int, error) {
	have, err := b.acct.JobRowCount(ctx)
	if err != nil {
		return 0, err
	}
	if have >= b.o.rows {
		return 0, nil
	}
	all, err := b.acct.Associations(ctx)
	if err != nil {
		return 0, err
	}
	assocs := slices.DeleteFunc(all, func(a slurm.Association) bool { return a.User == "" || !slices.Contains(b.sh.users, a.User) })
	if len(assocs) == 0 {
		return 0, fmt.Errorf("no associations of %s in %s_assoc_table", strings.Join(b.sh.users, ", "), b.acct.Cluster)
	}
	names, err := b.acct.TRESNames(ctx)
	if err != nil {
		return 0, err
	}
	gpuType := b.sh.gpuProject.GPUType
	gpu, ok := slurmdbd.TRESID(names, "gres/gpu")
	if !ok {
		return 0, fmt.Errorf("no tres gres/gpu in tres_table")
	}
	typed, ok := slurmdbd.TRESID(names, "gres/gpu:"+gpuType)
	if !ok {
		return 0, fmt.Errorf("no tres gres/gpu:%s in tres_table", gpuType)
	}
	now := time.Now().Unix()
	n := b.o.rows - have
	jobs := make([]testbed.JobRow, n)
	for i := range jobs {
		a := assocs[i%len(assocs)]
		end := now - int64(i%(7*24*3600))
		gpus := 1 + i%4
		jobs[i] = testbed.JobRow{ID: uint32(50_000_000 + i), Assoc: a.ID, Account: a.Account, Partition: b.sh.gpuPool, CPUs: gpus,
			Start: end - int64(60+i%3600), End: end, TRES: fmt.Sprintf("1=%d,2=%d,4=1,%d=%d,%d=%d", gpus, gpus*1000, gpu, gpus, typed, gpus)}
	}
	if done, err := b.c.InsertJobRows(ctx, b.acct.DB, seedName, jobs); err != nil {
		return done, fmt.Errorf("seeding: %w", err)
	}
	return n, b.rollup(ctx)
}

// submitPending submits o.pending one-GPU jobs as bob (quota 4) in his GPU type's pool, as
// arrays of o.array tasks or one by one, 8 submissions at a time: with no quotad lending, all
// but the 4 in quota pend with reason QOSGrpGRES.
func (b *bench) submitPending(ctx context.Context) error {
	var subs [][]string
	for left := b.o.pending; left > 0; {
		// Long enough that no task ends while a slow fill (thousands of sallocs on a busy
		// machine take many minutes) is under way: bob's four running tasks are his quota, and a
		// task that ended would leave the queue short of o.pending.
		args := []string{"--job-name=" + b.jobs, "-p", b.sh.gpuPool, "--gres=gpu:" + b.sh.gpuProject.GPUType + ":1", "-t", "240"}
		if b.o.array > 0 {
			k := min(b.o.array, left)
			args = append(args, fmt.Sprintf("--array=0-%d", k-1))
			left -= k
		} else {
			left--
		}
		subs = append(subs, append(args, "--wrap", "sleep 14400"))
	}
	return fanout.Run(len(subs), func(i int) error {
		_, err := b.c.Submit(ctx, b.sh.gpuUser, subs[i]...)
		return err
	})
}

// submitRunning creates a hidden partition over the default pool's nodes where every core may
// be shared by many jobs, and makes o.running one-CPU allocations in it as alice: salloc
// --no-shell returns once the allocation is granted and leaves no process behind, so thousands
// fit on this machine.
func (b *bench) submitRunning(ctx context.Context) error {
	n := b.o.running
	share := (n + b.sh.cpuCores - 1) / b.sh.cpuCores * 2 // with room to spare
	if err := b.admin.CreatePartition(ctx, slurm.PartitionSpec{Name: benchPartition, Nodes: b.sh.cpuNodes, ForceOverSubscribe: share, Hidden: true}); err != nil {
		return fmt.Errorf("creating partition %s: %w", benchPartition, err)
	}
	alice, err := b.c.SlurmAs(b.sh.cpuUser, nil)
	if err != nil {
		return err
	}
	return fanout.Run(n, func(int) error {
		return alice.AllocateNoShell(ctx, slurm.SubmitOptions{JobName: b.jobs, Partition: benchPartition, Tasks: 1, MemMB: 1, TimeMinutes: 60})
	})
}

func (b *bench) removePartition() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for ctx.Err() == nil {
		if err := b.admin.DeletePartition(ctx, benchPartition); err == nil {
			return
		}
		time.Sleep(2 * time.Second) // its jobs are still ending
	}
	fmt.Fprintf(os.Stderr, "quotadcost: partition %s could not be removed; scontrol delete PartitionName=%s\n", benchPartition, benchPartition)
}

func tail(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 2000 {
		s = s[len(s)-2000:]
	}
	return s
}
