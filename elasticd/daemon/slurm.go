package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/slurm"
)

// Slurm is what elasticd asks of Slurm. CommandSlurm runs the real commands; tests use a fake.
type Slurm interface {
	// Queue is one `squeue --json`: the jobs and their extra fields, one moment.
	Queue(ctx context.Context) ([]slurm.Job, map[uint32]slurm.JobExtra, error)
	Nodes(ctx context.Context) ([]slurm.Node, error)
	// BatchScript is the main job's batch script, which every worker runs too.
	BatchScript(ctx context.Context, jobID uint32) ([]byte, error)
	// Submit runs sbatch as the job's user and returns the new job's id.
	Submit(ctx context.Context, req SubmitRequest) (uint32, error)
	// Terminate asks a worker to stop (SIGTERM to its batch script and steps).
	Terminate(ctx context.Context, jobID uint32) error
	// Cancel ends a job (Slurm's own TERM, KillWait, KILL).
	Cancel(ctx context.Context, jobID uint32) error
}

// SubmitRequest is one worker job.
type SubmitRequest struct {
	UID, GID uint32
	Args     []string // sbatch options, without the script
	Env      []string // the job's environment contract (NAME=VALUE), added to a minimal base
	Script   []byte   // fed on stdin
	// Dir is where sbatch runs (the main job's working directory, so SLURM_SUBMIT_DIR and
	// relative paths in the script mean the same in every worker); "" or unusable: home.
	Dir string
}

// CommandSlurm runs Slurm's commands without a shell.
type CommandSlurm struct {
	Runner slurm.Runner
	// Fetcher reads the queue and the nodes the way the release needs; zero: one over Runner
	// (which learns the release on every call).
	Fetcher slurm.Client
	// Env is the base environment of the commands elasticd runs as users (SLURM_CONF, PATH).
	Env     []string
	Timeout time.Duration
}

// Queue implements Slurm.
func (c CommandSlurm) Queue(ctx context.Context) ([]slurm.Job, map[uint32]slurm.JobExtra, error) {
	return c.fetcher().Queue(ctx)
}

func (c CommandSlurm) fetcher() slurm.Client {
	if c.Fetcher.Runner == nil {
		return slurm.Client{Runner: c.Runner}
	}
	return c.Fetcher
}

// Nodes implements Slurm.
func (c CommandSlurm) Nodes(ctx context.Context) ([]slurm.Node, error) {
	return c.fetcher().Nodes(ctx)
}

// BatchScript implements Slurm.
func (c CommandSlurm) BatchScript(ctx context.Context, jobID uint32) ([]byte, error) {
	out, err := c.Runner.Run(ctx, "scontrol", "write", "batch_script", strconv.FormatUint(uint64(jobID), 10), "-")
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("job %d: empty batch script", jobID)
	}
	return out, nil
}

// Terminate implements Slurm. --full: without it scancel signals only the steps, and a worker
// whose batch script runs the trainer itself would never hear the TERM.
func (c CommandSlurm) Terminate(ctx context.Context, jobID uint32) error {
	_, err := c.Runner.Run(ctx, "scancel", "--full", "--signal=TERM", strconv.FormatUint(uint64(jobID), 10))
	return err
}

// Cancel implements Slurm.
func (c CommandSlurm) Cancel(ctx context.Context, jobID uint32) error {
	_, err := c.Runner.Run(ctx, "scancel", strconv.FormatUint(uint64(jobID), 10))
	return err
}

// Submit implements Slurm: sbatch runs with the user's uid, gid and groups, in their home
// directory, with the script on stdin.
func (c CommandSlurm) Submit(ctx context.Context, req SubmitRequest) (uint32, error) {
	u, err := user.LookupId(strconv.FormatUint(uint64(req.UID), 10))
	if err != nil {
		return 0, fmt.Errorf("job owner uid %d: %w", req.UID, err)
	}
	var groups []uint32
	if ids, err := u.GroupIds(); err == nil {
		for _, g := range ids {
			if n, err := strconv.ParseUint(g, 10, 32); err == nil {
				groups = append(groups, uint32(n))
			}
		}
	}
	timeout := c.Timeout
	if timeout == 0 {
		timeout = slurm.DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sbatch", append([]string{"--parsable"}, req.Args...)...)
	cmd.Env = append(append(append([]string{}, c.Env...),
		"HOME="+u.HomeDir, "USER="+u.Username, "LOGNAME="+u.Username), req.Env...)
	cmd.Dir = u.HomeDir
	if req.Dir != "" {
		if st, err := os.Stat(req.Dir); err == nil && st.IsDir() {
			cmd.Dir = req.Dir
		}
	}
	cmd.Stdin = bytes.NewReader(req.Script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: req.UID, Gid: req.GID, Groups: groups}}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return 0, &slurm.CommandError{Command: "sbatch " + strings.Join(req.Args, " "), ExitCode: exitCode(err), Stderr: stderr.String(), Err: err}
	}
	// --parsable prints "jobid" or "jobid;cluster".
	line := strings.TrimSpace(stdout.String())
	if i := strings.LastIndexByte(line, '\n'); i >= 0 {
		line = line[i+1:]
	}
	id, _, _ := strings.Cut(line, ";")
	n, err := strconv.ParseUint(id, 10, 32)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("sbatch printed %q, not a job id", stdout.String())
	}
	return uint32(n), nil
}

func exitCode(err error) int {
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		return exitErr.ExitCode()
	}
	return -1
}
