// Command slurmbridge-doctor checks a live cluster for what slurmbridge needs: the job_submit
// plugin, the pools file, preemption and accounting, quotad's rights, the daemons and the
// database credentials (`poolctl doctor` is the same command).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/doctor"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := doctor.Main(ctx, os.Args, doctor.Env{
		Slurm: slurm.NewClient(slurm.ExecRunner{}),
		Out:   os.Stdout,
		Err:   os.Stderr,
	})
	stop()
	os.Exit(code)
}
