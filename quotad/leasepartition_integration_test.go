//go:build integration

// A quotad cut off from MariaDB by the network (not killed: its connection stays open on the
// server) stops acting at once, and the server frees its lease after the lease's idle timeout,
// so a standby takes over: against the testbed's real MariaDB, through a TCP relay that the
// test turns into a black hole.
package quotad_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/slurmdbd"
	"github.com/slurmbridge/slurmbridge/bridge/testbed"
	"github.com/slurmbridge/slurmbridge/quotad/daemon"
)

// blackholeRelay forwards TCP to target until cut: from then on it reads and drops whatever
// either side sends and never closes a connection, as a partition looks to both ends.
type blackholeRelay struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    bool
}

func newBlackholeRelay(t *testing.T, target string) *blackholeRelay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &blackholeRelay{ln: ln, target: target}
	t.Cleanup(func() { ln.Close() })
	go r.serve()
	return r
}

func (r *blackholeRelay) serve() {
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", r.target)
		if err != nil {
			c.Close()
			continue
		}
		go r.pipe(c, s)
		go r.pipe(s, c)
	}
}

func (r *blackholeRelay) pipe(from, to net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := from.Read(buf)
		if err != nil {
			return
		}
		r.mu.Lock()
		cut := r.cut
		r.mu.Unlock()
		if !cut {
			if _, err := to.Write(buf[:n]); err != nil {
				return
			}
		}
	}
}

func (r *blackholeRelay) Cut() {
	r.mu.Lock()
	r.cut = true
	r.mu.Unlock()
}

func TestPartitionedQuotadStopsActingAndServerFreesItsLease(t *testing.T) {
	c := testbed.Require(t)
	ctx := context.Background()
	quotaDB := c.Vars["SLURMBRIDGE_QUOTA_DB"]
	if quotaDB == "" {
		quotaDB = "slurmbridge"
	}
	relay := newBlackholeRelay(t, c.DBConfig().Addr)
	cutCfg := c.DBConfig()
	cutCfg.Addr = relay.ln.Addr().String()
	cutDB, err := slurmdbd.Open(ctx, cutCfg, quotaDB)
	if err != nil {
		t.Fatal(err)
	}
	defer cutDB.Close()
	directDB, err := c.OpenDB(ctx, quotaDB)
	if err != nil {
		t.Fatal(err)
	}
	defer directDB.Close()

	// Its own lock name: the testbed's quotad may hold the real one.
	const name = "slurmbridge.test.partition"
	const idle = 4 * time.Second
	active := &daemon.DBLease{DB: cutDB, Name: name, IdleTimeout: idle}
	standby := &daemon.DBLease{DB: directDB, Name: name, IdleTimeout: idle}
	defer standby.Release(ctx)
	if held, holder, err := active.Ensure(ctx); err != nil || !held {
		t.Fatalf("the first quotad did not get the lease: held %v, holder %q, err %v", held, holder, err)
	}
	if held, _, err := standby.Ensure(ctx); err != nil || held {
		t.Fatalf("the standby got a held lease: held %v, err %v", held, err)
	}

	relay.Cut()
	cutAt := time.Now()
	// The fence fails within its query timeout (a third of the idle timeout): the cut-off
	// quotad's next action is refused long before the server may free the lock.
	err = active.Check(ctx)
	fenced := time.Since(cutAt)
	if !errors.Is(err, daemon.ErrLeaseLost) {
		t.Fatalf("the cut-off quotad's fence answered %v, want ErrLeaseLost", err)
	}
	if fenced >= idle {
		t.Fatalf("the fence took %s to fail, not under the idle timeout %s", fenced, idle)
	}
	// Before the idle timeout the server still holds the lock for the silent connection.
	if held, _, err := standby.Ensure(ctx); err != nil || held {
		t.Fatalf("the standby got the lease %s after the cut, before the idle timeout %s (err %v)", time.Since(cutAt), idle, err)
	}
	var took time.Duration
	for deadline := time.Now().Add(idle + 20*time.Second); ; {
		held, _, err := standby.Ensure(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if held {
			took = time.Since(cutAt)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server kept the cut-off quotad's lease %s after the cut (idle timeout %s)", time.Since(cutAt), idle)
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("partition: fence failed after %s, standby held the lease after %s (idle timeout %s)", fenced.Round(time.Millisecond), took.Round(time.Millisecond), idle)
	// The cut-off quotad never wins it back through the dead link.
	if held, _, _ := active.Ensure(ctx); held {
		t.Fatal("the cut-off quotad holds the lease again")
	}
}
