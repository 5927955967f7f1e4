package daemon

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/slurmbridge/slurmbridge/bridge/pools"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/elasticd/capacity"
	"github.com/slurmbridge/slurmbridge/elasticd/policy"
	"github.com/slurmbridge/slurmbridge/elasticd/reconcile"
	"github.com/slurmbridge/slurmbridge/elasticd/registry"
)

// grow submits a worker of type t, of shape, for each of places, in the QOS it places it in:
// in the project's guarantee while it has GPUs idle, beyond that on borrowed GPUs in its
// elastic QOS (reclaimed before other borrowers), never on those other projects' lending
// limits keep idle (capacity.Room.Place).
func (d *Daemon) grow(ctx context.Context, j *job, main slurm.Job, t policy.GPUType, shape capacity.Shape, places []capacity.Placement, log zerolog.Logger) []uint32 {
	var ids []uint32
	for _, place := range places {
		id, err := d.submitWorker(ctx, j, main, t, shape, place)
		if err != nil {
			d.metrics.actionErrors.WithLabelValues("grow").Inc()
			j.refusals++
			j.refused = strings.TrimSpace(err.Error())
			if !reconcile.HoldsOnRefusals(j.refusals) {
				log.Warn().Err(err).Str("type", string(t)).Int("attempt", j.refusals).Msg("cannot submit a worker; trying again next cycle")
				return ids
			}
			log.Error().Err(err).Str("type", string(t)).Int("attempts", j.refusals).
				Msg("Slurm refuses this job's workers: the job holds at its size until it is resubmitted or elasticd restarts")
			return ids
		}
		j.refusals, j.refused = 0, ""
		d.metrics.actions.WithLabelValues("grow").Inc()
		log.Info().Uint32("worker", id).Str("type", string(t)).Str("qos", place.QOS).Bool("borrowed", place.Borrowed).Msg("worker submitted")
		d.mu.Lock()
		j.submitted[id] = d.now()
		d.mu.Unlock()
		ids = append(ids, id)
	}
	return ids
}

// partitionFor places a worker of type t: the declared pools of that type, through
// bridge/pools' Route (the job_submit plugin's own choice), else the main job's partition.
func (d *Daemon) partitionFor(j *job, main slurm.Job, t policy.GPUType) (string, error) {
	ps := d.poolsOfType(j, t)
	if len(ps) == 0 {
		if d.typeOf(main) != t {
			return "", fmt.Errorf("no declared pool has %s GPUs", t)
		}
		return main.Partition, nil
	}
	var names []string
	for _, p := range ps {
		names = append(names, p.Partition)
	}
	r := pools.Request{
		Op: pools.Submit, Partition: strings.Join(names, ","),
		TRESPerNode: fmt.Sprintf("gres:gpu:%s:%d", t, j.decl.GPUsPerWorker),
		MinNodes:    1, MaxNodes: 1, NumTasks: 1,
		CPUsPerTask: pools.NoVal16, PnMinCPUs: pools.NoVal16, NTasksPerNode: pools.NoVal16, SocketsPerNode: pools.NoVal16,
		MinCPUs: pools.NoVal, PnMinMemory: pools.NoVal64,
	}
	switch route := d.cfg.Pools.Route(&r); route.Action {
	case pools.SetPartition:
		return route.Partition, nil
	case pools.Reject:
		return "", fmt.Errorf("pools: %s", route.Message)
	default:
		if route.Err != nil {
			return "", route.Err
		}
		return r.Partition, nil
	}
}

