package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/slurmbridge/slurmbridge/elasticd/api"
	"github.com/slurmbridge/slurmbridge/elasticd/policy"
	"github.com/slurmbridge/slurmbridge/quotad/view"
)

// StatusHistory is how many measurements a status shows per job.
const StatusHistory = 20

// Status describes every followed job, by job id.
func (d *Daemon) Status() []api.JobStatus {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []api.JobStatus
	for _, j := range d.jobs {
		maxWorkers, _ := j.decl.EffectiveMax()
		s := api.JobStatus{JobID: j.id, User: j.user, Account: j.account, MinWorkers: j.decl.MinWorkers,
			MaxWorkers: maxWorkers, GPUsPerWorker: j.decl.GPUsPerWorker, Pools: j.decl.Pools,
			MaxBatch: j.decl.MaxBatch, BatchPerDevice: j.decl.BatchPerDevice, Pin: j.pin, PinnedBy: j.pinnedBy,
			RdzvEndpoint:           j.decl.RdzvEndpoint,
			ValuePerMillionSamples: j.decl.ValuePerMillionSamples,
			Size:                   map[string]int{}, Decision: j.last.Action.String(), Reason: j.last.Reason, DecidedAt: j.lastAt}
		for t, n := range j.size {
			s.Size[string(t)] = n
		}
		for _, m := range j.history[max(len(j.history)-StatusHistory, 0):] {
			p := api.Point{Time: m.Time, Size: map[string]int{}, SamplesPerSec: total(m)}
			for t, n := range m.Allocated {
				p.Size[string(t)] = n
			}
			s.Throughput = append(s.Throughput, p)
		}
		if n := len(j.history); n > 0 {
			for _, w := range j.history[n-1].Workers {
				s.Workers = append(s.Workers, api.WorkerPoint{Worker: w.Worker, Type: string(w.Type),
					SamplesPerSec: w.SamplesPerSec, ComputeSecondsPerStep: w.ComputeSecondsPerStep})
			}
		}
		for _, f := range j.last.Flags {
			s.Flags = append(s.Flags, f.Worker+": "+f.Reason)
		}
		for id := range j.stopping {
			s.Stopping = append(s.Stopping, id)
		}
		slices.Sort(s.Stopping)
		for newID, old := range j.replacing {
			s.Replacements = append(s.Replacements, fmt.Sprintf("%d replaces %d", newID, old))
		}
		for old, l := range j.leaving {
			s.Leaving = append(s.Leaving, fmt.Sprintf("%d leaves before its %s successor joins", old, l.Type))
		}
		slices.Sort(s.Leaving)
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b api.JobStatus) int { return int(a.JobID) - int(b.JobID) })
	return out
}

func total(m policy.Measurement) float64 {
	sum := 0.0
	for _, w := range m.Workers {
		sum += w.SamplesPerSec
	}
	return sum
}

// maxSignalReport bounds a posted report.
const maxSignalReport = 1 << 20

// AddSignals stores an agent's report; only the latest sample per GPU is kept, and only for
// jobs elasticd follows (main jobs and their workers).
func (d *Daemon) AddSignals(r api.SignalReport) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, js := range r.Jobs {
		if !d.followsLocked(js.JobID) {
			continue
		}
		byGPU := d.signals[js.JobID]
		if byGPU == nil {
			byGPU = map[int]policy.GPUSignal{}
			d.signals[js.JobID] = byGPU
		}
		for _, s := range js.Samples {
			byGPU[s.Index] = toSignal(js.JobID, s)
		}
	}
	for id := range d.signals {
		if !d.followsLocked(id) {
			delete(d.signals, id)
		}
	}
}

// followsLocked: id is a followed main job or one of its known workers.
func (d *Daemon) followsLocked(id uint32) bool {
	if _, ok := d.jobs[id]; ok {
		return true
	}
	for _, j := range d.jobs {
		for _, m := range j.history[max(len(j.history)-1, 0):] {
			for _, w := range m.Workers {
				if w.Worker == strconv.FormatUint(uint64(id), 10) {
					return true
				}
			}
		}
	}
	return false
}

