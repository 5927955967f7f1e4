package slurm

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Config is `scontrol show config` as key = value pairs (the first of each key wins: later
// sections such as cgroup.conf's may repeat a name).
type Config map[string]string

// ParseConfig reads what `scontrol show config` prints.
func ParseConfig(out []byte) Config {
	conf := Config{}
	for _, line := range strings.Split(string(out), "\n") {
		k, v, found := strings.Cut(line, " = ")
		k = strings.TrimSpace(k)
		if !found || k == "" || strings.Contains(k, " ") {
			continue
		}
		if _, seen := conf[k]; !seen {
			conf[k] = strings.TrimSpace(v)
		}
	}
	return conf
}

// Get is a setting's value; Slurm prints unset ones as "(null)", returned as "".
func (c Config) Get(key string) string {
	if v := c[key]; v != "(null)" {
		return v
	}
	return ""
}

// List splits a comma-separated setting.
func (c Config) List(key string) []string {
	var out []string
	for _, s := range strings.Split(c.Get(key), ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// ShowConfig reads slurmctld's running configuration; it fails when slurmctld does not answer.
func (c Client) ShowConfig(ctx context.Context) (Config, error) {
	out, err := c.Runner.Run(ctx, "scontrol", "show", "config")
	if err != nil {
		return nil, err
	}
	return ParseConfig(out), nil
}

// Ping fails unless slurmctld answers.
func (c Client) Ping(ctx context.Context) error {
	_, err := c.Runner.Run(ctx, "scontrol", "ping")
	return err
}

// Reconfigure makes slurmctld reread its configuration files (and, from 23.11, restart; see
// Release.ReconfigureRestarts).
func (c Client) Reconfigure(ctx context.Context) error {
	_, err := c.Runner.Run(ctx, "scontrol", "reconfigure")
	return err
}

// BatchScript is a job's batch script as slurmctld keeps it ("-": on stdout, not in a file).
func (c Client) BatchScript(ctx context.Context, jobID uint32) ([]byte, error) {
	out, err := c.Runner.Run(ctx, "scontrol", "write", "batch_script", formatID(jobID), "-")
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("job %d: empty batch script", jobID)
	}
	return out, nil
}

// UpdateJobQOS moves pending jobs to another QOS, in one scontrol run (it takes a list of
// ids). scontrol refuses it for a job that is no longer pending.
func (c Client) UpdateJobQOS(ctx context.Context, jobIDs []uint32, qos string) error {
	if len(jobIDs) == 0 {
		return errors.New("scontrol update: no job id")
	}
	_, err := c.Runner.Run(ctx, "scontrol", "update", "jobid="+joinIDs(jobIDs), "qos="+qos)
	return err
}

// JobUpdate is what UpdateJob changes; empty fields stay as they are.
type JobUpdate struct {
	Partition string
	Gres      string // e.g. "gpu:a100:1"
}

// UpdateJob changes a job's request, as its owner would with scontrol update: the job_submit
// plugin's job_modify sees it.
func (c Client) UpdateJob(ctx context.Context, jobID uint32, u JobUpdate) error {
	args := []string{"update", "jobid=" + formatID(jobID)}
	if u.Partition != "" {
		args = append(args, "partition="+u.Partition)
	}
	if u.Gres != "" {
		args = append(args, "gres="+u.Gres)
	}
	_, err := c.Runner.Run(ctx, "scontrol", args...)
	return err
}

func formatID(id uint32) string { return strconv.FormatUint(uint64(id), 10) }

func joinIDs(ids []uint32) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = formatID(id)
	}
	return strings.Join(s, ",")
}
