// Command quotactl manages slurmbridge's GPU quotas; see quotad/cli.
package main

import (
	"fmt"
	"os"

	"github.com/slurmbridge/slurmbridge/quotad/cli"
)

func main() {
	if err := cli.QuotactlApp().Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "quotactl:", err)
		os.Exit(1)
	}
}
