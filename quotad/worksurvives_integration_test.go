//go:build integration

package quotad_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/testbed"
)

// trainScript is a training job's shape, in shell: it resumes from its checkpoint, logs each
// step to its output and checkpoints it (write, then rename), and says which run it is. It
// trains until a file "done" appears in its submission directory (its target reached).
const trainScript = `#!/bin/bash
ckpt="$SLURM_SUBMIT_DIR/ckpt-$SLURM_JOB_ID"
step=0
[ -f "$ckpt" ] && step=$(cat "$ckpt")
echo "run ${SLURM_RESTART_COUNT:-0} resumes at step $step"
while [ "$step" -lt 100000 ] && [ ! -e "$SLURM_SUBMIT_DIR/done" ]; do
	step=$((step + 1))
	echo "step $step"
	echo "$step" >"$ckpt.tmp" && mv "$ckpt.tmp" "$ckpt"
	sleep 1
done
`

// A borrower that logs and checkpoints, as a training job does, is requeued by an owner's claim
// and runs again: its output file keeps every line of its first run (the plugin sets a GPU
// batch job's --open-mode to append; Slurm truncates a rerun's output otherwise), and the rerun
// resumes from the checkpoint with SLURM_RESTART_COUNT=1. Nothing is killed.
func TestReclaimedBorrowerKeepsItsLogAndResumes(t *testing.T) {
	reclaimKeepsTheLog(t, func(c *testbed.Cluster, work, out, script string) string {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		id, err := c.SubmitIn(ctx, "bob", work, "-p", "a100", "--gres=gpu:a100:1", "--requeue", "--job-name=train", "--output="+out, script)
		if err != nil {
			t.Fatal(err)
		}
		return id
	})
}

// A job whose record has no open mode when quotad lends it keeps its log all the same: here a
// CPU job that bob gives an a100 by scontrol update (the plugin sets append at submission for
// GPU jobs only, and slurmctld applies no open mode an update carries). A job queued before the
// plugin was installed is in the same state, and takes the same path: the plugin sets the open
// mode in the job's record when quotad's update moves it into a borrow QOS.
func TestBorrowerGivenGPUsByUpdateKeepsItsLog(t *testing.T) {
	reclaimKeepsTheLog(t, func(c *testbed.Cluster, work, out, script string) string {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		offset := c.CtldLogSize(t)
		id, err := c.SubmitIn(ctx, "bob", work, "-p", "cpu", "--hold", "--requeue", "--job-name=train", "--output="+out, script)
		if err != nil {
			t.Fatal(err)
		}
		if out, err := c.RunAs(ctx, "bob", "scontrol", "update", "jobid="+id, "partition=a100", "gres=gpu:a100:1"); err != nil {
			t.Fatalf("bob gives his CPU job %s an a100: %v\n%s", id, err, out)
		}
		if out, err := c.Run(ctx, "scontrol", "release", id); err != nil {
			t.Fatalf("scontrol release %s: %v\n%s", id, err, out)
		}
		waitFor(t, "the plugin setting job "+id+"'s open mode in its record as quotad lends it", 30*time.Second, func() bool {
			return strings.Contains(c.CtldLogSince(t, offset), "job_submit/pools: job "+id+": output files are appended to from now on")
		})
		return id
	})
}

