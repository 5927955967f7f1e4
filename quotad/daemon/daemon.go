// Package daemon runs quotad's cycle: snapshot → plan → actions, every few seconds, with one
// active instance (a MariaDB lease), Prometheus metrics and zerolog logs.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/rs/zerolog"

	"github.com/slurmbridge/slurmbridge/bridge/pools"
	"github.com/slurmbridge/slurmbridge/bridge/slurmdbd"
	"github.com/slurmbridge/slurmbridge/quotad/actuate"
	"github.com/slurmbridge/slurmbridge/quotad/policy"
	"github.com/slurmbridge/slurmbridge/quotad/snapshot"
	"github.com/slurmbridge/slurmbridge/quotad/store"
	"github.com/slurmbridge/slurmbridge/quotad/view"
)

// DefaultInterval is the time between cycle starts.
const DefaultInterval = 5 * time.Second

// ConfigLoader reads the quota table (store.Store).
type ConfigLoader interface {
	Load(ctx context.Context) (*policy.Config, error)
}

// Snapshotter loads the quota table and takes a snapshot, side by side (snapshot.Builder).
type Snapshotter interface {
	TakeLoading(ctx context.Context, load func(context.Context) (*policy.Config, error)) (*policy.Config, *snapshot.Snapshot, error)
}

// Lease is the single-active-instance lease (DBLease).
type Lease interface {
	Ensure(ctx context.Context) (held bool, holder string, err error)
	Release(ctx context.Context)
	// Check is the fence the applier calls before each action (actuate.Fence).
	Check(ctx context.Context) error
}

// PreemptionReader lists the runs Slurm preempted (slurmdb.Reader).
type PreemptionReader interface {
	// PreemptedRuns are the runs recorded as PREEMPTED that ended after since, in any QOS.
	PreemptedRuns(ctx context.Context, since time.Time) ([]slurmdbd.PreemptedRun, error)
	// Runs are the job runs overlapping [from, to], for the reclaim audit.
	Runs(ctx context.Context, from, to time.Time) ([]policy.Run, error)
}

// AuditTrail is quotad's audit trail (store.Store): the cluster page's recent actions are read
// from it, and each reclaim Slurm made is written to it once judged.
type AuditTrail interface {
	History(ctx context.Context, kind string, limit int) ([]store.Entry, error)
	Record(ctx context.Context, e store.Entry) error
}

// RecentActions is how many of its latest actions quotad shows on the cluster page.
const RecentActions = 50

// Applier applies a plan (actuate.Actuator).
type Applier interface {
	Apply(ctx context.Context, plan *policy.Plan) (actuate.Result, error)
}

// Daemon is one quotad.
type Daemon struct {
	Config      ConfigLoader
	Snapshots   Snapshotter
	Lease       Lease
	Apply       Applier
	Preemptions PreemptionReader // nil: reclaims are not observed
	Metrics     *Metrics
	View        *view.View // nil: no read-only API
	// For the cluster page: pools.yaml (nil: no pools shown) and the audit trail of moves
	// (nil: lends and returns not shown).
	Pools func() (*pools.Config, error)
	Audit AuditTrail
	Log   zerolog.Logger
	// DryRun prints each cycle's plan to Out and changes nothing; it needs no lease.
	DryRun bool
	Out    io.Writer
	// CycleTimeout bounds one cycle; zero means the interval.
	CycleTimeout time.Duration
	Now          func() time.Time

	wasActive *bool
	// reclaimsFrom is where the next read of preemptions starts: it follows the newest seen,
	// less reclaimLag, so the reads and reclaimsSeen (by "job@end", its end) stay small.
	reclaimsFrom time.Time
	reclaimsSeen map[string]int64
	reclaims     []view.Action // the latest reclaims observed, newest last
	// unaudited are the reclaims seen whose claim is not judged yet (auditReclaims).
	unaudited []slurmdbd.PreemptedRun
}

// reclaimLag is how far behind the newest preemption seen the next read starts: slurmdbd may
// record a job's end a while after a later one's (its agent queue from slurmctld).
const reclaimLag = 10 * time.Minute

func (d *Daemon) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

// CycleResult says what one cycle did.
type CycleResult struct {
	Outcome string // acted, dry_run, passive, not_acting, error
	Plan    *policy.Plan
	Applied actuate.Result
}

