// Command elasticd grows and shrinks elastic training jobs on Slurm; see elasticd/README.md.
package main

import (
	"fmt"
	"os"

	"github.com/slurmbridge/slurmbridge/elasticd/app"
)

func main() {
	if err := app.New().Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "elasticd:", err)
		os.Exit(1)
	}
}
