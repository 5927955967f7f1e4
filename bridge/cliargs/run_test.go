package cliargs

import (
	"bytes"
	"context"
	"errors"
	"testing"

	ucli "github.com/urfave/cli/v2"
)

func TestRunPicksTheExitStatusAndPrintsTheErrorOnce(t *testing.T) {
	for _, tc := range []struct {
		name     string
		err      error
		want     int
		wantText string
	}{
		{"success", nil, 0, ""},
		{"exit with a code", ucli.Exit("bad flag", 2), 2, "tool: bad flag\n"},
		{"exit with no message", ucli.Exit("", 3), 3, ""},
		{"any other error", errors.New("broken"), 1, "tool: broken\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var errOut bytes.Buffer
			app := &ucli.App{
				Name:           "tool",
				ExitErrHandler: func(*ucli.Context, error) {},
				Action:         func(*ucli.Context) error { return tc.err },
			}
			if got := Run(context.Background(), app, []string{"tool"}, &errOut, 1); got != tc.want {
				t.Errorf("exit %d, want %d", got, tc.want)
			}
			if errOut.String() != tc.wantText {
				t.Errorf("printed %q, want %q", errOut.String(), tc.wantText)
			}
		})
	}
}
