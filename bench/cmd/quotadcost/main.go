// Command quotadcost measures one quotad cycle at scale on the running testbed: slurmdbd's job
// table seeded (through its real schema) to --rows rows of recent history, --pending GPU jobs
// pending over quota and --running jobs running in slurmctld, then `quotad --once --dry-run`
// run --runs times, printing each run's wall time, peak RSS and planned lends, and their
// medians against the goals (<= 1 s, <= 200 MB). The last line is
// "cycle_s=... rss_mb=... lends=..." (medians). With --apply one acting cycle follows
// (`quotad --once`: read, plan and the batched moves).
//
// Shapes: bob (quota 4 a100) runs 4 one-a100 jobs in his guarantee; the pending jobs are his
// one-a100 jobs, over quota, so each cycle plans to lend the 4 a100 of partition a100 that stay
// idle. --array N submits them as arrays of N tasks (sbatch --array, MaxArraySize permitting),
// which fills slurmctld in seconds; 0 submits single jobs. The running jobs are alice's
// one-CPU allocations without a shell (salloc --no-shell: no process on any node) in a hidden
// partition that this tool creates over cpu-[1-2] with OverSubscribe=FORCE, and removes.
//
// It pauses the testbed's quotad (so the pending jobs stay pending) and puts everything back:
// the seeded rows are deleted, the jobs cancelled, the partition removed. Run as root:
// go run ./bench/cmd/quotadcost -pending 50000 -running 5000 -array 1000
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/slurmbridge/slurmbridge/bench/internal/fanout"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/bridge/testbed"
)

// seedName marks the rows this tool inserts, so it can remove exactly those.
const seedName = "slurmbridge-bench-seed"

// benchPartition holds the running allocations.
const benchPartition = "qcbench"

type options struct {
	rows, pending, running, array, runs int
	quotad, baseline                    string
	apply, json                         bool
}