// reclaimKeepsTheLog runs the training script as bob's job over his quota (submitted by
// submit, which returns its id), lets quotad lend it an a100 and alice claim it back, and checks
// that the rerun resumed from its checkpoint and kept every line of the first run's output.
func reclaimKeepsTheLog(t *testing.T, submit func(c *testbed.Cluster, work, out, script string) string) {
	c := testbed.Require(t)
	ensureQuotad(t, c)
	offset := c.CtldLogSize(t)
	work := testbed.SharedDir(t, "quotad-work-", 0o777)
	script := filepath.Join(work, "train.sh")
	if err := os.WriteFile(script, []byte(trainScript), 0o755); err != nil {
		t.Fatal(err)
	}
	inQuota := submitN(t, c, "bob", 4)
	waitQueue(t, c, inQuota, "bob's 4 in-quota jobs running", 30*time.Second, exactly(4, inQuota, running))

	out := filepath.Join(work, "train-%j.out")
	id := submit(c, work, out, script)
	t.Cleanup(func() { c.Cancel(id) })
	out = strings.ReplaceAll(out, "%j", id)
	lent := []string{id}
	waitQueue(t, c, lent, "bob's training job lent an a100", 30*time.Second, exactly(1, lent, runningIn("borrow-proj-b")))
	borrowedAt := time.Now()
	// What bob reads: he may be reclaimed, and how his work survives it (the words are the point).
	if e := explained(t, c, id); e.Code != "reclaimable" || !strings.Contains(e.Explanation, "SLURM_RESTART_COUNT") {
		t.Errorf("explain %s: %s %q, want it reclaimable and told how to keep its work", id, e.Code, e.Explanation)
	}

	// alice claims her 4 a100 once the borrower's PreemptExemptTime has passed.
	alice := submitN(t, c, "alice", 4)
	waitQueue(t, c, alice, "alice's 4 jobs running", time.Until(borrowedAt.Add(exemptTime))+60*time.Second, exactly(4, alice, running))
	waitFor(t, "the training job PREEMPTED in sacct", 20*time.Second, func() bool { return len(preemptedIn(t, c, lent)) == 1 })
	firstRun := readLines(t, out)
	lastStep := lastStepIn(t, firstRun)
	if lastStep < 3 {
		t.Fatalf("the first run logged %d steps before its reclaim, want a few: %q", lastStep, firstRun)
	}

	// alice's jobs end; the training job runs again and goes on from its checkpoint.
	c.Cancel(alice...)
	waitFor(t, "the training job's rerun logging two steps", 90*time.Second, func() bool {
		lines := readLines(t, out)
		return slices.Contains(lines, "run 1 resumes at step "+strconv.Itoa(lastStep)) && lastStepIn(t, lines) >= lastStep+2
	})
	lines := readLines(t, out)
	if len(lines) < len(firstRun) || !slices.Equal(lines[:len(firstRun)], firstRun) {
		t.Fatalf("the rerun lost the first run's output: %d lines before the reclaim, now %q", len(firstRun), lines[:min(len(lines), 5)])
	}
	t.Logf("first run: %d lines, steps 1 to %d; the rerun resumed at step %d and appended; 0 lines lost", len(firstRun), lastStep, lastStep)
	c.AssertNoneKilled(t, offset)
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimRight(string(data), "\n"), "\n")
}

var stepLine = regexp.MustCompile(`^step (\d+)$`)

// lastStepIn is the last step the lines log, 0 for none.
func lastStepIn(t *testing.T, lines []string) int {
	t.Helper()
	last := 0
	for _, l := range lines {
		if m := stepLine.FindStringSubmatch(l); m != nil {
			last, _ = strconv.Atoi(m[1])
		}
	}
	return last
}

// Jobs already queued when slurmbridge is installed: bob's held GPU job and CPU job were
// submitted while proj-b still had Slurm's default QOS (normal). quotad's first sync takes
// normal off the account's list, which left them in a QOS the account no longer allows (on
// 26.05 they waited with reason InvalidQOS for ever). quotad moves both into guar-proj-b, where
// the GPU job counts in bob's guarantee, and once released both run.
func TestJobsQueuedBeforeTheFirstSyncJoinTheirGuarantee(t *testing.T) {
	c := testbed.Require(t)
	c.PauseDaemon(t, "quotad")
	offset := c.CtldLogSize(t)
	// proj-b as Slurm has it before slurmbridge: normal is its list and its default.
	sacctmgrRun(t, c, "modify", "account", "where", "name=proj-b", "set", "qos=normal", "defaultqos=normal")
	gpu := submitJobs(t, c, "bob", 1, "-A", "proj-b", "--hold", "-p", "a100", "--gres=gpu:a100:1")
	cpu := submitJobs(t, c, "bob", 1, "-A", "proj-b", "--hold", "-p", "cpu")
	held := append(slices.Clone(gpu), cpu...)
	waitQueue(t, c, held, "bob's held jobs in QOS normal", 10*time.Second, exactly(2, held, both(pending, inQOS("normal"))))

	importTestbedQuotas(t, c)
	log, _ := startQuotad(t, c, "2s")
	logTailIfFailed(t, log, 40)
	waitSynced(t, c, log)
	waitQueue(t, c, held, "bob's jobs moved into guar-proj-b", 30*time.Second, exactly(2, held, both(pending, inQOS("guar-proj-b"))))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, id := range held {
		if out, err := c.Run(ctx, "scontrol", "release", id); err != nil {
			t.Fatalf("scontrol release %s: %v\n%s", id, err, out)
		}
	}
	waitQueue(t, c, gpu, "bob's GPU job running in guar-proj-b", 30*time.Second, exactly(1, gpu, runningIn("guar-proj-b")))
	if e := explained(t, c, gpu[0]); e.Code != "in-quota" {
		t.Errorf("explain %s: %+v, want it in quota", gpu[0], e)
	}
	c.AssertNoneKilled(t, offset)
}
