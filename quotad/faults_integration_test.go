//go:build integration

// Faults: quotad killed mid-cycle, MariaDB gone for a minute, slurmctld restarted. quotad must
// take no wrong action while it cannot see the whole picture, never cancel or kill a job, and
// converge within two cycles once everything answers again. These tests pause the testbed's
// own quotad and run their own, so they control which one is active.
package quotad_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/testbed"
	"github.com/slurmbridge/slurmbridge/quotad/daemon"
)

const faultCycle = 2 * time.Second // --interval of the quotad under test

// upAtCleanup brings every daemon of the testbed back up when the test ends, however it ends.
func upAtCleanup(t *testing.T, c *testbed.Cluster) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := c.Up(ctx); err != nil {
			t.Errorf("bringing the testbed back: %v", err)
		}
	})
}

// loggedEvent says whether any line of quotad's JSON log is an event the function is picks out.
func loggedEvent(log []byte, is func(fields map[string]any) bool) bool {
	for line := range bytes.Lines(log) {
		var fields map[string]any
		if json.Unmarshal(line, &fields) == nil && is(fields) {
			return true
		}
	}
	return false
}

// tookLease is the line of a quotad that became the active one: the lease, at info (a passive
// quotad warns, naming the holder).
func tookLease(fields map[string]any) bool {
	return fields["level"] == "info" && fields["lease"] == daemon.LeaseName
}

// failedCycle is the error of a cycle that stopped before acting, with its outcome.
func failedCycle(fields map[string]any) bool {
	_, outcome := fields["outcome"]
	return fields["level"] == "error" && outcome
}

// activeQuotad pauses the testbed's quotad, starts one under test with the testbed quotas, and
// waits until it holds the lease. It returns the log path and the process.
func activeQuotad(t *testing.T, c *testbed.Cluster) (string, *os.Process) {
	t.Helper()
	log, cmd := startQuotad(t, c, faultCycle.String())
	waitFor(t, "the quotad under test to take the lease", 30*time.Second, func() bool {
		data, _ := os.ReadFile(log)
		return loggedEvent(data, tookLease)
	})
	return log, cmd.Process
}

// overQuota submits bob's 8 one-a100 jobs (quota 4) and waits until the 4 in quota run.
func overQuota(t *testing.T, c *testbed.Cluster) (all []string) {
	t.Helper()
	all = submitN(t, c, "bob", 8)
	waitQueue(t, c, all, "bob's 4 in-quota jobs running", 30*time.Second, exactly(4, all, running))
	return all
}

// assertNothingLent fails if any of the jobs is in the borrow QOS or no longer pending/running.
func assertNothingLent(t *testing.T, c *testbed.Cluster, ids []string, while string) {
	t.Helper()
	for id, r := range queue(t, c, ids) {
		if inABorrowQOS(r) {
			t.Fatalf("job %s lent %s", id, while)
		}
		if !running(r) && !pending(r) {
			t.Fatalf("job %s is %s %s; quotad must never end a job", id, r.state, while)
		}
	}
}

// assertConverges waits for 4 of bob's jobs to be lent within two cycles (plus the time one
// cycle can take) after recovery, then for all 8 to run, none ended.
func assertConverges(t *testing.T, c *testbed.Cluster, ids []string, recovered time.Time) {
	t.Helper()
	limit := 2*faultCycle + 5*time.Second - time.Since(recovered)
	waitQueue(t, c, ids, "4 of bob's jobs lent within two cycles of recovery", limit, exactly(4, ids, inABorrowQOS))
	t.Logf("lent %s after recovery", time.Since(recovered).Round(100*time.Millisecond))
	waitQueue(t, c, ids, "all 8 of bob's jobs running", 30*time.Second, exactly(8, ids, running))
}

func TestQuotadKilledMidCycleConverges(t *testing.T) {
	c := testbed.Require(t)
	pauseWithTestbedQuotas(t, c)
	_, first := activeQuotad(t, c)

	// bob's jobs arrive and the quotad dies without warning while it may be mid-cycle.
	ids := submitN(t, c, "bob", 8)
	time.Sleep(faultCycle + faultCycle/3)
	if err := first.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, _ = first.Wait()
	for id, r := range queue(t, c, ids) {
		if !running(r) && !pending(r) {
			t.Fatalf("job %s is %s after quotad was killed", id, r.state)
		}
	}

	// Its lease died with its database connection: a new quotad takes over and finishes.
	restarted := time.Now()
	activeQuotad(t, c)
	assertConverges(t, c, ids, restarted)
}

func TestDatabaseOutageStopsQuotadUntilItIsBack(t *testing.T) {
	c := testbed.Require(t)
	pauseWithTestbedQuotas(t, c)
	log, _ := activeQuotad(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	upAtCleanup(t, c) // whatever happens, the testbed gets its database back

	if err := c.Stop(ctx, "mariadb"); err != nil {
		t.Fatal(err)
	}
	down := time.Now()
	ids := overQuota(t, c) // slurmctld keeps accepting and running jobs without its database
	for time.Since(down) < 60*time.Second {
		assertNothingLent(t, c, ids, "while the database is down")
		time.Sleep(2 * time.Second)
	}
	data, _ := os.ReadFile(log)
	if !loggedEvent(data, failedCycle) {
		t.Errorf("quotad did not log its failed cycles during the outage:\n%s", data)
	}

	if err := c.Up(ctx); err != nil {
		t.Fatal(err)
	}
	assertConverges(t, c, ids, time.Now())
}

func TestSlurmctldRestartConverges(t *testing.T) {
	c := testbed.Require(t)
	pauseWithTestbedQuotas(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	upAtCleanup(t, c)

	// Over-quota work waits while no quotad runs; then slurmctld goes away and a quotad starts
	// that can read the database but not slurmctld's live state.
	ids := overQuota(t, c)
	if err := c.Stop(ctx, "slurmctld"); err != nil {
		t.Fatal(err)
	}
	log, _ := activeQuotad(t, c)
	time.Sleep(5 * faultCycle)
	// The QOS were synced before; without slurmctld's live state any applied action, sync or
	// move, would be an action on partial data.
	data, _ := os.ReadFile(log)
	if strings.Contains(string(data), "cycle applied") {
		t.Fatalf("quotad acted while slurmctld was down:\n%s", data)
	}
	if !loggedEvent(data, failedCycle) {
		t.Errorf("quotad did not log its failed cycles while slurmctld was down:\n%s", data)
	}

	if err := c.Up(ctx); err != nil {
		t.Fatal(err)
	}
	assertConverges(t, c, ids, time.Now())
}