// Cycle runs one cycle. Any read error means no action at all, and the error says why.
// Its steps: the lease, the reads, the plan, then the dry run, or the lease checked again and
// the plan applied; the cycle's record and metrics are left whatever step it ended at.
func (d *Daemon) Cycle(ctx context.Context) (res CycleResult, err error) {
	c := &cycleRun{start: d.now(), clock: time.Now()}
	defer func() {
		d.recordCycle(ctx, c, res, err)
		d.countCycle(c.start, res, err)
	}()
	res.Outcome = "error"
	if c.active, err = d.ensureLease(ctx); err != nil {
		return res, err
	}
	if err = d.read(ctx, c); err != nil {
		return res, err
	}
	res.Plan = d.plan(c)
	if c.active {
		d.observeReclaims(ctx, c.cfg)
		d.auditReclaims(ctx, c.cfg, c.snap.Snapshot)
	}
	switch {
	case d.DryRun:
		res.Outcome = "dry_run"
		d.printDryRun(c.start, res.Plan)
		return res, nil
	case !res.Plan.Acting:
		res.Outcome = "not_acting"
		for _, n := range res.Plan.Notes {
			d.Log.Warn().Str("note", n).Msg("plan does not act")
		}
		return res, nil
	case !c.active:
		res.Outcome = "passive"
		return res, nil
	}
	if held, err := d.leaseStillHeld(ctx); !held {
		res.Outcome = "passive"
		return res, err
	}
	return d.apply(ctx, c.start, res)
}

// cycleRun is what one cycle has learnt so far, for the record it leaves.
type cycleRun struct {
	start time.Time // by d.now: when the cycle started, as the record and the plan see it
	clock time.Time // by the wall clock: what the cycle's timings are measured from
	// active: this quotad holds the lease (never in a dry run).
	active bool
	// cfg and snap are what the reads returned; snapshotAt is when a snapshot that could be
	// read was taken.
	cfg        *policy.Config
	snap       *snapshot.Snapshot
	snapshotAt time.Time
}

// recordCycle gives the read-only API the cycle's outcome, plan and facts.
func (d *Daemon) recordCycle(ctx context.Context, c *cycleRun, res CycleResult, err error) {
	if d.View == nil {
		return
	}
	rec := view.Cycle{Start: c.start, Outcome: res.Outcome, Err: err, Plan: res.Plan, Config: c.cfg,
		SnapshotAt: c.snapshotAt, LeaseHeld: d.wasActive != nil && *d.wasActive}
	if c.snap != nil {
		rec.Nodes, rec.Jobs = c.snap.SlurmNodes, c.snap.Jobs
	}
	d.pageFacts(ctx, &rec)
	d.View.Record(rec)
}

// countCycle counts the cycle by outcome, with its duration; one that ended without an error,
// and not on a plan that does not act, sets the last success.
func (d *Daemon) countCycle(start time.Time, res CycleResult, err error) {
	if d.Metrics == nil {
		return
	}
	d.Metrics.cycleSeconds.Observe(time.Since(start).Seconds())
	d.Metrics.cycles.WithLabelValues(res.Outcome).Inc()
	if err == nil && res.Outcome != "not_acting" {
		d.Metrics.lastSuccess.Set(float64(d.now().Unix()))
	}
}

// ensureLease takes or keeps the lease and says whether this quotad is the active one. A dry
// run needs no lease and is never active.
func (d *Daemon) ensureLease(ctx context.Context) (bool, error) {
	if d.DryRun {
		return false, nil
	}
	held, holder, err := d.Lease.Ensure(ctx)
	if err != nil {
		d.setActive(false, "")
		return false, fmt.Errorf("lease: %w", err)
	}
	d.setActive(held, holder)
	return held, nil
}

// read loads the quota table and takes the snapshot, at once: the queue and node reads need
// no table, and the table's queries would otherwise come before them every cycle.
func (d *Daemon) read(ctx context.Context, c *cycleRun) error {
	var err error
	c.cfg, c.snap, err = d.Snapshots.TakeLoading(ctx, d.Config.Load)
	if ce := (*snapshot.ConfigError)(nil); errors.As(err, &ce) {
		c.cfg, c.snap = nil, nil
		return ce
	}
	if err != nil {
		c.snap = nil
		return fmt.Errorf("snapshot: %w", err)
	}
	c.snapshotAt = c.snap.TakenAt
	return nil
}

