//go:build integration

package daemon

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/stats"
	"github.com/slurmbridge/slurmbridge/bridge/testbed"
	"github.com/slurmbridge/slurmbridge/elasticd/api"
	"github.com/slurmbridge/slurmbridge/elasticd/policy"
	"github.com/slurmbridge/slurmbridge/elasticd/transition"
)

// A real synchronous PyTorch job (examples/train.py, DDP over gloo under torchrun, as
// torchrun.sbatch starts it) of two workers, one of them slowed: the first worker job's
// training processes run a tenth of the time while they train (slowFirstWorker).
// Every step waits for it at the allreduce, so both workers report the same samples/s and
// throughput alone cannot name it; its compute time per step before the exchange (reported by
// the slurmbridge_elastic helper) can. elasticd must replace it (below the max of 4 the
// successor joins first, even if the job grew once before the straggler showed; at the max
// it leaves first) and the job's samples/s at that size must recover once it has left.
func TestTorchrunStragglerIsReplacedAndThroughputRecovers(t *testing.T) {
	torchrunStragglerIsReplaced(t, "2:4:1", policy.CodeStraggler)
}

// replaceCodeAt is the replace decision's code for a job of size workers with at most max:
// below its max the successor joins beside the straggler (code), at its max the straggler
// must leave first. A job that grew to its max before its straggler showed (the world's
// processes share the 2 cores with the other suites) is replaced the second way.
func replaceCodeAt(size, max int, code policy.Code) policy.Code {
	if size >= max {
		return policy.CodeStragglerLeaves
	}
	return code
}

// The same job declared at its max (--elastic=2:2): torchrun's rendezvous admits no third
// agent, so a successor submitted first would wait beside the straggler for ever. elasticd
// must let the straggler leave first (TERM, gone from the queue), then submit its successor,
// which joins the rendezvous the straggler left; the job never has 3 workers, and its
// samples/s at 2 recover.
func TestTorchrunStragglerAtMaxLeavesFirstAndThroughputRecovers(t *testing.T) {
	torchrunStragglerIsReplaced(t, "2:2:1", policy.CodeStragglerLeaves)
}

// torchrunStragglerIsReplaced runs the torchrun straggler test for the declaration elastic
// (MIN:MAX:GPUS); code is the replace decision's, which says the order of the replacement.
func torchrunStragglerIsReplaced(t *testing.T, elastic string, code policy.Code) {
	testbed.OneHeavyAtATime(t)
	r := newElasticRun(t)
	ctx, cancel := context.WithTimeout(context.Background(), testbed.Patience(5*time.Minute))
	defer cancel()
	examples := filepath.Dir(example(t, "train.py"))
	body, err := transition.Script(examples, r.work, elastic, "a100", transition.KeepAlive)
	if err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(r.work, "slow")
	body, err = slowFirstWorker(body, marker)
	if err != nil {
		t.Fatal(err)
	}
	_, main := r.submitMain(ctx, t, body)

	w := newStragglerWatch(r, main, marker)
	for ctx.Err() == nil {
		st := w.cycle(ctx, t)
		// The new world's first measurements follow its processes' restart (and, on the
		// shared 2 cores, whatever else runs): up to 8 are given the chance to show recovery.
		if a := after(w.points, w.size, w.goneAt); st != nil && !w.goneAt.IsZero() &&
			(len(a) >= 8 || st.Decision == "grow" || recovered(w.points, w.size, w.replacedAt, a)) {
			break
		}
		time.Sleep(time.Second)
	}
	maxWorkers := mustAtoi(t, strings.Split(elastic, ":")[1])
	w.checkReplaced(t, replaceCodeAt(w.size, maxWorkers, code))
	// Which signal named the straggler is in the words alone: checked for a compute time.
	if !computeTime.MatchString(w.replaceReason) {
		t.Fatalf("replace reason %q, want the straggler named by its compute time", w.replaceReason)
	}
	if w.sizes[maxWorkers+1] {
		t.Fatalf("the job ran %d workers, above its max %d", maxWorkers+1, maxWorkers)
	}
	// Synchronous training: every worker's samples/s is the job's step rate (they differ only
	// by when each report's window fell); compute time is what named the straggler.
	t.Logf("workers at the replace decision: %+v", w.replaceWorkers)

	before := beforeReplacement(w.points, w.size, w.replacedAt)
	afterwards := after(w.points, w.size, w.goneAt)
	if len(before) == 0 || len(afterwards) == 0 {
		t.Fatalf("measurements at %d workers: %v before the replacement, %v after", w.size, before, afterwards)
	}
	b, a := stats.Median(before), slices.Max(afterwards)
	t.Logf("samples/s at %d workers: %.0f with the straggler (median of %.0f), %.0f after (best of %.0f): x%.2f", w.size, b, before, a, afterwards, a/b)
	if !recovered(w.points, w.size, w.replacedAt, afterwards) {
		t.Fatalf("samples/s did not recover: %.0f after the replacement, %.0f before", a, b)
	}
}

// recovered: the best measurement after the replacement is at least twice the median one
// before it (the straggler's quota makes single measurements before it jump).
func recovered(points map[time.Time]api.Point, size int, replacedAt time.Time, after []float64) bool {
	before := beforeReplacement(points, size, replacedAt)
	return len(before) > 0 && len(after) > 0 && slices.Max(after) >= 2*stats.Median(before)
}

// beforeReplacement lists the job's samples/s at size workers measured before t.
func beforeReplacement(points map[time.Time]api.Point, size int, t time.Time) []float64 {
	return samplesAt(points, size, func(when time.Time) bool { return when.Before(t) })
}

// after lists the job's samples/s at size workers measured after t.
func after(points map[time.Time]api.Point, size int, t time.Time) []float64 {
	return samplesAt(points, size, func(when time.Time) bool { return when.After(t) })
}

// samplesAt lists the job's samples/s at size workers measured at the times that match.
func samplesAt(points map[time.Time]api.Point, size int, match func(time.Time) bool) []float64 {
	var out []float64
	for when, p := range points {
		if p.Size["a100"] == size && match(when) {
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
	// Before the case that chooses the launcher: each branch execs it.
	i := strings.Index(body, "\ncase ")
	if i < 0 {
		return "", fmt.Errorf("the torchrun job script has no case choosing its launcher:\n%s", body)
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
		"fi\ncase "
	return body[:i] + slow + body[i+len("\ncase "):], nil
}

// computeTime is a straggler's compute time per step as a reason gives it: "137 ms of compute"
// or "1.2s of compute".
var computeTime = regexp.MustCompile(`\d+(?:\.\d+)? ?(?:ms|s) of compute\b`)
