// Command quotadcost measures one quotad cycle at scale on the running testbed: slurmdbd's job
// table seeded (through its real schema) to --rows rows of recent history, --pending GPU jobs
// pending over quota in slurmctld, then `quotad --once --dry-run` run --runs times, printing
// each run's wall time and peak RSS and their medians against the goals (≤ 1 s, ≤ 150 MB).
//
// It pauses the testbed's quotad (so the pending jobs stay pending) and puts everything back:
// the seeded rows are deleted and the jobs cancelled. Run as root: go run ./bench/cmd/quotadcost
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/slurmbridge/slurmbridge/bridge/testbed"
)

// seedName marks the rows this tool inserts, so it can remove exactly those.
const seedName = "slurmbridge-bench-seed"

func main() {
	rows := flag.Int("rows", 100_000, "job rows in slurmdbd's job table")
	pending := flag.Int("pending", 2000, "GPU jobs pending over quota")
	runs := flag.Int("runs", 5, "quotad cycles to measure")
	quotad := flag.String("quotad", "bin/quotad", "quotad binary")
	flag.Parse()
	if err := run(*rows, *pending, *runs, *quotad); err != nil {
		fmt.Fprintln(os.Stderr, "quotadcost:", err)
		os.Exit(1)
	}
}

func run(rows, pending, runs int, quotadBin string) error {
	ctx := context.Background()
	c, err := testbed.Open(ctx)
	if err != nil {
		return err
	}
	root, err := filepath.Abs(".")
	if err != nil {
		return err
	}
	script := filepath.Join(root, "testbed", "quotad.sh")
	env := append(c.Env(), "TESTBED_DIR="+c.Dir)
	if out, err := command(env, "bash", script, "stop").CombinedOutput(); err != nil {
		return fmt.Errorf("pausing the testbed's quotad: %v: %s", err, out)
	}
	defer func() {
		if out, err := command(env, "bash", script, "start").CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "quotadcost: restarting the testbed's quotad: %v: %s\n", err, out)
		}
	}()

	db, err := openDB(c)
	if err != nil {
		return err
	}
	defer db.Close()
	seeded, err := seed(ctx, db, c.Vars["SLURMBRIDGE_CLUSTER"], rows)
	if err != nil {
		return err
	}
	defer func() {
		if _, err := db.Exec("DELETE FROM "+c.Vars["SLURMBRIDGE_CLUSTER"]+"_job_table WHERE job_name = ?", seedName); err != nil {
			fmt.Fprintln(os.Stderr, "quotadcost: removing the seeded rows:", err)
		}
	}()

	name := fmt.Sprintf("quotadcost-%d", time.Now().UnixNano())
	defer func() { _ = c.Slurm().CancelNamed(context.Background(), name) }()
	if err := submitPending(ctx, c, name, pending); err != nil {
		return err
	}

	var total int
	if err := db.Get(&total, "SELECT COUNT(*) FROM "+c.Vars["SLURMBRIDGE_CLUSTER"]+"_job_table"); err != nil {
		return err
	}
	fmt.Printf("job table: %d rows (%d seeded); %d jobs pending over quota\n", total, seeded, pending)
	fmt.Println("run  wall_s  max_rss_MB")
	var walls, rss []float64
	for i := 1; i <= runs; i++ {
		cmd := command(env, quotadBin, "--once", "--dry-run", "--log-level", "warn")
		cmd.Stdout = nil
		start := time.Now()
		out, err := cmd.CombinedOutput()
		wall := time.Since(start).Seconds()
		if err != nil {
			return fmt.Errorf("quotad --once: %v: %s", err, tail(out))
		}
		mb := float64(cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss) / 1024
		walls, rss = append(walls, wall), append(rss, mb)
		fmt.Printf("%3d  %6.3f  %10.1f\n", i, wall, mb)
	}
	fmt.Printf("median: %.3f s per cycle (goal <= 1 s), %.1f MB peak RSS (goal <= 150 MB)\n", median(walls), median(rss))
	return nil
}

func command(env []string, name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Env = env
	return cmd
}

func openDB(c *testbed.Cluster) (*sqlx.DB, error) {
	pw, err := os.ReadFile(c.Vars["SLURMBRIDGE_DB_PASSWORD_FILE"])
	if err != nil {
		return nil, err
	}
	dsn := fmt.Sprintf("%s:%s@tcp(%s)/%s", c.Vars["SLURMBRIDGE_DB_USER"], strings.TrimSpace(string(pw)),
		c.Vars["SLURMBRIDGE_DB_ADDR"], c.Vars["SLURMBRIDGE_DB_NAME"])
	return sqlx.Open("mysql", dsn)
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

// submitPending submits n one-a100 jobs as bob (quota 4), 8 at a time: with no quotad lending,
// all but the 4 in quota pend with reason QOSGrpGRES.
func submitPending(ctx context.Context, c *testbed.Cluster, name string, n int) error {
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range next {
				if _, err := c.Submit(ctx, "bob", "--job-name="+name, "-p", "a100", "--gres=gpu:a100:1", "--wrap", "sleep 600"); err != nil {
					errs <- err
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		return fmt.Errorf("submitting: %w", err)
	}
	return nil
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
