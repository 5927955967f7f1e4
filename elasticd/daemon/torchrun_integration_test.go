//go:build integration

package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/auth"
	"github.com/slurmbridge/slurmbridge/bridge/testbed"
	"github.com/slurmbridge/slurmbridge/elasticd/transition"
)

// A real PyTorch job (examples/train.py: DDP over gloo on the testbed's CPUs), set up exactly as
// examples/torchrun.sbatch does: in place by default, its processes meeting through
// slurmbridge_elastic.torch. elasticd grows it from its own samples/s and, once a step stops
// paying on these two cores, shrinks it with a TERM. Every membership change must re-form the
// world and training must go on from where it was: a world of 2 or more forms, a smaller one
// forms after the shrink, and the main job keeps running throughout. In place, the main job's
// process is the same one in every world; under torchrun (ELASTIC_TRANSITION=restart, the
// straggler test's) each world has new processes that resume from the checkpoint. The idle time
// of each change is logged (bench/cmd/elastictransition measures it over rounds).
//
// Where other work shares the cores (CI runs three releases' suites at once), a third worker
// can keep paying: more processes take a bigger share of contended cores. Then, after
// atMaxBeforePin at the max, the test pins the job one below it, as its owner may: elasticd
// shrinks it by the same TERM and the world re-forms the same way. The throughput-driven
// shrink itself is TestSyntheticJobGrowsToTheKneeShrinksGracefullyAndHolds's, where rates are
// set, not measured on shared cores.
func TestTorchJobGrowsAndShrinksInPlace(t *testing.T) {
	const maxWorkers = 3
	// Reaching the max takes under a minute; after this the shrink still fits the deadline.
	const atMaxBeforePin = 2 * time.Minute
	testbed.OneHeavyAtATime(t)
	r := newElasticRun(t)
	c, d, work := r.c, r.d, r.work
	ctx, cancel := context.WithTimeout(context.Background(), testbed.Patience(6*time.Minute))
	defer cancel()
	body, err := transition.Script(filepath.Dir(example(t, "train.py")), work, fmt.Sprintf("1:%d:1", maxWorkers), "a100", transition.InPlace)
	if err != nil {
		t.Fatal(err)
	}
	mainID, main := r.submitMain(ctx, t, body)

	start := time.Now()
	var lastDecision string
	var shrunkAt, atMaxSince time.Time
	pinned := false
	var trs []transition.Transition
	for ctx.Err() == nil {
		if err := d.Cycle(ctx); err != nil {
			t.Logf("cycle: %v", err)
		}
		if st := jobStatus(d, main); st != nil {
			if st.Decision+st.Reason != lastDecision {
				lastDecision = st.Decision + st.Reason
				t.Logf("%5.1fs size %d: %s %s", time.Since(start).Seconds(), st.Size["a100"], st.Decision, st.Reason)
				if st.Decision == "shrink" && shrunkAt.IsZero() {
					shrunkAt = time.Now()
				}
			}
			if st.Size["a100"] >= maxWorkers && atMaxSince.IsZero() {
				atMaxSince = time.Now()
			}
		}
		if !pinned && shrunkAt.IsZero() && !atMaxSince.IsZero() && time.Since(atMaxSince) > atMaxBeforePin {
			t.Logf("%5.1fs: the step to %d workers still pays on this machine's shared cores; pinning the job at %d, which shrinks it the same way",
				time.Since(start).Seconds(), maxWorkers, maxWorkers-1)
			if err := d.Pin(main, maxWorkers-1, auth.Caller{User: "root", SeesAll: true}); err != nil {
				t.Fatal(err)
			}
			pinned = true
		}
		records, err := transition.ReadDir(work)
		if err != nil {
			t.Fatal(err)
		}
		trs = transition.Transitions(records)
		if !shrunkAt.IsZero() && len(trs) > 0 {
			last := trs[len(trs)-1]
			// Done once the world that formed after the shrink has trained for a while.
			if last.Kind() == "shrink" && last.To.LastStep-last.To.FirstStep > 3 {
				break
			}
		}
		time.Sleep(time.Second)
	}
	var grew, shrank bool
	for _, tr := range trs {
		t.Logf("%s (jobs %v -> %v)", tr, tr.From.Jobs, tr.To.Jobs)
		grew = grew || tr.Kind() == "grow" && tr.To.Size >= 2
		shrank = shrank || tr.Kind() == "shrink"
	}
	if !grew || !shrank {
		t.Fatalf("after %s: want a grow to 2+ workers and a shrink through the rendezvous, got %v (last decision %q)",
			time.Since(start).Round(time.Second), trs, lastDecision)
	}
	// The main job was never signalled: it is still running, and it took part in every world.
	state, err := c.JobState(ctx, mainID)
	if err != nil || state != "RUNNING" {
		t.Fatalf("main job %s: %q, %v; want RUNNING", mainID, state, err)
	}
	for _, tr := range trs {
		if !slices.Contains(tr.To.Jobs, mainID) {
			t.Fatalf("world %v formed without the main job %s", tr.To.Jobs, mainID)
		}
	}
	// Training went on rather than starting over: every world after the first began where the
	// one before left off. Read from the processes' own trace records.
	records, err := transition.ReadDir(work)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(work, "main-"+mainID+".out"))
	for _, w := range transition.Worlds(records)[1:] {
		if w.ResumedAt == 0 {
			t.Fatalf("world %v began at 0 samples; main job output:\n%s", w.Jobs, data)
		}
	}
	// In place: one process of the main job trained in every world, and said so.
	pids := map[int]bool{}
	for _, rec := range records {
		if rec.Mode != "in-place" {
			t.Fatalf("a process of job %s ran %q, want in-place; main job output:\n%s", rec.Job, rec.Mode, data)
		}
		if rec.Job == mainID {
			pids[rec.PID] = true
		}
	}
	if len(pids) != 1 {
		t.Fatalf("the main job's training process changed across worlds (%d processes): not in place; output:\n%s", len(pids), data)
	}
}
