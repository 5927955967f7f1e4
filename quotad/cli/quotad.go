package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/slurmbridge/slurmbridge/bridge/auth"
	"github.com/slurmbridge/slurmbridge/bridge/serve"
	"github.com/slurmbridge/slurmbridge/bridge/slurmdbd"
	"github.com/slurmbridge/slurmbridge/quotad/actuate"
	"github.com/slurmbridge/slurmbridge/quotad/daemon"
	"github.com/slurmbridge/slurmbridge/quotad/view"
)

// QuotadApp is the quotad daemon's command line.
func QuotadApp() *ucli.App {
	return &ucli.App{
		Name:  "quotad",
		Usage: "guaranteed GPU quotas with borrowing on Slurm: keeps QOS in line with the quota table, lends idle GPUs, returns borrowers",
		Flags: append(dbFlags(),
			&ucli.DurationFlag{Name: "interval", Usage: "time between cycles", Value: daemon.DefaultInterval, EnvVars: []string{"QUOTAD_INTERVAL"}},
			&ucli.DurationFlag{Name: "lease-timeout", Usage: "MariaDB frees the active quotad's lease after it has been silent this long: how soon a standby takes over from a quotad cut off from the database (default: 3 intervals, at least 15s)", EnvVars: []string{"QUOTAD_LEASE_TIMEOUT"}},
			&ucli.BoolFlag{Name: "dry-run", Usage: "print each cycle's plan and change nothing"},
			&ucli.BoolFlag{Name: "once", Usage: "run one cycle and exit (with the cycles that follow it at once when its moves reached --move-budget)"},
			&ucli.DurationFlag{Name: "move-budget", Usage: "how long after an apply's start its job moves may still begin: past it the rest are made by a cycle that follows at once, on a fresh snapshot (0: no bound)", Value: actuate.DefaultMoveBudget, EnvVars: []string{"QUOTAD_MOVE_BUDGET"}},
			&ucli.IntFlag{Name: "max-commands", Usage: "most sacctmgr commands (QOS, accounts, users) one cycle runs; a plan whose QOS limits, Preempt lists, accounts and users take more runs that many and leaves the rest, and its job moves, to the next cycle; past them the reclaim order waits, a whole project at a time, and jobs still move (0: no bound)", Value: actuate.DefaultMaxCommands, EnvVars: []string{"QUOTAD_MAX_COMMANDS"}},
			&ucli.StringFlag{Name: "listen", Usage: "address of /metrics and of the read-only API /api/v1/ (empty: none)", Value: view.DefaultAddr, EnvVars: []string{"QUOTAD_LISTEN"}},
			auth.MungeSocketFlag(),
			poolsFlag(),
			&ucli.StringFlag{Name: "log-level", Value: "info"},
			&ucli.StringFlag{Name: "log-format", Usage: "json or console", Value: "json"},
			// Tests only: slows an apply down so that a test can cut the lease between two actions.
			&ucli.DurationFlag{Name: "apply-step-delay", Hidden: true},
		),
		Action: runQuotad,
	}
}

func runQuotad(c *ucli.Context) error {
	log, err := newLogger(os.Stderr, c.String("log-level"), c.String("log-format"))
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	c.Context = ctx
	e, err := openEnv(c, log, readWrite)
	if err != nil {
		return err
	}
	defer e.Close()
	host, _ := os.Hostname()
	m := daemon.NewMetrics()
	leaseTimeout := c.Duration("lease-timeout")
	if leaseTimeout == 0 {
		leaseTimeout = daemon.LeaseIdleTimeoutFor(interval(c))
	}
	if leaseTimeout <= interval(c) {
		return fmt.Errorf("--lease-timeout %s must be longer than --interval %s: the active quotad would lose its lease between cycles", leaseTimeout, interval(c))
	}
	lease := &daemon.DBLease{DB: e.quotaDB, IdleTimeout: leaseTimeout}
	poolsFile := poolsPath(c)
	e.table.Broken = func(err error) {
		log.Error().Err(err).Str("pools", poolsFile).Msg("the pools file does not load: the last good file's borrow and elastic QOS patterns stand")
	}
	d := &daemon.Daemon{
		// pools.yaml names the QOS patterns; the quota table may only repeat them.
		Config:    e.table,
		Snapshots: e.builder,
		Lease:     lease,
		// Every action is fenced by the lease on the connection that holds it.
		Apply: &actuate.Actuator{Slurm: e.slurm, Audit: e.store, Actor: fmt.Sprintf("quotad@%s[%d]", host, os.Getpid()), Cluster: c.String("cluster"), Log: log,
			Fence: lease, StepDelay: c.Duration("apply-step-delay"), MaxCommands: c.Int("max-commands"), MoveBudget: c.Duration("move-budget")},
		Preemptions: e.reader,
		Metrics:     m,
		Log:         log,
		DryRun:      c.Bool("dry-run"),
		Out:         os.Stdout,
	}
	if c.Bool("once") {
		// One cycle, and those that follow at once for the moves its budget left.
		res, err := d.CycleAndFollowUps(ctx, 0)
		if err == nil && !d.DryRun {
			daemon.WritePlan(os.Stdout, res.Plan)
		}
		d.Lease.Release(ctx)
		return err
	}
	if addr := c.String("listen"); addr != "" {
		d.View = &view.View{Cluster: c.String("cluster"), Interval: interval(c), DryRun: d.DryRun}
		d.Pools = e.table.LastRead // the file as the cycle's table load read it
		d.Audit = e.store
		// Everything but /metrics goes to the view: the read-only API under /api/ and the cluster page.
		bound, err := serve.MetricsAndAPI(ctx, addr, m.Registry, "/", view.Handler(d.View, mungeAuth(e, c.String("munge-socket"))),
			func(err error) { log.Error().Err(err).Msg("metrics server") })
		if err != nil {
			return fmt.Errorf("metrics listener: %w", err)
		}
		log.Info().Str("addr", bound.String()).Str("pools", poolsFile).Msg("serving /metrics, the read-only API /api/v1/ and the cluster page /")
	}
	log.Info().Dur("interval", c.Duration("interval")).Bool("dry_run", d.DryRun).Str("cluster", c.String("cluster")).Msg("quotad starting")
	err = d.Run(ctx, interval(c))
	log.Info().Msg("quotad stopped")
	return err
}

func interval(c *ucli.Context) time.Duration {
	if i := c.Duration("interval"); i > 0 {
		return i
	}
	return daemon.DefaultInterval
}

// mungeAuth authenticates the API's requests for jobs with quotad's munged; Slurm operators
// and administrators are read from slurmdbd's tables, which quotad reads anyway.
func mungeAuth(e *env, socket string) auth.Munge {
	return auth.NewMunge(e.slurm, socket, func(ctx context.Context, name string) (bool, error) {
		level, err := e.reader.AdminLevel(ctx, name)
		return level >= slurmdbd.AdminOperator, err
	}, view.API)
}
