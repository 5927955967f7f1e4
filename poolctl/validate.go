package poolctl

import (
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/slurmbridge/slurmbridge/bridge/pools/validation"
)

func validateCommand(env Env) *cli.Command {
	return &cli.Command{
		Name:      "validate",
		Usage:     "check a pools file on its own and against the live cluster (sinfo --json)",
		ArgsUsage: "[FILE]",
		Description: "Prints every problem with its line and exits 1 when there is any. " +
			"Run it before scontrol reconfigure.",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "no-cluster", Usage: "only the checks that need no Slurm"},
		},
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			if c.NArg() > 1 {
				return cli.Exit(fmt.Sprintf("validate takes one file, got %d arguments", c.NArg()), exitUsage)
			}
			path := c.Args().First()
			if path == "" {
				path = configPath(c)
			}
			return validate(c, env, path, !c.Bool("no-cluster"))
		},
	}
}

// validate reads the file, and the nodes unless withCluster is false, and prints what
// validation.Check says of them.
func validate(c *cli.Context, env Env, path string, withCluster bool) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return cli.Exit(err.Error(), exitProblems)
	}
	var cluster *validation.Cluster
	if withCluster {
		nodes, err := env.Fetcher.Nodes(c.Context)
		cluster = &validation.Cluster{Nodes: nodes, Err: err}
	}
	report := validation.Check(path, data, cluster)
	for _, line := range report.Lines {
		fmt.Fprintln(env.Out, line)
	}
	if !report.OK() {
		return cli.Exit(report.Failure, exitProblems)
	}
	return nil
}
