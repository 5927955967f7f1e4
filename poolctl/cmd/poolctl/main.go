// Command poolctl checks and shows slurmbridge's resource pools: validate, status, explain.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/poolctl"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := poolctl.Run(ctx, os.Args, poolctl.Env{
		Fetcher: slurm.NewClient(slurm.ExecRunner{}),
		Out:     os.Stdout,
		Err:     os.Stderr,
	})
	stop()
	os.Exit(code)
}
