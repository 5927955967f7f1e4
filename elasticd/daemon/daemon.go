// Package daemon is elasticd's control loop: each cycle reads the queue (squeue --json), the
// elastic jobs' declarations and throughput reports (elasticd/registry) and the node agents'
// NVML signals, plans each job on that snapshot (planJob: its room from elasticd/capacity, then
// elasticd/reconcile and through it elasticd/policy), and carries the plan out (act): grow by
// submitting worker jobs as the job's user, shrink by TERM then cancel of chosen worker jobs
// after a grace period, replace a straggler by starting its successor first. The main job is
// never signalled; a job without a declaration is never touched.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/slurmbridge/slurmbridge/bridge/pools"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/elasticd/api"
	"github.com/slurmbridge/slurmbridge/elasticd/capacity"
	"github.com/slurmbridge/slurmbridge/elasticd/policy"
	"github.com/slurmbridge/slurmbridge/elasticd/reconcile"
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
	// Quotad reads quotad's plan: the idle GPUs other projects' lending limits keep, which
	// borrowed workers leave alone. nil, unreachable or stale: no worker borrows.
	Quotad Quotad
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

	saveMu sync.Mutex // one write of a state file at a time (cycles, pins)
	// mu guards jobs, status, signals and lastCycle, and every field of a job that Pin or save
	// reads: the cycle is the only writer of a job's maps, but a pin saves the job from an HTTP
	// handler while it runs, and a Go map read during a write is a fatal error, not a stale
	// value.
	mu   sync.Mutex
	jobs map[uint32]*job
	// status is each followed job's status as the cycle or a pin last left it, made under mu
	// (statusOf): what the HTTP handlers read while the cycle writes the jobs.
	status  map[uint32]api.JobStatus
	signals map[uint32]map[int]policy.GPUSignal // by worker job id, then GPU index
	// placed is where each running one-node job ran and nodeAddrs each node's NodeAddr and
	// NodeHostname, as the last cycle read them: what an agent's report is checked against.
	placed    map[uint32]string
	nodeAddrs map[string][]string
	addrGen   uint64 // bumped when nodeAddrs change
	// followed are the main jobs and workers the last cycle followed, and gpusToRead the GPUs
	// of those running on one node, by node: what each node's agent is told to read.
	followed   map[uint32]bool
	gpusToRead map[string][]api.JobGPUs
	// lastCycle is when a cycle last read the queue.
	lastCycle time.Time
	// cluster is slurmctld's ClusterName, read once: whose associations limit workers.
	cluster string
	// lendingWhy is why the last cycle could not count the lending limits ("": it could), so
	// that a change is logged once.
	lendingWhy string
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
	submitted map[uint32]time.Time       // workers submitted and not yet seen running
	stopping  map[uint32]time.Time       // workers sent TERM, with when
	replacing map[uint32]uint32          // new worker → the straggler it replaces
	leaving   map[uint32]reconcile.Leave // straggler sent TERM before its successor is submitted
	// mainStart is when the main job's current run started; another start is a restart.
	mainStart time.Time
	pin       int    // size pinned by the job's owner or root (0: none)
	pinnedBy  string // who pinned it
	saved     []byte // the state file as last written
	// refusals counts worker submissions failed in a row and refused is Slurm's last answer:
	// facts for reconcile, which decides when the job holds on them (reconcile.MaxRefusals).
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
		jobs: map[uint32]*job{}, status: map[uint32]api.JobStatus{}, signals: map[uint32]map[int]policy.GPUSignal{}}
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
	d.mu.Lock()
	idle := len(ids) == 0 && len(d.jobs) == 0
	if idle {
		d.lastCycle = start
		d.followed, d.gpusToRead = nil, nil
		clear(d.signals)
	}
	d.mu.Unlock()
	if idle {
		// No elastic job registered or followed: nothing to read the whole queue for, and on a
		// site's queue that read is the cycle's cost.
		return nil
	}
	list, err := d.slurm.Queue(ctx)
	if err != nil {
		d.metrics.cycleErrors.Inc()
		return fmt.Errorf("reading the queue: %w", err)
	}
	nodes, err := d.slurm.Nodes(ctx)
	if err != nil {
		d.metrics.cycleErrors.Inc()
		return fmt.Errorf("reading the nodes: %w", err)
	}
	d.notePlacement(list, nodes)
	snap := &capacity.Snapshot{Jobs: make(map[uint32]slurm.Job, len(list)), Nodes: nodes, QOS: d.readQOS(ctx), Pools: d.cfg.Pools}
	if len(ids) > 0 {
		if snap.Assocs, snap.AssocErr = d.readAssociations(ctx); snap.AssocErr != nil {
			d.log.Warn().Err(snap.AssocErr).Msg("cannot read the association limits; no worker is submitted this cycle")
		}
	}
	for _, j := range list {
		snap.Jobs[j.ID] = j
	}
	if len(ids) > 0 {
		snap.Lending = capacity.KeptNow(d.readQuotad(ctx), snap.Jobs)
	}

	d.mu.Lock()
	d.lastCycle = start
	d.mu.Unlock()
	for _, id := range ids {
		d.step(ctx, id, snap)
		d.mu.Lock()
		j := d.jobs[id]
		if j != nil {
			d.publishLocked(j)
		}
		d.mu.Unlock()
		if j != nil {
			d.save(j, d.log.With().Uint32("job", id).Logger())
		}
	}
	d.mu.Lock()
	for id := range d.jobs {
		if !slices.Contains(ids, id) {
			d.forgetLocked(id)
		}
	}
	d.noteFollowedLocked(snap)
	d.metrics.observeJobs(d.jobs)
	d.mu.Unlock()
	return nil
}

