// Package actuate applies a quota plan through the Slurm adapter: sacctmgr for QOS and
// accounts, scontrol for pending jobs' QOS. It has no verb that cancels,
// kills, requeues or holds a job: reclaim is Slurm's own preemption.
package actuate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/quotad/policy"
	"github.com/slurmbridge/slurmbridge/quotad/store"
)

// Auditor records what was done (store.Store): each call's rows in as few statements as it
// can, so a batch of hundreds of moves costs a commit or two, not one each.
type Auditor interface {
	RecordAll(ctx context.Context, entries []store.Entry) error
}

// Fence says whether this process may still act: quotad's lease, checked on the connection
// that holds it. An error means stop now, because another quotad may be acting.
type Fence interface {
	Check(ctx context.Context) error
}

// DefaultMaxCommands is quotad's bound on one cycle's sacctmgr commands. A command takes about
// half a second (a process, a slurmdbd commit, an update pushed to slurmctld), so a cycle stays
// within tens of seconds even when a new table creates every project's QOS at once.
const DefaultMaxCommands = 40

// Actuator runs a plan's actions.
type Actuator struct {
	Slurm   slurm.Client
	Audit   Auditor // nil: no audit (tests)
	Actor   string  // who acts, for the audit, e.g. "quotad@host"
	Cluster string  // the accounts' cluster, so a multi-cluster slurmdbd is not touched elsewhere
	Log     zerolog.Logger
	// Fence is checked before every single action; nil means no check (tests, dry runs).
	Fence Fence
	// StepDelay waits between two actions. Only tests set it, to cut the lease mid-apply.
	StepDelay time.Duration
	// MaxCommands bounds the sacctmgr commands of one Apply (0: no bound). A plan whose QOS
	// limits, Preempt lists, accounts and users take more runs that many and defers the rest,
	// and its moves, to the next cycle's plan; past them, the reclaim order's bands wait, whole,
	// and the moves do not.
	MaxCommands int
	// MoveBudget bounds how long after the apply's start its moves may still begin (0: no
	// bound). Moves go in chunks (moveChunk jobs); a chunk begins only if, at the pace of the
	// chunk before it, it ends within the budget. The rest is left (Result.MovesLeft) for a
	// cycle on a fresh snapshot, which the daemon runs at once: on Slurm 24.11 and later each
	// pending array task is a request of its own, so a lend of hundreds of tasks would
	// otherwise act for seconds on a snapshot that ages all the while.
	MoveBudget time.Duration

	steps int
}

// ErrMovesFailed is an apply whose every step ran but some job moves failed: a job started,
// ended or was changed by its user after the snapshot. The next cycle sees it as it is now.
var ErrMovesFailed = errors.New("job moves failed")

// DefaultMoveBudget keeps an acting cycle's moves within about half a second of its apply's
// start, and so, with the read and plan before them and one chunk past the budget at most, the
// cycle within a second.
const DefaultMoveBudget = 500 * time.Millisecond

// moveChunk is the most jobs one step of the moves sends to scontrol. At 24.11's request per
// task that took 0.05 s on a 2-core host (26.05, 152 nodes), and up to 0.25 s while slurmctld
// took in a QOS change of 200 QOS the same cycle had just made.
const moveChunk = 50

