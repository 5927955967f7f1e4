// Package store keeps quotad's own state in slurmdbd's MariaDB, in a database of its own
// (default "slurmbridge"): the quota table, the single-instance lease and the audit trail.
// The database is the source of truth at runtime; YAML is only the import/export format.
package store

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
)

// DBConfig says how to reach MariaDB. The password is read from a file, never a flag.
type DBConfig struct {
	Addr         string // host:port
	User         string
	PasswordFile string
}

// ReadPassword reads the password file, refusing one that its group or others may read or
// write: a database password shared with every local user is no secret.
func ReadPassword(path string) (string, error) {
	if path == "" {
		return "", fmt.Errorf("no database password file given (--db-password-file or SLURMBRIDGE_DB_PASSWORD_FILE)")
	}
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("database password file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("database password file: %w", err)
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("database password file %s is not a regular file", path)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return "", fmt.Errorf("database password file %s has mode %04o: it must be readable by its owner only (chmod 600 %s)", path, perm, path)
	}
	buf := make([]byte, 4096)
	n, err := f.Read(buf)
	if err != nil {
		return "", fmt.Errorf("database password file %s: %w", path, err)
	}
	pw := strings.TrimRight(string(buf[:n]), "\r\n")
	if pw == "" {
		return "", fmt.Errorf("database password file %s is empty", path)
	}
	return pw, nil
}

// Open connects to database name (it must exist) and checks the connection.
func Open(ctx context.Context, cfg DBConfig, name string) (*sqlx.DB, error) {
	pw, err := ReadPassword(cfg.PasswordFile)
	if err != nil {
		return nil, err
	}
	mc := mysql.NewConfig()
	mc.Net = "tcp"
	mc.Addr = cfg.Addr
	mc.User = cfg.User
	mc.Passwd = pw
	mc.DBName = name
	mc.ParseTime = true // audit times
	mc.Loc = time.UTC
	// Bounded waits: a cycle must fail fast, not hang, when MariaDB is gone.
	mc.Timeout = 3 * time.Second
	mc.ReadTimeout = 10 * time.Second
	mc.WriteTimeout = 10 * time.Second
	db, err := sqlx.Open("mysql", mc.FormatDSN())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(4)
	db.SetConnMaxLifetime(5 * time.Minute)
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := db.PingContext(pctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("database %s at %s as %s: %w", name, cfg.Addr, cfg.User, err)
	}
	return db, nil
}
