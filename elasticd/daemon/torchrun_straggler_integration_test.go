//go:build integration

package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/elasticd/transition"
)

// A real synchronous PyTorch job (examples/train.py, DDP over gloo under torchrun, as
// torchrun.sbatch starts it) of two workers, one of them slowed: the first worker job's
// training processes run a tenth of the time while they train (slowFirstWorker).
// Every step waits for it at the allreduce, so both workers report the same samples/s and
// throughput alone cannot name it; its compute time per step before the exchange (reported by
// the slurmbridge_elastic helper) can. elasticd must replace it (the successor joins first:
// MAX 4 lets torchrun admit one agent more, even if the job grew once before the straggler
// showed) and the job's samples/s at that size must recover once it has left.
func TestTorchrunStragglerIsReplacedAndThroughputRecovers(t *testing.T) {
	r := newElasticRun(t)
	d, work := r.d, r.work
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	examples := filepath.Dir(example(t, "train.py"))
	body, err := transition.Script(examples, work, "2:4:1", "a100", transition.KeepAlive)
	if err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(work, "slow")
	body, err = slowFirstWorker(body, marker)
	if err != nil {
		t.Fatal(err)
	}
	_, main := r.submitMain(ctx, t, body)

	start := time.Now()
	var slowID, successor, replaceReason, last string
	var replaceWorkers []WorkerPoint
	var replacedAt, goneAt time.Time
	size := 0 // the job's size when the replacement was decided
	points := map[time.Time]Point{}
	for ctx.Err() == nil {
		if err := d.Cycle(ctx); err != nil {
			t.Logf("cycle: %v", err)
		}
		if slowID == "" {
			if data, err := os.ReadFile(filepath.Join(marker, "id")); err == nil {
				slowID = strings.TrimSpace(string(data))
				t.Logf("%5.1fs worker %s trains a tenth of the time", time.Since(start).Seconds(), slowID)
			}
		}
		st := jobStatus(d, main)
		if st == nil {
			time.Sleep(time.Second)
			continue
		}
		for _, p := range st.Throughput {
			points[p.Time] = p
		}
		if line := fmt.Sprintf("size %d: %s %s %v %v", st.Size["a100"], st.Decision, st.Reason, st.Replacements, st.Stopping); line != last {
			last = line
			t.Logf("%5.1fs %s; workers %+v", time.Since(start).Seconds(), line, st.Workers)
		}
		if st.Decision == "replace" && replacedAt.IsZero() {
			replaceReason, replaceWorkers, replacedAt, size = st.Reason, st.Workers, time.Now(), st.Size["a100"]
		}
		for _, rep := range st.Replacements {
			if id, old, ok := strings.Cut(rep, " replaces "); ok && old == slowID {
				successor = id
			}
		}
		if goneAt.IsZero() && successor != "" && len(st.Replacements) == 0 && len(st.Stopping) == 0 &&
			!workerQueued(ctx, t, r.c.Slurm(), main, slowID) {
			goneAt = time.Now()
			t.Logf("%5.1fs straggler %s gone, %s runs in its place", time.Since(start).Seconds(), slowID, successor)
		}
		if a := after(points, size, goneAt); !goneAt.IsZero() && (len(a) >= 3 || st.Decision == "grow" || recovered(points, size, replacedAt, a)) {
			break
		}
		time.Sleep(time.Second)
	}
	if ctx.Err() != nil || goneAt.IsZero() {
		t.Fatalf("no replacement within the deadline: slow worker %q, successor %q, replace %q, status %+v",
			slowID, successor, replaceReason, jobStatus(d, main))
	}
	t.Logf("replaced %s by %s: decided after %s, done after %s", slowID, successor,
		replacedAt.Sub(start).Round(time.Second), goneAt.Sub(start).Round(time.Second))
	if !strings.Contains(replaceReason, "worker "+slowID+" does") || !strings.Contains(replaceReason, "of compute per step") {
		t.Fatalf("replace reason %q does not name the slow worker %s by its compute time", replaceReason, slowID)
	}
	// Synchronous training: every worker's samples/s is the job's step rate (they differ only
	// by when each report's window fell); compute time is what named the straggler.
	t.Logf("workers at the replace decision: %+v", replaceWorkers)

	before := beforeReplacement(points, size, replacedAt)
	afterwards := after(points, size, goneAt)
	if len(before) == 0 || len(afterwards) == 0 {
		t.Fatalf("measurements at 2 workers: %v before the replacement, %v after", before, afterwards)
	}
	b, a := median(before), slices.Max(afterwards)
	t.Logf("samples/s at %d workers: %.0f with the straggler (median of %.0f), %.0f after (best of %.0f): x%.2f", size, b, before, a, afterwards, a/b)
	if !recovered(points, size, replacedAt, afterwards) {
		t.Fatalf("samples/s did not recover: %.0f after the replacement, %.0f before", a, b)
	}
}

