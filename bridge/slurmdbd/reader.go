// Package slurmdbd reads slurmdbd's MariaDB: the connection and its password file, and the
// rows slurmbridge's components read (TRES, QOS, associations, admin levels, the job table).
// It only reads Slurm's tables: every change to Slurm's own objects goes through sacctmgr, so
// slurmdbd stays the one writer. A Slurm object that bridge/slurm has a record for is read as
// that record, as sacctmgr gives it (Reader.QOS: slurm.QOS; Reader.Associations:
// slurm.Association, QOS lists resolved through inheritance here, as slurmdbd resolves them for
// sacctmgr), so a component reads one record whichever source it reads; what the records mean
// to a component (quotad's policy, poolctl's profiles) is that component's business.
package slurmdbd

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
)

var errNoCluster = errors.New("no cluster given: --cluster or SLURMBRIDGE_CLUSTER (Slurm's ClusterName)")

// Reader reads one cluster's accounting database.
type Reader struct {
	DB      *sqlx.DB
	Cluster string // ClusterName: the per-cluster tables are <cluster>_assoc_table, <cluster>_job_table
}

// clusterName is what a cluster name may be before it is used in a table name.
var clusterName = regexp.MustCompile(`^[a-z0-9_][a-z0-9_-]*$`)

// NewReader checks the cluster name, which becomes part of table names.
func NewReader(db *sqlx.DB, cluster string) (*Reader, error) {
	if cluster == "" {
		return nil, errNoCluster
	}
	if !clusterName.MatchString(cluster) {
		return nil, fmt.Errorf("cluster name %q is not a Slurm cluster name", cluster)
	}
	return &Reader{DB: db, Cluster: cluster}, nil
}

func (r *Reader) table(suffix string) string { return "`" + r.Cluster + "_" + suffix + "`" }

// TRESNames maps tres_table ids to their names as accounting prints them: "cpu", "mem",
// "gres/gpu", "gres/gpu:a100". GRES ids are assigned by slurmdbd, so they are always looked up.
func (r *Reader) TRESNames(ctx context.Context) (map[uint32]string, error) {
	var rows []struct {
		ID   uint32 `db:"id"`
		Type string `db:"type"`
		Name string `db:"name"`
	}
	if err := r.DB.SelectContext(ctx, &rows, "SELECT id, type, name FROM tres_table WHERE deleted = 0"); err != nil {
		return nil, fmt.Errorf("reading tres_table: %w", err)
	}
	names := make(map[uint32]string, len(rows))
	for _, row := range rows {
		names[row.ID] = TRESName(row.Type, row.Name)
	}
	return names, nil
}

// TRESName spells a tres_table row the way sacct and sacctmgr do.
func TRESName(typ, name string) string {
	if name == "" {
		return typ
	}
	return typ + "/" + name
}

// TRESID is the id of the TRES named as accounting prints it ("gres/gpu:a100") in a TRESNames
// map, or false.
func TRESID(names map[uint32]string, name string) (uint32, bool) {
	for id, n := range names {
		if n == name {
			return id, true
		}
	}
	return 0, false
}

// GPUTypes returns the typed GPU TRES known to slurmdbd ("a100" for gres/gpu:a100).
func GPUTypes(names map[uint32]string) map[string]bool {
	types := map[string]bool{}
	for _, n := range names {
		if t, ok := strings.CutPrefix(n, "gres/gpu:"); ok {
			types[t] = true
		}
	}
	return types
}

// ChangeMark is what moves in slurmdbd's database whenever a TRES, QOS, account, user or
// association changes: the newest transaction (slurmdbd writes one for every add, modify and
// remove of those), how many of the last txnWindow transactions are there (one that commits after
// a newer one, an admin's sacctmgr left at "Would you like to commit changes?" while quotad's own
// commits, moves no maximum but adds to this count), the QOS and association tables' newest
// modification time and row count, and the TRES table's row count and newest id. Two equal
// marks, read one after the other, mean none of those tables changed between them; a mark is
// read before the tables it vouches for.
type ChangeMark struct {
	Txn, TxnRecent, TRESRows, TRESMax, QOSMod, QOSRows, AssocMod, AssocRows int64
}