// plan builds the cycle's plan from what was read, logging the cycle's timings so far and
// counting what the plan holds.
func (d *Daemon) plan(c *cycleRun) *policy.Plan {
	planStart := time.Now()
	plan := policy.BuildPlan(c.cfg, c.snap.Snapshot, d.now())
	d.Log.Debug().Dur("accounting", c.snap.Took.Accounting).Dur("nodes", c.snap.Took.Nodes).Dur("queue", c.snap.Took.Queue).
		Dur("plan", time.Since(planStart)).Dur("cycle", time.Since(c.clock)).Int("jobs", len(c.snap.Jobs)).Int("moves", len(plan.Moves)).Msg("cycle timings")
	if d.Metrics != nil {
		d.Metrics.observePlan(plan)
		d.Metrics.observeUnreadable(plan, d.Log)
	}
	return plan
}

// printDryRun prints the plan a dry run would have applied.
func (d *Daemon) printDryRun(start time.Time, plan *policy.Plan) {
	if d.Out == nil {
		return
	}
	fmt.Fprintf(d.Out, "--- %s (dry run: nothing is changed)\n", start.Format(time.RFC3339))
	WritePlan(d.Out, plan)
}

// leaseStillHeld checks the lease again just before acting: the snapshot took time, and a
// lost lease means another quotad may act on the same facts. A lease that cannot be checked
// is lost, and the error says why.
func (d *Daemon) leaseStillHeld(ctx context.Context) (bool, error) {
	held, holder, err := d.Lease.Ensure(ctx)
	if err == nil && held {
		return true, nil
	}
	d.setActive(false, holder)
	if err != nil {
		return false, fmt.Errorf("lease lost before acting: %w", err)
	}
	return false, nil
}

// apply applies the cycle's plan (res.Plan) and says what was done. A lease lost mid-apply
// (fenced) stops it: what was done stays done (each action is audited), nothing more is, and
// the next cycle starts over from the lease.
func (d *Daemon) apply(ctx context.Context, start time.Time, res CycleResult) (CycleResult, error) {
	for _, n := range res.Plan.Notes {
		d.Log.Info().Str("note", n).Msg("plan")
	}
	applied, err := d.Apply.Apply(ctx, res.Plan)
	res.Applied = applied
	res.Outcome = "acted"
	if errors.Is(err, ErrLeaseLost) {
		res.Outcome = "fenced"
		d.fenced(err, applied)
	}
	d.countApplied(start, applied)
	if err != nil {
		return res, fmt.Errorf("applying the plan: %w", err)
	}
	return res, nil
}

// fenced notes a lease lost mid-apply: another quotad may be acting from now on.
func (d *Daemon) fenced(err error, applied actuate.Result) {
	d.wasActive = nil // the next cycle's lease check says who is active now
	if d.Metrics != nil {
		d.Metrics.fenced.Inc()
		d.Metrics.active.Set(0)
	}
	d.Log.Error().Err(err).Int("qos", applied.QOS).Int("accounts", applied.Accounts).Int("lends", applied.Lends).
		Int("returns", applied.Returns).Msg("lease lost mid-apply: stopped applying")
}

// countApplied counts the lends and returns per account and logs what the cycle changed.
func (d *Daemon) countApplied(start time.Time, applied actuate.Result) {
	if d.Metrics != nil {
		for acct, n := range applied.LendsByAccount {
			d.Metrics.lends.WithLabelValues(acct).Add(float64(n))
		}
		for acct, n := range applied.ReturnsByAccount {
			d.Metrics.returns.WithLabelValues(acct).Add(float64(n))
		}
	}
	if applied.QOS+applied.Accounts+applied.Users+applied.Lends+applied.Returns+applied.Deferred > 0 {
		d.Log.Info().Int("qos", applied.QOS).Int("accounts", applied.Accounts).Int("users", applied.Users).Int("lends", applied.Lends).
			Int("returns", applied.Returns).Int("deferred", applied.Deferred).Dur("took", time.Since(start)).
			Dur("commands", applied.Took.Commands).Dur("moves", applied.Took.Moves).Dur("audit", applied.Took.Audit).Msg("cycle applied")
	}
}

