// Package daemon is elasticd's control loop: each cycle reads the queue (squeue --json), the
// elastic jobs' declarations and throughput reports (elasticd/registry) and the node agents'
// NVML signals, asks elasticd/policy what each job should do, and does it: grow by submitting
// worker jobs as the job's user, shrink by TERM then cancel of chosen worker jobs after a
// grace period, replace a straggler by starting its successor first. The main job is never
// signalled; a job without a declaration is never touched.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/slurmbridge/slurmbridge/bridge/gpureq"
	"github.com/slurmbridge/slurmbridge/bridge/jobreason"
	"github.com/slurmbridge/slurmbridge/bridge/pools"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/elasticd/policy"
	"github.com/slurmbridge/slurmbridge/elasticd/registry"
)

// Config is what the daemon needs besides Slurm.
type Config struct {
	Dir registry.Dir
	// Pools places workers and prices GPU types; nil: workers go to the main job's partition.
	Pools    *pools.Config
	Settings policy.Settings
	// Grace between a worker's TERM and its cancellation.
	Grace time.Duration
	// PendingTimeout: a worker still pending after this is cancelled (the capacity it was
	// counted on went elsewhere).
	PendingTimeout time.Duration
	// HistoryLimit bounds the measurements kept per job.
	HistoryLimit int
	// DeclarationOwner is the uid that must own declarations: 0, the SPANK plugin in
	// slurmstepd; tests that do not run as root set their own.
	DeclarationOwner uint32
}

// WorkerName is the job name of every worker of main job id: workers are found by it (and by
// their owner) after a restart.
func WorkerName(mainID uint32) string {
	return slurm.ElasticWorkerName(mainID)
}

// Daemon holds the state of every elastic job between cycles.
type Daemon struct {
	cfg     Config
	slurm   Slurm
	log     zerolog.Logger
	now     func() time.Time
	metrics *Metrics

	saveMu  sync.Mutex // one write of a state file at a time (cycles, pins)
	mu      sync.Mutex // guards jobs, signals and lastCycle (the HTTP handlers read them)
	jobs    map[uint32]*job
	signals map[uint32]map[int]policy.GPUSignal // by worker job id, then GPU index
	// lastCycle is when a cycle last read the queue.
	lastCycle time.Time
	// cluster is slurmctld's ClusterName, read once: whose associations limit workers.
	cluster string
}

// job is one elastic job as elasticd follows it.
type job struct {
	id      uint32
	decl    *registry.Declaration
	user    string
	account string
	script  []byte

	history   []policy.Measurement
	size      map[policy.GPUType]int
	last      policy.Decision
	lastAt    time.Time
	submitted map[uint32]time.Time // workers submitted and not yet seen running
	stopping  map[uint32]time.Time // workers sent TERM, with when
	replacing map[uint32]uint32    // new worker → the straggler it replaces
	leaving   map[uint32]leave     // straggler sent TERM before its successor is submitted
	finished  time.Time            // main job left the queue
	// mainStart is when the main job's current run started; another start is a restart.
	mainStart time.Time
	pin       int    // size pinned by the job's owner or root (0: none)
	pinnedBy  string // who pinned it
	saved     []byte // the state file as last written
	// refusals counts worker submissions failed in a row; at maxRefusals the job holds with
	// refused, Slurm's answer, as its reason.
	refusals int
	refused  string
}

// New makes a daemon.
func New(cfg Config, s Slurm, log zerolog.Logger, m *Metrics) *Daemon {
	if cfg.Grace <= 0 {
		cfg.Grace = 30 * time.Second
	}
	if cfg.PendingTimeout <= 0 {
		cfg.PendingTimeout = 5 * time.Minute
	}
	if cfg.HistoryLimit <= 0 {
		cfg.HistoryLimit = 1000
	}
	return &Daemon{cfg: cfg, slurm: s, log: log, now: time.Now, metrics: m,
		jobs: map[uint32]*job{}, signals: map[uint32]map[int]policy.GPUSignal{}}
}

// snapshot is one cycle's view of the queue.
type snapshot struct {
	jobs   map[uint32]slurm.Job
	extras map[uint32]slurm.JobExtra
	nodes  []slurm.Node
	// qos is every QOS' GrpTRES by lower-case name; nil when they could not be read, and
	// workers then run in their main job's QOS.
	qos map[string]gpureq.TRES
	// assocs are the cluster's associations with their limits; assocErr says why they could
	// not be read, and then no worker is submitted (it could wait on a limit for ever).
	assocs   []slurm.AssociationLimits
	assocErr error
}