// txnWindow is how far below the newest transaction ChangeMark counts them: a transaction open
// while this many later ones commit is caught by the snapshot's minute-long bound instead.
const txnWindow = 1000

// ChangeMark reads the mark in one query: txn_table by its primary key, the QOS and association
// tables whole (a few hundred to a few thousand rows; mod_time has no index), tres_table.
func (r *Reader) ChangeMark(ctx context.Context) (ChangeMark, error) {
	var m ChangeMark
	row := r.DB.QueryRowContext(ctx, "SELECT (SELECT COALESCE(MAX(id), 0) FROM txn_table), "+
		"(SELECT COUNT(*) FROM txn_table WHERE id > (SELECT COALESCE(MAX(id), 0) FROM txn_table) - ?), "+
		"(SELECT COUNT(*) FROM tres_table), (SELECT COALESCE(MAX(id), 0) FROM tres_table), "+
		"(SELECT COALESCE(MAX(mod_time), 0) FROM qos_table), (SELECT COUNT(*) FROM qos_table), "+
		"(SELECT COALESCE(MAX(mod_time), 0) FROM "+r.table("assoc_table")+"), (SELECT COUNT(*) FROM "+r.table("assoc_table")+")", txnWindow)
	if err := row.Scan(&m.Txn, &m.TxnRecent, &m.TRESRows, &m.TRESMax, &m.QOSMod, &m.QOSRows, &m.AssocMod, &m.AssocRows); err != nil {
		return ChangeMark{}, fmt.Errorf("reading the accounting tables' change mark: %w", err)
	}
	return m, nil
}

// AccountExists says whether slurmdbd has a live association for the account on this cluster.
func (r *Reader) AccountExists(ctx context.Context, account string) (bool, error) {
	var n int
	err := r.DB.GetContext(ctx, &n, "SELECT COUNT(*) FROM "+r.table("assoc_table")+
		" WHERE deleted = 0 AND user = '' AND acct = ?", account)
	if err != nil {
		return false, fmt.Errorf("reading %s_assoc_table: %w", r.Cluster, err)
	}
	return n > 0, nil
}

// Slurm's admin levels in user_table.admin_level.
const (
	AdminNone          = 1
	AdminOperator      = 2
	AdminAdministrator = 3
)

// AdminLevel is the user's AdminLevel in slurmdbd (AdminNone when the user is unknown).
func (r *Reader) AdminLevel(ctx context.Context, user string) (int, error) {
	var level int
	err := r.DB.GetContext(ctx, &level, "SELECT admin_level FROM user_table WHERE deleted = 0 AND name = ?", user)
	if errors.Is(err, sql.ErrNoRows) {
		return AdminNone, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading user_table: %w", err)
	}
	return level, nil
}

// jobStatePreempted is job_state_t JOB_PREEMPTED in the job table.
const jobStatePreempted = 8

// UsageRow is one job's GPU allocation over time, from the job table.
type UsageRow struct {
	Account   string `db:"account"`
	TRESAlloc string `db:"tres_alloc"`
	Start     int64  `db:"time_start"`
	End       int64  `db:"time_end"`
}

// UsageRows reads the jobs whose tres_alloc may hold GPU id gpuID and that ran in [since, now].
func (r *Reader) UsageRows(ctx context.Context, gpuID uint32, since, now time.Time) ([]UsageRow, error) {
	var rows []UsageRow
	// The LIKE only narrows the scan to rows that mention the GPU id; the caller parses
	// tres_alloc and decides.
	err := r.DB.SelectContext(ctx, &rows, "SELECT IFNULL(account, '') AS account, tres_alloc, time_start, time_end FROM "+
		r.table("job_table")+" WHERE time_start > 0 AND (time_end = 0 OR time_end >= ?) AND time_start <= ?"+
		" AND tres_alloc LIKE ?", since.Unix(), now.Unix(), "%"+strconv.FormatUint(uint64(gpuID), 10)+"=%")
	if err != nil {
		return nil, fmt.Errorf("reading %s_job_table: %w", r.Cluster, err)
	}
	return rows, nil
}

