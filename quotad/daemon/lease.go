package daemon

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"
)

// LeaseName is the MariaDB user lock that makes one quotad the active one.
const LeaseName = "slurmbridge.quotad.active"

// DBLease is a single-active-instance lease: a MariaDB GET_LOCK held on a dedicated
// connection. The server frees it when that connection dies (quotad killed, network gone), so
// a standby takes over without any timeout of ours.
type DBLease struct {
	DB   *sqlx.DB
	Name string // "" means LeaseName
	conn *sql.Conn
}

func (l *DBLease) name() string {
	if l.Name == "" {
		return LeaseName
	}
	return l.Name
}

// Ensure checks that the lease is still held on its connection, or tries once, without
// waiting, to take it. holder describes who has it when we do not.
func (l *DBLease) Ensure(ctx context.Context) (held bool, holder string, err error) {
	if l.conn != nil {
		var mine sql.NullInt64
		err := l.conn.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?) = CONNECTION_ID()", l.name()).Scan(&mine)
		if err == nil && mine.Valid && mine.Int64 == 1 {
			return true, "", nil
		}
		// Lost (connection broken, or the lock freed under us): start over on a new connection.
		l.conn.Close()
		l.conn = nil
		if err != nil {
			return false, "", fmt.Errorf("lease connection lost: %w", err)
		}
	}
	conn, err := l.DB.Conn(ctx)
	if err != nil {
		return false, "", fmt.Errorf("lease: %w", err)
	}
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 0)", l.name()).Scan(&got); err != nil {
		conn.Close()
		return false, "", fmt.Errorf("lease: GET_LOCK: %w", err)
	}
	if got.Valid && got.Int64 == 1 {
		l.conn = conn
		return true, "", nil
	}
	var owner sql.NullInt64
	_ = conn.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?)", l.name()).Scan(&owner)
	conn.Close()
	if owner.Valid {
		return false, fmt.Sprintf("MariaDB connection %d", owner.Int64), nil
	}
	return false, "another session", nil
}

// ErrLeaseLost is the fence's answer once the lease's connection is gone or the lock is no
// longer its own: another quotad may hold the lease and act.
var ErrLeaseLost = errors.New("lease lost")

// Check is the fence before each action of an apply: one query on the connection that holds
// the lock, asking whether the lock is still that connection's. It never takes the lease (only
// Ensure, at a cycle's start, does), so an apply that lost it cannot win it back midway.
func (l *DBLease) Check(ctx context.Context) error {
	if l.conn == nil {
		return fmt.Errorf("%w: no lease connection", ErrLeaseLost)
	}
	var mine sql.NullInt64
	err := l.conn.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?) = CONNECTION_ID()", l.name()).Scan(&mine)
	if err != nil {
		return fmt.Errorf("%w: its connection failed: %v", ErrLeaseLost, err)
	}
	if !mine.Valid || mine.Int64 != 1 {
		return fmt.Errorf("%w: the lock is no longer held on this quotad's connection", ErrLeaseLost)
	}
	return nil
}

// Release gives the lease up.
func (l *DBLease) Release(ctx context.Context) {
	if l.conn == nil {
		return
	}
	_, _ = l.conn.ExecContext(ctx, "SELECT RELEASE_LOCK(?)", l.name())
	l.conn.Close()
	l.conn = nil
}
