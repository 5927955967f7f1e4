//go:build integration

// What the scenario tests share: bob's and alice's jobs as submitted, the queue's rows of them,
// named predicates over a row, and waits for a count of them that say what they last saw.
package quotad_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/pools"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/bridge/testbed"
	"github.com/slurmbridge/slurmbridge/quotad/policy"
	"github.com/slurmbridge/slurmbridge/quotad/view"
)

// explained is `quotactl explain --json JOBID` as root (args before explain, such as --quotad,
// and after it, such as --via quotad, as given): the API's view of the job, its code included.
func explained(t *testing.T, c *testbed.Cluster, id string, args ...string) view.Job {
	t.Helper()
	out := quotactl(t, c, append(append([]string{}, args...), "explain", "--json", id)...)
	return parseExplained(t, id, out)
}

func parseExplained(t *testing.T, id, out string) view.Job {
	t.Helper()
	var j view.Job
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		t.Fatalf("quotactl explain --json %s: %v\n%s", id, err, out)
	}
	if fmt.Sprint(j.JobID) != id {
		t.Fatalf("quotactl explain --json %s explained job %d:\n%s", id, j.JobID, out)
	}
	return j
}

// wantCode fails t unless quotactl explain gives job id one of codes; it returns the job's view.
func wantCode(t *testing.T, c *testbed.Cluster, id string, codes ...policy.Code) view.Job {
	t.Helper()
	j := explained(t, c, id)
	if !slices.Contains(codes, policy.Code(j.Code)) {
		t.Errorf("explain %s: code %s, want %v: %s", id, j.Code, codes, j.Explanation)
	}
	return j
}

// assertRefused fails t unless slurmctld logged since offset a refusal by the job_submit
// plugin of kind code (its line ends with code=KIND), and the user was told by slurmbridge.
func assertRefused(t *testing.T, c *testbed.Cluster, offset int64, code pools.Refusal, told string) {
	t.Helper()
	logged := false
	for _, line := range strings.Split(c.CtldLogSince(t, offset), "\n") {
		if strings.Contains(line, " refused: ") && strings.HasSuffix(strings.TrimSpace(line), " code="+string(code)) {
			logged = true
		}
	}
	if !logged {
		t.Errorf("slurmctld.log lacks a refusal with code=%s", code)
	}
	if !strings.Contains(told, "slurmbridge: ") {
		t.Errorf("the user was not told by slurmbridge: %q", told)
	}
}

// runsBorrowed are the codes of a started borrower: whether a claim may take it depends on its
// project's holdings at that cycle, which the callers do not pin down.
var runsBorrowed = []policy.Code{policy.CodeNotReclaimable, policy.CodeReclaimable}

// refusedBorrow is the plugin's refusal of a new job in a borrow QOS that Slurm could not requeue.
const refusedBorrow = pools.RefusedBorrowNotRequeueable

type jobRow struct{ id, user, qos, state, reason string }

func (r jobRow) String() string {
	return fmt.Sprintf("%s %s %s in %s (%s)", r.id, r.user, r.state, r.qos, r.reason)
}

// queue is the queue's row of each of ids, in every state; a job slurmctld no longer lists
// has none.
func queue(t *testing.T, c *testbed.Cluster, ids []string) map[string]jobRow {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := c.Slurm().Queue(ctx, slurm.QueueRead{Fields: slurm.SummaryFields, JobIDs: ids, AllStates: true})
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]jobRow{}
	for _, r := range list {
		rows[r.PrintedID] = jobRow{r.PrintedID, r.User, r.QOS, r.StateName(), r.StateReason}
	}
	return rows
}

// timeLimits is each job's time limit as squeue prints it (37:00, UNLIMITED), in every state.
func timeLimits(t *testing.T, c *testbed.Cluster, ids []string) map[string]string {
	t.Helper()
	out, err := c.Runner().Run(ctxFor(t, 10*time.Second), "squeue", "--noheader", "--states=all", "--jobs="+strings.Join(ids, ","), "--format=%i %l")
	if err != nil {
		t.Fatal(err)
	}
	limits := map[string]string{}
	for line := range strings.Lines(string(out)) {
		if id, limit, ok := strings.Cut(strings.TrimSpace(line), " "); ok {
			limits[id] = limit
		}
	}
	if len(limits) != len(ids) {
		t.Fatalf("squeue lists the time limits of %d of %d jobs: %s", len(limits), len(ids), out)
	}
	return limits
}

// sameTimeLimits says whether each job's time limit is the one it had before. A job without
// --time in a partition without MaxTime shows UNLIMITED until it starts; when the backfill
// scheduler starts it, Slurm itself writes one year (365-00:00:00) into its limit
// (backfill.c, on every release), so that change is Slurm's and counts as the same limit.
func sameTimeLimits(before, now map[string]string) bool {
	if len(before) != len(now) {
		return false
	}
	for id, limit := range before {
		if now[id] != limit && (limit != "UNLIMITED" || now[id] != "365-00:00:00") {
			return false
		}
	}
	return true
}

// row is the queue's row of one job (the zero row when slurmctld no longer lists it).
func row(t *testing.T, c *testbed.Cluster, id string) jobRow {
	t.Helper()
	return queue(t, c, []string{id})[id]
}

// submitN submits n jobs of user, each one a100 in partition a100 (sleep 600), and cancels them
// when the test ends.
func submitN(t *testing.T, c *testbed.Cluster, user string, n int, extra ...string) []string {
	t.Helper()
	return submitJobs(t, c, user, n, append([]string{"-p", "a100", "--gres=gpu:a100:1"}, extra...)...)
}

