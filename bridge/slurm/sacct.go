package slurm

import (
	"context"
	"errors"
	"strings"
	"time"
)

// SacctFilter picks the accounting records SacctJobs reads. Records are always allocations
// only (-X): a job's steps are not wanted anywhere.
type SacctFilter struct {
	JobIDs []string
	Names  []string
	// AllUsers (-a) reads every user's jobs; without it, root still sees all of them with -j.
	AllUsers bool
	// Duplicates (-D) lists every run of a requeued job, not only the last.
	Duplicates bool
	// Since (-S) is the earliest start, in the local time zone; zero: sacct's default.
	Since time.Time
}

// SacctRecord is one line of sacct, by field name.
type SacctRecord map[string]string

// SacctJobs runs `sacct -X -n -P -o FIELDS` and reads each line into its fields. The output
// of times follows the runner's SLURM_TIME_FORMAT (e.g. %s for Unix seconds).
func (c Client) SacctJobs(ctx context.Context, f SacctFilter, fields ...string) ([]SacctRecord, error) {
	if len(fields) == 0 {
		return nil, errors.New("sacct: no fields")
	}
	var args []string
	if f.AllUsers {
		args = append(args, "-a")
	}
	if f.Duplicates {
		args = append(args, "-D")
	}
	args = append(args, "-X", "-n", "-P")
	if !f.Since.IsZero() {
		args = append(args, "-S", f.Since.Format("2006-01-02T15:04:05"))
	}
	if len(f.JobIDs) > 0 {
		args = append(args, "-j", strings.Join(f.JobIDs, ","))
	}
	if len(f.Names) > 0 {
		args = append(args, "--name", strings.Join(f.Names, ","))
	}
	out, err := c.Runner.Run(ctx, "sacct", append(args, "-o", strings.Join(fields, ","))...)
	if err != nil {
		return nil, err
	}
	return ParseSacct(out, fields)
}

// ParseSacct reads `sacct -n -P -o FIELDS` output; every line must have the fields asked for
// (the last one takes any further "|", as a job name may have one).
func ParseSacct(out []byte, fields []string) ([]SacctRecord, error) {
	rows, err := parsePipes(out, len(fields), "sacct")
	if err != nil {
		return nil, err
	}
	recs := make([]SacctRecord, len(rows))
	for i, row := range rows {
		rec := make(SacctRecord, len(fields))
		for j, name := range fields {
			rec[name] = row[j]
		}
		recs[i] = rec
	}
	return recs, nil
}
