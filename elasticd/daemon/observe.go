// The cycle's gathering: what reconcile needs of a job, read from the queue, the job's
// directory and the agents' signals.

package daemon

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/slurmbridge/slurmbridge/bridge/gpureq"
	"github.com/slurmbridge/slurmbridge/bridge/pools"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/elasticd/capacity"
	"github.com/slurmbridge/slurmbridge/elasticd/policy"
	"github.com/slurmbridge/slurmbridge/elasticd/reconcile"
	"github.com/slurmbridge/slurmbridge/elasticd/registry"
)

// queuedOf is what reconcile.SortWorkers needs of the job's workers.
func (d *Daemon) queuedOf(workers []slurm.Job, snap *capacity.Snapshot) []reconcile.Queued {
	out := make([]reconcile.Queued, 0, len(workers))
	for _, w := range workers {
		out = append(out, reconcile.Queued{ID: w.ID, Running: w.Running(), Pending: w.Pending(), Restarts: snap.Jobs[w.ID].Restarts})
	}
	return out
}

// seen says which of j's submitted workers are in the queue.
func (d *Daemon) seen(j *job, snap *capacity.Snapshot) map[uint32]bool {
	out := map[uint32]bool{}
	for id := range j.submitted {
		_, out[id] = snap.Jobs[id]
	}
	return out
}

// stateOf is what reconcile needs of what elasticd remembers of j, copied: the plan is made
// from values that acting on it does not change.
func (d *Daemon) stateOf(j *job) reconcile.State {
	bounds := d.bounds(j)
	d.mu.Lock()
	defer d.mu.Unlock()
	return reconcile.State{ID: j.id, Bounds: bounds, PinnedBy: j.pinnedBy, Settings: d.settingsFor(j),
		PendingTimeout: d.cfg.PendingTimeout, History: j.history, Submitted: len(j.submitted),
		Stopping: maps.Clone(j.stopping), Replacing: maps.Clone(j.replacing), Leaving: maps.Clone(j.leaving), Refusals: j.refusals, Refused: j.refused}
}

// observe is what reconcile needs of this cycle's view of j: its workers, the successors and
// leaving stragglers in the queue, and the agents' signals. The capacity of each GPU type is
// planJob's to count.
func (d *Daemon) observe(j *job, main slurm.Job, active []slurm.Job, current map[policy.GPUType]int, pending []uint32, snap *capacity.Snapshot) reconcile.Snapshot {
	o := reconcile.Snapshot{MainType: d.typeOf(main), Allocated: current, Signals: d.signalsFor(active),
		Successors: map[uint32]reconcile.Successor{}, Queued: map[uint32]bool{}}
	for _, w := range active {
		o.Active = append(o.Active, w.ID)
	}
	for _, id := range pending {
		o.Pending = append(o.Pending, reconcile.Pending{ID: id, Submit: snap.Jobs[id].Submit})
	}
	for next := range j.replacing {
		w, ok := snap.Jobs[next]
		s := reconcile.Successor{Queued: ok && (w.Running() || w.Pending()), Running: ok && w.Running()}
		if s.Running {
			rep, reported, _ := d.cfg.Dir.LatestReport(j.id, strconv.FormatUint(uint64(next), 10), j.decl.UID)
			s.Reported = reported && !rep.Time.Before(w.Start)
		}
		o.Successors[next] = s
	}
	for old := range j.leaving {
		if w, ok := snap.Jobs[old]; ok && (w.Running() || w.Pending()) {
			o.Queued[old] = true
		}
	}
	return o
}

// runOf is what reconcile.FollowRun needs of the main job's run: its state, its start against
// the one followed, its workers, and, once it started again, the declaration in its directory
// (returned too, to be taken).
func (d *Daemon) runOf(j *job, main slurm.Job, workers []slurm.Job) (reconcile.Run, *registry.Declaration) {
	r := reconcile.Run{Running: main.Running(), State: main.StateName(), Start: main.Start, Followed: j.mainStart,
		Declared: reconcile.Declared{UID: j.decl.UID, Recorded: j.decl.Recorded}}
	for _, w := range workers {
		if _, stopping := j.stopping[w.ID]; stopping || !(w.Running() || w.Pending()) {
			continue
		}
		since := w.Start
		if !w.Running() {
			since = w.Submit
		}
		r.Workers = append(r.Workers, reconcile.Worker{ID: w.ID, Since: since})
	}
	if !r.Running || main.Start.Equal(j.mainStart) {
		return r, nil
	}
	decl, err := d.cfg.Dir.ReadDeclarationOwnedBy(j.id, d.cfg.DeclarationOwner)
	if err != nil {
		return r, nil
	}
	r.Declaration = &reconcile.Declared{UID: decl.UID, Recorded: decl.Recorded}
	return r, decl
}