func (d *Daemon) setActive(active bool, holder string) {
	if d.Metrics != nil {
		v := 0.0
		if active {
			v = 1
		}
		d.Metrics.active.Set(v)
	}
	if d.wasActive != nil && *d.wasActive == active {
		return
	}
	d.wasActive = &active
	if active {
		d.Log.Info().Str("lease", LeaseName).Msg("this quotad is the active one")
	} else {
		d.Log.Warn().Str("lease", LeaseName).Str("holder", holder).Msg("another quotad holds the lease: staying passive (planning only, no actions)")
	}
}

// observeReclaims counts borrowers slurmdbd recorded as PREEMPTED since this quotad started.
// Errors only cost the metric.
func (d *Daemon) observeReclaims(ctx context.Context, cfg *policy.Config) {
	if d.Preemptions == nil || d.Metrics == nil {
		return
	}
	if d.reclaimsSeen == nil {
		d.reclaimsSeen = map[string]int64{}
		d.reclaimsFrom = d.now()
	}
	// One read for every QOS. The guaranteed QOS count too: no claim may take a job there,
	// and the audit says so if one did.
	got, err := d.Preemptions.PreemptedRuns(ctx, d.reclaimsFrom)
	if err != nil {
		d.Log.Debug().Err(err).Msg("reading preemptions")
		return
	}
	watched, elasticQOS := map[string]bool{}, map[string]bool{}
	for _, p := range cfg.Projects {
		watched[cfg.Settings.GuaranteedQOSName(p.Account)] = true
		elasticQOS[cfg.Settings.ElasticQOSName(p.Account)] = true
	}
	var rows []slurmdbd.PreemptedRun
	elastic := map[string]bool{} // "job@end" of the reclaimed elastic workers
	for _, r := range got {
		q := pools.QOSKey(r.QOS)
		switch {
		case elasticQOS[q]:
			elastic[reclaimKey(r.JobID, r.End)] = true
		case !watched[q] && !cfg.Settings.IsBorrowQOS(q):
			continue // preempted by the site's own QOS, not a claim
		}
		rows = append(rows, r)
	}
	newest := d.reclaimsFrom.Unix()
	for _, r := range rows {
		newest = max(newest, r.End)
		key := reclaimKey(r.JobID, r.End)
		if _, seen := d.reclaimsSeen[key]; seen {
			continue
		}
		d.reclaimsSeen[key] = r.End
		d.Metrics.reclaims.WithLabelValues(r.Account).Inc()
		detail := "Slurm preempted and requeued the borrower"
		if elastic[key] {
			detail = "Slurm preempted and requeued the elastic worker; elasticd ends it (the job shrinks)"
		}
		d.reclaims = append(d.reclaims, view.Action{At: time.Unix(r.End, 0).UTC(), Kind: "reclaim", Job: strconv.FormatUint(uint64(r.JobID), 10),
			Account: r.Account, Detail: detail})
		if len(d.reclaims) > RecentActions {
			d.reclaims = d.reclaims[len(d.reclaims)-RecentActions:]
		}
		d.Log.Info().Uint32("job", r.JobID).Str("account", r.Account).Msg("borrower reclaimed: Slurm preempted and requeued it")
		if len(d.unaudited) < maxUnaudited {
			d.unaudited = append(d.unaudited, r)
		}
	}
	if from := time.Unix(newest, 0).Add(-reclaimLag); from.After(d.reclaimsFrom) {
		d.reclaimsFrom = from
		for key, end := range d.reclaimsSeen {
			if end <= from.Unix() {
				delete(d.reclaimsSeen, key) // the next read starts after it
			}
		}
	}
}

// reclaimKey names one reclaim, "job@end": a requeued job may be reclaimed again later.
func reclaimKey(job uint32, end int64) string { return fmt.Sprintf("%d@%d", job, end) }

// maxUnaudited bounds the reclaims waiting for their audit: past it (slurmdbd unreadable for
// long while claims go on) a reclaim is counted and shown, not judged.
const maxUnaudited = 1000

// auditGrace is how long after ClaimWindow a reclaim waits for its runs to reach slurmdbd
// before it is audited with what is there.
const auditGrace = time.Minute