// HourlyRollupEnd is where slurmdbd's hourly rollup has got to: every hour before it is summed
// in the hour tables (<cluster>_last_ran_table's hourly_rollup; slurmdbd moves it back when a
// job record of an earlier hour arrives late). Zero when it has never run.
func (r *Reader) HourlyRollupEnd(ctx context.Context) (time.Time, error) {
	var ends []int64
	if err := r.DB.SelectContext(ctx, &ends, "SELECT hourly_rollup FROM "+r.table("last_ran_table")); err != nil {
		return time.Time{}, fmt.Errorf("reading %s_last_ran_table: %w", r.Cluster, err)
	}
	if len(ends) == 0 || ends[0] <= 0 {
		return time.Time{}, nil
	}
	return time.Unix(ends[0], 0).UTC(), nil
}

// AccountTRESSeconds is one account's allocated TRES-seconds of one TRES, summed.
type AccountTRESSeconds struct {
	Account string `db:"acct"`
	Seconds int64  `db:"secs"`
}

// HourUsage sums, per account, the allocated seconds of TRES tresID that slurmdbd's hourly
// rollup wrote for the hours starting in [from, to) (<cluster>_assoc_usage_hour_table, one row
// per association, hour and TRES): a few rows per account, however many jobs ran. The
// associations lead the join (STRAIGHT_JOIN), so each one's rows are a range of the hour
// table's primary key (id, id_tres, time_start): from 24.11 the table has no index on
// time_start alone, and a join led by the hour table would read its whole history.
func (r *Reader) HourUsage(ctx context.Context, tresID uint32, from, to time.Time) ([]AccountTRESSeconds, error) {
	var rows []AccountTRESSeconds
	err := r.DB.SelectContext(ctx, &rows, "SELECT a.acct AS acct, CAST(SUM(h.alloc_secs) AS SIGNED) AS secs FROM "+
		r.table("assoc_table")+" a STRAIGHT_JOIN "+r.table("assoc_usage_hour_table")+" h"+
		" ON h.id = a.id_assoc AND h.id_tres = ? AND h.time_start >= ? AND h.time_start < ? GROUP BY a.acct", tresID, from.Unix(), to.Unix())
	if err != nil {
		return nil, fmt.Errorf("reading %s_assoc_usage_hour_table: %w", r.Cluster, err)
	}
	return rows, nil
}

// JobRowCount is how many rows the cluster's job table holds, deleted ones too.
func (r *Reader) JobRowCount(ctx context.Context) (int, error) {
	var n int
	if err := r.DB.GetContext(ctx, &n, "SELECT COUNT(*) FROM "+r.table("job_table")); err != nil {
		return 0, fmt.Errorf("reading %s_job_table: %w", r.Cluster, err)
	}
	return n, nil
}

// jobStateCompleted is job_state_t JOB_COMPLETE in the job table.
const jobStateCompleted = 3

// CompletedJob is one job that ran to completion, as the job table keeps it.
type CompletedJob struct {
	Partition  string `db:"partition"`
	Comment    string `db:"comment"`     // derived_es: the job's comment with AccountingStoreFlags=job_comment
	SubmitLine string `db:"submit_line"` // what the user typed, as slurmdbd stored it
	Start      int64  `db:"time_start"`
	End        int64  `db:"time_end"`
}