// submitWorker runs sbatch as the job's owner: same account, the job's own script, one node
// with GPUsPerWorker GPUs of type t, the main job's CPUs, memory and constraint, the time
// the main job has left, and the environment contract. The request is entirely on the command
// line: the script's #SBATCH lines are comments for the worker (slurm.WithoutDirectives),
// since sbatch would merge them with these options and refuse, for one, a script's untyped
// --gpus-per-node beside a typed GPU request. Every worker is requeueable: a borrowed one's
// GPUs are reclaimed by requeue, never by killing it. A borrowed worker is submitted in the
// guarantee's QOS (place.GuarQOS; "" is the account's default) to start lendWindowSeconds
// later, and then lent into place.QOS and started by elasticd itself: the job_submit plugin
// refuses a user's job straight into the elastic QOS, since no QOS limit keeps the lending
// limits for it. A worker that cannot be lent is cancelled.
func (d *Daemon) submitWorker(ctx context.Context, j *job, main slurm.Job, t policy.GPUType, shape capacity.Shape, place capacity.Placement) (uint32, error) {
	qos, borrowed, guarQOS := place.QOS, place.Borrowed, place.GuarQOS
	if j.script == nil {
		script, err := d.slurm.BatchScript(ctx, j.id)
		if err != nil {
			return 0, fmt.Errorf("reading the main job's batch script: %w", err)
		}
		j.script = slurm.WithoutDirectives(script)
	}
	partition, err := d.partitionFor(j, main, t)
	if err != nil {
		return 0, err
	}
	gpus := strconv.Itoa(shape.GPUs)
	if t != "gpu" {
		gpus = string(t) + ":" + gpus
	}
	opts := slurm.SubmitOptions{
		JobName:     WorkerName(j.id),
		Account:     main.Account,
		Partition:   partition,
		QOS:         qos,
		Nodes:       1,
		Tasks:       shape.Tasks,
		CPUsPerTask: shape.CPUsPerTask,
		GPUsPerNode: gpus,
		MemMB:       shape.MemMB,
		Constraint:  main.Features,
		Requeue:     true,
		WorkDir:     main.WorkDir,
		Output:      workerOutput(main.StdOut),
		TimeMinutes: d.timeLeft(main),
		Args:        []string{"--ignore-pbs"},
	}
	if borrowed {
		opts.QOS = guarQOS
		opts.Args = append(opts.Args, "--begin=now+"+strconv.Itoa(lendWindowSeconds))
	}
	id, err := d.slurm.Submit(ctx, SubmitRequest{UID: j.decl.UID, GID: j.decl.GID, Options: opts, Env: d.contract(j), Script: j.script, Dir: main.WorkDir})
	if err != nil || !borrowed {
		return id, err
	}
	// sbatch ran as the job's owner, who could make it print another job's id: root moves,
	// starts or cancels only the worker it submitted. Not that one: nothing is done to it, and
	// the worker elasticd really submitted (if any) starts at its begin time in the guarantee.
	if err := d.checkDeferredWorker(ctx, id, j, guarQOS); err != nil {
		return 0, err
	}
	if err := d.slurm.Lend(ctx, id, qos); err != nil {
		// Cancelled even when the cycle's context has ended: the worker was to borrow.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if cerr := d.slurm.Cancel(cctx, id); cerr != nil {
			return 0, fmt.Errorf("%w; and cancelling the worker %d: %v", err, id, cerr)
		}
		return 0, err
	}
	return id, nil
}

// lendWindowSeconds is how far ahead a borrowed worker's begin time is set at its submission:
// time for elasticd to lend it, which it does at once; should elasticd stop in between, the
// worker starts then in its guarantee, as a worker there would.
const lendWindowSeconds = 60

// checkDeferredWorker says why job id is not the worker of j that elasticd just submitted in
// guarQOS ("" for the account's default) to begin later, or nil: a pending job of j's owner,
// named as its workers are, waiting for its begin time.
func (d *Daemon) checkDeferredWorker(ctx context.Context, id uint32, j *job, guarQOS string) error {
	w, err := d.slurm.Job(ctx, id)
	if err != nil {
		return fmt.Errorf("reading the worker %d before lending it: %w", id, err)
	}
	switch {
	case w.User != j.user || w.Name != WorkerName(j.id):
		return fmt.Errorf("job %d is not a worker of job %d (user %s, name %q): not lent", id, j.id, w.User, w.Name)
	case !w.Pending() || w.StateReason != "BeginTime":
		return fmt.Errorf("worker %d is %s (%s), not waiting for its begin time as submitted: not lent", id, w.StateName(), w.StateReason)
	case guarQOS != "" && pools.QOSKey(w.QOS) != pools.QOSKey(guarQOS):
		return fmt.Errorf("worker %d is in QOS %s, not %s as submitted: not lent", id, w.QOS, guarQOS)
	}
	return nil
}

// timeLeft is the main job's remaining time limit in whole minutes (at least 1): a worker
// never outlives its main job's limit. 0 when the main job has none.
func (d *Daemon) timeLeft(main slurm.Job) uint32 {
	if main.TimeLimit == 0 || main.Start.IsZero() {
		return main.TimeLimit
	}
	left := main.Start.Add(time.Duration(main.TimeLimit) * time.Minute).Sub(d.now())
	return uint32(max((left+time.Minute-1)/time.Minute, 1))
}