// auditReclaims judges each reclaim seen once its claim has started, or ClaimWindow has passed
// without one: who claimed, who lost what, and whether Slurm took the fewest borrowed GPUs
// that would do (policy.AuditReclaims). Each judgement goes to the audit trail (kind reclaim),
// the log and the cluster page. A read that fails is tried again next cycle.
func (d *Daemon) auditReclaims(ctx context.Context, cfg *policy.Config, snap *policy.Snapshot) {
	if len(d.unaudited) == 0 || d.Preemptions == nil {
		return
	}
	first, last := d.unaudited[0].End, d.unaudited[0].End
	for _, r := range d.unaudited {
		first, last = min(first, r.End), max(last, r.End)
	}
	runs, err := d.Preemptions.Runs(ctx, time.Unix(first, 0), time.Unix(last, 0).Add(policy.ClaimWindow))
	if err != nil {
		d.Log.Debug().Err(err).Msg("reading the runs around reclaims")
		return
	}
	policy.WithQueuePriorities(runs, snap.Jobs)
	nodeGPUs := map[string]int{}
	for _, n := range snap.Nodes {
		for _, g := range n.GPUs {
			nodeGPUs[n.Name] += g
		}
	}
	now := d.now()
	waiting := map[string]bool{}
	for _, r := range d.unaudited {
		waiting[reclaimKey(r.JobID, r.End)] = true
	}
	done := map[string]bool{}
	for _, a := range policy.AuditReclaims(cfg, runs, nodeGPUs) {
		mine := false
		for _, v := range a.Lost {
			mine = mine || waiting[reclaimKey(v.JobID, v.Ended.Unix())]
		}
		if !mine || (a.Claimant == nil && now.Before(a.At.Add(policy.ClaimWindow))) {
			continue
		}
		for _, v := range a.Lost {
			done[reclaimKey(v.JobID, v.Ended.Unix())] = true
		}
		d.recordReclaim(ctx, a)
	}
	kept := d.unaudited[:0]
	for _, r := range d.unaudited {
		switch k := reclaimKey(r.JobID, r.End); {
		case done[k]:
		case now.After(time.Unix(r.End, 0).Add(policy.ClaimWindow + auditGrace)):
			d.Log.Warn().Uint32("job", r.JobID).Str("account", r.Account).Msg("reclaim not audited: slurmdbd has no run of it")
		default:
			kept = append(kept, r)
		}
	}
	d.unaudited = kept
}

// recordReclaim writes one judged reclaim to the audit trail and the log, and gives its
// victims' actions on the cluster page the judgement.
func (d *Daemon) recordReclaim(ctx context.Context, a policy.ReclaimAudit) {
	var lost []string
	for _, v := range a.Lost {
		lost = append(lost, fmt.Sprintf("job %d", v.JobID))
	}
	subject := "unknown claim"
	if a.Claimant != nil {
		subject = fmt.Sprintf("job %d", a.Claimant.JobID)
	}
	text := a.Text()
	if d.Audit != nil {
		e := store.Entry{At: a.At, Actor: "slurmctld (seen by quotad)", Kind: store.KindReclaim, Subject: subject,
			Old: strings.Join(lost, ","), New: a.Verdict(), Detail: text}
		if err := d.Audit.Record(ctx, e); err != nil {
			d.Log.Warn().Err(err).Msg("writing a reclaim to the audit trail")
		}
	}
	ev := d.Log.Info()
	if !a.Minimal() && a.Claimant != nil {
		ev = d.Log.Warn()
	}
	ev.Str("claim", subject).Str("project", a.Project).Strs("lost", lost).Int("lost_gpus", a.LostGPUs).Int("fewest_gpus", a.Fewest).
		Bool("minimal", a.Minimal()).Msg("reclaim audited: " + text)
	for i := range d.reclaims {
		for _, v := range a.Lost {
			if d.reclaims[i].Job == strconv.FormatUint(uint64(v.JobID), 10) && d.reclaims[i].At.Equal(v.Ended) {
				d.reclaims[i].Detail += "; " + text
			}
		}
	}
}

// MaxFollowUps bounds the cycles that follow one at once because its moves reached their
// budget (actuate.Actuator.MoveBudget): past it, the rest waits for the next interval.
const MaxFollowUps = 20

