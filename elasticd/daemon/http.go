package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/slurmbridge/slurmbridge/bridge/auth"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/elasticd/api"
	"github.com/slurmbridge/slurmbridge/elasticd/policy"
)

// StatusHistory is how many measurements a status shows per job.
const StatusHistory = 20

// StatusFor is the status of the jobs caller may read: their own, or every job for root and
// Slurm's operators (auth.Caller.MayRead, as quotad's API). A job's rendezvous endpoint and
// throughput are its owner's business.
func (d *Daemon) StatusFor(caller auth.Caller) []api.JobStatus {
	return slices.DeleteFunc(d.Status(), func(s api.JobStatus) bool { return !caller.MayRead(s.User) })
}

// Status describes every followed job, by job id, as the cycle (or a pin) last left it: a
// copy made under the daemon's lock (statusOf), never the jobs' own maps, which the cycle
// writes meanwhile. Its values are shared with other readers: read them, never change them.
func (d *Daemon) Status() []api.JobStatus {
	d.mu.Lock()
	out := slices.Collect(maps.Values(d.status))
	d.mu.Unlock()
	slices.SortFunc(out, func(a, b api.JobStatus) int { return int(a.JobID) - int(b.JobID) })
	return out
}

// publishLocked makes j's status anew for the readers of Status. Called with d.mu held.
func (d *Daemon) publishLocked(j *job) {
	d.status[j.id] = statusOf(j)
}

// forgetLocked stops following job id and drops its status. Called with d.mu held.
func (d *Daemon) forgetLocked(id uint32) {
	delete(d.jobs, id)
	delete(d.status, id)
}