// recovered: the best measurement after the replacement is at least twice the median one
// before it (the straggler's quota makes single measurements before it jump).
func recovered(points map[time.Time]Point, size int, replacedAt time.Time, after []float64) bool {
	before := beforeReplacement(points, size, replacedAt)
	return len(before) > 0 && len(after) > 0 && slices.Max(after) >= 2*median(before)
}

// beforeReplacement lists the job's samples/s at size workers measured before t.
func beforeReplacement(points map[time.Time]Point, size int, t time.Time) []float64 {
	var out []float64
	for when, p := range points {
		if p.Size["a100"] == size && when.Before(t) {
			out = append(out, p.SamplesPerSec)
		}
	}
	return out
}

func median(v []float64) float64 {
	v = slices.Sorted(slices.Values(v))
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// after lists the job's samples/s at size workers measured after t.
func after(points map[time.Time]Point, size int, t time.Time) []float64 {
	var out []float64
	for when, p := range points {
		if p.Size["a100"] == size && when.After(t) {
			out = append(out, p.SamplesPerSec)
		}
	}
	return out
}

// slowFirstWorker makes the first worker job that starts (not the main job) claim marker and
// hold its training processes to a tenth of the time while they train, as a slow device
// would: a loop beside the torchrun agent stops the agent's children for 450 ms in every 500
// whenever the worker's report file shows training in the last 2 s (the agent itself, with
// its rendezvous heartbeats, and the processes' restarts run freely). CPU contention from busy
// loops pinned to the worker's CPU was tried first: on the 2 shared cores it slowed the other
// worker just as much whenever other work crowded the remaining CPU, while a quota slows this
// worker relative to its peer whatever the machine's load.
func slowFirstWorker(body, marker string) (string, error) {
	i := strings.Index(body, "\nexec ")
	if i < 0 {
		return "", fmt.Errorf("the torchrun job script has no exec line:\n%s", body)
	}
	// exec keeps the shell's pid, so $$ is the agent's once it runs; the loop is its child too.
	slow := "\n" +
		`if [ "${ELASTIC_ROLE:-}" = worker ] && mkdir ` + marker + " 2>/dev/null; then\n" +
		`	echo "$SLURM_JOB_ID" >` + marker + "/id\n" +
		"	(\n" +
		"		p= me=$BASHPID report=$ELASTIC_REPORT_DIR/$SLURM_JOB_ID.jsonl\n" +
		`		trap '[ -n "$p" ] && kill -CONT $p 2>/dev/null; exit 0' TERM` + "\n" +
		`		while kill -0 $$ 2>/dev/null; do` + "\n" +
		`			p=` + "\n" +
		`			if [ $(( $(date +%s) - $(stat -c %Y "$report" 2>/dev/null || echo 0) )) -le 2 ]; then` + "\n" +
		`				p=$(pgrep -P $$ | grep -vx "$me" || true)` + "\n" +
		"			fi\n" +
		`			[ -n "$p" ] && kill -STOP $p 2>/dev/null || true` + "\n" +
		"			sleep 0.45\n" +
		`			[ -n "$p" ] && kill -CONT $p 2>/dev/null || true` + "\n" +
		"			sleep 0.05\n" +
		"		done\n" +
		"	) &\n" +
		"fi\nexec "
	return body[:i] + slow + body[i+len("\nexec "):], nil
}
