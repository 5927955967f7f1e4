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
)

// A site's week, in one scenario: bob trains a 4-task array of one-a100 tasks that log and
// checkpoint, lent on alice's idle a100, and a CPU job that needs the array's results
// (afterok). alice then claims her guarantee interactively, 2 GPUs with srun, then 1 with
// salloc: each claim starts in guar-proj-a once Slurm has requeued just the tasks it needs
// (3 of 4, never the fourth). bob requeues the fourth task himself. Every task runs again and
// resumes from its checkpoint with its first run's output kept (SLURM_RESTART_COUNT=1,
// appended), the dependent job waits through all of it and runs once the array succeeds, and
// nothing is killed.
func TestInteractiveClaimsReclaimArrayTasksAndTheirDependentWaits(t *testing.T) {
	c := testbed.Require(t)
	ensureQuotad(t, c)
	offset := c.CtldLogSize(t)
	work := testbed.SharedDir(t, "quotad-routes-", 0o777)
	script := filepath.Join(work, "train.sh")
	if err := os.WriteFile(script, []byte(trainScript), 0o755); err != nil {
		t.Fatal(err)
	}
	bob := bobFillsGuarantee(t, c)
	var all []string
	drainAtEnd(t, c, &all)
	all = append(all, bob...)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	arr, err := c.SubmitIn(ctx, "bob", work, "-p", "a100", "--gres=gpu:a100:1", "--requeue", "--array=0-3",
		"--job-name=train", "--output="+filepath.Join(work, "train-%A_%a.out"), script)
	if err != nil {
		t.Fatal(err)
	}
	all = append(all, arr)
	tasks := []string{arr + "_0", arr + "_1", arr + "_2", arr + "_3"}
	waitFor(t, "bob's 4 array tasks running borrowed", 40*time.Second, func() bool {
		return maps.Equal(arrayStates(t, c, arr), map[string]int{"borrow-proj-b/RUNNING": 4})
	})
	lentAt := time.Now()
	depScript := filepath.Join(work, "report.sh")
	if err := os.WriteFile(depScript, []byte("#!/bin/bash\necho report of $SLURM_JOB_ID\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dep, err := c.SubmitIn(ctx, "bob", work, "-p", "cpu", "--dependency=afterok:"+arr, "--job-name=report",
		"--output="+filepath.Join(work, "report.out"), depScript)
	if err != nil {
		t.Fatal(err)
	}
	all = append(all, dep)

	// alice's claims, once the tasks are past PreemptExemptTime: srun for 2 GPUs, then salloc
	// for 1, each waiting for its allocation as a user's shell would.
	time.Sleep(time.Until(lentAt.Add(exemptTime)))
	claim := func(name string, gpus int, cmd ...string) string {
		t.Helper()
		args := append([]string{"-A", "proj-a", "-p", "a100", "--gres=gpu:a100:" + strconv.Itoa(gpus), "-t", "10", "-J", name}, cmd[1:]...)
		b := startAs(t, c, "alice", cmd[0], args...)
		var id string
		waitFor(t, "alice's "+cmd[0]+" claim queued", 20*time.Second, func() bool { id = jobNamed(t, c, name); return id != "" })
		all = append(all, id)
		waitQueue(t, c, []string{id}, "alice's "+cmd[0]+" claim running in guar-proj-a", 60*time.Second, exactly(1, []string{id}, runningIn("guar-proj-a")))
		if b.ended() {
			t.Fatalf("alice's %s ended: %s", cmd[0], b.out)
		}
		return id
	}
	stamp := time.Now().UnixNano()
	srunClaim := claim(fmt.Sprintf("claim-srun-%d", stamp), 2, "srun", "sleep", "600")
	var reclaimed []string
	waitFor(t, "the srun claim's reclaim in sacct", 20*time.Second, func() bool { reclaimed = preemptedIn(t, c, tasks); return len(reclaimed) >= 2 })
	sallocClaim := claim(fmt.Sprintf("claim-salloc-%d", stamp), 1, "salloc", "sleep", "600")
	waitFor(t, "the salloc claim's reclaim in sacct", 20*time.Second, func() bool { reclaimed = preemptedIn(t, c, tasks); return len(reclaimed) >= 3 })
	time.Sleep(testbed.Patience(3 * time.Second)) // a fourth victim would be recorded by now
	reclaimed = preemptedIn(t, c, tasks)
	if len(reclaimed) != 3 {
		t.Fatalf("alice's claims of 3 GPUs requeued tasks %v, want 3 of bob's 4", reclaimed)
	}
	if p := preemptedIn(t, c, bob); len(p) > 0 {
		t.Errorf("the claims requeued bob's jobs %v, which run in his guarantee", p)
	}
	t.Logf("srun %s and salloc %s claimed 3 GPUs, %s after the lend; Slurm requeued tasks %v", srunClaim, sallocClaim, time.Since(lentAt).Round(time.Second), reclaimed)
	if r := row(t, c, dep); r.state != "PENDING" || r.reason != "Dependency" {
		t.Errorf("the dependent job %s is %s (%s) after its array's reclaim, want PENDING (Dependency)", dep, r.state, r.reason)
	}

	// bob requeues the task the claims left running (its owner may): it runs again too.
	var kept string
	for _, id := range tasks {
		if !slices.Contains(reclaimed, id) {
			kept = id
		}
	}
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := c.RunAs(ctx, "bob", "scontrol", "requeue", kept); err != nil {
		t.Fatalf("bob's scontrol requeue %s: %v\n%s", kept, err, out)
	}

	// alice's claims end: every task runs again, resumes from its checkpoint, keeps its log.
	c.Cancel(srunClaim, sallocClaim)
	rel, err := c.Release(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !rel.StartsSplitArrayTasks() {
		// 22.05 starts no task lent alone while others of its array wait, and the requeued tasks
		// are records of their own: quotad does not lend them (array-split), and they wait in
		// bob's guarantee, pending, until his own jobs end.
		time.Sleep(testbed.Patience(6 * time.Second))
		for _, task := range tasks {
			t.Logf("quotactl explain %s: %s", task, strings.TrimSpace(quotactl(t, c, "explain", task)))
			if r := row(t, c, task); r.state != "PENDING" || r.qos != "guar-proj-b" {
				t.Errorf("requeued task %s is %s in %s on %s, want PENDING in guar-proj-b", task, r.state, r.qos, rel)
			}
		}
		c.Cancel(bob...)
	}
	outOf := func(task string) string { return filepath.Join(work, "train-"+task+".out") }
	rerun := func() bool {
		for _, task := range tasks {
			if resumedAt(readLinesIfAny(outOf(task))) < 0 {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(testbed.Patience(120 * time.Second))
	for !rerun() {
		if time.Now().After(deadline) {
			var logs []string
			for _, task := range tasks {
				lines := readLinesIfAny(outOf(task))
				logs = append(logs, fmt.Sprintf("%s: %d lines, head %q, tail %q", task, len(lines), lines[:min(2, len(lines))], lines[max(0, len(lines)-2):]))
			}
			t.Fatalf("not every task ran again and resumed within %s: squeue %v, sacct %s\n%s", testbed.Patience(120*time.Second),
				arrayStates(t, c, arr), sacctHistory(t, c, arr), strings.Join(logs, "\n"))
		}
		time.Sleep(time.Second)
	}
	for _, task := range tasks {
		lines := readLines(t, outOf(task))
		step := resumedAt(lines)
		t.Logf("%s: first run logged to step %d, the rerun resumed there and appended (%d lines)", task, step, len(lines))
	}
	if r := row(t, c, dep); r.state != "PENDING" || r.reason != "Dependency" {
		t.Errorf("the dependent job %s is %s (%s) while its array reruns, want PENDING (Dependency)", dep, r.state, r.reason)
	}

	// The array reaches its target: every task succeeds, and then the dependent job runs.
	if err := os.WriteFile(filepath.Join(work, "done"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	depCtx, depCancel := context.WithTimeout(context.Background(), testbed.Patience(90*time.Second))
	defer depCancel()
	if state, err := c.WaitState(depCtx, dep, "COMPLETED"); err != nil {
		t.Fatalf("the dependent job after its array succeeded: %s: %v", state, err)
	}
	if data, err := os.ReadFile(filepath.Join(work, "report.out")); err != nil || !strings.Contains(string(data), "report of "+dep) {
		t.Errorf("the dependent job's output: %q, %v", data, err)
	}
	c.AssertNoneKilled(t, offset)
}

func readLinesIfAny(path string) []string {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimRight(string(data), "\n"), "\n")
}

// resumeLine reads the line the checkpointing job prints as a run starts: its run and the step
// it resumes at.
func resumeLine(l string) (run, step int, ok bool) {
	_, err := fmt.Sscanf(l, "run %d resumes at step %d", &run, &step)
	return run, step, err == nil
}

// resumedAt is the step a rerun resumed at when lines are a whole first run's log followed by
// a rerun that resumed from the checkpoint and logged two steps, else -1. The checkpoint may be
// one step behind the log: a SIGTERM can land between the two.
func resumedAt(lines []string) int {
	if len(lines) == 0 {
		return -1
	}
	if run, step, ok := resumeLine(lines[0]); !ok || run != 0 || step != 0 {
		return -1
	}
	for i, l := range lines {
		rest, ok := strings.CutPrefix(l, "run 1 resumes at step ")
		if !ok {
			continue
		}
		step, err := strconv.Atoi(rest)
		if err != nil || step < 1 {
			return -1
		}
		logged := 0
		for _, before := range lines[1:i] {
			if m := stepLine.FindStringSubmatch(before); m != nil {
				logged, _ = strconv.Atoi(m[1])
			}
		}
		if logged != step && logged != step+1 {
			return -1
		}
		after := 0
		for _, l := range lines[i+1:] {
			if stepLine.MatchString(l) {
				after++
			}
		}
		if after < 2 {
			return -1
		}
		return step
	}
	return -1
}

// sacctHistory is every record sacct keeps of the job, its requeued runs included, one a line.
func sacctHistory(t *testing.T, c *testbed.Cluster, id string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	recs, err := c.Slurm().SacctJobs(ctx, slurm.SacctFilter{JobIDs: []string{id}, Duplicates: true}, "JobID", "QOS", "State", "Reason")
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, r := range recs {
		out = append(out, r["JobID"]+" "+r["QOS"]+" "+r["State"]+" "+r["Reason"])
	}
	return strings.Join(out, "; ")
}
