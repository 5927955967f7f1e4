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
)

// A job of exactly 3 workers (--elastic=3:3) on a linear curve: elasticd brings it to 3 at
// once; the first worker job to start claims a marker and runs the trainer with --slow 0.5,
// so it reports half its peers' samples/s. elasticd must replace it: a new worker joins first,
// then the slow one gets TERM and leaves; the job is back at 3 healthy workers and holds.
func TestSlowWorkerIsReplacedNewOneJoinsFirst(t *testing.T) {
	r := newElasticRun(t)
	c, d, work := r.c, r.d, r.work
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	marker := filepath.Join(work, "slow")
	mainID, main := r.submitMain(ctx, t, "#!/bin/bash\n#SBATCH --elastic=3:3:1\n#SBATCH --elastic-pools=a100\n"+
		"slow=1\n"+
		"if [ \"$ELASTIC_ROLE\" = worker ] && mkdir "+marker+" 2>/dev/null; then\n"+
		"  echo \"$SLURM_JOB_ID\" > "+marker+"/id; slow=0.5\n"+
		"fi\n"+
		"exec python3 "+example(t, "synthetic_trainer.py")+" --interval 0.5 --duration 600 --slow $slow --curve 1:100,2:200,3:300,4:400\n")

	start := time.Now()
	slowID := ""
	var replaceReason, successor string
	var sawFour bool
	var last string
	for ctx.Err() == nil {
		if err := d.Cycle(ctx); err != nil {
			t.Logf("cycle: %v", err)
		}
		if slowID == "" {
			if data, err := os.ReadFile(filepath.Join(marker, "id")); err == nil {
				slowID = strings.TrimSpace(string(data))
				t.Logf("%5.1fs worker %s runs at half speed", time.Since(start).Seconds(), slowID)
			}
		}
		st := jobStatus(d, main)
		if st == nil {
			time.Sleep(time.Second)
			continue
		}
		if line := fmt.Sprintf("size %d: %s %s %v", st.Size["a100"], st.Decision, st.Reason, st.Replacements); line != last {
			last = line
			t.Logf("%5.1fs %s", time.Since(start).Seconds(), line)
		}
		if st.Decision == "replace" && replaceReason == "" {
			replaceReason = st.Reason
		}
		for _, r := range st.Replacements {
			if id, old, ok := strings.Cut(r, " replaces "); ok && old == slowID {
				successor = id
			}
		}
		// Joins before it leaves: the successor runs beside the straggler.
		sawFour = sawFour || st.Size["a100"] == 4
		if successor != "" && st.Decision == "hold" && st.Size["a100"] == 3 && len(st.Stopping) == 0 &&
			len(st.Replacements) == 0 && strings.Contains(st.Reason, "at max") && !workerQueued(ctx, t, c.Slurm(), main, slowID) {
			break
		}
		time.Sleep(time.Second)
	}
	if ctx.Err() != nil {
		t.Fatalf("no replacement settled within the deadline: slow worker %q, successor %q, replace %q, status %+v",
			slowID, successor, replaceReason, jobStatus(d, main))
	}
	t.Logf("replaced %s by %s after %s", slowID, successor, time.Since(start).Round(time.Second))
	if !strings.Contains(replaceReason, "worker "+slowID+" does") || !strings.Contains(replaceReason, "joins before it leaves") {
		t.Fatalf("replace reason %q does not name the slow worker %s", replaceReason, slowID)
	}
	if !sawFour {
		t.Errorf("the successor never ran beside the straggler (size never 4)")
	}

	// The straggler heard the TERM and left; no other worker was stopped.
	outs, _ := filepath.Glob(filepath.Join(work, fmt.Sprintf("elastic-worker-%s-*.out", mainID)))
	var termed []string
	for _, out := range outs {
		data, _ := os.ReadFile(out)
		if strings.Contains(string(data), "SIGTERM, leaving the rendezvous") {
			termed = append(termed, out)
		}
	}
	if len(termed) != 1 || !strings.Contains(termed[0], slowID) {
		t.Fatalf("workers that heard TERM: %v; want only the slow worker %s (outputs %v)", termed, slowID, outs)
	}
	// Three worker jobs ran in all, nothing is flagged now, and the job runs at full speed
	// (300 samples/s; 250 with the straggler).
	st := jobStatus(d, main)
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
func workerQueued(ctx context.Context, t *testing.T, s slurm.Client, main uint32, id string) bool {
	rows, err := s.QueueRows(ctx, slurm.QueueFilter{Names: []string{WorkerName(main)}})
	if err != nil {
		t.Logf("squeue: %v", err)
		return true
	}
	return slices.ContainsFunc(rows, func(r slurm.QueueRow) bool { return r.ID == id })
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
	var st *JobStatus
	for ctx.Err() == nil && held < 8 {
		if err := d.Cycle(ctx); err != nil {
			t.Logf("cycle: %v", err)
		}
		if st = jobStatus(d, main); st != nil && strings.Contains(st.Reason, fmt.Sprintf("the main job %d is the straggler", main)) {
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
	if n := strings.Count(logged.String(), "is the straggler"); n != 1 {
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
