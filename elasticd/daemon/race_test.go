package daemon

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/slurmbridge/slurmbridge/bridge/auth"
	"github.com/slurmbridge/slurmbridge/elasticd/api"
)

// Any user with a MUNGE credential may read GET /v1/status, and the job's owner may pin it,
// while the cycle grows, shrinks and cancels the job's workers: under -race a write of the
// job's state outside the daemon's lock fails this test (and without -race, a concurrent map
// read and write would crash the daemon).
func TestStatusAndPinsReadWhileCyclesGrowAndShrink(t *testing.T) {
	h := newHarness(t, 1, 4)
	h.cycle()
	handler := h.d.Handler(Access{Callers: fakeAuth{auth.Caller{User: "alice"}}})
	var stop atomic.Bool
	var reads atomic.Int64
	var wg, reading sync.WaitGroup
	for range 2 {
		wg.Add(1)
		reading.Add(1)
		go func() {
			defer wg.Done()
			first := true
			for !stop.Load() {
				rec := httptest.NewRecorder()
				handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, api.StatusPath, nil))
				if rec.Code != http.StatusOK {
					t.Errorf("status: %d %s", rec.Code, rec.Body.String())
					return
				}
				// A pin and its removal: each saves the job's state at once.
				for _, req := range []*http.Request{
					httptest.NewRequest(http.MethodPut, api.PinPath(mainID, 2), nil),
					httptest.NewRequest(http.MethodDelete, api.PinPath(mainID, 0), nil),
				} {
					rec := httptest.NewRecorder()
					handler.ServeHTTP(rec, req)
				}
				reads.Add(1)
				if first {
					first = false
					reading.Done()
				}
			}
		}()
	}
	// The cycles start once both readers run: on a busy machine the goroutines could otherwise
	// be scheduled only after the last cycle, and the test would read nothing that changes.
	reading.Wait()
	// Grow to the knee, then the shrink's TERM, grace and cancel, then a reclaim.
	workers := h.growUntilTerminate(map[int]float64{1: 100, 2: 190, 3: 200})
	for range 8 {
		h.report(190, workers[:2]...)
		h.cycle()
	}
	delete(h.slurm.jobs, workers[len(workers)-1])
	if len(workers) > 1 {
		w := h.slurm.jobs[workers[1]]
		w.State = "PENDING"
		h.slurm.jobs[workers[1]] = w
	}
	for range 4 {
		h.report(100, mainID)
		h.cycle()
	}
	stop.Store(true)
	wg.Wait()
	if len(h.slurm.submits) < 2 || len(h.slurm.terminate) == 0 || len(h.slurm.cancel) == 0 {
		t.Fatalf("the cycles did not grow, shrink and cancel (submits %d, TERM %v, cancels %v): the test reads no changing state",
			len(h.slurm.submits), h.slurm.terminate, h.slurm.cancel)
	}
	if reads.Load() < 2 {
		t.Fatalf("%d status reads: each reader should have read at least once", reads.Load())
	}
}
