//go:build integration

package quotad_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/bridge/testbed"
	"github.com/slurmbridge/slurmbridge/quotad/policy"
)

// bobFillsGuarantee submits bob's 4 one-a100 jobs and waits until they run in his guarantee
// (proj-b's 4 a100).
func bobFillsGuarantee(t *testing.T, c *testbed.Cluster) []string {
	t.Helper()
	bob := submitN(t, c, "bob", 4)
	waitQueue(t, c, bob, "bob's 4 in-quota jobs running", 20*time.Second, exactly(4, bob, runningIn("guar-proj-b")))
	return bob
}

// TestArrayLendsOnlyTasksThatFit: bob uses his 4 guaranteed a100, and submits an array of 10
// one-a100 tasks while 4 a100 of its partition are idle. quotad lends exactly 4 tasks (the
// first ones, split off the array's record by scontrol update jobid=A_T), they run in the
// borrow QOS, and the other 6 stay pending in bob's guarantee, cycle after cycle.
func TestArrayLendsOnlyTasksThatFit(t *testing.T) {
	c := testbed.Require(t)
	ensureQuotad(t, c)
	bobFillsGuarantee(t, c)
	arr := submitN(t, c, "bob", 1, "--array=0-9")[0]
	rel, err := c.Release(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !rel.StartsSplitArrayTasks() {
		wholeArraysOnly(t, c, arr)
		return
	}

	tasks := func() map[string]slurm.SacctRecord {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		recs, err := c.Slurm().SacctJobs(ctx, slurm.SacctFilter{JobIDs: []string{arr}}, "JobID", "QOS", "State")
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]slurm.SacctRecord{}
		for _, r := range recs {
			out[r["JobID"]] = r
		}
		return out
	}
	borrowedRunning := func(recs map[string]slurm.SacctRecord) []string {
		var ids []string
		for id, r := range recs {
			if r["QOS"] == "borrow-proj-b" && r["State"] == "RUNNING" {
				ids = append(ids, id)
			}
		}
		slices.Sort(ids)
		return ids
	}
	waitFor(t, "4 array tasks running borrowed", 30*time.Second, func() bool { return len(borrowedRunning(tasks())) == 4 })
	time.Sleep(6 * time.Second) // three more quotad cycles: nothing more may move

	recs := tasks()
	want := []string{arr + "_0", arr + "_1", arr + "_2", arr + "_3"}
	if got := borrowedRunning(recs); !slices.Equal(got, want) {
		t.Errorf("tasks running borrowed: %v, want %v (sacct: %v)", got, want, recs)
	}
	// The 6 others wait in bob's guarantee, still in the array's record.
	rest := recs[arr+"_[4-9]"]
	if rest == nil || rest["QOS"] != "guar-proj-b" || rest["State"] != "PENDING" {
		t.Errorf("tasks 4-9: %v, want one record PENDING in guar-proj-b (sacct: %v)", rest, recs)
	}
	for id, r := range recs {
		if r["QOS"] == "borrow-proj-b" && !slices.Contains(want, id) {
			t.Errorf("%s was moved to borrow: %v", id, r)
		}
	}
	// squeue's per-task view (the fast read) agrees.
	view := arrayStates(t, c, arr)
	if wantView := map[string]int{"borrow-proj-b/RUNNING": 4, "guar-proj-b/PENDING": 6}; !maps.Equal(view, wantView) {
		t.Errorf("squeue: %v, want %v", view, wantView)
	}
	// The active quotad (the testbed's, or the test's when none runs) lent each task by name.
	var data []byte
	for _, log := range append(quotadLogs, filepath.Join(c.Dir, "log", "quotad.log")) {
		b, _ := os.ReadFile(log)
		data = append(data, b...)
	}
	lent := 0
	for line := range strings.SplitSeq(string(data), "\n") {
		if strings.Contains(line, `"job":"`+arr+`_`) && strings.Contains(line, `"kind":"lend"`) && strings.Contains(line, "moved job") {
			lent++
		}
	}
	if lent != 4 {
		t.Errorf("quotad logged %d lends of the array's tasks, want 4:\n%s", lent, data)
	}
	assertNoneKilled(t, c, 0)
}

// wholeArraysOnly is the test on 22.05, where a task lent alone would never start while the
// rest of its array waits: the 10-task array is not lent at all, and a 4-task array submitted
// after it is lent whole, all 4 tasks running borrowed.
func wholeArraysOnly(t *testing.T, c *testbed.Cluster, arr10 string) {
	time.Sleep(6 * time.Second) // three quotad cycles with 4 idle a100 and 10 tasks
	wantCode(t, c, arr10, policy.CodeArrayNotWhole)
	arr4 := submitN(t, c, "bob", 1, "--array=0-3")[0]
	waitFor(t, "the 4-task array running borrowed", 30*time.Second, func() bool { return arrayStates(t, c, arr4)["borrow-proj-b/RUNNING"] == 4 })
	time.Sleep(6 * time.Second) // three more quotad cycles
	if got := arrayStates(t, c, arr10); !maps.Equal(got, map[string]int{"guar-proj-b/PENDING": 10}) {
		t.Errorf("10-task array: %v, want all 10 pending in guar-proj-b", got)
	}
	assertNoneKilled(t, c, 0)
}

