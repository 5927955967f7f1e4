// Package slurmdb turns what bridge/slurmdbd reads from slurmdbd's MariaDB into quotad's
// policy terms: QOS and associations (bridge reads them as slurm.QOS and slurm.Association, the
// records sacctmgr gives, associations with their QOS lists resolved through inheritance; here
// they are mapped field by field), and GPU-seconds per account.
package slurmdb

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/slurmbridge/slurmbridge/bridge/gpureq"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/bridge/slurmdbd"
	"github.com/slurmbridge/slurmbridge/quotad/policy"
)

// Reader reads one cluster's accounting database in the policy's terms.
type Reader struct {
	*slurmdbd.Reader
}

// NewReader checks the cluster name, which becomes part of table names.
func NewReader(db *sqlx.DB, cluster string) (*Reader, error) {
	r, err := slurmdbd.NewReader(db, cluster)
	if err != nil {
		return nil, err
	}
	return &Reader{Reader: r}, nil
}

// QOS reads every live QOS in the policy's terms.
func (r *Reader) QOS(ctx context.Context, tres map[uint32]string) ([]policy.QOS, error) {
	qos, err := r.Reader.QOS(ctx, tres)
	if err != nil {
		return nil, err
	}
	return policyQOS(qos), nil
}

// policyQOS maps QOS records to the policy's, field by field.
func policyQOS(qos []slurm.QOS) []policy.QOS {
	out := make([]policy.QOS, 0, len(qos))
	for _, q := range qos {
		p := policy.QOS{Name: q.Name, GrpTRES: make(map[string]int64, len(q.GrpTRES)), Preempt: q.Preempt, PreemptMode: q.PreemptMode,
			GraceTime: q.GraceTime, PreemptExemptTime: q.PreemptExemptTime, Priority: q.Priority}
		for name, v := range q.GrpTRES {
			p.GrpTRES[name] = int64(v)
		}
		out = append(out, p)
	}
	return out
}

// Associations reads each account's own association (root's left out: it is no project) and
// the user associations that set their own QOS list, in the policy's terms. bridge reads them
// as slurm.Association, QOS lists and defaults resolved through inheritance as Slurm applies
// them; here they are mapped field by field.
func (r *Reader) Associations(ctx context.Context) ([]policy.Account, []policy.UserAssociation, error) {
	assocs, err := r.Reader.Associations(ctx)
	if err != nil {
		return nil, nil, err
	}
	accounts, users := policyAssociations(assocs)
	return accounts, users, nil
}

// policyAssociations maps association records to the policy's, field by field: the accounts'
// own associations but root's, and the user associations that set their own QOS list. Users
// that inherit their account's list are left out: the account's sync reaches them.
func policyAssociations(assocs []slurm.Association) ([]policy.Account, []policy.UserAssociation) {
	var accounts []policy.Account
	var users []policy.UserAssociation
	for _, a := range assocs {
		switch {
		case a.User == "" && a.Account != "root":
			accounts = append(accounts, policy.Account{Name: a.Account, Parent: a.ParentAccount, QOS: a.QOS,
				DefaultQOS: a.DefaultQOS, OwnQOS: a.OwnQOS, OwnDefaultQOS: a.OwnDefaultQOS})
		case a.User != "" && a.OwnQOS:
			users = append(users, policy.UserAssociation{User: a.User, Account: a.Account, Partition: a.Partition, QOS: a.QOS})
		}
	}
	return accounts, users
}

// Usage is GPU-seconds per account of jobs that ran in [since, now]. gpuID is gres/gpu's
// tres_table id. The hours slurmdbd's hourly rollup has summed come from its hour table, a few
// rows per account; only what ran after the rollup's end (the last hour or so: the jobs that
// run now or ended since) is read job by job. So the read does not grow with the site's
// history. The hour in which the window starts counts in proportion to the part of it inside
// the window. The hours are slurmdbd's local ones, which need not fall on whole UTC hours:
// they are counted back from the rollup's end. Without an hour of rollup inside the window
// every job row is read. For the hours rolled up this is Slurm's own usage (sreport's): it
// leaves out suspended time and counts a reservation's idle GPUs to its associations.
func (r *Reader) Usage(ctx context.Context, gpuID uint32, since, now time.Time) (map[string]float64, error) {
	rolled, err := r.HourlyRollupEnd(ctx)
	if err != nil {
		return nil, err
	}
	if rolled.IsZero() || rolled.After(now) || rolled.Sub(since) < time.Hour {
		rows, err := r.UsageRows(ctx, gpuID, since, now)
		if err != nil {
			return nil, err
		}
		return SumUsage(rows, gpuID, since, now)
	}
	rows, err := r.UsageRows(ctx, gpuID, rolled, now)
	if err != nil {
		return nil, err
	}
	usage, err := SumUsage(rows, gpuID, rolled, now)
	if err != nil {
		return nil, err
	}
	full := FirstRolledHour(since, rolled)
	if full.After(since) {
		part, err := r.HourUsage(ctx, gpuID, full.Add(-time.Hour), full)
		if err != nil {
			return nil, err
		}
		share := full.Sub(since).Seconds() / time.Hour.Seconds()
		for _, a := range part {
			usage[a.Account] += float64(a.Seconds) * share
		}
	}
	hours, err := r.HourUsage(ctx, gpuID, full, rolled)
	if err != nil {
		return nil, err
	}
	for _, a := range hours {
		usage[a.Account] += float64(a.Seconds)
	}
	return usage, nil
}