func main() {
	var o options
	flag.IntVar(&o.rows, "rows", 100_000, "job rows in slurmdbd's job table")
	flag.IntVar(&o.pending, "pending", 2000, "GPU jobs pending over quota")
	flag.IntVar(&o.running, "running", 0, "one-CPU allocations running (no process)")
	flag.IntVar(&o.array, "array", 0, "submit the pending jobs as arrays of this many tasks (0: single jobs)")
	flag.IntVar(&o.runs, "runs", 5, "quotad cycles to measure")
	flag.StringVar(&o.quotad, "quotad", "bin/quotad", "quotad binary")
	flag.StringVar(&o.baseline, "baseline", "", "another quotad binary (an older build) run before -quotad in every round, on the same queue; prints both and the median of per-round ratios")
	flag.BoolVar(&o.apply, "apply", false, "after the dry runs, run one acting cycle and time it")
	flag.BoolVar(&o.json, "json", false, "also time one squeue --json read, for comparison")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "quotadcost:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	ctx := context.Background()
	c, err := testbed.Open(ctx)
	if err != nil {
		return err
	}
	root, err := filepath.Abs(".")
	if err != nil {
		return err
	}
	env := append(c.Env(), "TESTBED_DIR="+c.Dir)
	// Right after the testbed comes up its quotad may not have synced QOS and accounts yet:
	// without them bob's jobs would not be over quota.
	if err := waitSynced(ctx, c); err != nil {
		return err
	}
	// quotad would lend the pending jobs away; elasticd's squeue --json poll would load the
	// machine and hold slurmctld's job lock while the cycle is measured.
	for _, daemon := range []string{"quotad", "elasticd"} {
		script := filepath.Join(root, "testbed", daemon+".sh")
		if out, _ := command(env, "bash", script, "status").CombinedOutput(); !strings.Contains(string(out), "running (") {
			continue
		}
		if out, err := command(env, "bash", script, "stop").CombinedOutput(); err != nil {
			return fmt.Errorf("pausing the testbed's %s: %v: %s", daemon, err, out)
		}
		defer func() {
			if out, err := command(env, "bash", script, "start").CombinedOutput(); err != nil {
				fmt.Fprintf(os.Stderr, "quotadcost: restarting the testbed's %s: %v: %s\n", daemon, err, out)
			}
		}()
	}

	db, err := c.OpenDB(ctx, c.Vars["SLURMBRIDGE_DB_NAME"])
	if err != nil {
		return err
	}
	defer db.Close()
	seeded, err := seed(ctx, db, c.Vars["SLURMBRIDGE_CLUSTER"], o.rows)
	if err != nil {
		return err
	}
	defer func() {
		if _, err := db.Exec("DELETE FROM "+c.Vars["SLURMBRIDGE_CLUSTER"]+"_job_table WHERE job_name = ?", seedName); err != nil {
			fmt.Fprintln(os.Stderr, "quotadcost: removing the seeded rows:", err)
		}
	}()

	name := fmt.Sprintf("quotadcost-%d", time.Now().UnixNano())
	defer func() {
		_ = c.Slurm().CancelNamed(context.Background(), name)
		if o.running > 0 {
			removePartition(c)
		}
	}()
	fillStart := time.Now()
	if err := submitPending(ctx, c, name, o.pending, o.array); err != nil {
		return err
	}
	pendingTook := time.Since(fillStart)
	if o.running > 0 {
		if err := submitRunning(ctx, c, name, o.running); err != nil {
			return err
		}
	}
	fmt.Printf("filled in %s (pending jobs %s)\n", time.Since(fillStart).Round(100*time.Millisecond), pendingTook.Round(100*time.Millisecond))
	if err := waitQueue(ctx, c, o); err != nil {
		return err
	}

	var total int
	if err := db.Get(&total, "SELECT COUNT(*) FROM "+c.Vars["SLURMBRIDGE_CLUSTER"]+"_job_table"); err != nil {
		return err
	}
	shape := "single jobs"
	if o.array > 0 {
		shape = fmt.Sprintf("arrays of %d tasks", o.array)
	}
	fmt.Printf("job table: %d rows (%d seeded); %d GPU jobs pending over quota (%s); %d allocations running\n", total, seeded, o.pending, shape, o.running)
	readQueue(ctx, c, o.json)
	fmt.Println("run  process_s  cycle_s  max_rss_MB  lends  (in the cycle, s: accounting nodes queue plan)")
	var walls, cycles, rss, lends, baseCycles, ratios []float64
	for i := 1; i <= o.runs; i++ {
		if o.baseline != "" {
			_, bmb, bout, err := cycle(env, o.baseline, "--once", "--dry-run", "--log-level", "debug")
			if err != nil {
				return err
			}
			bt, ok := phases(bout)
			if !ok {
				return fmt.Errorf("the baseline quotad printed no cycle timings:\n%s", tail([]byte(bout)))
			}
			baseCycles = append(baseCycles, bt.Cycle/1000)
			fmt.Printf("%3d  baseline    %7.3f  %10.1f         %.3f %.3f %.3f %.3f\n", i, bt.Cycle/1000, bmb, bt.Accounting/1000, bt.Nodes/1000, bt.Queue/1000, bt.Plan/1000)
		}
		wall, mb, out, err := cycle(env, o.quotad, "--once", "--dry-run", "--log-level", "debug")
		if err != nil {
			return err
		}
		n := strings.Count(out, "\nlend job ")
		if strings.HasPrefix(out, "lend job ") {
			n++
		}
		t, ok := phases(out)
		if !ok {
			return fmt.Errorf("quotad printed no cycle timings:\n%s", tail([]byte(out)))
		}
		walls, cycles, rss, lends = append(walls, wall), append(cycles, t.Cycle/1000), append(rss, mb), append(lends, float64(n))
		if o.baseline != "" {
			ratios = append(ratios, t.Cycle/1000/baseCycles[len(baseCycles)-1])
		}
		fmt.Printf("%3d  %9.3f  %7.3f  %10.1f  %5d  %.3f %.3f %.3f %.3f\n", i, wall, t.Cycle/1000, mb, n, t.Accounting/1000, t.Nodes/1000, t.Queue/1000, t.Plan/1000)
	}
	if o.apply {
		wall, mb, out, err := cycle(env, o.quotad, "--once", "--log-level", "info")
		if err != nil {
			return err
		}
		fmt.Printf("acting cycle (read, plan, batched moves): %.3f s, %.1f MB, %d jobs moved\n", wall, mb, strings.Count(out, `"moved job"`))
	}
	// cycle_s is what a running quotad spends per cycle (read and plan); process_s adds a
	// process's start: Go, two database connections, the schema check.
	fmt.Printf("median: %.3f s per cycle (goal <= 1 s; %.3f s for the whole quotad --once process), %.1f MB peak RSS (goal <= 200 MB), %.0f lends planned\n",
		median(cycles), median(walls), median(rss), median(lends))
	if o.baseline != "" {
		fmt.Printf("baseline: median %.3f s per cycle; median of per-round ratios (-quotad / -baseline) %.3f\n", median(baseCycles), median(ratios))
	}
	fmt.Printf("cycle_s=%.3f rss_mb=%.1f process_s=%.3f lends=%.0f pending=%d running=%d\n", median(cycles), median(rss), median(walls), median(lends), o.pending, o.running)
	return nil
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
func readQueue(ctx context.Context, c *testbed.Cluster, compareJSON bool) {
	start := time.Now()
	jobs, err := c.Slurm().QueueJobs(ctx)
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
	if r, ok := c.Runner().(slurm.EnvRunner); ok {
		noTZ := func(env []string) []string {
			return slices.DeleteFunc(slurm.QueueEnv(env), func(kv string) bool { return strings.HasPrefix(kv, "TZ=") })
		}
		for _, v := range []struct {
			name string
			edit func([]string) []string
			args []string
		}{
			{"squeue alone", slurm.QueueEnv, slurm.QueueArgs()},
			{"squeue alone, without --array", slurm.QueueEnv, slices.DeleteFunc(slurm.QueueArgs(), func(a string) bool { return a == "--array" })},
			{"squeue alone, TZ unset", noTZ, slurm.QueueArgs()},
		} {
			start = time.Now()
			out, err := r.RunEnv(ctx, v.edit, "squeue", v.args...)
			fmt.Printf("%s: %.3f s, %d lines (err %v)\n", v.name, time.Since(start).Seconds(), strings.Count(string(out), "\n"), err)
		}
	}
	if !compareJSON {
		return
	}
	start = time.Now()
	jobs, err = c.Slurm().Jobs(ctx)
	fmt.Printf("squeue --json read (parsed): %.3f s for %d records (err %v)\n", time.Since(start).Seconds(), len(jobs), err)
}

// waitSynced waits until quotad has given proj-b's users their guaranteed QOS as default.
func waitSynced(ctx context.Context, c *testbed.Cluster) error {
	deadline := time.Now().Add(time.Minute)
	for {
		assocs, err := c.Slurm().ShowAssociations(ctx, slurm.AssociationFilter{Accounts: []string{"proj-b"}})
		synced := err == nil && len(assocs) > 0
		for _, a := range assocs {
			synced = synced && a.DefaultQOS == "guar-proj-b"
		}
		if synced {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("proj-b's associations have no default QOS guar-proj-b after a minute (is the testbed's quotad running?): %v %v", assocs, err)
		}
		time.Sleep(time.Second)
	}
}

// waitQueue waits until slurmctld lists every job: submissions return before the last
// array is fully known to squeue, and the allocations until each is granted.
func waitQueue(ctx context.Context, c *testbed.Cluster, o options) error {
	deadline := time.Now().Add(5 * time.Minute)
	for {
		jobs, err := c.Slurm().QueueJobs(ctx)
		if err != nil {
			return err
		}
		bob, running := 0, 0
		for i := range jobs {
			j := &jobs[i]
			switch {
			case j.Account == "proj-b":
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

// seed inserts completed GPU jobs of the testbed's three projects, spread over the last week,
// until the job table holds at least want rows. TRES ids come from tres_table, as slurmdbd
// writes them.
func seed(ctx context.Context, db *sqlx.DB, cluster string, want int) (int, error) {
	table := cluster + "_job_table"
	var have int
	if err := db.GetContext(ctx, &have, "SELECT COUNT(*) FROM "+table); err != nil {
		return 0, err
	}
	if have >= want {
		return 0, nil
	}
	type assoc struct {
		ID   uint32 `db:"id_assoc"`
		User string `db:"user"`
		Acct string `db:"acct"`
	}
	var assocs []assoc
	if err := db.SelectContext(ctx, &assocs, "SELECT id_assoc, user, acct FROM "+cluster+"_assoc_table WHERE deleted = 0 AND user IN ('alice','bob','carol')"); err != nil {
		return 0, err
	}
	if len(assocs) == 0 {
		return 0, fmt.Errorf("no associations of alice, bob, carol in %s_assoc_table", cluster)
	}
	var gpu, a100 uint32
	if err := db.GetContext(ctx, &gpu, "SELECT id FROM tres_table WHERE type = 'gres' AND name = 'gpu'"); err != nil {
		return 0, fmt.Errorf("tres gres/gpu: %w", err)
	}
	if err := db.GetContext(ctx, &a100, "SELECT id FROM tres_table WHERE type = 'gres' AND name = 'gpu:a100'"); err != nil {
		return 0, fmt.Errorf("tres gres/gpu:a100: %w", err)
	}
	now := time.Now().Unix()
	const batch = 1000
	n := want - have
	for done := 0; done < n; done += batch {
		var sb strings.Builder
		args := make([]any, 0, batch*12)
		sb.WriteString("INSERT INTO " + table + " (id_job, job_name, id_assoc, account, `partition`, state, cpus_req, id_resv, id_wckey, id_user, id_group, het_job_id, het_job_offset, state_reason_prev, nodes_alloc, priority, time_submit, time_eligible, time_start, time_end, tres_alloc, tres_req) VALUES ")
		for i := done; i < min(done+batch, n); i++ {
			if i > done {
				sb.WriteString(",")
			}
			a := assocs[i%len(assocs)]
			end := now - int64(i%(7*24*3600))
			start := end - int64(60+i%3600)
			gpus := 1 + i%4
			tres := fmt.Sprintf("1=%d,2=%d,4=1,%d=%d,%d=%d", gpus, gpus*1000, gpu, gpus, a100, gpus)
			sb.WriteString("(?,?,?,?,?,3,?,0,0,0,0,0,4294967294,0,1,1,?,?,?,?,?,?)")
			args = append(args, 50_000_000+i, seedName, a.ID, a.Acct, "a100", gpus, start-30, start-30, start, end, tres, tres)
		}
		if _, err := db.ExecContext(ctx, sb.String(), args...); err != nil {
			return done, fmt.Errorf("seeding %s: %w", table, err)
		}
	}
	return n, nil
}

// submitPending submits n one-a100 jobs as bob (quota 4), as arrays of array tasks or one by
// one, 8 submissions at a time: with no quotad lending, all but the 4 in quota pend with
// reason QOSGrpGRES.
func submitPending(ctx context.Context, c *testbed.Cluster, name string, n, array int) error {
	var subs [][]string
	for left := n; left > 0; {
		// Long enough that no task ends while a slow fill (thousands of sallocs on a busy
		// machine take many minutes) is under way: bob's four running tasks are his quota, and a
		// task that ended would leave the queue short of n.
		args := []string{"--job-name=" + name, "-p", "a100", "--gres=gpu:a100:1", "-t", "240"}
		if array > 0 {
			k := min(array, left)
			args = append(args, fmt.Sprintf("--array=0-%d", k-1))
			left -= k
		} else {
			left--
		}
		subs = append(subs, append(args, "--wrap", "sleep 14400"))
	}
	return fanout.Run(len(subs), func(i int) error {
		_, err := c.Submit(ctx, "bob", subs[i]...)
		return err
	})
}

// submitRunning creates a hidden partition over cpu-[1-2] where every core may be shared by
// many jobs, and makes n one-CPU allocations in it as alice: salloc --no-shell returns once the
// allocation is granted and leaves no process behind, so thousands fit on this machine.
func submitRunning(ctx context.Context, c *testbed.Cluster, name string, n int) error {
	share := (n + 15) / 16 * 2 // two nodes of 8 cores, with room to spare
	if _, err := c.Run(ctx, "scontrol", "create", "PartitionName="+benchPartition, "Nodes=cpu-[1-2]",
		fmt.Sprintf("OverSubscribe=FORCE:%d", share), "Hidden=YES", "State=UP", "MaxTime=INFINITE"); err != nil {
		return fmt.Errorf("creating partition %s: %w", benchPartition, err)
	}
	return fanout.Run(n, func(int) error {
		_, err := c.RunAs(ctx, "alice", "salloc", "--no-shell", "--job-name="+name, "-p", benchPartition, "-n", "1", "--mem=1M", "-t", "60")
		return err
	})
}

func removePartition(c *testbed.Cluster) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for ctx.Err() == nil {
		if _, err := c.Run(ctx, "scontrol", "delete", "PartitionName="+benchPartition); err == nil {
			return
		}
		time.Sleep(2 * time.Second) // its jobs are still ending
	}
	fmt.Fprintf(os.Stderr, "quotadcost: partition %s could not be removed; scontrol delete PartitionName=%s\n", benchPartition, benchPartition)
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func tail(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 2000 {
		s = s[len(s)-2000:]
	}
	return s
}
