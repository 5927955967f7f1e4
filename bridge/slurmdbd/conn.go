package slurmdbd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/urfave/cli/v2"
)

// Flags say how to reach slurmdbd's database, the same for every command that reads it; each
// also reads the variable that the testbed's env file and the packages' env files export.
func Flags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "cluster", Usage: "Slurm ClusterName (names slurmdbd's per-cluster tables)", EnvVars: []string{"SLURMBRIDGE_CLUSTER"}},
		&cli.StringFlag{Name: "db-addr", Usage: "slurmdbd's MariaDB, host:port", EnvVars: []string{"SLURMBRIDGE_DB_ADDR"}, Value: "127.0.0.1:3306"},
		&cli.StringFlag{Name: "db-user", Usage: "database user", EnvVars: []string{"SLURMBRIDGE_DB_USER"}, Value: "slurm"},
		&cli.StringFlag{Name: "db-password-file", Usage: "file holding the database password (mode 0600 or stricter)", EnvVars: []string{"SLURMBRIDGE_DB_PASSWORD_FILE"}},
		&cli.StringFlag{Name: "acct-db", Usage: "slurmdbd's database (StorageLoc)", EnvVars: []string{"SLURMBRIDGE_DB_NAME"}, Value: "slurm_acct_db"},
	}
}

// ConfigFrom reads the connection Flags give.
func ConfigFrom(c *cli.Context) Config {
	return Config{Addr: c.String("db-addr"), User: c.String("db-user"), PasswordFile: c.String("db-password-file")}
}

// OpenAccounting connects to the accounting database Flags name and reads the cluster they
// name.
func OpenAccounting(c *cli.Context) (*Reader, error) {
	if c.String("cluster") == "" {
		return nil, errNoCluster
	}
	db, err := Open(c.Context, ConfigFrom(c), c.String("acct-db"))
	if err != nil {
		return nil, err
	}
	r, err := NewReader(db, c.String("cluster"))
	if err != nil {
		db.Close()
		return nil, err
	}
	return r, nil
}

// Config says how to reach slurmdbd's MariaDB. The password is read from a file, never a flag.
type Config struct {
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
	if perm := st.Mode().Perm(); perm&0o077 != 0 && !systemdCredential(path, st) {
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

// systemdCredential reports whether path is systemd's private copy of a credential for this
// service (LoadCredential=, in $CREDENTIALS_DIRECTORY), which systemd 252 writes 0400 owned by
// the service's user but later releases (262 in Debian sid) 0440 owned by root:root with an ACL
// for the service: group read is then root's group or the service's own, and the directory is
// closed to everyone else. Others' bits and group write are refused all the same.
func systemdCredential(path string, st os.FileInfo) bool {
	dir := os.Getenv("CREDENTIALS_DIRECTORY")
	if dir == "" || filepath.Dir(filepath.Clean(path)) != filepath.Clean(dir) || st.Mode().Perm()&0o037 != 0 {
		return false
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	return ok && (sys.Gid == 0 || int(sys.Gid) == os.Getgid())
}

// Open connects to database name (it must exist) and checks the connection.
func Open(ctx context.Context, cfg Config, name string) (*sqlx.DB, error) {
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
