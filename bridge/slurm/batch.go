package slurm

import (
	"bytes"
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
	QOS       string
	Gres      string // e.g. "gpu:a100:2"
	// GPUsPerNode is --gpus-per-node, e.g. "a100:4".
	GPUsPerNode string
	CPUsPerTask int
	MemMB       uint64 // --mem, per node
	Constraint  string
	// Requeue asks for --requeue: Slurm requeues the job when it is preempted (a borrower's
	// GPUs reclaimed) rather than killing it.
	Requeue bool
	WorkDir string // --chdir
	Output  string // --output, a pattern such as /tmp/%x-%j.out
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
	if o.CPUsPerTask > 0 {
		args = append(args, "--cpus-per-task="+strconv.Itoa(o.CPUsPerTask))
	}
	add("--qos", o.QOS)
	add("--gres", o.Gres)
	add("--gpus-per-node", o.GPUsPerNode)
	if o.MemMB > 0 {
		args = append(args, "--mem="+strconv.FormatUint(o.MemMB, 10)+"M")
	}
	add("--constraint", o.Constraint)
	if o.Requeue {
		args = append(args, "--requeue")
	}
	add("--chdir", o.WorkDir)
	add("--output", o.Output)
	if o.TimeMinutes > 0 {
		args = append(args, "--time="+strconv.FormatUint(uint64(o.TimeMinutes), 10))
	}
	return append(args, o.Args...)
}

// WithoutDirectives is a batch script with the option lines sbatch would read from it turned
// into plain comments, so that a job submitted with it asks for exactly the options on
// sbatch's command line: sbatch merges a script's #SBATCH lines with its command line option
// by option, so a script's --gpus-per-node=4 beside a command line --gres=gpu:a100:4 would ask
// for both, typed and untyped, which Slurm refuses. Like sbatch, it reads "#SBATCH" and
// "#SLURM" lines up to the first line that is neither blank nor a comment (give sbatch
// --ignore-pbs for #PBS lines). Every other line, and the line count, stay as they were.
func WithoutDirectives(script []byte) []byte {
	lines := bytes.SplitAfter(script, []byte("\n"))
	for i, line := range lines {
		if bytes.HasPrefix(line, []byte("#SBATCH")) || bytes.HasPrefix(line, []byte("#SLURM")) {
			lines[i] = append([]byte("#(option given on the command line) "), line[1:]...)
			continue
		}
		if trimmed := bytes.TrimLeft(line, " \t\r\n\v\f"); len(trimmed) > 0 && trimmed[0] != '#' {
			break // a command: sbatch reads no options after it
		}
	}
	return bytes.Join(lines, nil)
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

// AllocateNoShell runs salloc --no-shell with the options (Output and WorkDir are sbatch's and
// are not given): it returns once slurmctld grants the allocation, and leaves no process on any
// node; the allocation lasts until its time limit or until it is cancelled.
func (c Client) AllocateNoShell(ctx context.Context, o SubmitOptions) error {
	o.Output, o.WorkDir = "", ""
	_, err := c.Runner.Run(ctx, "salloc", append([]string{"--no-shell"}, o.Argv()...)...)
	return err
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