// workerOutput puts a worker's output beside the main job's: the main job's directory is the
// one its owner chose and can write.
func workerOutput(mainOut string) string {
	if mainOut == "/dev/null" {
		return mainOut
	}
	if !filepath.IsAbs(mainOut) {
		return ""
	}
	return filepath.Join(filepath.Dir(mainOut), "%x-%j.out")
}

// contract is the environment every worker gets (see elasticd/README.md); the main job gets
// the same from the SPANK plugin, with ELASTIC_ROLE=main.
func (d *Daemon) contract(j *job) []string {
	id := strconv.FormatUint(uint64(j.id), 10)
	maxWorkers, _ := j.decl.EffectiveMax()
	env := []string{
		"ELASTIC_ROLE=worker",
		"ELASTIC_JOB_ID=" + id,
		"ELASTIC_MIN=" + strconv.Itoa(j.decl.MinWorkers),
		"ELASTIC_MAX=" + strconv.Itoa(maxWorkers),
		fmt.Sprintf("ELASTIC_NNODES=%d:%d", j.decl.MinWorkers, maxWorkers),
		"ELASTIC_GPUS_PER_WORKER=" + strconv.Itoa(j.decl.GPUsPerWorker),
		"ELASTIC_RDZV_ENDPOINT=" + j.decl.RdzvEndpoint,
		"ELASTIC_REPORT_DIR=" + d.cfg.Dir.ReportDir(j.id),
		"ELASTIC_HOSTS_FILE=" + d.cfg.Dir.HostsFile(j.id),
	}
	if j.decl.MaxBatch > 0 {
		env = append(env, "ELASTIC_MAX_BATCH="+strconv.Itoa(j.decl.MaxBatch), "ELASTIC_BATCH_PER_DEVICE="+strconv.Itoa(j.decl.BatchPerDevice))
	}
	return env
}

func (d *Daemon) terminate(ctx context.Context, j *job, id uint32, now time.Time, log zerolog.Logger) {
	if err := d.slurm.Terminate(ctx, id); err != nil {
		d.metrics.actionErrors.WithLabelValues("terminate").Inc()
		log.Error().Err(err).Uint32("worker", id).Msg("cannot signal the worker")
		return
	}
	d.metrics.actions.WithLabelValues("terminate").Inc()
	log.Info().Uint32("worker", id).Dur("grace", d.cfg.Grace).Msg("worker sent TERM")
	d.mu.Lock()
	j.stopping[id] = now
	d.mu.Unlock()
}

// finishStops cancels workers still there after the grace period and forgets those gone.
func (d *Daemon) finishStops(ctx context.Context, j *job, workers []slurm.Job, now time.Time, log zerolog.Logger) {
	queue := map[uint32]reconcile.Stop{}
	for _, w := range workers {
		if _, stopping := j.stopping[w.ID]; stopping {
			queue[w.ID] = reconcile.Stop{Queued: w.Running() || w.Pending(), Completing: w.StateName() == "COMPLETING"}
		}
	}
	cancel, forget := reconcile.FinishStops(j.stopping, queue, d.cfg.Grace, now)
	d.mu.Lock()
	for _, id := range forget {
		delete(j.stopping, id)
	}
	d.mu.Unlock()
	for _, id := range cancel {
		d.cancelWorker(ctx, j, id, "cancel", "still running after the grace period", now, log)
	}
}

// sortWorkers cancels the workers Slurm reclaimed, forgets the submitted ones that started or
// vanished, and returns the active workers (running, not being stopped, main job first) and
// the pending ones.
func (d *Daemon) sortWorkers(ctx context.Context, j *job, main slurm.Job, workers []slurm.Job, snap *capacity.Snapshot, now time.Time, log zerolog.Logger) (active []slurm.Job, pending []uint32) {
	sorted := reconcile.SortWorkers(d.queuedOf(workers, snap), j.stopping, j.submitted, d.seen(j, snap), now)
	for _, id := range sorted.Reclaimed {
		d.reclaimed(ctx, j, id, now, log)
	}
	d.mu.Lock()
	for _, id := range slices.Concat(sorted.Started, sorted.Vanished) {
		delete(j.submitted, id)
	}
	d.mu.Unlock()
	running := []slurm.Job{main}
	for _, id := range sorted.Running {
		running = append(running, snap.Jobs[id])
	}
	active = slices.DeleteFunc(slices.Clone(running), func(w slurm.Job) bool { _, stopping := j.stopping[w.ID]; return stopping })
	return active, sorted.Pending
}

