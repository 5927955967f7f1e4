// Command quotad keeps Slurm's QOS in line with slurmbridge's GPU quota table and lends idle
// GPUs to over-quota jobs; see quotad/cli.
package main

import (
	"fmt"
	"os"

	"github.com/slurmbridge/slurmbridge/quotad/cli"
)

func main() {
	if err := cli.QuotadApp().Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "quotad:", err)
		os.Exit(1)
	}
}
