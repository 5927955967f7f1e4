package poolctl

import (
	"reflect"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/slurmbridge/slurmbridge/bridge/gpureq"
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

// sameRequest says whether explain's request a means what slurmctld passed, b: every field the
// same, except the four TRES strings, which each release spells its own way ("gres:gpu:1" in
// 22.05, "gres/gpu:1" and "cpu=4" per task from 24.11) and which must read as the same GPUs.
func sameRequest(t *testing.T, a, b pools.Request) bool {
	t.Helper()
	read := func(r pools.Request) gpureq.Request {
		parsed, err := gpureq.Parse(gpureq.Fields{PerJob: r.TRESPerJob, PerNode: r.TRESPerNode, PerSocket: r.TRESPerSocket, PerTask: r.TRESPerTask})
		if err != nil {
			t.Fatalf("%+v: %v", r, err)
		}
		return parsed
	}
	if !reflect.DeepEqual(read(a), read(b)) {
		return false
	}
	a.TRESPerJob, a.TRESPerNode, a.TRESPerSocket, a.TRESPerTask = "", "", "", ""
	b.TRESPerJob, b.TRESPerNode, b.TRESPerSocket, b.TRESPerTask = "", "", "", ""
	return a == b
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
				if !sameRequest(t, got, want) {
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
