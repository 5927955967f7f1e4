package daemon

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/slurmbridge/slurmbridge/bridge/pools"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/elasticd/policy"
)

// maxRefusals is how many submissions in a row Slurm may refuse before the job holds: a
// request Slurm refuses once it refuses every cycle.
const maxRefusals = 3

// grow submits dec.Count workers of dec.Type: in the project's guarantee while it has GPUs
// idle, beyond that on borrowed GPUs in its elastic QOS (reclaimed before other borrowers).
func (d *Daemon) grow(ctx context.Context, j *job, main slurm.Job, snap *snapshot, dec policy.Decision, log zerolog.Logger) []uint32 {
	var ids []uint32
	room := d.roomFor(main, snap, dec.Type)
	for range dec.Count {
		qos, borrowed := room.take(j.decl.GPUsPerWorker)
		id, err := d.submitWorker(ctx, j, main, snap, dec.Type, qos)
		if err != nil {
			d.metrics.actionErrors.WithLabelValues("grow").Inc()
			j.refusals++
			if j.refusals < maxRefusals {
				log.Warn().Err(err).Str("type", string(dec.Type)).Int("attempt", j.refusals).Msg("cannot submit a worker; trying again next cycle")
				return ids
			}
			j.refused = strings.TrimSpace(err.Error())
			log.Error().Err(err).Str("type", string(dec.Type)).Int("attempts", j.refusals).
				Msg("Slurm refuses this job's workers: the job holds at its size until it is resubmitted or elasticd restarts")
			return ids
		}
		j.refusals = 0
		d.metrics.actions.WithLabelValues("grow").Inc()
		log.Info().Uint32("worker", id).Str("type", string(dec.Type)).Str("qos", qos).Bool("borrowed", borrowed).Msg("worker submitted")
		j.submitted[id] = d.now()
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
// GPUs are reclaimed by requeue, never by killing it.
func (d *Daemon) submitWorker(ctx context.Context, j *job, main slurm.Job, snap *snapshot, t policy.GPUType, qos string) (uint32, error) {
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
	extra := snap.extras[j.id]
	shape := d.shapeOf(j, main, extra)
	gpus := strconv.Itoa(shape.gpus)
	if t != "gpu" {
		gpus = string(t) + ":" + gpus
	}
	opts := slurm.SubmitOptions{
		JobName:     WorkerName(j.id),
		Account:     main.Account,
		Partition:   partition,
		QOS:         qos,
		Nodes:       1,
		Tasks:       shape.tasks,
		CPUsPerTask: shape.cpusPerTask,
		GPUsPerNode: gpus,
		MemMB:       shape.memMB,
		Constraint:  extra.Features,
		Requeue:     true,
		WorkDir:     extra.WorkDir,
		Output:      workerOutput(extra.StdOut),
		TimeMinutes: d.timeLeft(main, extra),
		Args:        []string{"--ignore-pbs"},
	}
	return d.slurm.Submit(ctx, SubmitRequest{UID: j.decl.UID, GID: j.decl.GID, Options: opts, Env: d.contract(j), Script: j.script, Dir: extra.WorkDir})
}

// timeLeft is the main job's remaining time limit in whole minutes (at least 1): a worker
// never outlives its main job's limit. 0 when the main job has none.
func (d *Daemon) timeLeft(main slurm.Job, extra slurm.JobExtra) uint32 {
	if extra.TimeLimit == 0 || main.Start.IsZero() {
		return extra.TimeLimit
	}
	left := main.Start.Add(time.Duration(extra.TimeLimit) * time.Minute).Sub(d.now())
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

// shrink sends TERM to the named workers; the main job is never among them.
func (d *Daemon) shrink(ctx context.Context, j *job, active []slurm.Job, dec policy.Decision, now time.Time, log zerolog.Logger) {
	for _, name := range dec.Workers {
		id, err := strconv.ParseUint(name, 10, 32)
		if err != nil || uint32(id) == j.id || !slices.ContainsFunc(active, func(w slurm.Job) bool { return w.ID == uint32(id) }) {
			log.Warn().Str("worker", name).Msg("shrink names the main job or an unknown worker; left alone")
			continue
		}
		d.terminate(ctx, j, uint32(id), now, log)
	}
}

func (d *Daemon) terminate(ctx context.Context, j *job, id uint32, now time.Time, log zerolog.Logger) {
	if err := d.slurm.Terminate(ctx, id); err != nil {
		d.metrics.actionErrors.WithLabelValues("terminate").Inc()
		log.Error().Err(err).Uint32("worker", id).Msg("cannot signal the worker")
		return
	}
	d.metrics.actions.WithLabelValues("terminate").Inc()
	log.Info().Uint32("worker", id).Dur("grace", d.cfg.Grace).Msg("worker sent TERM")
	j.stopping[id] = now
}

// finishStops cancels workers still there after the grace period and forgets those gone.
func (d *Daemon) finishStops(ctx context.Context, j *job, workers []slurm.Job, now time.Time, log zerolog.Logger) {
	for id, at := range j.stopping {
		i := slices.IndexFunc(workers, func(w slurm.Job) bool { return w.ID == id })
		if i < 0 || !(workers[i].Running() || workers[i].Pending()) {
			delete(j.stopping, id)
			continue
		}
		if now.Sub(at) >= d.cfg.Grace && workers[i].StateName() != "COMPLETING" {
			if err := d.slurm.Cancel(ctx, id); err != nil {
				d.metrics.actionErrors.WithLabelValues("cancel").Inc()
				log.Error().Err(err).Uint32("worker", id).Msg("cannot cancel the worker")
				continue
			}
			d.metrics.actions.WithLabelValues("cancel").Inc()
			log.Info().Uint32("worker", id).Msg("worker still running after the grace period; cancelled")
			j.stopping[id] = now // cancel again only after another grace period
		}
	}
}

// reclaimed ends a worker Slurm requeued, which happens when guaranteed work reclaims the
// GPUs it borrowed: the job has shrunk, and the worker must not rejoin at some random later
// time (elasticd grows the job again when the policy says so, with capacity counted afresh).
func (d *Daemon) reclaimed(ctx context.Context, j *job, id uint32, now time.Time, log zerolog.Logger) {
	if err := d.slurm.Cancel(ctx, id); err != nil {
		d.metrics.actionErrors.WithLabelValues("cancel").Inc()
		log.Error().Err(err).Uint32("worker", id).Msg("cannot cancel the reclaimed worker")
		return
	}
	d.metrics.actions.WithLabelValues("reclaimed").Inc()
	log.Info().Uint32("worker", id).Msg("worker reclaimed (Slurm requeued it): cancelled, the job shrinks")
	j.stopping[id] = now
	delete(j.submitted, id)
	delete(j.replacing, id)
}

// cancelStalePending cancels workers pending too long.
func (d *Daemon) cancelStalePending(ctx context.Context, j *job, pending []uint32, snap *snapshot, now time.Time, log zerolog.Logger) {
	for _, id := range pending {
		submitted := snap.jobs[id].Submit
		if submitted.IsZero() || now.Sub(submitted) < d.cfg.PendingTimeout {
			continue
		}
		if _, done := j.stopping[id]; done {
			continue
		}
		if err := d.slurm.Cancel(ctx, id); err != nil {
			log.Error().Err(err).Uint32("worker", id).Msg("cannot cancel the pending worker")
			continue
		}
		log.Info().Uint32("worker", id).Dur("pending", now.Sub(submitted)).Msg("worker pending too long; cancelled")
		j.stopping[id] = now
		delete(j.replacing, id) // a straggler whose successor never started stays
	}
}

// replace starts the straggler's successor; the straggler gets TERM once it has reported. At
// the job's max (dec.LeaveFirst) the order is the other way round: the straggler gets TERM now,
// and its successor is submitted once it has left the queue (succeed).
func (d *Daemon) replace(ctx context.Context, j *job, main slurm.Job, active []slurm.Job, snap *snapshot, dec policy.Decision, now time.Time, log zerolog.Logger) {
	old, err := strconv.ParseUint(dec.Workers[0], 10, 32)
	if err != nil || uint32(old) == j.id || !slices.ContainsFunc(active, func(w slurm.Job) bool { return w.ID == uint32(old) }) {
		log.Warn().Str("worker", dec.Workers[0]).Msg("straggler is the main job or unknown; elasticd never touches the main job")
		return
	}
	if dec.LeaveFirst {
		d.mu.Lock()
		j.leaving[uint32(old)] = leave{Type: dec.Type, Size: len(active)}
		d.mu.Unlock()
		// Saved before the TERM: an elasticd restarted once the straggler is gone still
		// submits its successor.
		d.save(j, log)
		d.terminate(ctx, j, uint32(old), now, log)
		if _, stopping := j.stopping[uint32(old)]; !stopping {
			d.mu.Lock()
			delete(j.leaving, uint32(old)) // not signalled: nothing left, nothing to succeed
			d.mu.Unlock()
		}
		return
	}
	ids := d.grow(ctx, j, main, snap, policy.Decision{Action: policy.Grow, Type: dec.Type, Count: 1}, log)
	if len(ids) == 1 {
		j.replacing[ids[0]] = uint32(old)
	}
}

// leave is a straggler that leaves before its successor joins: the successor's GPU type and
// the job's size, straggler included, that the successor restores.
type leave struct {
	Type policy.GPUType `json:"type"`
	Size int            `json:"size"`
}

// succeed submits the successors of stragglers that left first, once they are out of the
// queue: torchrun's rendezvous then has room for them. A successor already there (elasticd
// restarted after submitting it, before saving that) is not submitted again: the job is back
// at its size.
func (d *Daemon) succeed(ctx context.Context, j *job, main slurm.Job, active []slurm.Job, snap *snapshot, now time.Time, log zerolog.Logger) {
	olds := slices.Sorted(maps.Keys(j.leaving))
	for _, old := range olds {
		if w, ok := snap.jobs[old]; ok && (w.Running() || w.Pending()) {
			d.setDecision(j, policy.Decision{Action: policy.Hold, Reason: fmt.Sprintf("straggler %d leaves before its successor joins (the rendezvous is at its max)", old)}, now, log)
			return
		}
	}
	for _, old := range olds {
		l := j.leaving[old]
		if len(active) >= l.Size || j.refused != "" {
			d.mu.Lock()
			delete(j.leaving, old)
			d.mu.Unlock()
			continue
		}
		ids := d.grow(ctx, j, main, snap, policy.Decision{Action: policy.Grow, Type: l.Type, Count: 1}, log)
		if len(ids) == 0 {
			return // tried again next cycle, until Slurm has refused it maxRefusals times
		}
		log.Info().Uint32("straggler", old).Uint32("successor", ids[0]).Msg("straggler gone; its successor submitted")
		d.mu.Lock()
		delete(j.leaving, old)
		d.mu.Unlock()
		d.setDecision(j, policy.Decision{Action: policy.Hold, Reason: fmt.Sprintf("straggler %d has left; its successor %d joins", old, ids[0])}, now, log)
		return
	}
}

// completeReplacements stops each straggler once its successor runs and has reported.
func (d *Daemon) completeReplacements(ctx context.Context, j *job, snap *snapshot, now time.Time, log zerolog.Logger) {
	for newID, old := range j.replacing {
		w, ok := snap.jobs[newID]
		if !ok || !(w.Running() || w.Pending()) {
			delete(j.replacing, newID)
			continue
		}
		rep, reported, _ := d.cfg.Dir.LatestReport(j.id, strconv.FormatUint(uint64(newID), 10), j.decl.UID)
		if !w.Running() || !reported || rep.Time.Before(w.Start) {
			d.setDecision(j, policy.Decision{Action: policy.Hold, Reason: fmt.Sprintf("worker %d joins before straggler %d leaves", newID, old)}, now, log)
			continue
		}
		d.terminate(ctx, j, old, now, log)
		delete(j.replacing, newID)
	}
}

// stopWorkers cancels the job's workers that match, running or pending, unless already being
// stopped: workers whose main job's run they belonged to is over, so no grace is due.
func (d *Daemon) stopWorkers(ctx context.Context, j *job, workers []slurm.Job, match func(slurm.Job) bool, why string, now time.Time, log zerolog.Logger) {
	for _, w := range workers {
		if _, stopping := j.stopping[w.ID]; stopping || !(w.Running() || w.Pending()) || !match(w) {
			continue
		}
		if err := d.slurm.Cancel(ctx, w.ID); err != nil {
			d.metrics.actionErrors.WithLabelValues("cancel").Inc()
			log.Error().Err(err).Uint32("worker", w.ID).Msg("cannot cancel the worker")
			continue
		}
		d.metrics.actions.WithLabelValues("cancel").Inc()
		log.Info().Uint32("worker", w.ID).Str("why", why).Msg("worker cancelled")
		d.mu.Lock()
		j.stopping[w.ID] = now
		d.mu.Unlock()
	}
}

// cleanup ends the workers of a finished main job and removes its directory once they are
// gone.
func (d *Daemon) cleanup(ctx context.Context, id uint32, j *job, snap *snapshot, log zerolog.Logger) {
	name := WorkerName(id)
	uid, known := uint32(0), false
	if j != nil {
		uid, known = j.decl.UID, true
	} else if decl, err := d.cfg.Dir.ReadDeclarationOwnedBy(id, d.cfg.DeclarationOwner); err == nil {
		uid, known = decl.UID, true
	}
	left := 0
	for wid, extra := range snap.extras {
		w := snap.jobs[wid]
		if !known || extra.Name != name || extra.UserID != uid || !(w.Running() || w.Pending()) {
			continue
		}
		left++
		if j != nil {
			if _, stopping := j.stopping[wid]; stopping {
				continue
			}
		}
		if err := d.slurm.Cancel(ctx, wid); err != nil {
			log.Error().Err(err).Uint32("worker", wid).Msg("cannot cancel a worker of a finished job")
			continue
		}
		log.Info().Uint32("worker", wid).Msg("main job finished; worker cancelled")
		if j != nil {
			j.stopping[wid] = d.now()
		}
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
	delete(d.jobs, id)
	d.mu.Unlock()
}
