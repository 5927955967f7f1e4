// Package doctor checks a live cluster for what slurmbridge needs: the job_submit plugin,
// the pools file, Slurm's preemption and accounting settings, quotad's rights and QOS, the
// daemons and the database credentials. Gather (facts.go) reads everything once; Judge
// (checks.go) is pure, one small function per check; Run prints the verdicts.
// slurmbridge-doctor runs it, and so does its alias `poolctl doctor`.
package doctor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/slurmbridge/slurmbridge/bridge/cliargs"
	"github.com/slurmbridge/slurmbridge/bridge/pools"
	"github.com/slurmbridge/slurmbridge/bridge/pools/validation"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
)

// Env is what doctor talks to and prints on.
type Env struct {
	// Slurm runs scontrol, sacctmgr and sinfo, and systemctl through its Runner; a Client
	// without a Runner cannot run doctor.
	Slurm slurm.Client
	HTTP  *http.Client // for the daemons' metrics; nil: a 5 s timeout
	Out   io.Writer
	Err   io.Writer
}

// Exit statuses.
const (
	exitProblems = 1 // a check found a problem
	exitUsage    = 2 // bad flags or arguments
)

// Run gathers the facts once, judges them and prints every verdict on out; it returns the
// number of problems.
func Run(ctx context.Context, env Env, opts Options) int {
	verdicts := Judge(Gather(ctx, env, opts))
	Print(env.Out, verdicts)
	return Problems(verdicts)
}

// Print writes one line per verdict and, under each problem, its fix.
func Print(w io.Writer, verdicts []Verdict) {
	for _, v := range verdicts {
		fmt.Fprintf(w, "%-8s %-11s %s\n", v.Status, v.Check, v.Text)
		if v.Status == Problem {
			fmt.Fprintf(w, "%-8s %-11s fix: %s\n", "", "", v.Fix)
		}
	}
}

// flags are doctor's own; the pools file comes from --config, which belongs to the command's
// parent (poolctl's global flag, or slurmbridge-doctor's own).
func flags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "plugin-dir", Usage: "where to look for " + PluginFile + " (default: slurmctld's PluginDir)"},
		&cli.StringFlag{Name: "quotad-url", Value: "http://127.0.0.1:9817/metrics", EnvVars: []string{"SLURMBRIDGE_QUOTAD_METRICS_URL"}, Usage: "quotad's metrics"},
		&cli.StringFlag{Name: "elasticd-url", Value: "http://127.0.0.1:9464/metrics", EnvVars: []string{"SLURMBRIDGE_ELASTICD_METRICS_URL"}, Usage: "elasticd's metrics"},
		&cli.DurationFlag{Name: "max-cycle-age", Value: 5 * time.Minute, Usage: "quotad's last successful cycle must be newer"},
		&cli.StringFlag{Name: "db-password-file", Value: DefaultDBPasswordFile, EnvVars: []string{"SLURMBRIDGE_DB_PASSWORD_FILE"}, Usage: "the file quotad and quotactl read"},
		&cli.StringFlag{Name: "quotad-user", Usage: "the account quotad runs as (default: User= of quotad.service, when systemd knows it)"},
	}
}

const (
	usage       = "check a live cluster for what slurmbridge needs: plugin version, pools, preemption, daemons, credentials"
	description = "Prints one line per check and, for each problem, the fix in one line; exits 1 when " +
		"there is any problem. Run it on the controller, as root, after every Slurm upgrade. " +
		"An empty URL, user or file skips that check."
)

// Command is `doctor` as a subcommand: poolctl's, whose global --config names the pools file.
func Command(env Env) *cli.Command {
	return &cli.Command{
		Name:         "doctor",
		Usage:        usage,
		Description:  description,
		Flags:        flags(),
		OnUsageError: usageError,
		Action:       action(env),
	}
}

// Main runs slurmbridge-doctor with args (args[0] is the program name) and returns the exit
// status: 0 when every check passed, 1 on any problem, 2 on bad usage.
func Main(ctx context.Context, args []string, env Env) int {
	app := &cli.App{
		Name:            "slurmbridge-doctor",
		Usage:           usage,
		Description:     description + " The pools file defaults to $" + pools.ConfigEnv + ", else pools.yaml beside slurm.conf ($SLURM_CONF or /etc/slurm/slurm.conf): the file the job_submit plugin reads.",
		Writer:          env.Out,
		ErrWriter:       env.Err,
		HideHelpCommand: true,
		Flags:           append([]cli.Flag{&cli.StringFlag{Name: "config", Usage: "pools file (default: the plugin's)"}}, flags()...),
		OnUsageError:    usageError,
		// Main reports errors and picks the exit status; urfave/cli must not exit on its own.
		ExitErrHandler: func(*cli.Context, error) {},
		Action:         action(env),
	}
	return cliargs.Run(ctx, app, args, env.Err, exitProblems)
}

// ErrNoRunner is doctor given a fetcher that cannot run Slurm's commands (poolctl's fakes).
var ErrNoRunner = errors.New("doctor needs Slurm's commands (no command runner behind the fetcher)")

// NoProblems is doctor's last line when every check passed.
const NoProblems = "doctor: no problems"

func action(env Env) cli.ActionFunc {
	return func(c *cli.Context) error {
		if c.Args().Present() {
			return cli.Exit(fmt.Sprintf("doctor takes no arguments, got %q", c.Args().First()), exitUsage)
		}
		if env.Slurm.Runner == nil {
			return cli.Exit(ErrNoRunner.Error(), exitProblems)
		}
		opts := Options{
			PoolsPath:      c.String("config"),
			PluginDir:      c.String("plugin-dir"),
			QuotadURL:      c.String("quotad-url"),
			ElasticdURL:    c.String("elasticd-url"),
			MaxCycleAge:    c.Duration("max-cycle-age"),
			DBPasswordFile: c.String("db-password-file"),
			QuotadUser:     c.String("quotad-user"),
		}
		if opts.PoolsPath == "" {
			opts.PoolsPath = pools.ConfigPathFromEnv()
		}
		if n := Run(c.Context, env, opts); n > 0 {
			return cli.Exit(fmt.Sprintf("doctor: %d %s", n, validation.Plural(n, "problem")), exitProblems)
		}
		fmt.Fprintln(env.Out, NoProblems)
		return nil
	}
}

func usageError(_ *cli.Context, err error, _ bool) error {
	return cli.Exit(err.Error(), exitUsage)
}