// TestArrayThrottleLimitsLends: bob uses his 4 guaranteed a100 and 4 more a100 are idle. An
// array that may run 2 tasks at once (--array=...%2) gets 2 tasks lent, never a third that would
// wait in the borrow QOS on idle GPUs promised to it. On 22.05, where arrays are lent whole, a
// 3-task array over a throttle of 2 is not lent at all.
func TestArrayThrottleLimitsLends(t *testing.T) {
	c := testbed.Require(t)
	ensureQuotad(t, c)
	bobFillsGuarantee(t, c)
	rel, err := c.Release(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	tasks := "--array=0-5%2"
	if !rel.StartsSplitArrayTasks() {
		tasks = "--array=0-2%2"
	}
	arr := submitN(t, c, "bob", 1, tasks)[0]
	want := map[string]int{"guar-proj-b/PENDING": 3}
	if rel.StartsSplitArrayTasks() {
		want = map[string]int{"borrow-proj-b/RUNNING": 2, "guar-proj-b/PENDING": 4}
		waitFor(t, "2 tasks running borrowed", 30*time.Second, func() bool { return arrayStates(t, c, arr)["borrow-proj-b/RUNNING"] == 2 })
	}
	time.Sleep(6 * time.Second) // three more quotad cycles with 2 a100 still idle
	if got := arrayStates(t, c, arr); !maps.Equal(got, want) {
		t.Errorf("array %s: %v, want %v", arr, got, want)
	}
	wantCode(t, c, arr, policy.CodeArrayThrottled)
	assertNoneKilled(t, c, 0)
}

// A throttled array with a pending task split off in the guaranteed QOS (here by an update of
// that task alone, as a task returned from the borrow QOS is): squeue folds the task back into
// the array's line and drops its "%2", so quotad reads the throttle from scontrol and still
// lends only 2 tasks, not the 4 that fit on the idle a100. On 22.05 a task lent does not start
// while another of its array waits in the guaranteed QOS, so an array whose pending tasks are in
// several records is not lent at all.
func TestArrayThrottleKeptWithASplitTask(t *testing.T) {
	c := testbed.Require(t)
	ensureQuotad(t, c)
	logStart := ctldLogSize(t, c)
	bobFillsGuarantee(t, c)
	rel, err := c.Release(ctxFor(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	tasks, last := "--array=0-5%2", 5
	if !rel.StartsSplitArrayTasks() {
		tasks, last = "--array=0-2%2", 2
	}
	// Held, so that quotad lends nothing before the split.
	arr := submitN(t, c, "bob", 1, tasks, "--hold")[0]
	task := fmt.Sprintf("%s_%d", arr, last)
	if out, err := c.Run(ctxFor(t, 10*time.Second), "scontrol", "update", "jobid="+task, "comment=split-off"); err != nil {
		t.Fatalf("splitting task %s off: %v\n%s", task, err, out)
	}
	records, err := c.Slurm().Queue(ctxFor(t, 10*time.Second), slurm.QueueRead{Fields: slurm.ThrottleFields, QOS: []string{"guar-proj-b"}})
	if err != nil {
		t.Fatal(err)
	}
	throttles := map[uint32]int{}
	for _, r := range records {
		if r.ArrayThrottle > 0 {
			throttles[r.ArrayJobID] = r.ArrayThrottle
		}
	}
	t.Logf("squeue's throttle read with task %s split off: %v (array %s has no entry when the fold dropped its %%2)", task, throttles, arr)
	id, _ := strconv.ParseUint(arr, 10, 32)
	if n, err := c.Slurm().ArrayTaskThrottle(ctxFor(t, 10*time.Second), uint32(id)); err != nil || n != 2 {
		t.Fatalf("scontrol's throttle of array %s: %d, %v; want 2", arr, n, err)
	}
	if out, err := c.RunAs(ctxFor(t, 10*time.Second), "bob", "scontrol", "release", arr); err != nil {
		t.Fatalf("scontrol release %s: %v\n%s", arr, err, out)
	}
	want := map[string]int{"borrow-proj-b/RUNNING": 2, "guar-proj-b/PENDING": 4}
	if !rel.StartsSplitArrayTasks() {
		want = map[string]int{"guar-proj-b/PENDING": 3}
		defer func() {
			wantCode(t, c, arr, policy.CodeArraySplit)
		}()
	} else {
		for start := time.Now(); arrayStates(t, c, arr)["borrow-proj-b/RUNNING"] != 2; time.Sleep(250 * time.Millisecond) {
			if time.Since(start) > 30*time.Second {
				t.Fatalf("array %s: %v after 30 s, want 2 tasks running borrowed; quotactl explain:\n%s", arr, arrayStates(t, c, arr), quotactl(t, c, "explain", "proj-b"))
			}
		}
	}
	time.Sleep(6 * time.Second) // three more quotad cycles with 2 a100 still idle
	if got := arrayStates(t, c, arr); !maps.Equal(got, want) {
		t.Errorf("array %s: %v, want %v; quotactl explain:\n%s", arr, got, want, quotactl(t, c, "explain", "proj-b"))
	}
	assertNoneKilled(t, c, logStart)
}

// arrayStates counts the tasks of array arr by QOS and state ("borrow-proj-b/RUNNING"), from
// the fast queue read.
func arrayStates(t *testing.T, c *testbed.Cluster, arr string) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	jobs, err := c.Slurm().Queue(ctx, slurm.QueueRead{Fields: slurm.SchedulingFields})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, j := range jobs {
		if fmt.Sprint(j.ArrayJobID) == arr {
			out[j.QOS+"/"+j.StateName()] += j.TaskCount()
		}
	}
	return out
}