// Cycle runs one round. It returns an error only when the queue or the nodes could not be read:
// then nothing is done, because every action would rest on stale data.
func (d *Daemon) Cycle(ctx context.Context) error {
	start := d.now()
	defer func() { d.metrics.cycleSeconds.Observe(d.now().Sub(start).Seconds()) }()
	// The registered jobs are listed before the queue is read: a job that registers after
	// that read (its batch step records it as it starts) is absent from this queue, and
	// taking its directory for a leftover would remove its declaration.
	ids, err := d.cfg.Dir.Jobs()
	if err != nil {
		d.metrics.cycleErrors.Inc()
		return fmt.Errorf("reading %s: %w", d.cfg.Dir, err)
	}
	list, extras, err := d.slurm.Queue(ctx)
	if err != nil {
		d.metrics.cycleErrors.Inc()
		return fmt.Errorf("reading the queue: %w", err)
	}
	nodes, err := d.slurm.Nodes(ctx)
	if err != nil {
		d.metrics.cycleErrors.Inc()
		return fmt.Errorf("reading the nodes: %w", err)
	}
	snap := snapshot{jobs: map[uint32]slurm.Job{}, extras: extras, nodes: nodes, qos: d.readQOS(ctx)}
	if len(ids) > 0 {
		if snap.assocs, snap.assocErr = d.readAssociations(ctx); snap.assocErr != nil {
			d.log.Warn().Err(snap.assocErr).Msg("cannot read the association limits; no worker is submitted this cycle")
		}
	}
	for _, j := range list {
		snap.jobs[j.ID] = j
	}

	d.mu.Lock()
	d.lastCycle = start
	d.mu.Unlock()
	for _, id := range ids {
		d.step(ctx, id, &snap)
		d.mu.Lock()
		j := d.jobs[id]
		d.mu.Unlock()
		if j != nil {
			d.save(j, d.log.With().Uint32("job", id).Logger())
		}
	}
	d.mu.Lock()
	for id := range d.jobs {
		if !slices.Contains(ids, id) {
			delete(d.jobs, id)
		}
	}
	d.metrics.observeJobs(d.jobs)
	d.mu.Unlock()
	return nil
}