// FirstRolledHour is the start of the first of the rollup's hours that starts at or after
// since. The rollup's hours end at rolled and are slurmdbd's local hours, which need not fall
// on whole UTC hours (a zone of +5:30): they are counted back from rolled, not from UTC.
func FirstRolledHour(since, rolled time.Time) time.Time {
	return rolled.Add(-rolled.Sub(since).Truncate(time.Hour))
}

// SumUsage adds up GPU-seconds per account, clipping each job to [since, now].
func SumUsage(rows []slurmdbd.UsageRow, gpuID uint32, since, now time.Time) (map[string]float64, error) {
	usage := map[string]float64{}
	for _, row := range rows {
		ids, err := gpureq.ParseTRESIDs(row.TRESAlloc)
		if err != nil {
			return nil, fmt.Errorf("job of %s: tres_alloc: %w", row.Account, err)
		}
		gpus := ids[gpuID]
		if gpus == 0 {
			continue
		}
		start, end := max(row.Start, since.Unix()), now.Unix()
		if row.End > 0 {
			end = min(row.End, end)
		}
		if end > start {
			usage[row.Account] += float64(gpus) * float64(end-start)
		}
	}
	return usage, nil
}

// Reclaims are the runs of jobs Slurm preempted (and requeued) that ended after since, for the
// policy's reclaim backoff; the policy keeps those of borrow QOS.
func (r *Reader) Reclaims(ctx context.Context, since time.Time) ([]policy.Reclaim, error) {
	rows, err := r.PreemptedRuns(ctx, since)
	if err != nil {
		return nil, err
	}
	out := make([]policy.Reclaim, 0, len(rows))
	for _, row := range rows {
		out = append(out, policy.Reclaim{JobID: row.JobID, QOS: row.QOS, Started: time.Unix(row.Start, 0).UTC(), Ended: time.Unix(row.End, 0).UTC()})
	}
	return out, nil
}

// Runs are the runs that overlap [from, to] in the reclaim audit's terms: nodes expanded and
// GPUs counted (gres/gpu of tres_alloc). A row that cannot be read fails the read: an audit of
// partial data would judge a claim wrongly.
func (r *Reader) Runs(ctx context.Context, from, to time.Time) ([]policy.Run, error) {
	names, err := r.TRESNames(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := r.RunsBetween(ctx, from, to)
	if err != nil {
		return nil, err
	}
	return ConvertRuns(rows, names)
}

// ConvertRuns turns job table rows into policy.Runs; tres maps TRES ids to names.
func ConvertRuns(rows []slurmdbd.Run, tres map[uint32]string) ([]policy.Run, error) {
	gpuID, hasGPU := uint32(0), false
	for id, name := range tres {
		if name == "gres/gpu" {
			gpuID, hasGPU = id, true
		}
	}
	out := make([]policy.Run, 0, len(rows))
	for _, row := range rows {
		nodes, err := slurm.ExpandHostList(row.NodeList)
		if err != nil {
			return nil, fmt.Errorf("job %d: nodelist: %w", row.JobID, err)
		}
		run := policy.Run{JobID: row.JobID, Account: row.Account, QOS: row.QOS, Nodes: nodes, Started: time.Unix(row.Start, 0).UTC(), Preempted: row.Preempted(), Priority: row.Priority}
		if row.End > 0 {
			run.Ended = time.Unix(row.End, 0).UTC()
		}
		if hasGPU && row.TRESAlloc != "" {
			ids, err := gpureq.ParseTRESIDs(row.TRESAlloc)
			if err != nil {
				return nil, fmt.Errorf("job %d: tres_alloc: %w", row.JobID, err)
			}
			run.GPUs = int(ids[gpuID])
		}
		out = append(out, run)
	}
	return out, nil
}
