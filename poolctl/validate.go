package poolctl

import (
	"fmt"
	"os"
	"slices"

	"github.com/urfave/cli/v2"

	"github.com/slurmbridge/slurmbridge/bridge/pools"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
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

func validate(c *cli.Context, env Env, path string, withCluster bool) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return cli.Exit(err.Error(), exitProblems)
	}
	cfg, problems := pools.Decode(data, path)
	if cfg != nil {
		// Decode's problems (an unknown key, a wrong type) leave the rest readable, so the
		// other checks still run: one run shows every problem.
		problems = append(problems, cfg.Validate()...)
		if withCluster {
			nodes, err := env.Fetcher.Nodes(c.Context)
			if err != nil {
				printProblems(env, problems)
				return cli.Exit(fmt.Sprintf("cannot check %s against the cluster: %v (--no-cluster skips this check)", path, err), exitProblems)
			}
			problems = append(problems, pools.CheckCluster(cfg, slurm.Cluster(nodes))...)
		}
	}
	if len(problems) > 0 {
		n := printProblems(env, problems)
		return cli.Exit(fmt.Sprintf("%s: %d %s", path, n, plural(n, "problem")), exitProblems)
	}
	if withCluster {
		fmt.Fprintf(env.Out, "%s: OK, %d %s match the cluster\n", path, len(cfg.Pools), plural(len(cfg.Pools), "pool"))
	} else {
		fmt.Fprintf(env.Out, "%s: OK, %d %s (not checked against the cluster)\n", path, len(cfg.Pools), plural(len(cfg.Pools), "pool"))
	}
	return nil
}

// printProblems prints each problem once, by line, and returns how many it printed.
func printProblems(env Env, problems pools.Problems) int {
	slices.SortStableFunc(problems, func(a, b pools.Problem) int { return a.Line - b.Line })
	printed := 0
	var last string
	for _, p := range problems {
		if s := p.String(); s != last {
			fmt.Fprintln(env.Out, s)
			last = s
			printed++
		}
	}
	return printed
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