// bounds are the job's declared bounds for the policy: its max lowered by its max global
// batch, and the size its owner pinned.
func (d *Daemon) bounds(j *job) policy.Bounds {
	maxWorkers, why := j.decl.EffectiveMax()
	d.mu.Lock()
	pin := j.pin
	d.mu.Unlock()
	return policy.Bounds{MinWorkers: j.decl.MinWorkers, MaxWorkers: maxWorkers, MaxReason: why, Pin: pin,
		GPUsPerWorker: j.decl.GPUsPerWorker, Types: d.typeOptions(j)}
}

// settingsFor is the daemon's settings with the job's own --elastic-value, when it gave one.
func (d *Daemon) settingsFor(j *job) policy.Settings {
	s := d.cfg.Settings
	if v := j.decl.ValuePerMillionSamples; v > 0 {
		s.ValuePerMillionSamples = v
	}
	return s
}

// workersOf lists the job's worker jobs in the queue: the worker name and the main job's
// owner, so a job another user names like a worker is never counted or cancelled.
func (d *Daemon) workersOf(j *job, snap *capacity.Snapshot) []slurm.Job {
	var out []slurm.Job
	for _, id := range snap.Named(WorkerName(j.id)) {
		w, ok := snap.Jobs[id]
		if ok && snap.Jobs[id].UserID == j.decl.UID && id != j.id {
			out = append(out, w)
		}
	}
	slices.SortFunc(out, func(a, b slurm.Job) int { return int(a.ID) - int(b.ID) })
	return out
}

// typeOf is a worker's GPU type: its pool's, else the type of the GPUs it holds.
func (d *Daemon) typeOf(w slurm.Job) policy.GPUType {
	if d.cfg.Pools != nil {
		for _, p := range d.cfg.Pools.Pools {
			if p.Partition == w.Partition && p.GPUType != "" {
				return policy.GPUType(p.GPUType)
			}
		}
	}
	for _, tres := range []string{w.TRESAlloc.String(), w.TRESReq.String()} {
		for field := range strings.SplitSeq(tres, ",") {
			if name, ok := strings.CutPrefix(field, "gres/gpu:"); ok {
				t, _, _ := strings.Cut(name, "=")
				return policy.GPUType(t)
			}
		}
	}
	return "gpu"
}

// partitionsOf are the partitions a worker of type t may run in: the declared pools of that
// type, else the main job's partition.
func (d *Daemon) partitionsOf(j *job, main slurm.Job, t policy.GPUType) []string {
	ps := d.poolsOfType(j, t)
	if len(ps) == 0 {
		return []string{main.Partition}
	}
	parts := make([]string, 0, len(ps))
	for _, p := range ps {
		parts = append(parts, p.Partition)
	}
	return parts
}

// poolsOfType are the declared pools of GPU type t, in declaration order.
func (d *Daemon) poolsOfType(j *job, t policy.GPUType) []*pools.Pool {
	var out []*pools.Pool
	if d.cfg.Pools == nil {
		return nil
	}
	for _, name := range j.decl.Pools {
		if p := d.cfg.Pools.Pool(name); p != nil && policy.GPUType(p.GPUType) == t {
			out = append(out, p)
		}
	}
	return out
}

