package slurm

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestExecRunnerPassesArgumentsWithoutAShell(t *testing.T) {
	// A shell would expand $(...) and split on ';'; the program must see the bytes as given.
	arg := "a; echo injected $(id -u)"
	out, err := ExecRunner{}.Run(context.Background(), "printf", "%s", arg)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != arg {
		t.Fatalf("got %q, want %q", out, arg)
	}
}

func TestExecRunnerReportsStderrAndExitCode(t *testing.T) {
	_, err := ExecRunner{}.Run(context.Background(), "sh", "-c", "echo 'Invalid job id specified' >&2; exit 1")
	var cmdErr *CommandError
	if !errors.As(err, &cmdErr) {
		t.Fatalf("got %v, want a CommandError", err)
	}
	if cmdErr.ExitCode != 1 || !strings.Contains(err.Error(), "Invalid job id specified") {
		t.Fatalf("got exit %d, message %q", cmdErr.ExitCode, err)
	}
}

func TestExecRunnerTimesOut(t *testing.T) {
	start := time.Now()
	_, err := ExecRunner{Timeout: 100 * time.Millisecond}.Run(context.Background(), "sleep", "10")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want deadline exceeded", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatalf("timeout did not stop the command")
	}
}

func TestExecRunnerUsesGivenEnvironment(t *testing.T) {
	out, err := ExecRunner{Env: []string{"SLURM_CONF=/x/slurm.conf"}}.Run(context.Background(), "env")
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(out)) != "SLURM_CONF=/x/slurm.conf" {
		t.Fatalf("env = %q", out)
	}
}

func TestExecRunnerFeedsStdin(t *testing.T) {
	out, err := ExecRunner{}.RunInput(context.Background(), []byte("#!/bin/sh\necho hi\n"), "cat")
	if err != nil || string(out) != "#!/bin/sh\necho hi\n" {
		t.Errorf("cat got %q, %v", out, err)
	}
}
