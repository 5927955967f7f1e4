// Package poolctl is the pools admin CLI: check pools.yaml against the live cluster, show each
// pool's state, and explain where a job would be routed. It prints what bridge/pools decides
// and what bridge/slurm reads; it decides nothing of its own.
package poolctl

import (
	"context"
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/slurmbridge/slurmbridge/bridge/cliargs"
	"github.com/slurmbridge/slurmbridge/bridge/pools"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/doctor"
)

// Env is what the commands talk to; tests replace the fetcher with one fed by fixtures.
type Env struct {
	Fetcher slurm.Fetcher
	Out     io.Writer
	Err     io.Writer
}

// Exit statuses.
const (
	exitProblems = 1 // validate found problems, or Slurm could not be read
	exitUsage    = 2 // bad flags or arguments
)

// Run runs poolctl with args (args[0] is the program name) and returns the exit status.
func Run(ctx context.Context, args []string, env Env) int {
	app := newApp(env)
	return cliargs.Run(ctx, app, cliargs.FlagsFirst(app, args), env.Err, exitProblems)
}

func newApp(env Env) *cli.App {
	return &cli.App{
		Name:  "poolctl",
		Usage: "check and show slurmbridge resource pools",
		Description: "The pools file defaults to $" + pools.ConfigEnv + ", else pools.yaml beside slurm.conf " +
			"($SLURM_CONF or /etc/slurm/slurm.conf): the file the job_submit plugin reads.",
		Writer:          env.Out,
		ErrWriter:       env.Err,
		HideHelpCommand: true,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "config", Usage: "pools file (default: the plugin's)"},
		},
		OnUsageError: usageError,
		// Run reports errors and picks the exit status; urfave/cli must not exit on its own.
		ExitErrHandler: func(*cli.Context, error) {},
		Commands: []*cli.Command{
			validateCommand(env),
			statusCommand(env),
			explainCommand(env),
			profileCommand(env),
			// doctor checks the whole product, not only pools; it stays here as an alias of
			// slurmbridge-doctor so existing scripts keep working.
			doctor.Command(doctorEnv(env)),
		},
	}
}

func usageError(_ *cli.Context, err error, _ bool) error {
	return cli.Exit(err.Error(), exitUsage)
}

// configPath is --config, else where the job_submit plugin looks.
func configPath(c *cli.Context) string {
	if p := c.String("config"); p != "" {
		return p
	}
	return pools.ConfigPathFromEnv()
}

// loadConfig refuses positional arguments, then reads the pools file the command works on; a
// broken one is an exit that says where to see every problem.
func loadConfig(c *cli.Context) (*pools.Config, string, error) {
	if err := noArgs(c); err != nil {
		return nil, "", err
	}
	path := configPath(c)
	cfg, err := pools.Load(path)
	if err != nil {
		return nil, path, cli.Exit(fmt.Sprintf("%v\n(poolctl validate %s shows every problem)", err, path), exitProblems)
	}
	return cfg, path, nil
}

// noArgs refuses positional arguments, which urfave/cli would otherwise ignore silently.
func noArgs(c *cli.Context) error {
	if c.Args().Present() {
		return cli.Exit(fmt.Sprintf("%s takes no arguments, got %q", c.Command.Name, c.Args().First()), exitUsage)
	}
	return nil
}

// doctorEnv is doctor's view of env: the Slurm adapter behind the fetcher, whose Runner doctor
// also runs systemctl with, so tests replay every command from fixtures. A fetcher that is not
// the adapter leaves the Runner nil, which doctor refuses.
func doctorEnv(env Env) doctor.Env {
	d := doctor.Env{Out: env.Out, Err: env.Err}
	switch f := env.Fetcher.(type) {
	case slurm.Client:
		d.Slurm = f
	case *slurm.Client:
		d.Slurm = *f
	}
	return d
}
