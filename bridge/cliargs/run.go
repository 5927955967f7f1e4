package cliargs

import (
	"context"
	"errors"
	"fmt"
	"io"

	ucli "github.com/urfave/cli/v2"
)

// Run runs app with args (args[0] is the program name) and returns the process's exit status:
// 0 on success, the code of a cli.Exit error, else otherwise. A non-empty error is printed to
// errOut after the app's name, once: the app must not exit on its own (its ExitErrHandler does
// nothing), so that tests and aliases can run it in-process.
func Run(ctx context.Context, app *ucli.App, args []string, errOut io.Writer, otherwise int) int {
	err := app.RunContext(ctx, args)
	if err == nil {
		return 0
	}
	code := otherwise
	var exit ucli.ExitCoder
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	}
	if msg := err.Error(); msg != "" {
		fmt.Fprintln(errOut, app.Name+":", msg)
	}
	return code
}