// typeOptions turns the declared pools into the policy's GPU types, one per type, priced by
// the cheapest of its pools.
func (d *Daemon) typeOptions(j *job) []policy.TypeOption {
	var out []policy.TypeOption
	if d.cfg.Pools == nil {
		return nil
	}
	for _, name := range j.decl.Pools {
		p := d.cfg.Pools.Pool(name)
		if p == nil || p.GPUType == "" {
			continue
		}
		i := slices.IndexFunc(out, func(o policy.TypeOption) bool { return o.Type == policy.GPUType(p.GPUType) })
		if i < 0 {
			out = append(out, policy.TypeOption{Type: policy.GPUType(p.GPUType), Pool: p.Name, PricePerGPUHour: p.PricePerGPUHour})
		} else if p.PricePerGPUHour < out[i].PricePerGPUHour {
			out[i].PricePerGPUHour, out[i].Pool = p.PricePerGPUHour, p.Name
		}
	}
	return out
}

// signalsFor turns the agents' latest NVML samples into the policy's signals.
func (d *Daemon) signalsFor(active []slurm.Job) []policy.GPUSignal {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []policy.GPUSignal
	for _, w := range active {
		byGPU := d.signals[w.ID]
		for _, i := range slices.Sorted(maps.Keys(byGPU)) {
			out = append(out, byGPU[i])
		}
	}
	return out
}

// record appends a measurement when every active worker has reported since the last one.
// A worker's report counts only from its own job's start, and never the main job's old ones
// from before a requeue.
// It returns the allocation of the active workers.
func (d *Daemon) record(j *job, active []slurm.Job, now time.Time, log zerolog.Logger) map[policy.GPUType]int {
	m := policy.Measurement{Allocated: map[policy.GPUType]int{}}
	for _, w := range active {
		m.Allocated[d.typeOf(w)]++
	}
	d.mu.Lock()
	j.size = m.Allocated
	d.mu.Unlock()
	for _, w := range active {
		t := d.typeOf(w)
		worker := strconv.FormatUint(uint64(w.ID), 10)
		rep, ok, err := d.cfg.Dir.LatestReport(j.id, worker, j.decl.UID)
		if err != nil {
			log.Warn().Err(err).Str("worker", worker).Msg("report unreadable")
		}
		if !ok || err != nil || (!w.Start.IsZero() && rep.Time.Before(w.Start)) || rep.Time.After(now.Add(time.Minute)) {
			return m.Allocated // incomplete: the policy would hold on it anyway; keep the history clean
		}
		m.Workers = append(m.Workers, policy.WorkerRate{Worker: worker, Type: t, SamplesPerSec: rep.SamplesPerSec,
			ComputeSecondsPerStep: rep.ComputeSecondsPerStep})
		if m.Time.IsZero() || rep.Time.Before(m.Time) {
			m.Time = rep.Time // the measurement is as old as its oldest report
		}
	}
	if n := len(j.history); n > 0 && !m.Time.After(j.history[n-1].Time) {
		return m.Allocated
	}
	d.mu.Lock()
	j.history = append(j.history, m)
	if over := len(j.history) - d.cfg.HistoryLimit; over > 0 {
		j.history = slices.Delete(j.history, 0, over)
	}
	d.mu.Unlock()
	return m.Allocated
}

func (d *Daemon) writeHosts(j *job, active []slurm.Job, log zerolog.Logger) {
	var hosts []registry.Host
	for _, w := range active {
		if node, ok := singleNode(w); ok {
			hosts = append(hosts, registry.Host{Node: node, Slots: j.decl.GPUsPerWorker})
		}
	}
	if err := d.cfg.Dir.WriteHosts(j.id, hosts); err != nil {
		log.Warn().Err(err).Msg("cannot write the hosts file")
	}
}

// singleNode is a one-node job's node name.
func singleNode(w slurm.Job) (string, bool) {
	if w.NodeCount == 1 && w.Nodes != "" && !strings.ContainsAny(w.Nodes, "[,") {
		return w.Nodes, true
	}
	return "", false
}

// readQOS is every QOS' GrpTRES, or nil (logged) when they cannot be read.
func (d *Daemon) readQOS(ctx context.Context) map[string]gpureq.TRES {
	list, err := d.slurm.QOS(ctx)
	if err != nil {
		d.log.Warn().Err(err).Msg("cannot read the QOS limits; workers run in their main job's QOS")
		return nil
	}
	out := make(map[string]gpureq.TRES, len(list))
	for _, q := range list {
		t := q.GrpTRES
		if t == nil {
			t = gpureq.TRES{}
		}
		out[pools.QOSKey(q.Name)] = t
	}
	return out
}
