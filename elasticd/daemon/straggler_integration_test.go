//go:build integration

package daemon

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/bridge/testbed"
	"github.com/slurmbridge/slurmbridge/elasticd/api"
	"github.com/slurmbridge/slurmbridge/elasticd/policy"
)

// stragglerWatch follows a job one of whose workers is slowed (the worker's job script writes
// its job id to marker/id) through elasticd's cycles, and notes what the straggler tests
// check: the replace decision, the successor, when the straggler was gone, and the job's
// measurements.
type stragglerWatch struct {
	r      *elasticRun
	main   uint32
	marker string
	start  time.Time
	last   string

	slowID, successor, replaceReason string
	replaceCode                      policy.Code       // the replace decision's
	leaveFirst                       bool              // the replacement let the straggler leave first
	replaceWorkers                   []api.WorkerPoint // the workers at the replace decision
	replacedAt, goneAt               time.Time
	size                             int // the job's size when the replacement was decided
	sizes                            map[int]bool
	points                           map[time.Time]api.Point
}

func newStragglerWatch(r *elasticRun, main uint32, marker string) *stragglerWatch {
	return &stragglerWatch{r: r, main: main, marker: marker, start: time.Now(), sizes: map[int]bool{}, points: map[time.Time]api.Point{}}
}

// cycle runs one cycle of elasticd and returns the job's status (nil before elasticd follows
// the job).
func (w *stragglerWatch) cycle(ctx context.Context, t *testing.T) *api.JobStatus {
	t.Helper()
	if err := w.r.d.Cycle(ctx); err != nil {
		t.Logf("cycle: %v", err)
	}
	since := func() float64 { return time.Since(w.start).Seconds() }
	if w.slowID == "" {
		if data, err := os.ReadFile(filepath.Join(w.marker, "id")); err == nil {
			w.slowID = strings.TrimSpace(string(data))
			t.Logf("%5.1fs worker %s is the slow one", since(), w.slowID)
		}
	}
	st := jobStatus(w.r.d, w.main)
	if st == nil {
		return nil
	}
	w.sizes[st.Size["a100"]] = true
	for _, p := range st.Throughput {
		w.points[p.Time] = p
	}
	if line := fmt.Sprintf("size %d: %s %s %v %v %v", st.Size["a100"], st.Decision, st.Reason, st.Replacements, st.Leaving, st.Stopping); line != w.last {
		w.last = line
		t.Logf("%5.1fs %s; workers %+v", since(), line, st.Workers)
	}
	if st.Decision == "replace" && w.replacedAt.IsZero() {
		w.replaceReason, w.replaceWorkers, w.replacedAt, w.size = st.Reason, st.Workers, time.Now(), st.Size["a100"]
		w.replaceCode = policy.Code(st.ReasonCode)
		w.leaveFirst = w.replaceCode == policy.CodeStragglerLeaves
	}
	for _, rep := range st.Replacements {
		if id, old, ok := strings.Cut(rep, " replaces "); ok && old == w.slowID {
			w.successor = id
		}
	}
	if w.successor == "" && !w.replacedAt.IsZero() {
		// Leaving first, the successor is known once it reports: the worker measured now
		// that was not there at the decision.
		for _, p := range st.Workers {
			if !slices.ContainsFunc(w.replaceWorkers, func(q api.WorkerPoint) bool { return q.Worker == p.Worker }) {
				w.successor = p.Worker
			}
		}
	}
	if w.goneAt.IsZero() && w.successor != "" && len(st.Replacements) == 0 && len(st.Leaving) == 0 && len(st.Stopping) == 0 &&
		!workerQueued(ctx, t, w.r.c, w.main, w.slowID) {
		w.goneAt = time.Now()
		t.Logf("%5.1fs straggler %s gone, %s runs in its place", since(), w.slowID, w.successor)
	}
	return st
}

// checkReplaced fails the test unless the replace decision was of the kind code and named the
// slow worker, and a successor took its place.
func (w *stragglerWatch) checkReplaced(t *testing.T, code policy.Code) {
	t.Helper()
	if w.goneAt.IsZero() {
		t.Fatalf("no replacement within the deadline: slow worker %q, successor %q, replace %q, status %+v",
			w.slowID, w.successor, w.replaceReason, jobStatus(w.r.d, w.main))
	}
	t.Logf("replaced %s by %s: decided after %s, done after %s", w.slowID, w.successor,
		w.replacedAt.Sub(w.start).Round(time.Second), w.goneAt.Sub(w.start).Round(time.Second))
	// The status gives the decision's workers in its words alone: they are checked for the
	// slow worker's id.
	if w.replaceCode != code || !strings.Contains(w.replaceReason, "worker "+w.slowID+" does") {
		t.Fatalf("replace %s (%q), want %s naming the slow worker %s", w.replaceCode, w.replaceReason, code, w.slowID)
	}
}

// heardTERM lists the outputs of the job's worker jobs that say their trainer got TERM.
func heardTERM(t *testing.T, work, mainID, says string) (termed, outs []string) {
	t.Helper()
	outs, _ = filepath.Glob(filepath.Join(work, fmt.Sprintf("elastic-worker-%s-*.out", mainID)))
	for _, out := range outs {
		data, _ := os.ReadFile(out)
		if strings.Contains(string(data), says) {
			termed = append(termed, out)
		}
	}
	return termed, outs
}

