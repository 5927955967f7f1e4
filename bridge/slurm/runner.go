// Package slurm is the Slurm adapter: Client owns every Slurm command slurmbridge runs and
// every parse of its output. Commands go through a Runner, so policies stay pure and tests can
// replay captured output.
package slurm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Runner runs one command and returns its standard output. Implementations never involve a
// shell: arguments are passed to the program as they are, so job fields and CLI input cannot
// inject commands. Run may be called from several goroutines at once (UpdateJobsQOS runs
// scontrol side by side).
type Runner interface {
	Run(ctx context.Context, name string, args ...string) ([]byte, error)
}

// InputRunner is a Runner that can also feed the command's standard input: sbatch reads a
// script there, so a job's script never has to be written to a file first.
type InputRunner interface {
	Runner
	RunInput(ctx context.Context, stdin []byte, name string, args ...string) ([]byte, error)
}

// DefaultTimeout bounds a Slurm command when the caller's context has no deadline: a hung
// slurmctld must not hang a daemon cycle.
const DefaultTimeout = 30 * time.Second

// ExecRunner runs commands with os/exec.
type ExecRunner struct {
	// Env is the complete environment of the command (e.g. with SLURM_CONF); nil inherits ours.
	Env []string
	// Timeout applies when ctx has no deadline; zero means DefaultTimeout.
	Timeout time.Duration
	// Credential, when set, runs the command as another user (needs root).
	Credential *syscall.Credential
	// Dir is the working directory; empty means ours.
	Dir string
	// Stderr, when set, also receives what the command prints on stderr (Slurm commands say
	// there what a job_submit plugin told the user, even on success).
	Stderr io.Writer
}

// CommandError reports a command that ran and failed, with what it printed on stderr, which is
// where Slurm commands say why.
type CommandError struct {
	Command  string
	ExitCode int
	Stderr   string
	Err      error
}

func (e *CommandError) Error() string {
	msg := strings.TrimSpace(e.Stderr)
	if msg == "" {
		msg = e.Err.Error()
	}
	return fmt.Sprintf("%s: exit %d: %s", e.Command, e.ExitCode, msg)
}

func (e *CommandError) Unwrap() error { return e.Err }

// Run implements Runner.
func (r ExecRunner) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	return r.run(ctx, nil, name, args)
}

// RunInput implements InputRunner.
func (r ExecRunner) RunInput(ctx context.Context, stdin []byte, name string, args ...string) ([]byte, error) {
	return r.run(ctx, stdin, name, args)
}

func (r ExecRunner) run(ctx context.Context, stdin []byte, name string, args []string) ([]byte, error) {
	if _, ok := ctx.Deadline(); !ok {
		timeout := r.Timeout
		if timeout == 0 {
			timeout = DefaultTimeout
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = r.Env
	cmd.Dir = r.Dir
	if r.Credential != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: r.Credential}
	}
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if r.Stderr != nil {
		cmd.Stderr = io.MultiWriter(&stderr, lockedWriter{r.Stderr})
	}
	err := cmd.Run()
	if err == nil {
		return stdout.Bytes(), nil
	}
	cmdErr := &CommandError{Command: name + " " + strings.Join(args, " "), ExitCode: -1, Stderr: stderr.String(), Err: err}
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		cmdErr.ExitCode = exitErr.ExitCode()
	}
	if ctx.Err() != nil {
		cmdErr.Err = fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	return stdout.Bytes(), cmdErr
}

// SlurmctldBinary is the installed slurmctld's path: on PATH, else Debian's /usr/sbin (root's
// PATH has it, an admin's may not). It runs nothing; doctor reads the file.
func SlurmctldBinary() (string, error) {
	if path, err := exec.LookPath("slurmctld"); err == nil {
		return path, nil
	}
	const debian = "/usr/sbin/slurmctld"
	if _, err := os.Stat(debian); err != nil {
		return "", fmt.Errorf("no slurmctld on PATH or at %s", debian)
	}
	return debian, nil
}

// teeMu serializes writes to the ExecRunners' Stderr writers: commands run side by side may
// share one (a test's strings.Builder).
var teeMu sync.Mutex

type lockedWriter struct{ w io.Writer }

func (l lockedWriter) Write(p []byte) (int, error) {
	teeMu.Lock()
	defer teeMu.Unlock()
	return l.w.Write(p)
}