// CompletedJobs reads the jobs that completed, having run, since then.
func (r *Reader) CompletedJobs(ctx context.Context, since time.Time) ([]CompletedJob, error) {
	var jobs []CompletedJob
	err := r.DB.SelectContext(ctx, &jobs, "SELECT IFNULL(`partition`, '') AS `partition`, IFNULL(derived_es, '') AS comment, "+
		"IFNULL(submit_line, '') AS submit_line, time_start, time_end FROM "+r.table("job_table")+
		" WHERE deleted = 0 AND state = ? AND time_start > 0 AND time_end > time_start AND time_end >= ?",
		jobStateCompleted, since.Unix())
	if err != nil {
		return nil, fmt.Errorf("reading %s_job_table: %w", r.Cluster, err)
	}
	return jobs, nil
}

// Run is one run of a job from the job table: its account, QOS, nodes (a hostlist), TRES
// (tres_alloc: "id=count,...") and times (End 0 while it runs).
type Run struct {
	JobID     uint32 `db:"id_job"`
	Account   string `db:"account"`
	QOS       string `db:"qos"`
	NodeList  string `db:"nodelist"`
	TRESAlloc string `db:"tres_alloc"`
	Start     int64  `db:"time_start"`
	End       int64  `db:"time_end"`
	State     int    `db:"state"`
	Priority  int64  `db:"priority"` // as slurmdbd last recorded it: at the start for a started run
}

// Preempted says whether the run ended because Slurm preempted it.
func (r Run) Preempted() bool { return r.State == jobStatePreempted }

// RunsBetween lists the runs that overlap [from, to]: started by to, not ended before from.
func (r *Reader) RunsBetween(ctx context.Context, from, to time.Time) ([]Run, error) {
	var rows []Run
	err := r.DB.SelectContext(ctx, &rows, "SELECT j.id_job, IFNULL(j.account, '') AS account, IFNULL(q.name, '') AS qos, IFNULL(j.nodelist, '') AS nodelist, "+
		"IFNULL(j.tres_alloc, '') AS tres_alloc, j.time_start, j.time_end, j.state, j.priority FROM "+r.table("job_table")+
		" j LEFT JOIN qos_table q ON q.id = j.id_qos WHERE j.time_start > 0 AND j.time_start <= ? AND (j.time_end = 0 OR j.time_end >= ?) ORDER BY j.time_start, j.id_job",
		to.Unix(), from.Unix())
	if err != nil {
		return nil, fmt.Errorf("reading %s_job_table: %w", r.Cluster, err)
	}
	return rows, nil
}

// PreemptedRun is one run of a job that ended when Slurm preempted and requeued it, with the
// QOS it ran in.
type PreemptedRun struct {
	JobID   uint32 `db:"id_job"`
	Account string `db:"account"`
	QOS     string `db:"qos"`
	Start   int64  `db:"time_start"`
	End     int64  `db:"time_end"`
}

// PreemptedRuns lists the runs slurmdbd recorded as PREEMPTED that ended after since, oldest
// first: one query, whatever the number of QOS.
func (r *Reader) PreemptedRuns(ctx context.Context, since time.Time) ([]PreemptedRun, error) {
	var rows []PreemptedRun
	err := r.DB.SelectContext(ctx, &rows, "SELECT j.id_job, IFNULL(j.account, '') AS account, IFNULL(q.name, '') AS qos, j.time_start, j.time_end FROM "+r.table("job_table")+
		" j LEFT JOIN qos_table q ON q.id = j.id_qos WHERE j.state = ? AND j.time_end > ? ORDER BY j.time_end, j.id_job", jobStatePreempted, since.Unix())
	if err != nil {
		return nil, fmt.Errorf("reading %s_job_table: %w", r.Cluster, err)
	}
	return rows, nil
}

// QOSID returns the id of a live QOS, or false.
func (r *Reader) QOSID(ctx context.Context, name string) (uint32, bool, error) {
	var id uint32
	err := r.DB.GetContext(ctx, &id, "SELECT id FROM qos_table WHERE deleted = 0 AND name = ?", name)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("reading qos_table: %w", err)
	}
	return id, true, nil
}
