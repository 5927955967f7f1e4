//go:build integration

package quotad_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/testbed"
)

// The three shapes of a borrower's SIGTERM handling. Each logs "run R resumes at step S" at
// its start, one line per step, and "SIGTERM at step S" when the signal reaches it, after it
// has written its checkpoint.
//   - keeps: the work runs in the batch script; on SIGTERM it checkpoints and goes on until
//     Slurm ends it (what docs/operations.md asks of borrowers);
//   - exits: the same, but it exits 0 once it has checkpointed, as many training scripts do;
//   - step: the work runs in an srun step, which checkpoints on SIGTERM and goes on.
const graceLoop = `ckpt="$SLURM_SUBMIT_DIR/ckpt-$SLURM_JOB_ID"
step=0
[ -f "$ckpt" ] && step=$(cat "$ckpt")
echo "run ${SLURM_RESTART_COUNT:-0} resumes at step $step"
trap 'echo "$step" >"$ckpt"; echo "SIGTERM at step $step"; ON_TERM' TERM
while [ "$step" -lt 100000 ]; do
	step=$((step + 1))
	echo "step $step"
	sleep 1 &
	wait $!
done
`

var graceShapes = map[string]string{
	"keeps": "#!/bin/bash\n" + strings.ReplaceAll(graceLoop, "ON_TERM", ":"),
	"exits": "#!/bin/bash\n" + strings.ReplaceAll(graceLoop, "ON_TERM", "exit 0"),
	"step":  "#!/bin/bash\nsrun --ntasks=1 bash \"$SLURM_SUBMIT_DIR/loop.sh\"\n",
}

// graceOutcome is what a reclaim did to one borrower.
type graceOutcome struct {
	termed  bool // its handler ran: a checkpoint on SIGTERM
	rerun   bool // it ran again, from its checkpoint, with SLURM_RESTART_COUNT=1
	state   string
	outLost bool // the rerun's output lost the first run's lines
}

// TestReclaimSignalsTheBorrowerFirst measures what a reclaim gives a borrower to save its work,
// and what it costs the claim, with the shipped grace time (0: Slurm requeues the job at once,
// and its kill sends SIGTERM, then SIGKILL after slurm.conf's KillWait) and with a grace time
// of 20 s (Slurm sends SIGTERM at once and requeues the job once the grace time has passed and
// its periodic time-limit check, every 30 s, sees it). Each of the three shapes checkpoints on
// SIGTERM, is requeued and resumes from its checkpoint with its first run's output kept, with
// either setting: a script that exits on SIGTERM too. The claim waits about 10 s after the
// borrowers' exemption with 0, and about 90 s with 20 s (22.05 and 26.05 alike), so slurmbridge's
// default grace time is 0 and a site that wants a longer window to checkpoint lengthens KillWait.
func TestReclaimSignalsTheBorrowerFirst(t *testing.T) {
	for _, grace := range []time.Duration{0, 20 * time.Second} {
		t.Run(fmt.Sprintf("graceTime=%s", grace), func(t *testing.T) {
			c := testbed.Require(t)
			offset := c.CtldLogSize(t)
			importTestbedQuotasWith(t, c, fmt.Sprintf("graceTime: %ds", int(grace.Seconds())))
			log, _ := startQuotad(t, c, "2s")
			logTailIfFailed(t, log, 40)
			waitSynced(t, c, log)

			work := testbed.SharedDir(t, "quotad-grace-", 0o777)
			// The step shape's srun runs the keeping script as its step.
			if err := os.WriteFile(filepath.Join(work, "loop.sh"), []byte(graceShapes["keeps"]), 0o755); err != nil {
				t.Fatal(err)
			}
			inQuota := submitN(t, c, "bob", 4)
			waitQueue(t, c, inQuota, "bob's 4 in-quota jobs running", 30*time.Second, exactly(4, inQuota, running))
			ids := map[string]string{}
			outs := map[string]string{}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			for _, shape := range []string{"keeps", "exits", "step"} {
				script := filepath.Join(work, shape+".sh")
				if err := os.WriteFile(script, []byte(graceShapes[shape]), 0o755); err != nil {
					t.Fatal(err)
				}
				out := filepath.Join(work, shape+"-%j.out")
				id, err := c.SubmitIn(ctx, "bob", work, "-p", "a100", "--gres=gpu:a100:1", "--requeue", "--job-name=grace-"+shape, "--output="+out, script)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Cancel(id) })
				ids[shape], outs[shape] = id, strings.ReplaceAll(out, "%j", id)
			}
			borrowers := slices.Collect(maps.Values(ids))
			waitQueue(t, c, borrowers, "bob's 3 borrowers lent and running", 30*time.Second, exactly(3, borrowers, runningIn("borrow-proj-b")))
			lentAt := time.Now()

			// alice claims 4 a100 of partition a100: the idle one and the 3 borrowers'.
			time.Sleep(time.Until(lentAt.Add(exemptTime)))
			alice := submitJobs(t, c, "alice", 4, "-p", "a100", "--gres=gpu:a100:1", "--wrap", "sleep 600")
			back := waitQueue(t, c, alice, "alice's 4 claims running", grace+90*time.Second, exactly(4, alice, running))
			firstRuns := map[string][]string{}
			for shape := range ids {
				firstRuns[shape] = readLines(t, outs[shape])
			}
			c.Cancel(alice...)

			// The requeued ones run again: wait until each has resumed, or has ended for good.
			got := map[string]graceOutcome{}
			waitFor(t, "each borrower rerun or ended", 90*time.Second, func() bool {
				done := true
				for shape, id := range ids {
					lines := readLines(t, outs[shape])
					o := graceOutcome{termed: slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, "SIGTERM at step ") })}
					o.rerun = slices.ContainsFunc(lines, func(l string) bool { run, _, ok := resumeLine(l); return ok && run == 1 })
					o.outLost = len(lines) < len(firstRuns[shape]) || !slices.Equal(lines[:len(firstRuns[shape])], firstRuns[shape])
					o.state, _ = c.JobState(ctx, id)
					got[shape] = o
					if !o.rerun && o.state != "COMPLETED" && o.state != "FAILED" && o.state != "CANCELLED" {
						done = false
					}
				}
				return done
			})
			for _, shape := range []string{"keeps", "exits", "step"} {
				o := got[shape]
				t.Logf("graceTime %s, borrower %q: SIGTERM handled %v, rerun from its checkpoint %v, state %s, first run's output kept %v",
					grace, shape, o.termed, o.rerun, o.state, !o.outLost)
				if !o.termed || !o.rerun || o.outLost {
					t.Errorf("graceTime %s, borrower %q: %+v, want SIGTERM handled, rerun from its checkpoint, output kept", grace, shape, o)
				}
			}
			t.Logf("graceTime %s: alice's claims ran %.1f s after the borrowers' PreemptExemptTime ended", grace, back.Seconds())
			if back < grace {
				t.Errorf("graceTime %s: the claim ran %s after the exemption, within the grace time", grace, back)
			}
			c.AssertNoneKilled(t, offset)
		})
	}
}