// reclaimed ends a worker Slurm requeued, which happens when guaranteed work reclaims the
// GPUs it borrowed: the job has shrunk, and the worker must not rejoin at some random later
// time (elasticd grows the job again when the policy says so, with capacity counted afresh).
func (d *Daemon) reclaimed(ctx context.Context, j *job, id uint32, now time.Time, log zerolog.Logger) {
	if !d.cancelWorker(ctx, j, id, "reclaimed", "reclaimed (Slurm requeued it): the job shrinks", now, log) {
		return
	}
	d.mu.Lock()
	delete(j.submitted, id)
	delete(j.replacing, id)
	d.mu.Unlock()
}

// cancelStalePending cancels workers pending too long.
func (d *Daemon) cancelStalePending(ctx context.Context, j *job, stale []uint32, snap *capacity.Snapshot, now time.Time, log zerolog.Logger) {
	for _, id := range stale {
		why := fmt.Sprintf("pending for %s, too long", now.Sub(snap.Jobs[id].Submit))
		if d.cancelWorker(ctx, j, id, "cancel", why, now, log) {
			d.mu.Lock()
			delete(j.replacing, id) // a straggler whose successor never started stays
			d.mu.Unlock()
		}
	}
}

// replace starts the straggler's successor; the straggler gets TERM once it has reported
// (reconcile). At the job's max (LeaveFirst) the order is the other way round: the straggler
// gets TERM now, and its successor is submitted once it has left the queue (succeed).
func (d *Daemon) replace(ctx context.Context, j *job, main slurm.Job, r reconcile.Replacement, shape capacity.Shape, place []capacity.Placement, now time.Time, log zerolog.Logger) {
	if r.LeaveFirst {
		d.mu.Lock()
		j.leaving[r.Straggler] = reconcile.Leave{Type: r.Type, Size: r.Size}
		d.mu.Unlock()
		// Saved before the TERM: an elasticd restarted once the straggler is gone still
		// submits its successor.
		d.save(j, log)
		d.terminate(ctx, j, r.Straggler, now, log)
		if _, stopping := j.stopping[r.Straggler]; !stopping {
			d.mu.Lock()
			delete(j.leaving, r.Straggler) // not signalled: nothing left, nothing to succeed
			d.mu.Unlock()
		}
		return
	}
	ids := d.grow(ctx, j, main, r.Type, shape, place, log)
	if len(ids) == 1 {
		d.mu.Lock()
		j.replacing[ids[0]] = r.Straggler
		d.mu.Unlock()
	}
}

// succeed submits the successor of a straggler that left first, now out of the queue.
func (d *Daemon) succeed(ctx context.Context, j *job, main slurm.Job, s reconcile.Succession, shape capacity.Shape, place []capacity.Placement, now time.Time, log zerolog.Logger) {
	ids := d.grow(ctx, j, main, s.Type, shape, place, log)
	if len(ids) == 0 {
		return // tried again next cycle, until Slurm has refused it reconcile.MaxRefusals times
	}
	log.Info().Uint32("straggler", s.Straggler).Uint32("successor", ids[0]).Msg("straggler gone; its successor submitted")
	d.mu.Lock()
	delete(j.leaving, s.Straggler)
	d.mu.Unlock()
	d.setDecision(j, s.Joined(ids[0]), now, log)
}

// stopWorkers cancels the job's workers ids: the main job's run they belonged to is over,
// so no grace is due.
func (d *Daemon) stopWorkers(ctx context.Context, j *job, ids []uint32, why string, now time.Time, log zerolog.Logger) {
	for _, id := range ids {
		d.cancelWorker(ctx, j, id, "cancel", why, now, log)
	}
}

