package poolctl

import (
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/slurmbridge/slurmbridge/bridge/pools"
	"github.com/slurmbridge/slurmbridge/bridge/pools/poolstest"
	"github.com/slurmbridge/slurmbridge/bridge/slurm/slurmtest"
)

// parseExplainFlags runs args through explain's real flag parsing and returns the Request.
func parseExplainFlags(t *testing.T, args []string) (pools.Request, error) {
	t.Helper()
	var req pools.Request
	var reqErr error
	app := &cli.App{
		Flags:          explainFlags,
		ExitErrHandler: func(*cli.Context, error) {},
		Action: func(c *cli.Context) error {
			req, reqErr = requestFromFlags(c.String)
			return nil
		},
	}
	if err := app.Run(append([]string{"explain"}, args...)); err != nil {
		t.Fatalf("%q: %v", args, err)
	}
	return req, reqErr
}

// TestRequestMatchesCapturedJobDescs compares explain's Request with what slurmctld passed to
// job_submit for the same sbatch options (bridge/testdata/job_desc-*.txt), on every release
// captured: explain must read options the way the running release will.
func TestRequestMatchesCapturedJobDescs(t *testing.T) {
	for _, capture := range slurmtest.JobDescCaptures(t) {
		t.Run(slurmtest.CaptureVersion(capture), func(t *testing.T) {
			compared := 0
			for _, desc := range poolstest.JobDescs(t, capture) {
				command := desc.Command
				args, ok := explainArgs(command)
				if !ok {
					continue
				}
				got, err := parseExplainFlags(t, args)
				if err != nil {
					t.Errorf("%s: %v", command, err)
					continue
				}
				want := desc.Request
				if strings.Contains(command, "--sockets-per-node=") {
					want.SocketsPerNode = got.SocketsPerNode // not in the capture
				}
				if got != want {
					t.Errorf("%s:\n got %+v\nwant %+v", command, got, want)
				}
				compared++
			}
			if compared < 10 {
				t.Fatalf("only %d captured commands compared", compared)
			}
		})
	}
}

// explainArgs turns a captured sbatch command into explain's arguments; false for commands
// with options explain does not take (they do not affect routing or are not submissions).
func explainArgs(command string) ([]string, bool) {
	fields := strings.Fields(strings.ReplaceAll(command, "'", ""))
	if fields[0] != "sbatch" {
		return nil, false
	}
	var args []string
	for i := 1; i < len(fields); i++ {
		switch f := fields[i]; {
		case f == "--wrap":
			i++ // the script, not an option
		case strings.HasPrefix(f, "--constraint"), strings.HasPrefix(f, "--mem-per-gpu"), f == "--no-requeue":
			return nil, false
		default:
			args = append(args, f)
		}
	}
	return args, true
}
