package slurm

import (
	"context"
	"strings"
)

// QueueFilter picks the jobs QueueRows lists; empty fields match every job.
type QueueFilter struct {
	JobIDs []string
	Names  []string
	Users  []string
	// AllStates (-t all) includes jobs that have ended but slurmctld still holds (MinJobAge).
	AllStates bool
}

// QueueRow is one job as squeue's text output prints it. IDs are strings: squeue prints array
// and heterogeneous jobs as 12_3 and 12+0.
type QueueRow struct {
	ID, User, QOS, State, Reason, Partition, Nodes, Name string
}

// queueFormat pins QueueRow's fields; the name comes last, so a "|" in it stays in it.
const queueFormat = "%i|%u|%q|%T|%r|%P|%N|%j"

// QueueRows lists jobs with squeue's text output, which, unlike --json on 22.05, honours the
// filters: for checks on a few jobs by id, name or user.
func (c Client) QueueRows(ctx context.Context, f QueueFilter) ([]QueueRow, error) {
	args := []string{"-h"}
	if f.AllStates {
		args = append(args, "-t", "all")
	}
	if len(f.JobIDs) > 0 {
		args = append(args, "-j", strings.Join(f.JobIDs, ","))
	}
	if len(f.Names) > 0 {
		args = append(args, "-n", strings.Join(f.Names, ","))
	}
	if len(f.Users) > 0 {
		args = append(args, "-u", strings.Join(f.Users, ","))
	}
	out, err := c.Runner.Run(ctx, "squeue", append(args, "-o", queueFormat)...)
	if err != nil {
		return nil, err
	}
	return ParseQueueRows(out)
}

// ParseQueueRows reads squeue -h -o queueFormat output.
func ParseQueueRows(out []byte) ([]QueueRow, error) {
	rows, err := parsePipes(out, 8, "squeue")
	if err != nil {
		return nil, err
	}
	jobs := make([]QueueRow, len(rows))
	for i, f := range rows {
		jobs[i] = QueueRow{ID: f[0], User: f[1], QOS: f[2], State: f[3], Reason: f[4], Partition: f[5], Nodes: f[6], Name: f[7]}
	}
	return jobs, nil
}
