//go:build integration

// Fencing: a quotad whose lease connection is cut mid-apply stops before its next action, and
// the standby takes over. The two never both act.
package quotad_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/testbed"
	"github.com/slurmbridge/slurmbridge/quotad/daemon"
	"github.com/slurmbridge/slurmbridge/quotad/store"
)

// stepDelay slows the first quotad's apply down so the cut lands between two of its actions.
const stepDelay = 3 * time.Second

func logCount(t *testing.T, path, what string) int {
	t.Helper()
	data, _ := os.ReadFile(path)
	return strings.Count(string(data), what)
}

// auditMovesBy counts the job moves the audit trail records for quotad process pid.
func auditMovesBy(t *testing.T, c *testbed.Cluster, pid int) int {
	t.Helper()
	var rows []store.Entry
	if err := json.Unmarshal([]byte(quotactl(t, c, "history", "--kind", "move", "--limit", "1000", "--json")), &rows); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range rows {
		if strings.HasSuffix(r.Actor, "["+strconv.Itoa(pid)+"]") {
			n++
		}
	}
	return n
}

func TestCutLeaseConnectionStopsApplyAndStandbyTakesOver(t *testing.T) {
	c := testbed.Require(t)
	pauseWithTestbedQuotas(t, c)

	// With no quotad running, bob's 4 over-quota a100 jobs and carol's 2 (she has no a100
	// guarantee) wait, so the slow quotad's first plan lends them all: moves are batched per
	// borrow QOS, so that is two move actions (borrow-proj-b, borrow-proj-c), stepDelay apart.
	bob := overQuota(t, c)
	carol := []string{submitAs(t, c, "carol", "-p", "a100-spot"), submitAs(t, c, "carol", "-p", "a100-spot")}
	all := append(append([]string{}, bob...), carol...)
	const lends = 6
	// Only jobs Slurm has marked over quota are lent: wait for all six, or the first plan
	// could hold one batch only and the cut would fall between cycles, not between actions.
	waitQueue(t, c, all, "bob's 4 and carol's 2 jobs pending with reason QOSGrpGRES", 30*time.Second,
		exactly(lends, all, both(pending, withReason("QOSGrpGRES"))))

	// Its first plan also sets the reclaim order the lends bring (three Preempt lists, the
	// priorities of proj-b's and proj-c's borrow and elastic QOS), one action each before the
	// moves: up to 9 QOS changes and 2 move batches. The interval (and with it the cycle
	// timeout) leaves that first apply the time to reach its moves, so the cut, not the
	// timeout, stops it. No move budget: past it the second batch would go to a cycle that
	// follows at once (its first action undelayed), and the cut would fall between cycles.
	first, firstCmd := startQuotad(t, c, "45s", "--apply-step-delay", stepDelay.String(), "--move-budget", "0")
	waitFor(t, "the slow quotad to take the lease", 30*time.Second, func() bool {
		return logCount(t, first, "this quotad is the active one") > 0
	})
	firstAPI := apiAddr(t, first)
	standby, _ := startQuotad(t, c, "1s")
	waitFor(t, "the slow quotad's first move batch", 60*time.Second, func() bool {
		return logCount(t, first, "moved job") > 0
	})

	// Cut its lease connection, as a network failure or a DBA's KILL would: MariaDB frees the
	// lock at once.
	db, err := c.OpenDB(context.Background(), "slurmbridge")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var holder sql.NullInt64
	if err := db.Get(&holder, "SELECT IS_USED_LOCK(?)", daemon.LeaseName); err != nil || !holder.Valid {
		t.Fatalf("lease holder: %v %v", holder, err)
	}
	if _, err := db.Exec("KILL CONNECTION " + strconv.FormatInt(holder.Int64, 10)); err != nil {
		t.Fatalf("KILL CONNECTION %d: %v", holder.Int64, err)
	}
	cutMoves := logCount(t, first, "moved job")
	cutAudit := auditMovesBy(t, c, firstCmd.Process.Pid)
	t.Logf("cut lease connection %d after %d of the slow quotad's moves", holder.Int64, cutMoves)
	if cutMoves >= lends {
		t.Fatalf("the slow quotad had finished its apply (%d moves) before the cut: the test proves nothing", cutMoves)
	}

	// The standby takes over and lends the rest; all of bob's jobs run, none ended.
	waitFor(t, "the standby to take the lease", 15*time.Second, func() bool {
		return logCount(t, standby, "this quotad is the active one") > 0
	})
	waitQueue(t, c, all, "all of bob's and carol's jobs running, 6 borrowed", 30*time.Second,
		exactly(len(all), all, running), exactly(lends, all, inABorrowQOS))
	// Past the point where the slow quotad's next action would have come.
	time.Sleep(2 * stepDelay)

	if n := logCount(t, first, "moved job"); n != cutMoves {
		t.Errorf("the slow quotad moved %d jobs after its lease connection was cut", n-cutMoves)
	}
	if n := auditMovesBy(t, c, firstCmd.Process.Pid); n != cutAudit {
		t.Errorf("the audit shows %d moves by the slow quotad after the cut", n-cutAudit)
	}
	if n := logCount(t, first, "lease lost mid-apply"); n != 1 {
		data, _ := os.ReadFile(first)
		t.Errorf("the slow quotad logged the loss %d times, want once:\n%s", n, data)
	}
	if v := metric(t, firstAPI, "quotad_applies_fenced_total"); v != "1" {
		t.Errorf("quotad_applies_fenced_total = %q, want 1", v)
	}
	if n := logCount(t, standby, "moved job"); n != lends-cutMoves {
		t.Errorf("the standby moved %d jobs, want the %d the slow quotad left", n, lends-cutMoves)
	}
	if logCount(t, standby, "staying passive") == 0 {
		t.Error("the standby never said it stayed passive while the slow quotad held the lease")
	}
	for id, r := range queue(t, c, all) {
		if !running(r) {
			t.Errorf("job %s is %s; no job may end", id, r.state)
		}
	}
	assertNoneKilled(t, c, 0)
}

// metric reads one series' value from a quotad's /metrics.
func metric(t *testing.T, base, name string) string {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindSubmatch(body)
	if m == nil {
		return ""
	}
	return string(m[1])
}