// CycleAndFollowUps runs a cycle and, while the cycle before left moves past its budget, more
// cycles at once, each on a fresh snapshot: a lend of hundreds of array tasks (a request each
// from Slurm 24.11) goes in steps of under a second, none acting on facts older than that. It
// returns the last cycle's result. timeout bounds each cycle (0: none).
func (d *Daemon) CycleAndFollowUps(ctx context.Context, timeout time.Duration) (CycleResult, error) {
	var failedMoves error // of the cycles before the last: it is returned with the last's
	for follow := 0; ; follow++ {
		cctx, cancel := ctx, context.CancelFunc(func() {})
		if timeout > 0 {
			cctx, cancel = context.WithTimeout(ctx, timeout)
		}
		res, err := d.Cycle(cctx)
		cancel()
		// Failed moves alone (a job that started or ended since the snapshot, or that its user
		// changed) do not stop the moves left: the next cycle reads the jobs as they are.
		if (err != nil && !errors.Is(err, actuate.ErrMovesFailed)) || res.Applied.MovesLeft == 0 || ctx.Err() != nil {
			return res, errors.Join(failedMoves, err)
		}
		if follow == MaxFollowUps {
			d.Log.Info().Int("moves", res.Applied.MovesLeft).Int("cycles", MaxFollowUps+1).Msg("moves left after the follow-up cycles: they wait for the next interval")
			return res, errors.Join(failedMoves, err)
		}
		if err != nil {
			failedMoves = errors.Join(failedMoves, err)
			d.Log.Warn().Err(err).Msg("some job moves failed; a cycle follows at once for the moves the budget left")
		}
		d.Log.Debug().Int("moves", res.Applied.MovesLeft).Msg("a cycle follows at once for the moves the budget left")
	}
}

// Run runs cycles every interval until ctx ends. gocron's singleton mode skips a start while
// the previous cycle still runs, so cycles never overlap.
func (d *Daemon) Run(ctx context.Context, interval time.Duration) error {
	if interval <= 0 {
		interval = DefaultInterval
	}
	timeout := d.CycleTimeout
	if timeout <= 0 {
		timeout = max(interval, 10*time.Second)
	}
	s, err := gocron.NewScheduler()
	if err != nil {
		return err
	}
	_, err = s.NewJob(gocron.DurationJob(interval), gocron.NewTask(func() {
		res, err := d.CycleAndFollowUps(ctx, timeout)
		if err != nil && res.Outcome != "fenced" { // a fenced apply was logged by Cycle
			d.Log.Error().Err(err).Str("outcome", res.Outcome).Msg("cycle did nothing it should not: nothing more is done until the next cycle")
		}
	}), gocron.WithSingletonMode(gocron.LimitModeReschedule), gocron.WithStartAt(gocron.WithStartImmediately()))
	if err != nil {
		return err
	}
	s.Start()
	<-ctx.Done()
	err = s.Shutdown()
	rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if !d.DryRun {
		d.Lease.Release(rctx)
	}
	return err
}

// pageFacts adds what only the cluster page shows to a cycle's record: pools.yaml, read each
// cycle so that an edited price shows without a restart, and the latest lends, returns and
// reclaims, newest first. A failure costs only that part of the page, which says so.
func (d *Daemon) pageFacts(ctx context.Context, c *view.Cycle) {
	if d.Pools != nil && c.Plan != nil {
		c.Pools, c.PoolsErr = d.Pools()
	}
	var actions []view.Action
	if d.Audit != nil {
		entries, err := d.Audit.History(ctx, store.KindMove, RecentActions)
		if err != nil {
			c.ActionsErr = err
		}
		for _, e := range entries {
			actions = append(actions, MoveAction(e))
		}
	}
	actions = append(actions, d.reclaims...)
	slices.SortStableFunc(actions, func(a, b view.Action) int { return b.At.Compare(a.At) })
	if len(actions) > RecentActions {
		actions = actions[:RecentActions]
	}
	if actions == nil {
		actions = []view.Action{}
	}
	c.Actions = actions
}

// MoveAction reads one audited move back: its subject is "job ID", its values "qos=NAME",
// its detail the move as policy.JobMove prints it ("lend job 12 (proj-b, 4 a100): qos
// normal->borrow-proj-b: why").
func MoveAction(e store.Entry) view.Action {
	a := view.Action{At: e.At.UTC(), Job: strings.TrimPrefix(e.Subject, "job "), FromQOS: strings.TrimPrefix(e.Old, "qos="),
		ToQOS: strings.TrimPrefix(e.New, "qos="), Detail: e.Detail, Kind: "move"}
	if kind, rest, ok := strings.Cut(e.Detail, " job "); ok {
		a.Kind = kind
		if _, after, ok := strings.Cut(rest, " ("); ok {
			if account, _, ok := strings.Cut(after, ","); ok {
				a.Account = account
			}
		}
	}
	return a
}