// A job of exactly 3 workers (--elastic=3:3) on a linear curve: elasticd brings it to 3 at
// once; the first worker job to start claims a marker and runs the trainer with --slow 0.5,
// so it reports half its peers' samples/s. elasticd must replace it, and at its max the
// straggler leaves first (a rendezvous at its max admits no one more): it gets TERM and
// leaves, then a new worker joins; the job never runs 4 workers, and is back at 3 healthy
// ones and holds.
func TestSlowWorkerAtMaxIsReplacedItLeavesFirst(t *testing.T) {
	r := newElasticRun(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	marker := filepath.Join(r.work, "slow")
	mainID, main := r.submitMain(ctx, t, "#!/bin/bash\n#SBATCH --elastic=3:3:1\n#SBATCH --elastic-pools=a100\n"+
		"slow=1\n"+
		"if [ \"$ELASTIC_ROLE\" = worker ] && mkdir "+marker+" 2>/dev/null; then\n"+
		"  echo \"$SLURM_JOB_ID\" > "+marker+"/id; slow=0.5\n"+
		"fi\n"+
		"exec python3 "+example(t, "synthetic_trainer.py")+" --interval 0.5 --duration 600 --slow $slow --curve 1:100,2:200,3:300,4:400\n")

	w := newStragglerWatch(r, main, marker)
	for ctx.Err() == nil {
		st := w.cycle(ctx, t)
		if st != nil && !w.goneAt.IsZero() && st.Decision == "hold" && st.Size["a100"] == 3 && st.ReasonCode == string(policy.CodeAtMax) {
			break
		}
		time.Sleep(time.Second)
	}
	w.checkReplaced(t, policy.CodeStragglerLeaves)
	if w.sizes[4] {
		t.Errorf("4 workers ran at once: the successor joined before the straggler left")
	}

	// The straggler heard the TERM and left; no other worker was stopped.
	termed, outs := heardTERM(t, r.work, mainID, "SIGTERM, leaving the rendezvous")
	if len(termed) != 1 || !strings.Contains(termed[0], w.slowID) {
		t.Fatalf("workers that heard TERM: %v; want only the slow worker %s (outputs %v)", termed, w.slowID, outs)
	}
	// Three worker jobs ran in all, nothing is flagged now, and the job runs at full speed
	// (300 samples/s; 250 with the straggler).
	st := jobStatus(r.d, main)
	if len(st.Flags) != 0 {
		t.Errorf("flags after the replacement: %v", st.Flags)
	}
	if n := len(st.Throughput); n == 0 || st.Throughput[n-1].SamplesPerSec < 290 {
		t.Errorf("throughput after the replacement: %+v, want about 300 samples/s", st.Throughput)
	}
	if n := len(outs); n != 3 {
		t.Errorf("%d worker jobs ran (%v), want 3: two at start, one successor", n, outs)
	}
}

// workerQueued: the worker job is still in squeue (running, pending or completing).
func workerQueued(ctx context.Context, t *testing.T, c *testbed.Cluster, main uint32, id string) bool {
	rows, err := workerRows(ctx, c, main)
	if err != nil {
		t.Logf("squeue: %v", err)
		return true
	}
	return slices.ContainsFunc(rows, func(r slurm.Job) bool { return r.PrintedID == id })
}

// The main job is the slow one (--slow 0.5 on the main job's trainer): elasticd never replaces
// the main job, so the job holds at its size, says why in its status, logs it once however
// many cycles pass, and submits nothing.
func TestSlowMainJobHoldsAndSaysSo(t *testing.T) {
	r := newElasticRun(t)
	d := r.d
	var logged syncBuffer
	d.log = zerolog.New(io.MultiWriter(&logged, zerolog.NewTestWriter(t)))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, main := r.submitMain(ctx, t, "#!/bin/bash\n#SBATCH --elastic=2:3:1\n#SBATCH --elastic-pools=a100\n"+
		"slow=1\n[ \"$ELASTIC_ROLE\" = main ] && slow=0.5\n"+
		"exec python3 "+example(t, "synthetic_trainer.py")+" --interval 0.5 --duration 600 --slow $slow --curve 1:100,2:200,3:300\n")

	start := time.Now()
	held := 0
	var st *api.JobStatus
	for ctx.Err() == nil && held < 8 {
		if err := d.Cycle(ctx); err != nil {
			t.Logf("cycle: %v", err)
		}
		if st = jobStatus(d, main); st != nil && st.ReasonCode == string(policy.CodeMainStraggler) {
			held++
			if st.Decision != "hold" || st.Size["a100"] != 2 {
				t.Fatalf("status %+v, want a hold at 2 workers", st)
			}
		}
		time.Sleep(time.Second)
	}
	if held < 8 {
		t.Fatalf("after %s: the job did not hold on its slow main job for 8 cycles: %+v", time.Since(start).Round(time.Second), st)
	}
	t.Logf("held %d cycles: %s", held, st.Reason)
	if n := strings.Count(logged.String(), `"code":"`+string(policy.CodeMainStraggler)+`"`); n != 1 {
		t.Errorf("the slow main job was logged %d times, want once", n)
	}
	if n := strings.Count(logged.String(), `"worker submitted"`); n != 1 {
		t.Errorf("%d workers submitted, want only the one to reach min 2", n)
	}
	if strings.Contains(logged.String(), "TERM") {
		t.Errorf("a worker was stopped")
	}
}

// syncBuffer is a bytes.Buffer the daemon's log and the test may use at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