// submitTyped submits n one-a100 jobs of user with no partition (the plugin routes them to
// a100-spot and a100), and cancels them when the test ends.
func submitTyped(t *testing.T, c *testbed.Cluster, user string, n int) []string {
	t.Helper()
	return submitJobs(t, c, user, n, "--gres=gpu:a100:1")
}

// submitJobs submits n jobs of user with args (sleep 600), and cancels them when the test ends.
func submitJobs(t *testing.T, c *testbed.Cluster, user string, n int, args ...string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var ids []string
	for range n {
		id, err := c.Submit(ctx, user, append(slices.Clone(args), "--wrap", "sleep 600")...)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	t.Cleanup(func() { c.Cancel(ids...) })
	return ids
}

// A rowIs says whether a job's row is in some state, QOS or the like.
type rowIs func(jobRow) bool

// Named predicates over one row.
var (
	running rowIs = func(r jobRow) bool { return r.state == "RUNNING" }
	pending rowIs = func(r jobRow) bool { return r.state == "PENDING" }
	// inABorrowQOS: lent, in any project's borrow QOS.
	inABorrowQOS rowIs = func(r jobRow) bool { return strings.HasPrefix(r.qos, "borrow-") }
)

func inQOS(qos string) rowIs         { return func(r jobRow) bool { return r.qos == qos } }
func withReason(reason string) rowIs { return func(r jobRow) bool { return r.reason == reason } }

// both holds where a and b hold.
func both(a, b rowIs) rowIs { return func(r jobRow) bool { return a(r) && b(r) } }

// runningIn: running in that QOS.
func runningIn(qos string) rowIs { return both(running, inQOS(qos)) }

// count is how many of ids have a row that is.
func count(rows map[string]jobRow, ids []string, is rowIs) int {
	n := 0
	for _, id := range ids {
		if is(rows[id]) {
			n++
		}
	}
	return n
}

// A queueHas is what a wait asks of the queue's rows.
type queueHas func(rows map[string]jobRow) bool

// exactly: exactly n of ids are.
func exactly(n int, ids []string, is rowIs) queueHas {
	return func(rows map[string]jobRow) bool { return count(rows, ids, is) == n }
}

// waitFor polls cond until it holds or the time is up (limit, scaled by testbed.Patience), and
// returns how long it took.
func waitFor(t *testing.T, what string, limit time.Duration, cond func() bool) time.Duration {
	t.Helper()
	limit = testbed.Patience(limit)
	start := time.Now()
	for !cond() {
		if time.Since(start) > limit {
			t.Fatalf("%s: not within %s", what, limit)
		}
		time.Sleep(250 * time.Millisecond)
	}
	return time.Since(start)
}

// waitQueue polls the queue's rows of ids until every one of wants holds or the time is up
// (limit, scaled by testbed.Patience), and returns how long it took. On timeout it fails the
// test with the rows it last saw.
func waitQueue(t *testing.T, c *testbed.Cluster, ids []string, what string, limit time.Duration, wants ...queueHas) time.Duration {
	t.Helper()
	limit = testbed.Patience(limit)
	start := time.Now()
	for {
		rows := queue(t, c, ids)
		if allHold(rows, wants) {
			return time.Since(start)
		}
		if time.Since(start) > limit {
			t.Fatalf("%s: not within %s; the queue last showed:\n%s", what, limit, listRows(rows, ids))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func allHold(rows map[string]jobRow, wants []queueHas) bool {
	for _, w := range wants {
		if !w(rows) {
			return false
		}
	}
	return true
}

// listRows is the rows of ids, one a line, in the order of ids; a job not listed says so.
func listRows(rows map[string]jobRow, ids []string) string {
	var b strings.Builder
	for _, id := range ids {
		if r, ok := rows[id]; ok {
			fmt.Fprintf(&b, "  %s\n", r)
		} else {
			fmt.Fprintf(&b, "  %s not listed\n", id)
		}
	}
	return b.String()
}

// waitLent waits until inQuota of ids run in guarQOS and lent run in borrowQOS: a project's
// jobs filling its guarantee, and quotad's lends beside them.
func waitLent(t *testing.T, c *testbed.Cluster, ids []string, guarQOS string, inQuota int, borrowQOS string, lent int, limit time.Duration) time.Duration {
	t.Helper()
	what := fmt.Sprintf("%d in quota (%s) and %d borrowed (%s) running", inQuota, guarQOS, lent, borrowQOS)
	return waitQueue(t, c, ids, what, limit, exactly(inQuota, ids, runningIn(guarQOS)), exactly(lent, ids, runningIn(borrowQOS)))
}

// logTailIfFailed logs the last n lines of the quotad log at path when the test has failed:
// what quotad did while a wait for its lends timed out.
func logTailIfFailed(t *testing.T, path string, n int) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		data, _ := os.ReadFile(path)
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		t.Logf("quotad log %s, its last %d lines:\n%s", path, n, strings.Join(lines[max(0, len(lines)-n):], "\n"))
	})
}

// splitBorrowers splits ids, as the queue shows them now, into the jobs not in borrowQOS and
// those in it.
func splitBorrowers(t *testing.T, c *testbed.Cluster, ids []string, borrowQOS string) (inQuota, borrowers []string) {
	t.Helper()
	q := queue(t, c, ids)
	for _, id := range ids {
		if q[id].qos == borrowQOS {
			borrowers = append(borrowers, id)
		} else {
			inQuota = append(inQuota, id)
		}
	}
	return inQuota, borrowers
}
