//go:build integration

package quotad_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/slurmdbd"
	"github.com/slurmbridge/slurmbridge/bridge/testbed"
	"github.com/slurmbridge/slurmbridge/quotad/slurmdb"
)

// usageSeed marks the job rows TestUsageReadsTheRolledUpHours writes, so it removes those only.
const usageSeed = "slurmbridge-usage-probe"

// quotad reads a project's GPU usage of the fairness window from slurmdbd's hourly rollup for
// the hours it has summed and job by job only after them. Job rows of an account of its own,
// hours in the past, rolled up by slurmdbd itself (sacctmgr rollup, testbed.RollUp): the usage quotad reads is
// what the rows add up to, with the window's first hour counted in proportion, and the same
// whether the window starts on the hour or in it.
func TestUsageReadsTheRolledUpHours(t *testing.T) {
	c := testbed.Require(t)
	const acct, user = "usageprobe", "alice"
	addSubAccount(t, c, acct, "root", user)
	ctx := ctxFor(t, 5*time.Minute)
	db, err := c.OpenDB(ctx, c.Vars["SLURMBRIDGE_DB_NAME"])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	cluster := c.Vars["SLURMBRIDGE_CLUSTER"]
	base, err := slurmdbd.NewReader(db, cluster)
	if err != nil {
		t.Fatal(err)
	}
	r := &slurmdb.Reader{Reader: base}
	var assoc uint32
	if err := db.GetContext(ctx, &assoc, "SELECT id_assoc FROM `"+cluster+"_assoc_table` WHERE acct = ? AND user = ? AND deleted = 0", acct, user); err != nil {
		t.Fatalf("association of %s in %s: %v", user, acct, err)
	}
	names, err := base.TRESNames(ctx)
	if err != nil {
		t.Fatal(err)
	}
	gpu, ok := slurmdbd.TRESID(names, "gres/gpu")
	if !ok {
		t.Fatal("no gres/gpu in tres_table")
	}
	hour := time.Now().UTC().Truncate(time.Hour)
	at := func(d time.Duration) int64 { return hour.Add(d).Unix() }
	// (GPUs, start, end): 2 GPUs over [H-6h, H-2h), 1 over [H-5h+10m, H-3h-5m), 1 over
	// [H-8h, H-5h): it covers the whole hour a window from H-6h30m starts in.
	jobs := []struct {
		gpus       int
		start, end int64
	}{{2, at(-6 * time.Hour), at(-2 * time.Hour)}, {1, at(-5*time.Hour + 10*time.Minute), at(-3*time.Hour - 5*time.Minute)}, {1, at(-8 * time.Hour), at(-5 * time.Hour)}}
	table := "`" + cluster + "_job_table`"
	rollup := func() {
		t.Helper()
		if err := c.RollUp(ctxFor(t, 2*time.Minute), db, hour.Add(-9*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if _, err := db.Exec("DELETE FROM "+table+" WHERE job_name = ?", usageSeed); err != nil {
			t.Errorf("removing the seeded rows: %v", err)
		}
		rollup() // the hours without them again, for the tests after this one
	})
	rows := make([]testbed.JobRow, len(jobs))
	for i, j := range jobs {
		rows[i] = testbed.JobRow{ID: uint32(60_000_000 + i), Assoc: assoc, Account: acct, Partition: "a100", CPUs: j.gpus,
			Start: j.start, End: j.end, TRES: fmt.Sprintf("1=%d,2=%d,4=1,%d=%d", j.gpus, j.gpus*1000, gpu, j.gpus)}
	}
	if _, err := c.InsertJobRows(ctx, db, usageSeed, rows); err != nil {
		t.Fatal(err)
	}
	rollup()
	if end, err := base.HourlyRollupEnd(ctx); err != nil || end.Before(hour) {
		t.Fatalf("slurmdbd's hourly rollup ends at %s (err %v), want %s or later: the hour tables would not be read", end, err, hour)
	}
	want := func(since int64) float64 {
		var secs float64
		for _, j := range jobs {
			if from := max(j.start, since); j.end > from {
				secs += float64(j.gpus) * float64(j.end-from)
			}
		}
		return secs
	}
	now := time.Now()
	for _, since := range []time.Time{hour.Add(-6 * time.Hour), hour.Add(-6*time.Hour - 30*time.Minute), hour.Add(-10 * time.Hour)} {
		got, err := r.Usage(context.Background(), gpu, since, now)
		if err != nil {
			t.Fatal(err)
		}
		if w := want(since.Unix()); math.Abs(got[acct]-w) > 0.5 {
			t.Errorf("window from %s: %s used %.0f GPU-seconds, want %.0f (the rows' sum)", since.Format(time.RFC3339), acct, got[acct], w)
		}
	}
	// The rolled hours are read from the hour table, not job by job: with the job rows gone
	// and no rollup since, the usage is still there.
	if _, err := db.ExecContext(ctx, "DELETE FROM "+table+" WHERE job_name = ?", usageSeed); err != nil {
		t.Fatal(err)
	}
	since := hour.Add(-6 * time.Hour)
	got, err := r.Usage(context.Background(), gpu, since, now)
	if w := want(since.Unix()); err != nil || math.Abs(got[acct]-w) > 0.5 {
		t.Errorf("with the job rows deleted after the rollup: %s used %.0f GPU-seconds (err %v), want %.0f from the hour table", acct, got[acct], err, w)
	}
}

// quotad reads TRES, QOS and associations again only when slurmdbd's change mark moves. The
// mark must move with every change sacctmgr makes to them, two in the same second included,
// and stay put while nothing changes (the testbed's quotad paused, so nothing else acts).
func TestChangeMarkMovesWithEveryAccountingChange(t *testing.T) {
	c := testbed.Require(t)
	c.PauseDaemon(t, "quotad")
	ctx := ctxFor(t, 3*time.Minute)
	db, err := c.OpenDB(ctx, c.Vars["SLURMBRIDGE_DB_NAME"])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	r, err := slurmdbd.NewReader(db, c.Vars["SLURMBRIDGE_CLUSTER"])
	if err != nil {
		t.Fatal(err)
	}
	mark := func() slurmdbd.ChangeMark {
		t.Helper()
		m, err := r.ChangeMark(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	const qos, acct, user = "markprobe", "markprobeacct", "alice"
	_, _ = c.Run(ctx, "sacctmgr", "-i", "delete", "qos", qos)
	t.Cleanup(func() { _, _ = c.Run(context.Background(), "sacctmgr", "-i", "delete", "qos", qos) })
	last := mark()
	if again := mark(); again != last {
		t.Fatalf("the mark moved with nothing changed: %+v then %+v", last, again)
	}
	for _, step := range []struct {
		what string
		do   func()
	}{
		{"add qos", func() { sacctmgrRun(t, c, "add", "qos", qos) }},
		{"modify qos", func() { sacctmgrRun(t, c, "modify", "qos", "where", "name="+qos, "set", "Priority=1") }},
		{"modify qos again in the same second", func() { sacctmgrRun(t, c, "modify", "qos", "where", "name="+qos, "set", "Priority=2") }},
		{"add account and user", func() { addSubAccount(t, c, acct, "root", user) }},
		{"modify the user's association", func() {
			sacctmgrRun(t, c, "modify", "user", user, "where", "account="+acct, "set", "qos+="+qos)
		}},
		{"modify the account's association", func() {
			sacctmgrRun(t, c, "modify", "account", acct, "set", "GrpJobs=7")
		}},
	} {
		step.do()
		now := mark()
		if now == last {
			t.Errorf("%s: the mark did not move (%+v)", step.what, now)
		}
		last = now
	}

	// A transaction that commits after a newer one (an admin's sacctmgr left at its prompt
	// while another commits) moves no maximum: its row must still move the mark. The late one
	// is a row of our own in txn_table, written in an open transaction, marked as a probe.
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, "INSERT INTO txn_table (timestamp, action, name, actor, info) VALUES (UNIX_TIMESTAMP(), 0, 'slurmbridge change-mark probe', 'slurmbridge-test', '')"); err != nil {
		t.Fatal(err)
	}
	sacctmgrRun(t, c, "modify", "qos", "where", "name="+qos, "set", "Priority=3") // commits after it, with a newer id
	before := mark()
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = db.ExecContext(context.Background(), "DELETE FROM txn_table WHERE actor = 'slurmbridge-test' AND name = 'slurmbridge change-mark probe'")
	})
	if after := mark(); after == before {
		t.Errorf("a transaction committed after a newer one did not move the mark (%+v)", after)
	}
}
