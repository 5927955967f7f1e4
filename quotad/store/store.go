package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/slurmbridge/slurmbridge/quotad/policy"
)

// migrations are applied in order, once each; a released migration is never edited, only
// followed by a new one.
var migrations = []string{
	1: `CREATE TABLE IF NOT EXISTS quota_settings (
		name VARCHAR(64) NOT NULL PRIMARY KEY,
		value TEXT NOT NULL
	) ENGINE=InnoDB`,
	2: `CREATE TABLE IF NOT EXISTS quota_projects (
		account VARCHAR(64) NOT NULL PRIMARY KEY,
		total_gpus INT NULL,
		borrow_limit INT NULL,
		weight DOUBLE NULL
	) ENGINE=InnoDB`,
	3: `CREATE TABLE IF NOT EXISTS quota_gpus (
		account VARCHAR(64) NOT NULL,
		gpu_type VARCHAR(64) NOT NULL,
		guaranteed INT NOT NULL,
		PRIMARY KEY (account, gpu_type)
	) ENGINE=InnoDB`,
	4: `CREATE TABLE IF NOT EXISTS quota_borrow_limits (
		account VARCHAR(64) NOT NULL,
		gpu_type VARCHAR(64) NOT NULL,
		borrow_limit INT NOT NULL,
		PRIMARY KEY (account, gpu_type)
	) ENGINE=InnoDB`,
	5: `CREATE TABLE IF NOT EXISTS quota_lend_limits (
		gpu_type VARCHAR(64) NOT NULL PRIMARY KEY,
		lend_limit INT NOT NULL
	) ENGINE=InnoDB`,
	6: `CREATE TABLE IF NOT EXISTS audit (
		id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
		at DATETIME(3) NOT NULL,
		actor VARCHAR(128) NOT NULL,
		kind VARCHAR(32) NOT NULL,
		subject VARCHAR(128) NOT NULL,
		old_value TEXT NOT NULL,
		new_value TEXT NOT NULL,
		detail TEXT NOT NULL,
		KEY audit_at (at)
	) ENGINE=InnoDB`,
	7: `CREATE TABLE IF NOT EXISTS quota_project_lend_limits (
		account VARCHAR(64) NOT NULL,
		gpu_type VARCHAR(64) NOT NULL,
		lend_limit INT NOT NULL,
		PRIMARY KEY (account, gpu_type)
	) ENGINE=InnoDB`,
	// A table of its own, not a column of quota_projects: a quotad or quotactl of an older
	// release, writing the table during an upgrade, leaves it as it is.
	8: `CREATE TABLE IF NOT EXISTS quota_project_reclaim_thresholds (
		account VARCHAR(64) NOT NULL PRIMARY KEY,
		priority BIGINT NOT NULL
	) ENGINE=InnoDB`,
}

// Store is quotad's database.
type Store struct {
	DB *sqlx.DB
}

// migrateLock serialises migrations of concurrent starts (quotad and quotactl).
const migrateLock = "slurmbridge.migrate"