// statusOf is j's status, every map and slice of it its own. Called with d.mu held.
func statusOf(j *job) api.JobStatus {
	maxWorkers, _ := j.decl.EffectiveMax()
	s := api.JobStatus{JobID: j.id, User: j.user, Account: j.account, MinWorkers: j.decl.MinWorkers,
		MaxWorkers: maxWorkers, GPUsPerWorker: j.decl.GPUsPerWorker, Pools: slices.Clone(j.decl.Pools),
		MaxBatch: j.decl.MaxBatch, BatchPerDevice: j.decl.BatchPerDevice, Pin: j.pin, PinnedBy: j.pinnedBy,
		RdzvEndpoint:           j.decl.RdzvEndpoint,
		ValuePerMillionSamples: j.decl.ValuePerMillionSamples,
		Size:                   map[string]int{}, Decision: j.last.Action.String(), ReasonCode: string(j.last.Code), Reason: j.last.Reason, DecidedAt: j.lastAt}
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
	return s
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
func (d *Daemon) Pin(id uint32, n int, caller auth.Caller) error {
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
	d.publishLocked(j)
	d.mu.Unlock()
	log := d.log.With().Uint32("job", id).Logger()
	log.Info().Int("pin", n).Str("by", caller.User).Msg("size pinned (0: unpinned)")
	d.save(j, log)
	return nil
}

// Access is how the API learns who asks.
type Access struct {
	// Callers authenticates people: status and pins (nil: both refused).
	Callers auth.Authenticator
	// Agents authenticates node agents' reports (nil: reports refused).
	Agents *AgentAuth
}

// Handler serves GET /v1/status, POST /v1/signals (answering the GPUs to read next), POST
// /v1/signals/session, and PUT/DELETE of a job's pin; each needs a MUNGE credential except a
// report in a session, which carries its session's MAC.
func (d *Daemon) Handler(access Access) http.Handler {
	mux := http.NewServeMux()
	var sessions *sessionTable
	if access.Agents != nil {
		sessions = newSessionTable(access.Agents.MaxSessions, access.Agents.SessionTTL)
	}
	caller := func(w http.ResponseWriter, r *http.Request, what string) (auth.Caller, bool) {
		if access.Callers == nil {
			http.Error(w, "this elasticd "+what+" (no MUNGE authentication configured)", http.StatusServiceUnavailable)
			return auth.Caller{}, false
		}
		c, err := access.Callers.Caller(r)
		if err != nil {
			http.Error(w, err.Error(), auth.ErrorStatus(w, err))
			return auth.Caller{}, false
		}
		return c, true
	}
	pin := func(w http.ResponseWriter, r *http.Request, n int) {
		id, err := strconv.ParseUint(r.PathValue("id"), 10, 32)
		if err != nil || id == 0 {
			http.Error(w, "job id "+strconv.Quote(r.PathValue("id"))+" is not a job id", http.StatusBadRequest)
			return
		}
		caller, ok := caller(w, r, "takes no pins")
		if !ok {
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
	mux.HandleFunc(http.MethodGet+" "+api.StatusPath, func(w http.ResponseWriter, r *http.Request) {
		caller, ok := caller(w, r, "shows no status")
		if !ok {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(d.StatusFor(caller))
	})
	mux.HandleFunc(http.MethodPost+" "+api.SignalsPath, func(w http.ResponseWriter, r *http.Request) {
		d.serveSignals(w, r, access.Agents, sessions)
	})
	mux.HandleFunc(http.MethodPost+" "+api.SignalsSessionPath, func(w http.ResponseWriter, r *http.Request) {
		d.serveSession(w, r, access.Agents, sessions)
	})
	return mux
}

// serveSignals takes a node agent's report: who sent it first (its session's MAC, or its own
// MUNGE credential over the body), then the nodes it speaks for; a report refused at any step
// changes nothing.
func (d *Daemon) serveSignals(w http.ResponseWriter, r *http.Request, agents *AgentAuth, sessions *sessionTable) {
	if agents == nil || agents.Identity == nil || sessions == nil {
		http.Error(w, "this elasticd takes no signal reports (no MUNGE authentication configured)", http.StatusServiceUnavailable)
		return
	}
	authz := r.Header.Get("Authorization")
	if authz == "" {
		// Said before the body is read: nothing without a credential costs more than this.
		w.Header().Set("WWW-Authenticate", auth.Scheme)
		http.Error(w, fmt.Sprintf("signal reports come from elasticd's node agents: send \"Authorization: %s <id> <seq> <MAC>\" of a session set up at %s, or \"Authorization: %s <credential>\" with a credential of root or the agents' user from `munge --string 'slurmbridge-elasticd-signals POST %s sha256=<hex SHA-256 of the body>'` (elasticd agent does)",
			api.SessionScheme, api.SignalsSessionPath, auth.Scheme, api.SignalsPath), http.StatusUnauthorized)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxSignalReport))
	if err != nil {
		http.Error(w, "signal report unreadable or over "+strconv.Itoa(maxSignalReport)+" bytes: "+err.Error(), http.StatusRequestEntityTooLarge)
		return
	}
	var (
		host string // where the credential (the session's, or the report's own) was encoded
		sess *agentSession
	)
	if scheme, _, _ := strings.Cut(authz, " "); scheme == api.SessionScheme {
		sid, seq, mac, ok := api.ParseSessionAuthorization(authz)
		if !ok {
			w.Header().Set("WWW-Authenticate", api.SessionScheme)
			http.Error(w, "malformed session authorization: want \""+api.SessionScheme+" <id> <seq> <hex HMAC-SHA256>\"", http.StatusUnauthorized)
			return
		}
		s, err := sessions.accept(sid, seq, mac, body, d.now())
		if err != nil {
			w.Header().Set("WWW-Authenticate", api.SessionScheme)
			http.Error(w, "signal report refused: "+err.Error(), http.StatusUnauthorized)
			return
		}
		sess, host = &s, s.host
		d.metrics.agentReports.WithLabelValues("session").Inc()
	} else {
		// A MUNGE credential per report, as before sessions: kept for one release so that an
		// agent and an elasticd of different releases still work while a site upgrades (an old
		// agent posts this way; a new one does against an elasticd without sessions).
		d.metrics.agentDecodes.WithLabelValues("report").Inc()
		id, ok := agentIdentity(w, r, agents, api.SignalsPayload(body))
		if !ok {
			return
		}
		host = id.EncodeHost
		d.metrics.agentReports.WithLabelValues("munge").Inc()
	}
	var rep api.SignalReport
	if err := json.Unmarshal(body, &rep); err != nil {
		http.Error(w, "bad signal report: "+err.Error(), http.StatusBadRequest)
		return
	}
	if len(rep.Node) > maxReportNodeList {
		http.Error(w, fmt.Sprintf("the signal report's node list is over %d bytes", maxReportNodeList), http.StatusBadRequest)
		return
	}
	nodes := reportNodes(rep)
	if len(nodes) == 0 {
		http.Error(w, "the signal report names no node", http.StatusBadRequest)
		return
	}
	if len(nodes) > MaxReportNodes {
		http.Error(w, fmt.Sprintf("the signal report names over %d nodes: one host runs a few at most", MaxReportNodes), http.StatusBadRequest)
		return
	}
	if agents.CheckOrigin {
		now, gen := d.now(), d.addrGeneration()
		named := strings.Join(nodes, ",")
		if sess == nil || !originKnown(*sess, named, gen, now) {
			if err := d.checkOrigin(r.Context(), agents, nodes, host); err != nil {
				http.Error(w, "signal report refused: "+err.Error(), http.StatusForbidden)
				return
			}
			if sess != nil {
				sessions.noteOrigin(sess.id, named, gen, now)
			}
		}
	}
	out := d.AddSignals(rep)
	if len(out.refused) > 0 || out.dropped > 0 {
		d.log.Warn().Str("node", rep.Node).Strs("refused", out.refused).Int("samples_dropped", out.dropped).Int("samples_kept", out.kept).
			Msg("parts of a signal report not taken (jobs elsewhere, GPU index out of range, sample time stale or ahead)")
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(d.gpusToReadOn(nodes))
}

// agentIdentity decodes the request's MUNGE credential, which must hold payload and be root's
// or an agent uid's: a report's before sessions, and a session's set-up. Refused, it has
// answered w.
func agentIdentity(w http.ResponseWriter, r *http.Request, agents *AgentAuth, payload string) (slurm.MungeIdentity, bool) {
	id, err := agents.Identity(r, payload)
	if err != nil {
		http.Error(w, err.Error(), auth.ErrorStatus(w, err))
		return id, false
	}
	if id.UID != 0 && !slices.Contains(agents.UIDs, id.UID) {
		http.Error(w, fmt.Sprintf("uid %d may not report GPU signals: only root and the node agents' user (uid %s) may", id.UID, uidList(agents.UIDs)), http.StatusForbidden)
		return id, false
	}
	return id, true
}

func uidList(uids []uint32) string {
	if len(uids) == 0 {
		return "none configured"
	}
	var s []string
	for _, u := range uids {
		s = append(s, strconv.FormatUint(uint64(u), 10))
	}
	return strings.Join(s, ", ")
}
