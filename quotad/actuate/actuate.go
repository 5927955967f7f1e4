// Package actuate applies a quota plan: sacctmgr for QOS and accounts, scontrol for pending
// jobs' QOS, each as an argument vector run without a shell. It has no verb that cancels,
// kills, requeues or holds a job: reclaim is Slurm's own preemption.
package actuate

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/quotad/policy"
	"github.com/slurmbridge/slurmbridge/quotad/store"
)

// Auditor records what was done (store.Store).
type Auditor interface {
	Record(ctx context.Context, e store.Entry) error
}

// Actuator runs a plan's actions.
type Actuator struct {
	Runner  slurm.Runner
	Audit   Auditor // nil: no audit (tests)
	Actor   string  // who acts, for the audit, e.g. "quotad@host"
	Cluster string  // the accounts' cluster, so a multi-cluster slurmdbd is not touched elsewhere
	Log     zerolog.Logger
}

// Result counts what was applied.
type Result struct {
	QOS, Accounts    int
	Lends, Returns   int
	MoveFailures     []string
	LendsByAccount   map[string]int
	ReturnsByAccount map[string]int
}

// Apply runs the plan's actions in order: QOS, then accounts (which name the QOS), then job
// moves. A failed QOS or account change stops the plan: moves rest on QOS that match the
// table. A failed move is logged and the others go on: a job may have started or ended
// between the snapshot and the move, which the next cycle sees.
func (a *Actuator) Apply(ctx context.Context, plan *policy.Plan) (Result, error) {
	res := Result{LendsByAccount: map[string]int{}, ReturnsByAccount: map[string]int{}}
	if !plan.Acting {
		return res, nil
	}
	for _, c := range plan.QOS {
		for _, argv := range QOSCommands(c) {
			if err := a.run(ctx, argv); err != nil {
				return res, fmt.Errorf("%s: %w", c, err)
			}
		}
		a.audit(ctx, store.Entry{Kind: store.KindQOS, Subject: "qos " + c.Name, Old: qosOld(c), New: qosNew(c), Detail: c.String()})
		res.QOS++
	}
	for _, c := range plan.Accounts {
		if err := a.run(ctx, AccountCommand(c, a.Cluster)); err != nil {
			return res, fmt.Errorf("%s: %w", c, err)
		}
		a.audit(ctx, store.Entry{Kind: store.KindAccount, Subject: "account " + c.Account, Old: accountOld(c), New: accountNew(c), Detail: c.String()})
		res.Accounts++
	}
	for _, m := range plan.Moves {
		if err := a.run(ctx, MoveCommand(m)); err != nil {
			msg := fmt.Sprintf("%s: %v", m, err)
			a.Log.Warn().Uint32("job", m.JobID).Str("kind", string(m.Kind)).Err(err).Msg("job move failed; the next cycle sees the job as it is now")
			res.MoveFailures = append(res.MoveFailures, msg)
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			continue
		}
		a.Log.Info().Uint32("job", m.JobID).Str("account", m.Account).Str("kind", string(m.Kind)).Str("from", m.From).Str("to", m.To).Str("why", m.Reason).Msg("moved job")
		a.audit(ctx, store.Entry{Kind: store.KindMove, Subject: fmt.Sprintf("job %d", m.JobID), Old: "qos=" + m.From, New: "qos=" + m.To, Detail: m.String() + ": " + m.Reason})
		switch m.Kind {
		case policy.Lend:
			res.Lends++
			res.LendsByAccount[m.Account]++
		case policy.Return:
			res.Returns++
			res.ReturnsByAccount[m.Account]++
		}
	}
	if len(res.MoveFailures) > 0 {
		return res, fmt.Errorf("%d of %d job moves failed: %s", len(res.MoveFailures), len(plan.Moves), strings.Join(res.MoveFailures, "; "))
	}
	return res, nil
}

func (a *Actuator) run(ctx context.Context, argv []string) error {
	a.Log.Debug().Strs("argv", argv).Msg("run")
	_, err := a.Runner.Run(ctx, argv[0], argv[1:]...)
	return err
}

func (a *Actuator) audit(ctx context.Context, e store.Entry) {
	if a.Audit == nil {
		return
	}
	e.Actor = a.Actor
	e.At = time.Now()
	// The action is done; an audit failure must not hide that, but it is loud.
	if err := a.Audit.Record(ctx, e); err != nil {
		a.Log.Error().Err(err).Str("subject", e.Subject).Msg("audit record failed")
	}
}

// QOSCommands are the sacctmgr runs for one QOS change: "add qos" when it is new, then one
// "modify" with every field that changes.
func QOSCommands(c policy.QOSChange) [][]string {
	var cmds [][]string
	if c.Create {
		cmds = append(cmds, []string{"sacctmgr", "-i", "add", "qos", c.Name})
	}
	var set []string
	if len(c.GrpTRES) > 0 {
		parts := make([]string, 0, len(c.GrpTRES))
		for _, t := range c.GrpTRES {
			parts = append(parts, t.Name+"="+strconv.FormatInt(t.To, 10)) // -1 clears, in sacctmgr's spelling
		}
		set = append(set, "grptres="+strings.Join(parts, ","))
	}
	if c.Preempt != nil {
		// An empty value clears the list.
		set = append(set, "preempt="+strings.Join(c.Preempt.To, ","))
	}
	if c.PreemptMode != nil {
		set = append(set, "preemptmode="+c.PreemptMode.To)
	}
	if c.GraceTime != nil {
		set = append(set, "gracetime="+strconv.FormatInt(int64(c.GraceTime.To/time.Second), 10)) // seconds
	}
	if c.PreemptExemptTime != nil {
		set = append(set, "preemptexempttime="+clock(c.PreemptExemptTime.To)) // a bare number would be minutes
	}
	if c.Priority != nil {
		set = append(set, "priority="+strconv.Itoa(c.Priority.To))
	}
	if len(set) > 0 {
		cmds = append(cmds, append([]string{"sacctmgr", "-i", "modify", "qos", "where", "name=" + c.Name, "set"}, set...))
	}
	return cmds
}

// clock spells a duration as sacctmgr's [days-]hh:mm:ss.
func clock(d time.Duration) string {
	s := int64(d / time.Second)
	days, s := s/86400, s%86400
	out := fmt.Sprintf("%02d:%02d:%02d", s/3600, s/60%60, s%60)
	if days > 0 {
		out = strconv.FormatInt(days, 10) + "-" + out
	}
	return out
}

// AccountCommand sets an account's QOS list and default QOS on the cluster (the account's
// users inherit both unless they override them).
func AccountCommand(c policy.AccountChange, cluster string) []string {
	argv := []string{"sacctmgr", "-i", "modify", "account", "where", "name=" + c.Account}
	if cluster != "" {
		argv = append(argv, "cluster="+cluster)
	}
	argv = append(argv, "set")
	if c.QOS != nil {
		argv = append(argv, "qos="+strings.Join(c.QOS.To, ","))
	}
	if c.DefaultQOS != nil {
		argv = append(argv, "defaultqos="+c.DefaultQOS.To)
	}
	return argv
}

// MoveCommand changes a pending job's QOS. scontrol refuses it for a job that is no longer
// pending, which is what must happen if it started since the snapshot.
func MoveCommand(m policy.JobMove) []string {
	return []string{"scontrol", "update", "jobid=" + strconv.FormatUint(uint64(m.JobID), 10), "qos=" + m.To}
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
