package daemon

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// LeaseName is the MariaDB user lock that makes one quotad the active one.
const LeaseName = "slurmbridge.quotad.active"

// DBLease is a single-active-instance lease: a MariaDB GET_LOCK held on a dedicated
// connection. The server frees it when that connection ends. A quotad killed ends it at once;
// a quotad cut off from the server (a partition, a host that froze) does not, and the server
// would keep the lock for its wait_timeout (8 hours by default) or TCP keepalive's two. So the
// lease's connection gets wait_timeout = IdleTimeout: the server ends it, and frees the lock,
// once quotad has said nothing on it for that long. quotad asks on it every cycle and before
// every action, each query bounded by a fraction of IdleTimeout, so a cut-off quotad has
// stopped acting (its queries fail) before the server can hand the lock to a standby.
type DBLease struct {
	DB   *sqlx.DB
	Name string // "" means LeaseName
	// IdleTimeout is the lease connection's wait_timeout (whole seconds, at least 2); zero
	// means DefaultLeaseIdleTimeout. It must exceed the cycle interval.
	IdleTimeout time.Duration
	conn        *sql.Conn
}

// DefaultLeaseIdleTimeout is the lease connection's wait_timeout when none is given.
const DefaultLeaseIdleTimeout = 30 * time.Second

// LeaseIdleTimeoutFor is the idle timeout for a quotad cycling every interval: three cycles,
// so a slow snapshot never costs the lease, and never under DefaultLeaseIdleTimeout/2.
func LeaseIdleTimeoutFor(interval time.Duration) time.Duration {
	return max(3*interval, DefaultLeaseIdleTimeout/2)
}

func (l *DBLease) idleTimeout() time.Duration {
	if l.IdleTimeout <= 0 {
		return DefaultLeaseIdleTimeout
	}
	return max(l.IdleTimeout, 2*time.Second)
}

// queryTimeout bounds each query on the lease's connection: a third of the idle timeout, at
// most 5 s, so a query that hangs on a cut link fails long before the server frees the lock.
func (l *DBLease) queryTimeout() time.Duration {
	return min(l.idleTimeout()/3, 5*time.Second)
}

// isMine asks on the lease's connection whether the lock is still that connection's.
func (l *DBLease) isMine(ctx context.Context) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, l.queryTimeout())
	defer cancel()
	var mine sql.NullInt64
	err := l.conn.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?) = CONNECTION_ID()", l.name()).Scan(&mine)
	return err == nil && mine.Valid && mine.Int64 == 1, err
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
		mine, err := l.isMine(ctx)
		if mine {
			return true, "", nil
		}
		// Lost (connection broken, or the lock freed under us): start over on a new connection.
		l.conn.Close()
		l.conn = nil
		if err != nil {
			return false, "", fmt.Errorf("lease connection lost: %w", err)
		}
	}
	qctx, cancel := context.WithTimeout(ctx, l.queryTimeout())
	defer cancel()
	conn, err := l.DB.Conn(qctx)
	if err != nil {
		return false, "", fmt.Errorf("lease: %w", err)
	}
	// Before the lock: the server must never hold it for a quotad it can no longer hear.
	if _, err := conn.ExecContext(qctx, "SET SESSION wait_timeout = ?", int(l.idleTimeout()/time.Second)); err != nil {
		conn.Close()
		return false, "", fmt.Errorf("lease: setting wait_timeout: %w", err)
	}
	var got sql.NullInt64
	if err := conn.QueryRowContext(qctx, "SELECT GET_LOCK(?, 0)", l.name()).Scan(&got); err != nil {
		conn.Close()
		return false, "", fmt.Errorf("lease: GET_LOCK: %w", err)
	}
	if got.Valid && got.Int64 == 1 {
		l.conn = conn
		return true, "", nil
	}
	var owner sql.NullInt64
	_ = conn.QueryRowContext(qctx, "SELECT IS_USED_LOCK(?)", l.name()).Scan(&owner)
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
	mine, err := l.isMine(ctx)
	if err != nil {
		return fmt.Errorf("%w: its connection failed: %v", ErrLeaseLost, err)
	}
	if !mine {
		return fmt.Errorf("%w: the lock is no longer held on this quotad's connection", ErrLeaseLost)
	}
	return nil
}

// Release gives the lease up.
func (l *DBLease) Release(ctx context.Context) {
	if l.conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, l.queryTimeout())
	defer cancel()
	_, _ = l.conn.ExecContext(ctx, "SELECT RELEASE_LOCK(?)", l.name())
	l.conn.Close()
	l.conn = nil
}
