// Package cli holds quotad's and quotactl's command lines (urfave/cli/v2): flags, wiring of
// the adapters, and quotactl's commands. The mains under quotad/cmd only call these.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/rs/zerolog"
	ucli "github.com/urfave/cli/v2"

	"github.com/slurmbridge/slurmbridge/bridge/pools"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/bridge/slurmdbd"
	"github.com/slurmbridge/slurmbridge/quotad/daemon"
	"github.com/slurmbridge/slurmbridge/quotad/slurmdb"
	"github.com/slurmbridge/slurmbridge/quotad/snapshot"
	"github.com/slurmbridge/slurmbridge/quotad/store"
)

// dbFlags are shared by quotad and quotactl; each also reads the variables the testbed's env
// file exports.
// Needed by every command that opens the databases (openEnv checks); quotactl list and explain
// through quotad need none of these flags.
// poolsFlag names the pools file: its borrow_qos and elastic_qos are the QOS patterns quotad
// lends in, so every plan, quotad's and quotactl's, is built with them.
func poolsFlag() ucli.Flag {
	return &ucli.StringFlag{Name: "pools", Usage: "pools file: its borrow_qos and elastic_qos name the QOS patterns, and the cluster page shows its pools (default: the job_submit plugin's, pools.yaml beside slurm.conf)", EnvVars: []string{pools.ConfigEnv}}
}

// poolsPath is the pools file poolsFlag names, or the plugin's.
func poolsPath(c *ucli.Context) string {
	if p := c.String("pools"); p != "" {
		return p
	}
	return pools.ConfigPathFromEnv()
}

func dbFlags() []ucli.Flag {
	return append(slurmdbd.Flags(),
		&ucli.StringFlag{Name: "quota-db", Usage: "quotad's own database (quotas, audit)", EnvVars: []string{"SLURMBRIDGE_QUOTA_DB"}, Value: "slurmbridge"})
}

// env is what a command needs: both databases, the readers and the Slurm adapter.
type env struct {
	acctDB, quotaDB *sqlx.DB
	reader          *slurmdb.Reader
	store           *store.Store
	// table is the quota table with pools.yaml's QOS patterns, what every plan is built on.
	table   *daemon.PoolsQOSPatterns
	slurm   slurm.Client
	builder *snapshot.Builder
	log     zerolog.Logger
}

func (e *env) Close() {
	if e.acctDB != nil {
		e.acctDB.Close()
	}
	if e.quotaDB != nil {
		e.quotaDB.Close()
	}
}

// dbAccess says what a command does to quotad's database: a reader only checks that the schema
// is current, a writer (quotad, quotactl's edits) migrates it first.
type dbAccess int

const (
	readOnly dbAccess = iota
	readWrite
)

// openEnv connects to both databases; a writer migrates quotad's schema, a reader never does.
func openEnv(c *ucli.Context, log zerolog.Logger, access dbAccess) (*env, error) {
	ctx := c.Context
	acct, err := slurmdbd.OpenAccounting(c)
	if err != nil {
		return nil, err
	}
	e := &env{log: log, acctDB: acct.DB, reader: &slurmdb.Reader{Reader: acct}}
	cfg := slurmdbd.ConfigFrom(c)
	if e.quotaDB, err = slurmdbd.Open(ctx, cfg, c.String("quota-db")); err != nil {
		e.Close()
		return nil, fmt.Errorf("%w (as MariaDB root: CREATE DATABASE %s; GRANT ALL ON %s.* TO '%s'@'<host>')", err, c.String("quota-db"), c.String("quota-db"), cfg.User)
	}
	e.store = &store.Store{DB: e.quotaDB}
	mctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if access == readWrite {
		if _, err := e.store.Migrate(mctx); err != nil {
			e.Close()
			return nil, fmt.Errorf("migrating database %s: %w", c.String("quota-db"), err)
		}
	} else if err := e.store.CheckSchema(mctx); err != nil {
		e.Close()
		return nil, fmt.Errorf("database %s: %w", c.String("quota-db"), err)
	}
	// Slurm commands inherit our environment (SLURM_CONF); no shell is involved.
	e.slurm = slurm.NewClient(slurm.ExecRunner{Timeout: 20 * time.Second})
	e.builder = &snapshot.Builder{Live: e.slurm, Accounting: e.reader}
	path := poolsPath(c)
	e.table = &daemon.PoolsQOSPatterns{Table: e.store, Pools: func() (*pools.Config, error) { return pools.Load(path) }}
	return e, nil
}

// actor names who runs the command, for the audit: the login behind sudo when there is one.
func actor() string {
	name := fmt.Sprintf("uid %d", os.Geteuid())
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	if sudo := os.Getenv("SUDO_USER"); sudo != "" && os.Geteuid() == 0 {
		name += " (sudo by " + sudo + ")"
	}
	return name
}

// errNotAdmin is returned for mutations by users without Slurm admin rights.
var errNotAdmin = errors.New("permission denied")

// requireAdmin allows root and users whose slurmdbd AdminLevel is Administrator, as sacctmgr
// does for the changes quotactl makes.
func requireAdmin(ctx context.Context, r *slurmdb.Reader) error {
	if os.Geteuid() == 0 {
		return nil
	}
	u, err := user.Current()
	if err != nil {
		return fmt.Errorf("who am I: %w", err)
	}
	level, err := r.AdminLevel(ctx, u.Username)
	if err != nil {
		return err
	}
	if level < slurmdbd.AdminAdministrator {
		return fmt.Errorf("%w: %s is neither root nor a Slurm AdminLevel=Administrator user (sacctmgr modify user %s set adminlevel=Administrator)", errNotAdmin, u.Username, u.Username)
	}
	return nil
}

// newLogger writes zerolog to w: JSON, or console text when asked.
func newLogger(w io.Writer, level, format string) (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(level)
	if err != nil {
		return zerolog.Logger{}, fmt.Errorf("--log-level: %w", err)
	}
	out := w
	switch format {
	case "json", "":
	case "console":
		out = zerolog.ConsoleWriter{Out: w, TimeFormat: time.RFC3339, NoColor: true}
	default:
		return zerolog.Logger{}, fmt.Errorf("--log-format %q: want json or console", format)
	}
	return zerolog.New(out).Level(lvl).With().Timestamp().Logger(), nil
}
