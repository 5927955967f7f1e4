// Package slurmdb turns what bridge/slurmdbd reads from slurmdbd's MariaDB into quotad's
// policy terms: QOS (bridge reads them as slurm.QOS; here they are mapped field by field),
// accounts and users with their QOS lists resolved through inheritance as Slurm applies them,
// and GPU-seconds per account.
package slurmdb

import (
	"context"
	"fmt"
	"strconv"
	"strings"
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

// Associations reads each account's own association with its QOS list and default QOS
// resolved through inheritance, as Slurm applies them, and the user associations that set their
// own QOS list, resolved the same way.
func (r *Reader) Associations(ctx context.Context) ([]policy.Account, []policy.UserAssociation, error) {
	assocs, err := r.AssocRows(ctx)
	if err != nil {
		return nil, nil, err
	}
	qos, err := r.QOSNamesByID(ctx)
	if err != nil {
		return nil, nil, err
	}
	accounts, err := ConvertAccounts(assocs, qos)
	if err != nil {
		return nil, nil, err
	}
	users, err := ConvertUsers(assocs, qos)
	if err != nil {
		return nil, nil, err
	}
	return accounts, users, nil
}

// resolvedAssoc is an association's QOS list and default QOS as ids, inheritance applied.
type resolvedAssoc struct {
	qos []string // ids
	def string   // id, "" none
}

// ownList is what the association sets itself: its qos column, or else its delta_qos column
// (slurmdbd keeps "+id"/"-id" entries there; older rows may have them in qos). Empty: it
// inherits.
func ownList(a *slurmdbd.AssocRow) []string {
	if list := slurmdbd.IDList(a.QOS); len(list) > 0 {
		return list
	}
	return slurmdbd.IDList(a.DeltaQOS)
}

// applyList resolves an association's own list over its parent's: an absolute list replaces
// it, a delta list ("+id", "-id") adds to or removes from it, an empty one inherits it.
func applyList(parent, list []string) []string {
	if len(list) == 0 {
		return parent
	}
	set := map[string]bool{}
	if strings.HasPrefix(list[0], "+") || strings.HasPrefix(list[0], "-") {
		for _, id := range parent {
			set[id] = true
		}
	}
	for _, e := range list {
		switch {
		case strings.HasPrefix(e, "+"):
			set[e[1:]] = true
		case strings.HasPrefix(e, "-"):
			delete(set, e[1:])
		default:
			set[e] = true
		}
	}
	out := make([]string, 0, len(set))
	for id := range set {
		out = append(out, id)
	}
	return out
}

// accountResolver resolves the account associations (user "") as slurmdbd does: an own list
// over the parent account's (applyList), and a NULL def_qos_id inherits the parent's default.
func accountResolver(assocs []slurmdbd.AssocRow) func(acct string) *resolvedAssoc {
	byAcct := map[string]*slurmdbd.AssocRow{}
	for i := range assocs {
		if assocs[i].User == "" {
			byAcct[assocs[i].Account] = &assocs[i]
		}
	}
	cache := map[string]*resolvedAssoc{}
	var resolve func(acct string, depth int) *resolvedAssoc
	resolve = func(acct string, depth int) *resolvedAssoc {
		if r, ok := cache[acct]; ok {
			return r
		}
		a, ok := byAcct[acct]
		if !ok || depth > 64 {
			return &resolvedAssoc{}
		}
		parent := &resolvedAssoc{}
		if a.ParentAcct != "" && a.ParentAcct != acct {
			parent = resolve(a.ParentAcct, depth+1)
		}
		res := &resolvedAssoc{qos: applyList(parent.qos, ownList(a)), def: parent.def}
		if a.DefQOSID.Valid && a.DefQOSID.Int64 > 0 {
			res.def = strconv.FormatInt(a.DefQOSID.Int64, 10)
		}
		cache[acct] = res
		return res
	}
	return func(acct string) *resolvedAssoc { return resolve(acct, 0) }
}

// ConvertAccounts resolves the account associations (user "") as slurmdbd does (see
// accountResolver). Each account keeps its parent, for the account tree.
func ConvertAccounts(assocs []slurmdbd.AssocRow, qosName map[string]string) ([]policy.Account, error) {
	resolve := accountResolver(assocs)
	var out []policy.Account
	for _, a := range assocs {
		if a.User != "" || a.Account == "root" {
			continue
		}
		res := resolve(a.Account)
		acct := policy.Account{
			Name: a.Account, OwnQOS: len(ownList(&a)) > 0,
			OwnDefaultQOS: a.DefQOSID.Valid && a.DefQOSID.Int64 > 0,
		}
		if a.ParentAcct != a.Account {
			acct.Parent = a.ParentAcct
		}
		var err error
		if acct.QOS, err = namesOf(res.qos, qosName, "account "+a.Account+" allows"); err != nil {
			return nil, err
		}
		if res.def != "" {
			name, ok := qosName[res.def]
			if !ok {
				return nil, fmt.Errorf("account %s has default QOS id %s, which is not in qos_table", a.Account, res.def)
			}
			acct.DefaultQOS = name
		}
		out = append(out, acct)
	}
	return out, nil
}

// ConvertUsers resolves the user associations that set their own QOS list, absolute or as a
// delta over their account's (whose association is their parent), as slurmdbd does. Users that
// inherit their account's list are left out: the account's sync reaches them.
func ConvertUsers(assocs []slurmdbd.AssocRow, qosName map[string]string) ([]policy.UserAssociation, error) {
	resolve := accountResolver(assocs)
	var out []policy.UserAssociation
	for _, a := range assocs {
		own := ownList(&a)
		if a.User == "" || len(own) == 0 {
			continue
		}
		u := policy.UserAssociation{User: a.User, Account: a.Account, Partition: a.Partition}
		var err error
		if u.QOS, err = namesOf(applyList(resolve(a.Account).qos, own), qosName, "user "+a.User+" in account "+a.Account+" allows"); err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}

// namesOf turns QOS ids into names; who says whose list it is, for the error.
func namesOf(ids []string, qosName map[string]string, who string) ([]string, error) {
	var out []string
	for _, id := range ids {
		name, ok := qosName[id]
		if !ok {
			return nil, fmt.Errorf("%s QOS id %s, which is not in qos_table", who, id)
		}
		out = append(out, name)
	}
	return out, nil
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