func toSignal(jobID uint32, s api.GPUSample) policy.GPUSignal {
	g := policy.GPUSignal{Time: s.Time, Worker: strconv.FormatUint(uint64(jobID), 10), GPU: s.Index,
		ThermalOrPowerThrottled: s.ThermalOrPowerThrottled(), PowerCapOnly: s.PowerCapOnly(), ThrottleReasons: s.ThrottleReasons}
	if s.GPUUtilPct != nil {
		g.HasUtilization, g.UtilizationPct = true, float64(*s.GPUUtilPct)
	}
	if s.SMClockMHz != nil {
		g.SMClockMHz = *s.SMClockMHz
	}
	if s.MaxSMClockMHz != nil {
		g.MaxSMClockMHz = *s.MaxSMClockMHz
	}
	return g
}

var (
	errNotFollowed = errors.New("elasticd follows no elastic job of that id (it is followed once it runs)")
	errNotOwner    = errors.New("only the job's owner or root may pin its size")
)

// Pin sets (n > 0) or clears (n == 0) the size of job id, for caller, who must be the job's
// owner or root. The pin is saved at once, so it survives a restart of elasticd.
func (d *Daemon) Pin(id uint32, n int, caller view.Caller) error {
	d.mu.Lock()
	j := d.jobs[id]
	if j == nil {
		d.mu.Unlock()
		return errNotFollowed
	}
	if !(caller.User == "root" && caller.SeesAll) && caller.User != j.user {
		d.mu.Unlock()
		return fmt.Errorf("%w: job %d is %s's, you are %s", errNotOwner, id, j.user, caller.User)
	}
	if maxWorkers, why := j.decl.EffectiveMax(); n != 0 && (n < j.decl.MinWorkers || n > maxWorkers) {
		d.mu.Unlock()
		return fmt.Errorf("job %d runs %d to %d workers%s: cannot pin it at %d", id, j.decl.MinWorkers, maxWorkers, why, n)
	}
	j.pin, j.pinnedBy = n, caller.User
	if n == 0 {
		j.pinnedBy = ""
	}
	d.mu.Unlock()
	log := d.log.With().Uint32("job", id).Logger()
	log.Info().Int("pin", n).Str("by", caller.User).Msg("size pinned (0: unpinned)")
	d.save(j, log)
	return nil
}

// Handler serves GET /v1/status, POST /v1/signals, and PUT/DELETE of a job's pin, which need a
// MUNGE credential (auth; nil: pins are refused).
func (d *Daemon) Handler(auth view.Authenticator) http.Handler {
	mux := http.NewServeMux()
	pin := func(w http.ResponseWriter, r *http.Request, n int) {
		id, err := strconv.ParseUint(r.PathValue("id"), 10, 32)
		if err != nil || id == 0 {
			http.Error(w, "job id "+strconv.Quote(r.PathValue("id"))+" is not a job id", http.StatusBadRequest)
			return
		}
		if auth == nil {
			http.Error(w, "this elasticd takes no pins (no MUNGE authentication configured)", http.StatusServiceUnavailable)
			return
		}
		caller, err := auth.Caller(r)
		if err != nil {
			code := http.StatusInternalServerError
			if errors.Is(err, view.ErrUnauthenticated) {
				code = http.StatusUnauthorized
			}
			http.Error(w, err.Error(), code)
			return
		}
		switch err := d.Pin(uint32(id), n, caller); {
		case errors.Is(err, errNotFollowed):
			http.Error(w, err.Error(), http.StatusNotFound)
		case errors.Is(err, errNotOwner):
			http.Error(w, err.Error(), http.StatusForbidden)
		case err != nil:
			http.Error(w, err.Error(), http.StatusBadRequest)
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	}
	mux.HandleFunc("PUT /v1/jobs/{id}/pin/{n}", func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.Atoi(r.PathValue("n"))
		if err != nil || n < 1 {
			http.Error(w, "size "+strconv.Quote(r.PathValue("n"))+" is not a number of workers (1 or more)", http.StatusBadRequest)
			return
		}
		pin(w, r, n)
	})
	mux.HandleFunc("DELETE /v1/jobs/{id}/pin", func(w http.ResponseWriter, r *http.Request) { pin(w, r, 0) })
	mux.HandleFunc(http.MethodGet+" "+api.StatusPath, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(d.Status())
	})
	mux.HandleFunc(http.MethodPost+" "+api.SignalsPath, func(w http.ResponseWriter, r *http.Request) {
		var rep api.SignalReport
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxSignalReport))
		if err := dec.Decode(&rep); err != nil {
			http.Error(w, "bad signal report: "+err.Error(), http.StatusBadRequest)
			return
		}
		d.AddSignals(rep)
		w.WriteHeader(http.StatusNoContent)
	})
	return mux
}