// Migrate brings the schema to the latest version and returns it.
func (s *Store) Migrate(ctx context.Context) (int, error) {
	conn, err := s.DB.Connx(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	var got sql.NullInt64
	if err := conn.GetContext(ctx, &got, "SELECT GET_LOCK(?, 30)", migrateLock); err != nil {
		return 0, fmt.Errorf("migration lock: %w", err)
	}
	if !got.Valid || got.Int64 != 1 {
		return 0, errors.New("migration lock: another process has been migrating for 30s")
	}
	defer conn.ExecContext(context.Background(), "SELECT RELEASE_LOCK(?)", migrateLock) //nolint:errcheck // the lock also ends with the connection
	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INT NOT NULL PRIMARY KEY, applied_at DATETIME(3) NOT NULL) ENGINE=InnoDB`); err != nil {
		return 0, fmt.Errorf("creating schema_migrations: %w", err)
	}
	var current int
	if err := conn.GetContext(ctx, &current, "SELECT IFNULL(MAX(version), 0) FROM schema_migrations"); err != nil {
		return 0, err
	}
	for v := current + 1; v < len(migrations); v++ {
		// MariaDB commits DDL implicitly, so each migration is idempotent on its own.
		if _, err := conn.ExecContext(ctx, migrations[v]); err != nil {
			return current, fmt.Errorf("migration %d: %w", v, err)
		}
		if _, err := conn.ExecContext(ctx, "INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)", v, time.Now().UTC()); err != nil {
			return current, fmt.Errorf("recording migration %d: %w", v, err)
		}
		current = v
	}
	return current, nil
}

// SchemaVersion is the latest migration this build knows.
func SchemaVersion() int { return len(migrations) - 1 }

// ErrSchemaBehind says the database lacks migrations this build needs. Read commands never
// migrate (a read must not change the database, and needs no rights to); quotad migrates when
// it starts, and so do quotactl's write commands.
var ErrSchemaBehind = errors.New("quota database schema is older than this build")

// CheckSchema returns ErrSchemaBehind, with the versions, when the database is not migrated to
// this build's schema. It only reads.
func (s *Store) CheckSchema(ctx context.Context) error {
	var current int
	err := s.DB.GetContext(ctx, &current, "SELECT IFNULL(MAX(version), 0) FROM schema_migrations")
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == 1146 { // ER_NO_SUCH_TABLE: never migrated
		current, err = 0, nil
	}
	if err != nil {
		return fmt.Errorf("reading the schema version: %w", err)
	}
	if current < SchemaVersion() {
		return fmt.Errorf("%w: it is at version %d, this build needs %d; start quotad (it migrates) or run a quotactl write command such as import", ErrSchemaBehind, current, SchemaVersion())
	}
	return nil
}

// Load reads the quota table. An empty database gives a table with no projects.
func (s *Store) Load(ctx context.Context) (*policy.Config, error) {
	return load(ctx, s.DB, "")
}

type querier interface {
	SelectContext(ctx context.Context, dest any, query string, args ...any) error
}

func load(ctx context.Context, q querier, lock string) (*policy.Config, error) {
	cfg := &policy.Config{}
	var settings []struct {
		Name  string `db:"name"`
		Value string `db:"value"`
	}
	if err := q.SelectContext(ctx, &settings, "SELECT name, value FROM quota_settings ORDER BY name"+lock); err != nil {
		return nil, fmt.Errorf("reading quota_settings: %w", err)
	}
	for _, kv := range settings {
		if err := setSetting(&cfg.Settings, kv.Name, kv.Value); err != nil {
			return nil, fmt.Errorf("quota_settings %s=%q: %w", kv.Name, kv.Value, err)
		}
	}
	var lend []struct {
		Type  string `db:"gpu_type"`
		Limit int    `db:"lend_limit"`
	}
	if err := q.SelectContext(ctx, &lend, "SELECT gpu_type, lend_limit FROM quota_lend_limits ORDER BY gpu_type"+lock); err != nil {
		return nil, fmt.Errorf("reading quota_lend_limits: %w", err)
	}
	for _, l := range lend {
		if cfg.LendLimits == nil {
			cfg.LendLimits = map[string]int{}
		}
		cfg.LendLimits[l.Type] = l.Limit
	}
	var projects []struct {
		Account     string          `db:"account"`
		TotalGPUs   sql.NullInt64   `db:"total_gpus"`
		BorrowLimit sql.NullInt64   `db:"borrow_limit"`
		Weight      sql.NullFloat64 `db:"weight"`
	}
	if err := q.SelectContext(ctx, &projects, "SELECT account, total_gpus, borrow_limit, weight FROM quota_projects ORDER BY account"+lock); err != nil {
		return nil, fmt.Errorf("reading quota_projects: %w", err)
	}
	index := map[string]int{}
	for _, p := range projects {
		pc := policy.Project{Account: p.Account}
		if p.TotalGPUs.Valid {
			pc.TotalGPUs = ptr(int(p.TotalGPUs.Int64))
		}
		if p.BorrowLimit.Valid {
			pc.BorrowLimit = ptr(int(p.BorrowLimit.Int64))
		}
		if p.Weight.Valid {
			pc.Weight = ptr(p.Weight.Float64)
		}
		index[p.Account] = len(cfg.Projects)
		cfg.Projects = append(cfg.Projects, pc)
	}
	if err := loadByType(ctx, q, cfg, index, "quota_gpus", "guaranteed", lock, func(p *policy.Project) *map[string]int { return &p.GPUs }); err != nil {
		return nil, err
	}
	if err := loadByType(ctx, q, cfg, index, "quota_borrow_limits", "borrow_limit", lock, func(p *policy.Project) *map[string]int { return &p.BorrowLimitByType }); err != nil {
		return nil, err
	}
	if err := loadByType(ctx, q, cfg, index, "quota_project_lend_limits", "lend_limit", lock, func(p *policy.Project) *map[string]int { return &p.LendLimitByType }); err != nil {
		return nil, err
	}
	var thresholds []struct {
		Account  string `db:"account"`
		Priority int64  `db:"priority"`
	}
	if err := q.SelectContext(ctx, &thresholds, "SELECT account, priority FROM quota_project_reclaim_thresholds ORDER BY account"+lock); err != nil {
		return nil, fmt.Errorf("reading quota_project_reclaim_thresholds: %w", err)
	}
	for _, r := range thresholds {
		i, ok := index[r.Account]
		if !ok {
			return nil, fmt.Errorf("quota_project_reclaim_thresholds has %s, which is not in quota_projects", r.Account)
		}
		cfg.Projects[i].ReclaimPriorityThreshold = ptr(r.Priority)
	}
	cfg.ResolveSizeTiers() // a table stored without the row (before size tiers were the default) gets them
	return cfg, nil
}

// loadByType reads column of a table of GPU counts by project and type into the map field
// names of each project; index maps accounts to their place in cfg.Projects.
func loadByType(ctx context.Context, q querier, cfg *policy.Config, index map[string]int, table, column, lock string, field func(*policy.Project) *map[string]int) error {
	var rows []struct {
		Account string `db:"account"`
		Type    string `db:"gpu_type"`
		N       int    `db:"n"`
	}
	query := "SELECT account, gpu_type, " + column + " AS n FROM " + table + " ORDER BY account, gpu_type" + lock
	if err := q.SelectContext(ctx, &rows, query); err != nil {
		return fmt.Errorf("reading %s: %w", table, err)
	}
	for _, r := range rows {
		i, ok := index[r.Account]
		if !ok {
			return fmt.Errorf("%s has %s, which is not in quota_projects", table, r.Account)
		}
		m := field(&cfg.Projects[i])
		if *m == nil {
			*m = map[string]int{}
		}
		(*m)[r.Type] = r.N
	}
	return nil
}

func ptr[T any](v T) *T { return &v }

// noSizeTiers is the borrowSizeTiers row of a table that asks for no size tiers.
const noSizeTiers = "none"

// settingNames are the quota_settings rows, one per Settings field.
var settingNames = []string{"borrowQOS", "elasticQOS", "guaranteedQOS", "graceTime", "preemptExemptTime", "guaranteedPriority", "borrowPriority", "maxSnapshotAge", "lendReasons", "reclaimBackoff", "reclaimBackoffMax", "reclaimBackoffReset", "lendOrder", "borrowSizeTiers"}

func settingValues(s policy.Settings) map[string]string {
	out := map[string]string{}
	put := func(k, v string) {
		if v != "" {
			out[k] = v
		}
	}
	put("borrowQOS", s.BorrowQOS)
	put("elasticQOS", s.ElasticQOS)
	put("guaranteedQOS", s.GuaranteedQOS)
	if s.GraceTime != 0 {
		put("graceTime", s.GraceTime.String())
	}
	if s.PreemptExemptTime != 0 {
		put("preemptExemptTime", s.PreemptExemptTime.String())
	}
	for name, d := range map[string]time.Duration{"maxSnapshotAge": s.MaxSnapshotAge, "reclaimBackoff": s.ReclaimBackoff,
		"reclaimBackoffMax": s.ReclaimBackoffMax, "reclaimBackoffReset": s.ReclaimBackoffReset} {
		if d != 0 {
			put(name, d.String())
		}
	}
	if s.GuaranteedPriority != nil {
		put("guaranteedPriority", strconv.Itoa(*s.GuaranteedPriority))
	}
	if s.BorrowPriority != nil {
		put("borrowPriority", strconv.Itoa(*s.BorrowPriority))
	}
	put("lendReasons", strings.Join(s.LendReasons, ","))
	put("lendOrder", s.LendOrder)
	// Always a row: a table without one gets the default tiers (policy.ResolveSizeTiers).
	tiers := make([]string, len(s.BorrowSizeTiers))
	for i, n := range s.BorrowSizeTiers {
		tiers[i] = strconv.Itoa(n)
	}
	put("borrowSizeTiers", cmp.Or(strings.Join(tiers, ","), noSizeTiers))
	return out
}

func setSetting(s *policy.Settings, name, value string) error {
	var err error
	switch name {
	case "borrowQOS":
		s.BorrowQOS = value
	case "elasticQOS":
		s.ElasticQOS = value
	case "guaranteedQOS":
		s.GuaranteedQOS = value
	case "graceTime":
		s.GraceTime, err = time.ParseDuration(value)
	case "preemptExemptTime":
		s.PreemptExemptTime, err = time.ParseDuration(value)
	case "maxSnapshotAge":
		s.MaxSnapshotAge, err = time.ParseDuration(value)
	case "reclaimBackoff":
		s.ReclaimBackoff, err = time.ParseDuration(value)
	case "reclaimBackoffMax":
		s.ReclaimBackoffMax, err = time.ParseDuration(value)
	case "reclaimBackoffReset":
		s.ReclaimBackoffReset, err = time.ParseDuration(value)
	case "guaranteedPriority", "borrowPriority":
		var n int
		if n, err = strconv.Atoi(value); err == nil {
			if name == "guaranteedPriority" {
				s.GuaranteedPriority = &n
			} else {
				s.BorrowPriority = &n
			}
		}
	case "lendReasons":
		s.LendReasons = strings.Split(value, ",")
	case "lendOrder":
		s.LendOrder = value
	case "borrowSizeTiers":
		s.BorrowSizeTiers = []int{} // named, even as none: not the default
		if value == noSizeTiers {
			return nil
		}
		for f := range strings.SplitSeq(value, ",") {
			var n int
			if n, err = strconv.Atoi(strings.TrimSpace(f)); err != nil {
				return err
			}
			s.BorrowSizeTiers = append(s.BorrowSizeTiers, n)
		}
	default:
		// A newer quotad may know more settings; an older one must not silently drop them.
		return fmt.Errorf("unknown setting (written by a newer version?)")
	}
	return err
}

// editLock serialises quota edits (quotactl set, lend-limit, import). Row locks alone do not:
// two transactions that read an empty table FOR UPDATE both get gap locks and then deadlock on
// their inserts, and a read outside the transaction lets the later writer overwrite the earlier.
const editLock = "slurmbridge.quota-edit"

// editLockWait bounds how long an edit waits for another one to finish.
const editLockWait = 30

// Save replaces the quota table with cfg (validated first) in one transaction and writes an
// audit row, old → new, for each setting, lend limit and project that changed. It returns
// the changes.
func (s *Store) Save(ctx context.Context, cfg *policy.Config, actor string) ([]Change, error) {
	return s.Update(ctx, actor, func(*policy.Config) (*policy.Config, error) { return cfg, nil })
}

// Update reads the quota table, lets edit derive the new table from it, and writes the result,
// all under one edit lock and one transaction: two concurrent edits (quotactl set of two
// projects at once) each see the other's committed result, so neither is lost. edit may
// return an error to abort; the table is then unchanged.
func (s *Store) Update(ctx context.Context, actor string, edit func(current *policy.Config) (*policy.Config, error)) ([]Change, error) {
	conn, err := s.DB.Connx(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	var got sql.NullInt64
	if err := conn.GetContext(ctx, &got, "SELECT GET_LOCK(?, ?)", editLock, editLockWait); err != nil {
		return nil, fmt.Errorf("quota edit lock: %w", err)
	}
	if !got.Valid || got.Int64 != 1 {
		return nil, fmt.Errorf("quota edit lock: another quota edit has been running for %ds", editLockWait)
	}
	defer conn.ExecContext(context.Background(), "SELECT RELEASE_LOCK(?)", editLock) //nolint:errcheck // the lock also ends with the connection
	// The transaction starts after the lock, so its reads see every edit committed before.
	tx, err := conn.BeginTxx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	old, err := load(ctx, tx, " FOR UPDATE")
	if err != nil {
		return nil, err
	}
	// edit gets its own copy: old is what the diff compares against.
	current, err := load(ctx, tx, "")
	if err != nil {
		return nil, err
	}
	cfg, err := edit(current)
	if err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	changes := Diff(old, cfg)
	if len(changes) == 0 {
		return nil, nil
	}
	for _, stmt := range []string{"DELETE FROM quota_settings", "DELETE FROM quota_lend_limits", "DELETE FROM quota_gpus", "DELETE FROM quota_borrow_limits", "DELETE FROM quota_project_lend_limits", "DELETE FROM quota_project_reclaim_thresholds", "DELETE FROM quota_projects"} {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return nil, err
		}
	}
	for k, v := range settingValues(cfg.Settings) {
		if _, err := tx.ExecContext(ctx, "INSERT INTO quota_settings (name, value) VALUES (?, ?)", k, v); err != nil {
			return nil, err
		}
	}
	for t, n := range cfg.LendLimits {
		if _, err := tx.ExecContext(ctx, "INSERT INTO quota_lend_limits (gpu_type, lend_limit) VALUES (?, ?)", t, n); err != nil {
			return nil, err
		}
	}
	for _, p := range cfg.Projects {
		if _, err := tx.ExecContext(ctx, "INSERT INTO quota_projects (account, total_gpus, borrow_limit, weight) VALUES (?, ?, ?, ?)",
			p.Account, p.TotalGPUs, p.BorrowLimit, p.Weight); err != nil {
			return nil, err
		}
		for t, n := range p.GPUs {
			if _, err := tx.ExecContext(ctx, "INSERT INTO quota_gpus (account, gpu_type, guaranteed) VALUES (?, ?, ?)", p.Account, t, n); err != nil {
				return nil, err
			}
		}
		for t, n := range p.BorrowLimitByType {
			if _, err := tx.ExecContext(ctx, "INSERT INTO quota_borrow_limits (account, gpu_type, borrow_limit) VALUES (?, ?, ?)", p.Account, t, n); err != nil {
				return nil, err
			}
		}
		for t, n := range p.LendLimitByType {
			if _, err := tx.ExecContext(ctx, "INSERT INTO quota_project_lend_limits (account, gpu_type, lend_limit) VALUES (?, ?, ?)", p.Account, t, n); err != nil {
				return nil, err
			}
		}
		if t := p.ReclaimPriorityThreshold; t != nil {
			if _, err := tx.ExecContext(ctx, "INSERT INTO quota_project_reclaim_thresholds (account, priority) VALUES (?, ?)", p.Account, *t); err != nil {
				return nil, err
			}
		}
	}
	now := time.Now().UTC()
	for _, c := range changes {
		if err := insertAudits(ctx, tx, []Entry{{At: now, Actor: actor, Kind: KindQuota, Subject: c.Subject, Old: c.Old, New: c.New}}); err != nil {
			return nil, err
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	return changes, nil
}

// Change is one difference between two quota tables.
type Change struct {
	Subject  string // "project proj-a", "setting graceTime", "lend limit a100"
	Old, New string // "" when absent
}

// Diff lists what differs between two quota tables, in a stable order.
func Diff(old, cur *policy.Config) []Change {
	var out []Change
	add := func(subject, o, n string) {
		if o != n {
			out = append(out, Change{Subject: subject, Old: o, New: n})
		}
	}
	os, ns := settingValues(old.Settings), settingValues(cur.Settings)
	for _, k := range settingNames {
		add("setting "+k, os[k], ns[k])
	}
	types := map[string]bool{}
	for t := range old.LendLimits {
		types[t] = true
	}
	for t := range cur.LendLimits {
		types[t] = true
	}
	for _, t := range slices.Sorted(maps.Keys(types)) {
		add("lend limit "+t, limitText(old.LendLimits, t), limitText(cur.LendLimits, t))
	}
	accounts := map[string]bool{}
	for _, p := range old.Projects {
		accounts[p.Account] = true
	}
	for _, p := range cur.Projects {
		accounts[p.Account] = true
	}
	for _, a := range slices.Sorted(maps.Keys(accounts)) {
		op, _ := old.Project(a)
		np, _ := cur.Project(a)
		add("project "+a, ProjectText(op), ProjectText(np))
	}
	return out
}

func limitText(m map[string]int, t string) string {
	if n, ok := m[t]; ok {
		return strconv.Itoa(n)
	}
	return ""
}

// ProjectText spells a project's quota on one line, e.g.
// "gpus=a100:4,v100:2 borrowLimit=4 weight=2"; "" for no project.
func ProjectText(p policy.Project) string {
	if p.Account == "" {
		return ""
	}
	var parts []string
	parts = append(parts, "gpus="+typeList(p.GPUs))
	if p.TotalGPUs != nil {
		parts = append(parts, fmt.Sprintf("totalGPUs=%d", *p.TotalGPUs))
	}
	if p.BorrowLimit != nil {
		parts = append(parts, fmt.Sprintf("borrowLimit=%d", *p.BorrowLimit))
	}
	if len(p.BorrowLimitByType) > 0 {
		parts = append(parts, "borrowLimitByType="+typeList(p.BorrowLimitByType))
	}
	if len(p.LendLimitByType) > 0 {
		parts = append(parts, "lendLimitByType="+typeList(p.LendLimitByType))
	}
	if p.Weight != nil {
		parts = append(parts, "weight="+strconv.FormatFloat(*p.Weight, 'g', -1, 64))
	}
	if p.ReclaimPriorityThreshold != nil {
		parts = append(parts, fmt.Sprintf("reclaimPriorityThreshold=%d", *p.ReclaimPriorityThreshold))
	}
	return strings.Join(parts, " ")
}

func typeList(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, t := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s:%d", t, m[t]))
	}
	return strings.Join(parts, ",")
}