// step follows one registered job for one cycle: it stops workers past their grace, lets
// reconcile.FollowRun judge the main job's run, sorts the workers (reconcile.SortWorkers) and
// records their reports; then planJob judges the job on this cycle's snapshot, and act
// carries its plan out. Judgement lives in elasticd/capacity, elasticd/reconcile and
// elasticd/policy; here is the I/O.
func (d *Daemon) step(ctx context.Context, id uint32, snap *capacity.Snapshot) {
	log := d.log.With().Uint32("job", id).Logger()
	d.mu.Lock()
	j := d.jobs[id]
	d.mu.Unlock()
	main, inQueue := snap.Jobs[id]
	if j == nil {
		if j = d.follow(ctx, id, main, inQueue, snap, log); j == nil {
			return
		}
	}
	if !inQueue || !(main.Running() || main.Pending()) {
		d.cleanup(ctx, id, j, snap, log)
		return
	}
	now := d.now()
	workers := d.workersOf(j, snap)
	d.finishStops(ctx, j, workers, now, log)
	if main.Running() && j.mainStart.IsZero() {
		d.mu.Lock()
		j.mainStart = main.Start
		d.mu.Unlock()
	}
	run, decl := d.runOf(j, main, workers)
	if !d.carryOutRun(ctx, j, main, decl, reconcile.FollowRun(run), now, log) {
		return
	}

	active, pending := d.sortWorkers(ctx, j, main, workers, snap, now, log)
	d.writeHosts(j, active, log)
	current := d.record(j, active, now, log)

	p := planJob(d.stateOf(j), d.observe(j, main, active, current, pending, snap), snap, d.capacityJob(j, main, workers), now)
	d.act(ctx, j, main, snap, p, now, log)
}

// follow starts following job id once its main job runs with a declaration of its owner; a
// leftover directory of a job that ended while elasticd was down is cleaned once its workers
// are gone. nil: not followed (yet).
func (d *Daemon) follow(ctx context.Context, id uint32, main slurm.Job, inQueue bool, snap *capacity.Snapshot, log zerolog.Logger) *job {
	if !inQueue || !main.Running() {
		// Not ours to follow (yet): a leftover directory of a job that ended while
		// elasticd was down is cleaned once its workers are gone.
		if !inQueue {
			d.cleanup(ctx, id, nil, snap, log)
		}
		return nil
	}
	decl, err := d.cfg.Dir.ReadDeclarationOwnedBy(id, d.cfg.DeclarationOwner)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			log.Warn().Err(err).Msg("declaration unusable; job left alone")
		}
		return nil
	}
	if main.UserID != decl.UID {
		log.Warn().Uint32("declared_uid", decl.UID).Uint32("job_uid", main.UserID).Msg("declaration does not belong to the job's owner; job left alone")
		return nil
	}
	j := &job{id: id, decl: decl, user: main.User, account: main.Account,
		submitted: map[uint32]time.Time{}, stopping: map[uint32]time.Time{}, replacing: map[uint32]uint32{}, leaving: map[uint32]reconcile.Leave{}}
	log.Info().Str("user", j.user).Int("min", decl.MinWorkers).Int("max", decl.MaxWorkers).
		Int("gpus_per_worker", decl.GPUsPerWorker).Strs("pools", decl.Pools).Msg("following elastic job")
	d.restore(j, log)
	d.mu.Lock()
	d.jobs[id] = j
	d.mu.Unlock()
	return j
}