// step follows one registered job for one cycle.
func (d *Daemon) step(ctx context.Context, id uint32, snap *snapshot) {
	log := d.log.With().Uint32("job", id).Logger()
	d.mu.Lock()
	j := d.jobs[id]
	d.mu.Unlock()
	main, inQueue := snap.jobs[id]
	if j == nil {
		if !inQueue || !main.Running() {
			// Not ours to follow (yet): a leftover directory of a job that ended while
			// elasticd was down is cleaned once its workers are gone.
			if !inQueue {
				d.cleanup(ctx, id, nil, snap, log)
			}
			return
		}
		decl, err := d.cfg.Dir.ReadDeclarationOwnedBy(id, d.cfg.DeclarationOwner)
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				log.Warn().Err(err).Msg("declaration unusable; job left alone")
			}
			return
		}
		extra := snap.extras[id]
		if extra.UserID != decl.UID {
			log.Warn().Uint32("declared_uid", decl.UID).Uint32("job_uid", extra.UserID).Msg("declaration does not belong to the job's owner; job left alone")
			return
		}
		j = &job{id: id, decl: decl, user: main.User, account: main.Account,
			submitted: map[uint32]time.Time{}, stopping: map[uint32]time.Time{}, replacing: map[uint32]uint32{}, leaving: map[uint32]leave{}}
		log.Info().Str("user", j.user).Int("min", decl.MinWorkers).Int("max", decl.MaxWorkers).
			Int("gpus_per_worker", decl.GPUsPerWorker).Strs("pools", decl.Pools).Msg("following elastic job")
		d.restore(j, log)
		d.mu.Lock()
		d.jobs[id] = j
		d.mu.Unlock()
	}
	if !inQueue || !(main.Running() || main.Pending()) {
		d.cleanup(ctx, id, j, snap, log)
		return
	}
	now := d.now()
	workers := d.workersOf(j, snap)
	d.finishStops(ctx, j, workers, now, log)
	if !main.Running() {
		// Requeued (preempted, or by hand): the training restarts from its checkpoint, maybe on
		// another node with another rendezvous, so the workers of this run are stopped (the
		// plugin's job epilog has cancelled them already where it runs) and its reports
		// forgotten.
		d.stopWorkers(ctx, j, workers, func(slurm.Job) bool { return true }, "main job requeued", now, log)
		d.setDecision(j, policy.Decision{Action: policy.Hold, Reason: "main job is not running (" + main.StateName() + ")"}, now, log)
		d.mu.Lock()
		j.history = nil
		clear(j.leaving) // its workers are gone with this run; the next run grows afresh
		d.mu.Unlock()
		return
	}
	if j.mainStart.IsZero() {
		j.mainStart = main.Start
	}
	if !main.Start.Equal(j.mainStart) && !d.restarted(ctx, j, main, workers, now, log) {
		return
	}

	running := []slurm.Job{main}
	var pending []uint32
	for _, w := range workers {
		switch {
		case w.Running():
			running = append(running, w)
			delete(j.submitted, w.ID)
		case w.Pending():
			if _, stopping := j.stopping[w.ID]; !stopping && snap.extras[w.ID].Restarts > 0 {
				d.reclaimed(ctx, j, w.ID, now, log)
				continue
			}
			pending = append(pending, w.ID)
		}
	}
	for id, at := range j.submitted {
		// A job sbatch accepted is in the next squeue; still absent a minute later, it is
		// gone before it ran (purged after failing).
		if _, ok := snap.jobs[id]; !ok && now.Sub(at) > time.Minute {
			delete(j.submitted, id)
		}
	}
	active := slices.DeleteFunc(slices.Clone(running), func(w slurm.Job) bool { _, stopping := j.stopping[w.ID]; return stopping })
	d.writeHosts(j, active, log)
	current := d.record(j, active, now, log)

	switch {
	case len(pending) > 0:
		d.cancelStalePending(ctx, j, pending, snap, now, log)
		d.setDecision(j, policy.Decision{Action: policy.Hold, Reason: fmt.Sprintf("waiting for worker job(s) %v to start", pending)}, now, log)
		return
	case len(j.submitted) > 0:
		d.setDecision(j, policy.Decision{Action: policy.Hold, Reason: "waiting for submitted workers to appear in the queue"}, now, log)
		return
	case len(j.replacing) > 0:
		d.completeReplacements(ctx, j, snap, now, log)
		return
	case len(j.leaving) > 0:
		d.succeed(ctx, j, main, active, snap, now, log)
		return
	case len(j.stopping) > 0:
		d.setDecision(j, policy.Decision{Action: policy.Hold, Reason: fmt.Sprintf("waiting for %d worker(s) to stop", len(j.stopping))}, now, log)
		return
	}
	if j.refused != "" {
		d.setDecision(j, policy.Decision{Action: policy.Hold, Reason: fmt.Sprintf("Slurm refused %d worker submissions in a row: %s", j.refusals, j.refused)}, now, log)
		return
	}
	target, below := j.decl.MinWorkers, "the declared min"
	d.mu.Lock()
	if j.pin > target {
		target, below = j.pin, "the size pinned by "+j.pinnedBy
	}
	d.mu.Unlock()
	if len(active) < target {
		// Below the declared minimum the training cannot start (torchrun waits for MIN
		// nodes), so there is no throughput to wait for; nor below a pinned size, which
		// throughput does not decide.
		t := d.typeOf(main)
		dec := policy.Decision{Action: policy.Grow, Type: t, Count: target - len(active),
			Reason: fmt.Sprintf("below %s: %d of %d workers", below, len(active), target)}
		// Association limits are the one bound even here: a worker they hold back would wait
		// in the queue until cancelled, and be submitted again, and again.
		shape := d.shapeOf(j, main, snap.extras[j.id])
		qos := d.nextWorkerQOS(main, snap, t, shape.gpus)
		if n, why := d.associationRoom(main, snap, shape, t, d.partitionsOf(j, main, t), qos); n != unlimited && n < dec.Count {
			if n == 0 {
				d.setDecision(j, policy.Decision{Action: policy.Hold, Reason: dec.Reason + "; no worker can start: " + why}, now, log)
				return
			}
			dec.Count, dec.Reason = n, dec.Reason+fmt.Sprintf("; adding %d: %s", n, why)
		}
		d.setDecision(j, dec, now, log)
		d.grow(ctx, j, main, snap, dec, log)
		return
	}

	if n := len(j.history); n == 0 || !maps.Equal(j.history[n-1].Allocated, current) || !ofWorkers(j.history[n-1], active) {
		// The last measurement is of another size, or of workers since replaced: deciding on
		// it would repeat the last action (grow again before the new worker has even
		// reported, replace a straggler that has left).
		d.setDecision(j, policy.Decision{Action: policy.Hold, Reason: fmt.Sprintf("waiting for every worker of %d to report", len(active))}, now, log)
		return
	}
	capacity, limits, growth, growthLimits := d.capacity(j, main, snap)
	dec := policy.Decide(policy.Input{
		Now:            now,
		Job:            policy.Job{ID: strconv.FormatUint(uint64(id), 10), Elastic: true, Bounds: d.bounds(j)},
		History:        j.history,
		Signals:        d.signalsFor(active),
		Main:           strconv.FormatUint(uint64(id), 10),
		Capacity:       capacity,
		CapacityLimit:  limits,
		GrowthCapacity: growth,
		GrowthLimit:    growthLimits,
		Settings:       d.settingsFor(j),
	})
	d.setDecision(j, dec, now, log)
	switch dec.Action {
	case policy.Grow:
		d.grow(ctx, j, main, snap, dec, log)
	case policy.Shrink:
		d.shrink(ctx, j, active, dec, now, log)
	case policy.Replace:
		d.replace(ctx, j, main, active, snap, dec, now, log)
	}
}