// beforeAction runs before each action: the test delay, then the fence. Its error stops the
// apply; nothing after it is done.
func (a *Actuator) beforeAction(ctx context.Context, what fmt.Stringer) error {
	if a.StepDelay > 0 && a.steps > 0 {
		select {
		case <-time.After(a.StepDelay):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	a.steps++
	if a.Fence == nil {
		return nil
	}
	if err := a.Fence.Check(ctx); err != nil {
		return fmt.Errorf("stopped before %s: %w", what, err)
	}
	return nil
}

// Result counts what was applied.
type Result struct {
	QOS, Accounts  int
	Users          int // user associations given the project's QOS
	Lends, Returns int
	MoveFailures   []string
	Deferred       int // commands and moves left for the next cycle (MaxCommands, MoveBudget)
	// MovesLeft are the moves the budget left (MoveBudget): the plan's QOS and accounts are in
	// place, so a cycle that follows at once can make them from a fresh snapshot.
	MovesLeft        int
	LendsByAccount   map[string]int
	ReturnsByAccount map[string]int
	// Took is where the apply's time went: sacctmgr runs (QOS, accounts, users), scontrol
	// moves, and the moves' audit rows.
	Took struct{ Commands, Moves, Audit time.Duration }
}

// Apply runs the plan's actions in order: QOS, then accounts and users (which name the QOS), then job
// moves, batched by target QOS. A failed QOS or account change stops the plan: moves rest on QOS
// that match the table. A failed move is logged and the others go on: a job may have started
// or ended between the snapshot and the move, which the next cycle sees. A failed fence check
// (before each action, each batch of moves included) stops the plan at once, with the fence's
// error.
func (a *Actuator) Apply(ctx context.Context, plan *policy.Plan) (res Result, err error) {
	res = Result{LendsByAccount: map[string]int{}, ReturnsByAccount: map[string]int{}}
	applyStart := time.Now()
	if !plan.Acting {
		return res, nil
	}
	a.steps = 0
	structure, bands := qosRunsOf(plan.QOS)
	// The structure first (new QOS, limits, Preempt lists, accounts, users): moves rest on it,
	// and who may be reclaimed is in it. Then each project's band of the reclaim order.
	var commands []func() error
	for _, r := range structure {
		commands = append(commands, func() error { return a.runQOS(ctx, r, &res) })
	}
	for _, c := range plan.Accounts {
		commands = append(commands, func() error { return a.modifyAccount(ctx, c, &res) })
	}
	for _, c := range plan.Users {
		commands = append(commands, func() error { return a.addUserQOS(ctx, c, &res) })
	}
	runs := len(commands)
	if a.MaxCommands > 0 {
		runs = min(runs, a.MaxCommands)
	}
	defer func() {
		// Whatever step the apply ended at: the commands' time is the rest.
		res.Took.Commands = time.Since(applyStart) - res.Took.Moves - res.Took.Audit
	}()
	for _, run := range commands[:runs] {
		if err := run(); err != nil {
			return res, err
		}
	}
	if runs < len(commands) {
		bandRuns := 0
		for _, b := range bands {
			bandRuns += len(b)
		}
		res.Deferred = len(commands) - runs + bandRuns + len(plan.Moves)
		a.Log.Info().Int("commands", len(commands)+bandRuns).Int("bound", a.MaxCommands).Int("moves", len(plan.Moves)).
			Msg("more QOS and account changes than one cycle may run: the rest, and every job move, wait for the next cycle")
		return res, nil
	}
	// A band is written whole, so a project's tiers never sit out of order; past the bound the
	// other bands wait for the next cycle (at least one band a cycle is written, so a bound
	// smaller than a band still moves on). Moves do not wait for them: a band out of date
	// orders who loses first among projects, not who may lose.
	left := a.MaxCommands - len(commands)
	for i, b := range bands {
		if a.MaxCommands > 0 && i > 0 && len(b) > left {
			for _, rest := range bands[i:] {
				res.Deferred += len(rest)
			}
			a.Log.Info().Int("bands", len(bands)-i).Int("bound", a.MaxCommands).Msg("reclaim order: the other projects' priorities wait for the next cycle")
			break
		}
		for _, r := range b {
			if err := a.runQOS(ctx, r, &res); err != nil {
				return res, err
			}
		}
		left -= len(b)
	}
	// Each batch is logged and audited as soon as it ran: a quotad stopped (or fenced) between
	// batches leaves a trail of exactly what it did.
	err = a.moveJobs(ctx, plan.Moves, applyStart, &res, func(batch []policy.JobMove, failed map[string]string) {
		clock := time.Now()
		entries := make([]store.Entry, 0, len(batch))
		for _, m := range batch {
			if e, ok := a.recordMove(m, failed, &res); ok {
				entries = append(entries, e)
			}
		}
		a.audit(ctx, entries...)
		res.Took.Audit += time.Since(clock)
	})
	if err != nil {
		return res, err
	}
	if len(res.MoveFailures) > 0 {
		return res, fmt.Errorf("%w: %d of %d: %s", ErrMovesFailed, len(res.MoveFailures), len(plan.Moves), strings.Join(res.MoveFailures, "; "))
	}
	return res, nil
}

// moveJobs runs the moves with one scontrol update per target QOS (more for very many jobs),
// in the plan's order of first appearance, so returns still go before lends, and hands each
// chunk to done with the jobs that failed (Target → why). scontrol goes on past a job it cannot
// move (one that started since the snapshot, say) and names it. After an error, the chunks
// not tried are handed to done as failed too. Past the move budget (MoveBudget, counted from
// start) the moves not begun are left, neither done nor failed (res.MovesLeft).
func (a *Actuator) moveJobs(ctx context.Context, moves []policy.JobMove, start time.Time, res *Result, done func(batch []policy.JobMove, failed map[string]string)) error {
	var order []string
	byQOS := map[string][]policy.JobMove{}
	for _, m := range moves {
		if _, seen := byQOS[m.To]; !seen {
			order = append(order, m.To)
		}
		byQOS[m.To] = append(byQOS[m.To], m)
	}
	// The chunks in order: each a run of one target QOS.
	var chunks [][]policy.JobMove
	for _, qos := range order {
		chunks = slices.AppendSeq(chunks, slices.Chunk(byQOS[qos], moveChunk))
	}
	notTried := func(rest [][]policy.JobMove, err error) {
		for _, chunk := range rest {
			failed := map[string]string{}
			for _, m := range chunk {
				failed[m.Target()] = "not tried: " + err.Error()
			}
			done(chunk, failed)
		}
	}
	var last time.Duration // the chunk before's time, its audit included: the pace the next is judged by
	for i, chunk := range chunks {
		if i > 0 && a.MoveBudget > 0 && time.Since(start)+last > a.MoveBudget {
			for _, rest := range chunks[i:] {
				res.MovesLeft += len(rest)
			}
			res.Deferred += res.MovesLeft
			a.Log.Info().Int("moves", res.MovesLeft).Dur("budget", a.MoveBudget).Msg("the cycle's moves reached their budget: the rest wait for a cycle on a fresh snapshot, which follows at once")
			return nil
		}
		qos := chunk[0].To
		if err := a.beforeAction(ctx, moveBatch{qos, len(chunk)}); err != nil {
			notTried(chunks[i:], err)
			return err
		}
		ids := make([]string, len(chunk))
		for k, m := range chunk {
			ids[k] = m.Target()
		}
		clock := time.Now()
		failed, err := a.Slurm.UpdateJobsQOS(ctx, ids, qos)
		res.Took.Moves += time.Since(clock)
		if failed == nil {
			failed = map[string]string{}
		}
		done(chunk, failed)
		last = time.Since(clock)
		if err != nil {
			notTried(chunks[i+1:], err)
			return err
		}
	}
	return nil
}

// recordMove logs and counts one move as done, or as failed when failed names it; a move done
// returns its audit row (ok), which the caller writes with the rest of its batch.
func (a *Actuator) recordMove(m policy.JobMove, failed map[string]string, res *Result) (e store.Entry, ok bool) {
	if why, bad := failed[m.Target()]; bad {
		msg := fmt.Sprintf("%s: %s", m, why)
		a.Log.Warn().Str("job", m.Target()).Str("kind", string(m.Kind)).Str("error", why).Msg("job move failed; the next cycle sees the job as it is now")
		res.MoveFailures = append(res.MoveFailures, msg)
		return store.Entry{}, false
	}
	a.Log.Info().Str("job", m.Target()).Str("account", m.Account).Str("kind", string(m.Kind)).Str("from", m.From).Str("to", m.To).Str("why", m.Reason).Msg("moved job")
	e = store.Entry{Kind: store.KindMove, Subject: "job " + m.Target(), Old: "qos=" + m.From, New: "qos=" + m.To, Detail: m.String() + ": " + m.Reason}
	// Counted per project: a sub-account's job borrows as its project's.
	project := m.Project
	if project == "" {
		project = m.Account
	}
	switch m.Kind {
	case policy.Lend:
		res.Lends++
		res.LendsByAccount[project]++
	case policy.Return:
		res.Returns++
		res.ReturnsByAccount[project]++
	}
	return e, true
}

// moveBatch names one scontrol update of several jobs, for the fence's error.
type moveBatch struct {
	qos  string
	jobs int
}

func (b moveBatch) String() string { return fmt.Sprintf("moving %d job(s) to qos %s", b.jobs, b.qos) }

// qosRun is one sacctmgr run of a plan's QOS changes: the QOS it creates (create), or the QOS
// whose fields it sets to the same values (settings), with the changes it carries out.
type qosRun struct {
	create   bool
	settings slurm.QOSSettings
	changes  []policy.QOSChange
}

func (r qosRun) names() []string {
	names := make([]string, len(r.changes))
	for i, c := range r.changes {
		names[i] = c.Name
	}
	return names
}

func (r qosRun) String() string {
	verb := "modify"
	if r.create {
		verb = "create"
	}
	return verb + " qos " + strings.Join(r.names(), ",")
}

func changeName(c policy.QOSChange) string { return c.Name }

// qosRunsOf groups QOS changes into sacctmgr runs (slurm.QOSRuns) each: the
// structure (runs that create every new QOS, then one per distinct set of new field values, in
// the order each first appears), and each project's band of the reclaim order (the changes of
// its QOS that only move their Priority), a band per project in the order they appear. A lend
// that changes every guaranteed QOS's Preempt list the same way is one run, not one per
// project.
func qosRunsOf(changes []policy.QOSChange) (structure []qosRun, bands [][]qosRun) {
	var creates []policy.QOSChange
	var alike, byBand inOrder[policy.QOSChange]
	for _, c := range changes {
		if c.Create {
			creates = append(creates, c)
		}
		switch key := strings.Join(qosSettings(c).Args(), " "); {
		case key == "":
		case c.Band != "" && priorityOnly(c):
			byBand.add(c.Band, c)
		default:
			alike.add(key, c)
		}
	}
	for batch := range slurm.QOSRuns(creates, changeName) {
		structure = append(structure, qosRun{create: true, changes: batch})
	}
	for _, g := range alike.groups {
		for batch := range slurm.QOSRuns(g, changeName) {
			structure = append(structure, qosRun{settings: qosSettings(batch[0]), changes: batch})
		}
	}
	for _, g := range byBand.groups {
		band := make([]qosRun, len(g))
		for i, c := range g {
			band[i] = qosRun{settings: qosSettings(c), changes: []policy.QOSChange{c}}
		}
		bands = append(bands, band)
	}
	return structure, bands
}

// inOrder groups values by key, the groups in the order their keys first appear.
type inOrder[V any] struct {
	at     map[string]int
	groups [][]V
}

func (g *inOrder[V]) add(key string, v V) {
	i, seen := g.at[key]
	if !seen {
		if g.at == nil {
			g.at = map[string]int{}
		}
		i = len(g.groups)
		g.at[key] = i
		g.groups = append(g.groups, nil)
	}
	g.groups[i] = append(g.groups[i], v)
}

// priorityOnly reports whether c changes nothing but an existing QOS's Priority.
func priorityOnly(c policy.QOSChange) bool {
	return !c.Create && c.Priority != nil && len(c.GrpTRES) == 0 && c.Preempt == nil && c.PreemptMode == nil &&
		c.GraceTime == nil && c.PreemptExemptTime == nil
}

// runQOS runs one sacctmgr run of QOS changes and audits each change it carried out: a
// creation in the run that creates the QOS, and its fields in the run that sets them.
func (a *Actuator) runQOS(ctx context.Context, r qosRun, res *Result) error {
	if err := a.beforeAction(ctx, r); err != nil {
		return err
	}
	a.Log.Debug().Strs("qos", r.names()).Bool("create", r.create).Msg("modify qos")
	var err error
	if r.create {
		err = a.Slurm.AddQOS(ctx, r.names()...)
	} else {
		err = a.Slurm.ModifyQOS(ctx, r.names(), r.settings)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", r, err)
	}
	for _, c := range r.changes {
		switch {
		case r.create:
			a.audit(ctx, store.Entry{Kind: store.KindQOS, Subject: "qos " + c.Name, New: "created", Detail: "create qos " + c.Name})
			res.QOS++
		default:
			a.audit(ctx, store.Entry{Kind: store.KindQOS, Subject: "qos " + c.Name, Old: qosOld(c), New: qosNew(c), Detail: c.String()})
			if !c.Create {
				res.QOS++
			}
		}
	}
	return nil
}

// qosSettings is what a change sets on its QOS, in sacctmgr's terms.
func qosSettings(c policy.QOSChange) slurm.QOSSettings {
	s := slurm.QOSSettings{Preempt: to(c.Preempt), PreemptMode: to(c.PreemptMode), GraceTime: to(c.GraceTime),
		PreemptExemptTime: to(c.PreemptExemptTime), Priority: to(c.Priority)}
	for _, t := range c.GrpTRES {
		s.GrpTRES = append(s.GrpTRES, slurm.TRESLimit{Name: t.Name, Limit: t.To}) // policy.ClearLimit is -1, as sacctmgr's
	}
	return s
}

func (a *Actuator) modifyAccount(ctx context.Context, c policy.AccountChange, res *Result) error {
	if err := a.beforeAction(ctx, c); err != nil {
		return err
	}
	a.Log.Debug().Str("account", c.Account).Msg("modify account")
	if err := a.Slurm.ModifyAccount(ctx, c.Account, a.Cluster, slurm.AccountSettings{QOS: to(c.QOS), DefaultQOS: to(c.DefaultQOS)}); err != nil {
		return fmt.Errorf("%s: %w", c, err)
	}
	a.audit(ctx, store.Entry{Kind: store.KindAccount, Subject: "account " + c.Account, Old: accountOld(c), New: accountNew(c), Detail: c.String()})
	res.Accounts++
	return nil
}

func (a *Actuator) addUserQOS(ctx context.Context, c policy.UserChange, res *Result) error {
	if err := a.beforeAction(ctx, c); err != nil {
		return err
	}
	a.Log.Debug().Str("user", c.User).Str("account", c.Account).Strs("add", c.Add).Msg("add user qos")
	if err := a.Slurm.AddUserQOS(ctx, c.User, c.Account, c.Partition, a.Cluster, c.Add); err != nil {
		return fmt.Errorf("%s: %w", c, err)
	}
	a.audit(ctx, store.Entry{Kind: store.KindAccount, Subject: userSubject(c), Old: "qos=" + strings.Join(c.From, ","),
		New: "qos=" + strings.Join(normalizedUnion(c.From, c.Add), ","), Detail: c.String()})
	res.Users++
	return nil
}

// to is a change's new value, nil when nothing changes (an empty list is a value: it clears).
func to[T any](c *policy.Change[T]) *T {
	if c == nil {
		return nil
	}
	return &c.To
}

// audit writes the rows of actions done, as one record: each row is its actor's, at now.
func (a *Actuator) audit(ctx context.Context, entries ...store.Entry) {
	if a.Audit == nil || len(entries) == 0 {
		return
	}
	now := time.Now()
	for i := range entries {
		entries[i].Actor, entries[i].At = a.Actor, now
	}
	// The actions are done; an audit failure must not hide that, but it is loud.
	if err := a.Audit.RecordAll(ctx, entries); err != nil {
		subjects := make([]string, len(entries))
		for i, e := range entries {
			subjects[i] = e.Subject
		}
		a.Log.Error().Err(err).Strs("subjects", subjects).Msg("audit record failed")
	}
}

func qosOld(c policy.QOSChange) string {
	if c.Create {
		return ""
	}
	return qosFields(c, true)
}

func qosNew(c policy.QOSChange) string { return qosFields(c, false) }

func qosFields(c policy.QOSChange, old bool) string {
	pick := func(from, to string) string {
		if old {
			return from
		}
		return to
	}
	var parts []string
	for _, t := range c.GrpTRES {
		parts = append(parts, fmt.Sprintf("grptres %s=%s", t.Name, pick(limit(t.From), limit(t.To))))
	}
	if c.Preempt != nil {
		parts = append(parts, "preempt="+pick(strings.Join(c.Preempt.From, ","), strings.Join(c.Preempt.To, ",")))
	}
	if c.PreemptMode != nil {
		parts = append(parts, "preemptmode="+pick(c.PreemptMode.From, c.PreemptMode.To))
	}
	if c.GraceTime != nil {
		parts = append(parts, "gracetime="+pick(c.GraceTime.From.String(), c.GraceTime.To.String()))
	}
	if c.PreemptExemptTime != nil {
		parts = append(parts, "preemptexempttime="+pick(c.PreemptExemptTime.From.String(), c.PreemptExemptTime.To.String()))
	}
	if c.Priority != nil {
		parts = append(parts, "priority="+pick(strconv.Itoa(c.Priority.From), strconv.Itoa(c.Priority.To)))
	}
	return strings.Join(parts, " ")
}

func limit(v int64) string {
	if v == policy.ClearLimit {
		return "none"
	}
	return strconv.FormatInt(v, 10)
}

// userSubject names a user association in the audit: "user bob in account proj-b".
func userSubject(c policy.UserChange) string {
	s := "user " + c.User + " in account " + c.Account
	if c.Partition != "" {
		s += " partition " + c.Partition
	}
	return s
}

// normalizedUnion is a sorted list of the names in a and b, each once.
func normalizedUnion(a, b []string) []string {
	out := append(slices.Clone(a), b...)
	slices.Sort(out)
	return slices.Compact(out)
}

func accountOld(c policy.AccountChange) string { return accountFields(c, true) }
func accountNew(c policy.AccountChange) string { return accountFields(c, false) }

func accountFields(c policy.AccountChange, old bool) string {
	var parts []string
	if c.QOS != nil {
		l := c.QOS.To
		if old {
			l = c.QOS.From
		}
		parts = append(parts, "qos="+strings.Join(l, ","))
	}
	if c.DefaultQOS != nil {
		d := c.DefaultQOS.To
		if old {
			d = c.DefaultQOS.From
		}
		parts = append(parts, "defaultqos="+d)
	}
	return strings.Join(parts, " ")
}
