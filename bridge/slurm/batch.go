package slurm

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// SubmitOptions are sbatch's options for one job. Zero fields are left out.
type SubmitOptions struct {
	JobName   string
	Account   string
	Partition string
	Nodes     int
	Tasks     int
	Gres      string // e.g. "gpu:a100:2"
	WorkDir   string // --chdir
	Output    string // --output, a pattern such as /tmp/%x-%j.out
	// TimeMinutes is the time limit; 0: the partition's default.
	TimeMinutes uint32
	// Args are further options as a user would type them, after the ones above; without a
	// script to feed on stdin the last of them is the script's path.
	Args []string
}

// Argv is the options as sbatch gets them, after --parsable.
func (o SubmitOptions) Argv() []string {
	var args []string
	add := func(flag, v string) {
		if v != "" {
			args = append(args, flag+"="+v)
		}
	}
	add("--job-name", o.JobName)
	add("--account", o.Account)
	add("--partition", o.Partition)
	if o.Nodes > 0 {
		args = append(args, "--nodes="+strconv.Itoa(o.Nodes))
	}
	if o.Tasks > 0 {
		args = append(args, "--ntasks="+strconv.Itoa(o.Tasks))
	}
	add("--gres", o.Gres)
	add("--chdir", o.WorkDir)
	add("--output", o.Output)
	if o.TimeMinutes > 0 {
		args = append(args, "--time="+strconv.FormatUint(uint64(o.TimeMinutes), 10))
	}
	return append(args, o.Args...)
}

// SubmitBatch runs sbatch and returns the new job's id. A non-nil script is fed on stdin,
// which needs an InputRunner. The runner decides who submits: an ExecRunner with a Credential
// submits as that user, so Slurm applies the user's own limits and permissions.
func (c Client) SubmitBatch(ctx context.Context, o SubmitOptions, script []byte) (uint32, error) {
	args := append([]string{"--parsable"}, o.Argv()...)
	var out []byte
	var err error
	if script != nil {
		in, ok := c.Runner.(InputRunner)
		if !ok {
			return 0, errors.New("sbatch: the runner cannot feed a script on stdin")
		}
		out, err = in.RunInput(ctx, script, "sbatch", args...)
	} else {
		out, err = c.Runner.Run(ctx, "sbatch", args...)
	}
	if err != nil {
		return 0, err
	}
	return ParseSubmitted(out)
}

// ParseSubmitted reads the job id sbatch --parsable prints, "jobid" or "jobid;cluster", on its
// last line.
func ParseSubmitted(out []byte) (uint32, error) {
	line := strings.TrimSpace(string(out))
	if i := strings.LastIndexByte(line, '\n'); i >= 0 {
		line = line[i+1:]
	}
	id, _, _ := strings.Cut(line, ";")
	n, err := strconv.ParseUint(id, 10, 32)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("sbatch printed %q, not a job id", out)
	}
	return uint32(n), nil
}

// Cancel ends jobs the way Slurm does (TERM, KillWait, KILL), in one scancel run.
func (c Client) Cancel(ctx context.Context, jobIDs ...uint32) error {
	if len(jobIDs) == 0 {
		return nil
	}
	args := make([]string, len(jobIDs))
	for i, id := range jobIDs {
		args[i] = formatID(id)
	}
	_, err := c.Runner.Run(ctx, "scancel", args...)
	return err
}

// CancelNamed cancels every job with one of the names.
func (c Client) CancelNamed(ctx context.Context, names ...string) error {
	if len(names) == 0 {
		return nil
	}
	_, err := c.Runner.Run(ctx, "scancel", "--name="+strings.Join(names, ","))
	return err
}

// Signal sends a signal (e.g. "TERM") to every process of a job, the batch script included
// (--full): without it scancel signals only the steps, and a batch script that runs the work
// itself would never hear it.
func (c Client) Signal(ctx context.Context, jobID uint32, signal string) error {
	_, err := c.Runner.Run(ctx, "scancel", "--full", "--signal="+signal, formatID(jobID))
	return err
}
