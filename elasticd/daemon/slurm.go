package daemon

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"syscall"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/slurm"
)

// Slurm is what elasticd asks of Slurm. CommandSlurm is the adapter's; tests use a fake.
type Slurm interface {
	// Queue is one `squeue --json`: every job with every field (slurm.AllFields), one moment.
	Queue(ctx context.Context) ([]slurm.Job, error)
	Nodes(ctx context.Context) ([]slurm.Node, error)
	// QOS lists every QOS (elasticd reads its GrpTRES).
	QOS(ctx context.Context) ([]slurm.QOS, error)
	// ClusterName is slurmctld's ClusterName.
	ClusterName(ctx context.Context) (string, error)
	// Associations lists the cluster's associations with their limits.
	Associations(ctx context.Context, cluster string) ([]slurm.Association, error)
	// BatchScript is the main job's batch script, which every worker runs too.
	BatchScript(ctx context.Context, jobID uint32) ([]byte, error)
	// Submit runs sbatch as the job's user and returns the new job's id.
	Submit(ctx context.Context, req SubmitRequest) (uint32, error)
	// Job reads what a person checks of one job (slurm.SummaryFields: its user's name, name,
	// QOS, state and reason); an error when Slurm lists none.
	Job(ctx context.Context, jobID uint32) (slurm.Job, error)
	// Lend moves a worker submitted to begin later into a lending QOS and starts it, as elasticd
	// (root): the job_submit plugin refuses a user's job straight into the elastic QOS.
	Lend(ctx context.Context, jobID uint32, qos string) error
	// Terminate asks a worker to stop (SIGTERM to its batch script and steps).
	Terminate(ctx context.Context, jobID uint32) error
	// Cancel ends a job (Slurm's own TERM, KillWait, KILL).
	Cancel(ctx context.Context, jobID uint32) error
}

// SubmitRequest is one worker job.
type SubmitRequest struct {
	UID, GID uint32
	Options  slurm.SubmitOptions
	Env      []string // the job's environment contract (NAME=VALUE), added to a minimal base
	Script   []byte   // fed on stdin
	// Dir is where sbatch runs (the main job's working directory, so SLURM_SUBMIT_DIR and
	// relative paths in the script mean the same in every worker); "" or unusable: home.
	Dir string
}

// CommandSlurm is Slurm through the adapter, which runs the commands without a shell.
type CommandSlurm struct {
	Client slurm.Client
	// Env is the base environment of the commands elasticd runs as users (SLURM_CONF, PATH).
	Env     []string
	Timeout time.Duration
}

// Queue implements Slurm.
func (c CommandSlurm) Queue(ctx context.Context) ([]slurm.Job, error) {
	return c.Client.Queue(ctx, slurm.QueueRead{Fields: slurm.AllFields})
}

// Nodes implements Slurm.
func (c CommandSlurm) Nodes(ctx context.Context) ([]slurm.Node, error) {
	return c.Client.Nodes(ctx)
}

// QOS implements Slurm.
func (c CommandSlurm) QOS(ctx context.Context) ([]slurm.QOS, error) {
	return c.Client.QOS(ctx)
}

// ClusterName implements Slurm.
func (c CommandSlurm) ClusterName(ctx context.Context) (string, error) {
	conf, err := c.Client.ShowConfig(ctx)
	if err != nil {
		return "", err
	}
	if name := conf.Get("ClusterName"); name != "" {
		return name, nil
	}
	return "", fmt.Errorf("scontrol show config names no ClusterName")
}

// Associations implements Slurm.
func (c CommandSlurm) Associations(ctx context.Context, cluster string) ([]slurm.Association, error) {
	return c.Client.Associations(ctx, slurm.AssociationFilter{Cluster: cluster})
}

// BatchScript implements Slurm.
func (c CommandSlurm) BatchScript(ctx context.Context, jobID uint32) ([]byte, error) {
	return c.Client.BatchScript(ctx, jobID)
}

// Terminate implements Slurm: TERM to the batch script too, which may run the trainer itself.
func (c CommandSlurm) Terminate(ctx context.Context, jobID uint32) error {
	return c.Client.Signal(ctx, jobID, "TERM")
}

// Job implements Slurm.
func (c CommandSlurm) Job(ctx context.Context, jobID uint32) (slurm.Job, error) {
	id := strconv.FormatUint(uint64(jobID), 10)
	// Not AllFields: squeue --json of Slurm 22.05 ignores the job filter.
	jobs, err := c.Client.Queue(ctx, slurm.QueueRead{Fields: slurm.SummaryFields, JobIDs: []string{id}})
	if err != nil {
		return slurm.Job{}, err
	}
	for _, j := range jobs {
		if j.ID == jobID {
			return j, nil
		}
	}
	return slurm.Job{}, fmt.Errorf("slurmctld lists no job %s", id)
}

// Lend implements Slurm.
func (c CommandSlurm) Lend(ctx context.Context, jobID uint32, qos string) error {
	return c.Client.LendJob(ctx, jobID, qos)
}

// Cancel implements Slurm.
func (c CommandSlurm) Cancel(ctx context.Context, jobID uint32) error {
	return c.Client.Cancel(ctx, jobID)
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
	// Bounded even under the caller's deadline: one slow submission must not eat a cycle.
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	r := slurm.ExecRunner{
		Env: append(append(append([]string{}, c.Env...),
			"HOME="+u.HomeDir, "USER="+u.Username, "LOGNAME="+u.Username), req.Env...),
		Dir:        u.HomeDir,
		Credential: &syscall.Credential{Uid: req.UID, Gid: req.GID, Groups: groups},
	}
	if req.Dir != "" {
		if st, err := os.Stat(req.Dir); err == nil && st.IsDir() {
			r.Dir = req.Dir
		}
	}
	return slurm.Client{Runner: r}.SubmitBatch(ctx, req.Options, req.Script)
}
