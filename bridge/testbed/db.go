package testbed

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/slurmbridge/slurmbridge/bridge/slurmdbd"
)

// DBConfig reaches the testbed's MariaDB as quotad does, from the variables its env file exports.
func (c *Cluster) DBConfig() slurmdbd.Config {
	return slurmdbd.Config{Addr: c.Vars["SLURMBRIDGE_DB_ADDR"], User: c.Vars["SLURMBRIDGE_DB_USER"], PasswordFile: c.Vars["SLURMBRIDGE_DB_PASSWORD_FILE"]}
}

// OpenDB connects to one of the testbed's databases: SLURMBRIDGE_DB_NAME is slurmdbd's.
func (c *Cluster) OpenDB(ctx context.Context, name string) (*sqlx.DB, error) {
	return slurmdbd.Open(ctx, c.DBConfig(), name)
}

// RollUp has slurmdbd sum its job table into the usage tables again from the hour of from on
// (sacctmgr rollup), as its hourly rollup does for the hours that end, after a test or a
// benchmark wrote job rows of past hours itself. It first empties the usage rows of those
// hours (and of from's day and month on), since a rollup leaves the rows of an hour whose jobs
// are gone. Where slurmdbd has not rolled up yet (a testbed younger than an hour) it records
// from as where its rollups stand, as slurmdbd's first rollup records the cluster's start, so
// that the end of the hours rolled is on record as on any cluster older than an hour.
func (c *Cluster) RollUp(ctx context.Context, db *sqlx.DB, from time.Time) error {
	cluster := c.Vars["SLURMBRIDGE_CLUSTER"]
	hour := from.UTC().Truncate(time.Hour)
	day := time.Date(hour.Year(), hour.Month(), hour.Day(), 0, 0, 0, 0, time.UTC)
	month := time.Date(hour.Year(), hour.Month(), 1, 0, 0, 0, 0, time.UTC)
	for table, start := range map[string]time.Time{"assoc_usage_hour_table": hour, "assoc_usage_day_table": day, "assoc_usage_month_table": month} {
		if _, err := db.ExecContext(ctx, "DELETE FROM `"+cluster+"_"+table+"` WHERE time_start >= ?", start.Unix()); err != nil {
			return fmt.Errorf("emptying %s_%s from %s: %w", cluster, table, start, err)
		}
	}
	var rows int
	if err := db.GetContext(ctx, &rows, "SELECT COUNT(*) FROM `"+cluster+"_last_ran_table`"); err != nil {
		return err
	}
	if rows == 0 {
		if _, err := db.ExecContext(ctx, "INSERT INTO `"+cluster+"_last_ran_table` (hourly_rollup, daily_rollup, monthly_rollup) VALUES (?, ?, ?)", hour.Unix(), hour.Unix(), hour.Unix()); err != nil {
			return err
		}
	}
	// From the month's start: the rollup sums the day rows of the whole month into its month row.
	if out, err := c.Run(ctx, "sacctmgr", "-i", "rollup", month.Format("2006-01-02T15:04:05")); err != nil {
		return fmt.Errorf("sacctmgr rollup %s: %w (%s)", month.Format(time.RFC3339), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// JobRow is one completed job in slurmdbd's job table, as a test or a benchmark writes it to
// give the cluster a history of its own.
type JobRow struct {
	ID, Assoc          uint32
	Account, Partition string
	CPUs               int
	Start, End         int64  // unix seconds
	TRES               string // tres_alloc and tres_req by TRES id, e.g. "1=2,2=2000,4=1,1001=2"
}

// InsertJobRows writes rows into the cluster's job table under job name name, by which the
// writer deletes them again, 1,000 rows a statement. done is how many were written.
func (c *Cluster) InsertJobRows(ctx context.Context, db *sqlx.DB, name string, rows []JobRow) (done int, err error) {
	table := "`" + c.Vars["SLURMBRIDGE_CLUSTER"] + "_job_table`"
	for batch := range slices.Chunk(rows, 1000) {
		var sb strings.Builder
		args := make([]any, 0, len(batch)*12)
		sb.WriteString("INSERT INTO " + table + " (id_job, job_name, id_assoc, account, `partition`, state, cpus_req, id_resv, id_wckey, id_user, id_group, het_job_id, het_job_offset, state_reason_prev, nodes_alloc, priority, time_submit, time_eligible, time_start, time_end, tres_alloc, tres_req) VALUES ")
		for i, r := range batch {
			if i > 0 {
				sb.WriteString(",")
			}
			// state 3: COMPLETED; submitted and eligible 30 s before it started.
			sb.WriteString("(?,?,?,?,?,3,?,0,0,0,0,0,4294967294,0,1,1,?,?,?,?,?,?)")
			args = append(args, r.ID, name, r.Assoc, r.Account, r.Partition, r.CPUs, r.Start-30, r.Start-30, r.Start, r.End, r.TRES, r.TRES)
		}
		if _, err := db.ExecContext(ctx, sb.String(), args...); err != nil {
			return done, fmt.Errorf("writing job rows into %s: %w", table, err)
		}
		done += len(batch)
	}
	return done, nil
}