// ofWorkers: m measured exactly the active workers.
func ofWorkers(m policy.Measurement, active []slurm.Job) bool {
	if len(m.Workers) != len(active) {
		return false
	}
	for _, w := range active {
		id := strconv.FormatUint(uint64(w.ID), 10)
		if !slices.ContainsFunc(m.Workers, func(r policy.WorkerRate) bool { return r.Worker == id }) {
			return false
		}
	}
	return true
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

// restarted handles a main job that started again since elasticd last saw it run (requeued
// and restarted, maybe while elasticd was down): the plugin records its declaration again as
// the batch step starts, with the rendezvous endpoint of its new node. Until then elasticd
// holds; then it stops the workers of the earlier run, forgets that run's measurements and
// takes the new declaration, so new workers get the new endpoint. It reports whether the job
// may go on this cycle.
func (d *Daemon) restarted(ctx context.Context, j *job, main slurm.Job, workers []slurm.Job, now time.Time, log zerolog.Logger) bool {
	decl, err := d.cfg.Dir.ReadDeclarationOwnedBy(j.id, d.cfg.DeclarationOwner)
	if err != nil || decl.UID != j.decl.UID || (decl.Recorded == j.decl.Recorded && decl.Recorded < main.Start.Unix()) {
		d.setDecision(j, policy.Decision{Action: policy.Hold, Reason: fmt.Sprintf("main job restarted at %s; waiting for its new declaration (rendezvous endpoint)",
			main.Start.UTC().Format(time.RFC3339))}, now, log)
		return false
	}
	d.stopWorkers(ctx, j, workers, func(w slurm.Job) bool {
		started := w.Start
		if !w.Running() {
			started = w.Submit
		}
		return started.Before(main.Start)
	}, "worker of the main job's earlier run", now, log)
	log.Info().Time("start", main.Start).Str("rdzv_endpoint", decl.RdzvEndpoint).Str("was", j.decl.RdzvEndpoint).
		Msg("main job restarted; new workers get its new declaration")
	d.mu.Lock()
	j.decl, j.mainStart, j.history = decl, main.Start, nil
	clear(j.submitted)
	clear(j.replacing)
	clear(j.leaving)
	d.mu.Unlock()
	return true
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
func (d *Daemon) workersOf(j *job, snap *snapshot) []slurm.Job {
	name := WorkerName(j.id)
	var out []slurm.Job
	for id, extra := range snap.extras {
		w, ok := snap.jobs[id]
		if ok && extra.Name == name && extra.UserID == j.decl.UID && id != j.id {
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

// capacity counts, per type the job may use, how many more workers could start now: the
// nodes' free GPUs, CPUs and memory for the worker's shape, within what the project's
// guarantee and its elastic QOS (the borrowing limit) leave and what the user's and account's associations admit.
// limits says, per type, which association limit holds it where one does.
func (d *Daemon) capacity(j *job, main slurm.Job, snap *snapshot) (out map[policy.GPUType]int, limits map[policy.GPUType]string, growth map[policy.GPUType]int, growthLimits map[policy.GPUType]string) {
	types := d.typeOptions(j)
	if len(types) == 0 {
		types = []policy.TypeOption{{Type: d.typeOf(main)}}
	}
	shape := d.shapeOf(j, main, snap.extras[j.id])
	out, limits = map[policy.GPUType]int{}, map[policy.GPUType]string{}
	growth, growthLimits = map[policy.GPUType]int{}, map[policy.GPUType]string{}
	own := d.workersOf(j, snap)
	for _, o := range types {
		parts := d.partitionsOf(j, main, o.Type)
		out[o.Type] = shape.fits(snap.nodes, parts, o.Type)
		if n := d.roomFor(main, snap, o.Type).workers(shape.gpus); n != unlimited {
			out[o.Type] = min(out[o.Type], n)
		}
		qos := d.nextWorkerQOS(main, snap, o.Type, shape.gpus)
		if n, why := d.associationRoom(main, snap, shape, o.Type, parts, qos); n != unlimited && n <= out[o.Type] {
			out[o.Type], limits[o.Type] = n, why
		}
		if n, why := d.roomAfterWaiting(snap, parts, o.Type, shape.gpus, own); n != unlimited {
			growth[o.Type], growthLimits[o.Type] = n, why
		}
	}
	return out, limits, growth, growthLimits
}

// roomAfterWaiting is how many workers of gpus GPUs growth may add in the partitions once the
// jobs waiting there have their GPUs (unlimited when none waits), with why. Growth beyond MIN
// yields to any job Slurm would start, or quotad lend to, if GPUs were free: a worker's GPU adds
// less work than the same GPU gives a job of its own (scaling is sublinear), and a worker on
// GPUs a waiting job could take only delays that job (in the trace replay's busy window,
// elastic workers on such GPUs made waiting jobs later and the whole run longer). The job's own
// pending workers do not count: they are what growth is. A job pending in several of the job's
// GPU types counts against each, since it is not known which it will take.
func (d *Daemon) roomAfterWaiting(snap *snapshot, parts []string, t policy.GPUType, gpus int, own []slurm.Job) (int, string) {
	waiting := 0
	for _, j := range snap.jobs {
		if !j.Pending() || !d.waitsForGPUs(j) || slices.ContainsFunc(own, func(w slurm.Job) bool { return w.ID == j.ID }) {
			continue
		}
		if !slices.ContainsFunc(j.Partitions(), func(p string) bool { return slices.Contains(parts, p) }) {
			continue
		}
		waiting += int(j.TRESReq.GPUs("")) * j.TaskCount()
	}
	if waiting == 0 {
		return unlimited, ""
	}
	free := 0
	for _, n := range snap.nodes {
		if startsJobs(n, parts) {
			free += freeGPUs(n, t)
		}
	}
	return max(free-waiting, 0) / gpus, fmt.Sprintf("jobs waiting in %s ask for %d GPUs, %d of %s free there: growth yields to them",
		strings.Join(parts, ","), waiting, free, t)
}

// waitsForGPUs: the pending job would take GPUs that became free, by Slurm starting it or by
// quotad lending it them. quotad lends only batch jobs Slurm can requeue, waiting on their
// guarantee's GPU limit (QOSGrpGRES) outside any lending QOS.
func (d *Daemon) waitsForGPUs(j slurm.Job) bool {
	switch {
	case jobreason.StartsWhenGPUsFree(j.StateReason):
		return true
	case j.StateReason == jobreason.GuaranteeFull:
		return j.Batch && j.Requeue && !d.cfg.Pools.IsLendingQOS(j.QOS)
	}
	return false
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

// readQOS is every QOS' GrpTRES, or nil (logged) when they cannot be read.
func (d *Daemon) readQOS(ctx context.Context) map[string]gpureq.TRES {
	list, err := d.slurm.QOS(ctx)
	if err != nil {
		d.log.Warn().Err(err).Msg("cannot read the QOS limits; workers run in their main job's QOS")
		return nil
	}
	out := make(map[string]gpureq.TRES, len(list))
	for _, q := range list {
		t, err := gpureq.ParseTRES(q.GrpTRES)
		if err != nil {
			d.log.Warn().Err(err).Str("qos", q.Name).Msg("QOS GrpTRES unreadable; taken as no limit")
			t = gpureq.TRES{}
		}
		out[strings.ToLower(q.Name)] = t
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

func (d *Daemon) setDecision(j *job, dec policy.Decision, now time.Time, log zerolog.Logger) {
	d.mu.Lock()
	changed := dec.Action != j.last.Action || dec.Reason != j.last.Reason
	// A slow main job holds the job until it recovers; the figures in the reason move every
	// cycle, the state does not: said once, when the job enters it.
	stillSlowMain := dec.MainStraggler && j.last.MainStraggler
	j.last, j.lastAt = dec, now
	d.mu.Unlock()
	d.metrics.decisions.WithLabelValues(dec.Action.String()).Inc()
	if changed && !stillSlowMain {
		ev := log.Info()
		switch {
		case dec.MainStraggler:
			ev = log.Warn()
		case dec.Action == policy.Hold:
			ev = log.Debug()
		}
		ev.Str("action", dec.Action.String()).Str("type", string(dec.Type)).Int("count", dec.Count).
			Strs("workers", dec.Workers).Str("reason", dec.Reason).Msg("decision")
	}
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