// cancelWorker cancels worker id of j, counted under action, saying why in the log. The
// worker is then stopping (j nil: a worker of a job no longer followed), so it is cancelled
// again only after another grace period. It reports whether Slurm took the cancel.
func (d *Daemon) cancelWorker(ctx context.Context, j *job, id uint32, action, why string, now time.Time, log zerolog.Logger) bool {
	if err := d.slurm.Cancel(ctx, id); err != nil {
		d.metrics.actionErrors.WithLabelValues("cancel").Inc()
		log.Error().Err(err).Uint32("worker", id).Str("why", why).Msg("cannot cancel the worker")
		return false
	}
	d.metrics.actions.WithLabelValues(action).Inc()
	log.Info().Uint32("worker", id).Str("why", why).Msg("worker cancelled")
	if j != nil {
		d.mu.Lock()
		j.stopping[id] = now
		d.mu.Unlock()
	}
	return true
}

// cleanup ends the workers of a finished main job and removes its directory once they are
// gone.
func (d *Daemon) cleanup(ctx context.Context, id uint32, j *job, snap *capacity.Snapshot, log zerolog.Logger) {
	name := WorkerName(id)
	uid, known := uint32(0), false
	if j != nil {
		uid, known = j.decl.UID, true
	} else if decl, err := d.cfg.Dir.ReadDeclarationOwnedBy(id, d.cfg.DeclarationOwner); err == nil {
		uid, known = decl.UID, true
	}
	left := 0
	for wid, w := range snap.Jobs {
		if !known || w.Name != name || w.UserID != uid || !(w.Running() || w.Pending()) {
			continue
		}
		left++
		if j != nil {
			if _, stopping := j.stopping[wid]; stopping {
				continue
			}
		}
		d.cancelWorker(ctx, j, wid, "cancel", "main job finished", d.now(), log)
	}
	if left > 0 {
		return
	}
	if err := d.cfg.Dir.Remove(id); err != nil {
		log.Warn().Err(err).Msg("cannot remove the finished job's directory")
		return
	}
	if j != nil {
		log.Info().Msg("elastic job finished; directory removed")
	}
	d.mu.Lock()
	d.forgetLocked(id)
	d.mu.Unlock()
}

// act carries out the job's plan: cancels, the decision, then the workers to stop, submit or
// replace, each submitted in the shape and QOS the plan gives it: nothing is counted again.
func (d *Daemon) act(ctx context.Context, j *job, main slurm.Job, snap *capacity.Snapshot, p jobPlan, now time.Time, log zerolog.Logger) {
	d.cancelStalePending(ctx, j, p.CancelPending, snap, now, log)
	if p.Decision != nil {
		d.setDecision(j, *p.Decision, now, log)
	}
	for _, why := range p.Ignored {
		log.Warn().Msg(why)
	}
	for _, old := range p.Terminate {
		d.terminate(ctx, j, old, now, log)
	}
	d.mu.Lock()
	for _, next := range p.ForgetReplacing {
		delete(j.replacing, next)
	}
	for _, old := range p.ForgetLeaving {
		delete(j.leaving, old)
	}
	d.mu.Unlock()
	if p.Grow != nil {
		d.grow(ctx, j, main, p.Grow.Type, p.shape, p.grow, log)
	}
	for _, id := range p.Shrink {
		d.terminate(ctx, j, id, now, log)
	}
	if p.Replace != nil {
		d.replace(ctx, j, main, *p.Replace, p.shape, p.replace, now, log)
	}
	if p.Succeed != nil {
		d.succeed(ctx, j, main, *p.Succeed, p.shape, p.succeed, now, log)
	}
}

// carryOutRun does what FollowRun decided and says whether the cycle goes on with the job.
func (d *Daemon) carryOutRun(ctx context.Context, j *job, main slurm.Job, decl *registry.Declaration, p reconcile.RunPlan, now time.Time, log zerolog.Logger) bool {
	d.stopWorkers(ctx, j, p.Stop, p.StopWhy, now, log)
	if p.Decision != nil {
		d.setDecision(j, *p.Decision, now, log)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case p.ForgetRun:
		j.history = nil
		clear(j.leaving)
	case p.NewRun:
		log.Info().Time("start", main.Start).Str("rdzv_endpoint", decl.RdzvEndpoint).Str("was", j.decl.RdzvEndpoint).
			Msg("main job restarted; new workers get its new declaration")
		j.decl, j.mainStart, j.history = decl, main.Start, nil
		clear(j.submitted)
		clear(j.replacing)
		clear(j.leaving)
	}
	return p.GoOn
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
			Strs("workers", dec.Workers).Str("code", string(dec.Code)).Str("reason", dec.Reason).Msg("decision")
	}
}
