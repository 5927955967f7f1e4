// Command quotactl manages slurmbridge's GPU quotas; see quotad/cli.
package main

import (
	"fmt"
	"os"

	"github.com/slurmbridge/slurmbridge/bridge/cliargs"
	"github.com/slurmbridge/slurmbridge/quotad/cli"
)

func main() {
	app := cli.QuotactlApp()
	if err := app.Run(cliargs.FlagsFirst(app, os.Args)); err != nil {
		fmt.Fprintln(os.Stderr, "quotactl:", err)
		os.Exit(1)
	}
}
