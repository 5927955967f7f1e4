package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/slurmbridge/slurmbridge/bridge/auth"
	"github.com/slurmbridge/slurmbridge/bridge/slurmdbd"
	"github.com/slurmbridge/slurmbridge/quotad/actuate"
	"github.com/slurmbridge/slurmbridge/quotad/daemon"
	"github.com/slurmbridge/slurmbridge/quotad/policy"
	"github.com/slurmbridge/slurmbridge/quotad/snapshot"
	"github.com/slurmbridge/slurmbridge/quotad/store"
	"github.com/slurmbridge/slurmbridge/quotad/view"
)

// QuotactlApp is the admin command line.
func QuotactlApp() *ucli.App {
	outFlags := []ucli.Flag{
		&ucli.BoolFlag{Name: "parsable2", Aliases: []string{"P"}, Usage: "'|'-separated output with a header, like sacctmgr -P"},
		&ucli.BoolFlag{Name: "json", Usage: "JSON output"},
	}
	return &ucli.App{
		Name:                 "quotactl",
		Usage:                "manage slurmbridge's guaranteed GPU quotas",
		Flags:                append(dbFlags(), quotadFlag(), auth.MungeSocketFlag(), poolsFlag()),
		EnableBashCompletion: true,
		Commands: []*ucli.Command{
			{
				Name: "set", Usage: "set a project's quota", ArgsUsage: "ACCOUNT",
				Flags: []ucli.Flag{
					&ucli.StringFlag{Name: "gpus", Usage: "guaranteed GPUs per type, e.g. a100=4,v100=2 (replaces the project's list)"},
					&ucli.IntFlag{Name: "borrow-limit", Usage: "most GPUs the project may borrow, all types (-1: no limit)"},
					&ucli.StringFlag{Name: "lend-limit", Usage: "most of its guaranteed GPUs per type others may borrow, e.g. a100=2 (the rest stays idle for its own jobs; replaces the project's list; none: lends all)"},
					&ucli.Float64Flag{Name: "weight", Usage: "share of idle GPUs among borrowers (> 0)"},
					&ucli.Int64Flag{Name: "reclaim-priority-threshold", Usage: "its borrowed jobs of at least this Slurm priority are reclaimed only by claims of at least this priority (-1: none)"},
				},
				Action: withEnv(cmdSet, readWrite),
			},
			{
				// The cluster's lending limit per GPU type caps all borrowers together in each
				// borrow QOS's GrpTRES, so Slurm holds it whatever pool it picks. A project's own
				// limit (set --lend-limit) is quotad's: Slurm cannot tell whose guarantee a
				// borrower's GPUs come from, so quotad counts them.
				Name: "lend-limit", Usage: "most GPUs of a type lent to borrowers at once (-1: no limit)", ArgsUsage: "TYPE N",
				Action: withEnv(cmdLendLimit, readWrite),
			},
			{Name: "list", Usage: "quota, in use, borrowed, lent and pending GPUs per project and type", Flags: append([]ucli.Flag{viaFlag()}, outFlags...),
				Action: readCommand(cmdList, listFromQuotad)},
			{Name: "explain", Usage: "why a job runs or waits (your own jobs; all for root and Slurm operators), or a project's position", ArgsUsage: "JOBID|ACCOUNT",
				Flags:  []ucli.Flag{viaFlag(), &ucli.BoolFlag{Name: "json", Usage: "JSON: a job as the API's job view (job_id, account, user, state, code, explanation, move), or an account's project and jobs"}},
				Action: readCommand(cmdExplain, explainFromQuotad)},
			{Name: "cluster", Usage: "the cluster page as text: pools, projects and quotad's recent actions, from quotad's read-only view (no secret needed)",
				Flags: []ucli.Flag{&ucli.BoolFlag{Name: "json", Usage: "the page's JSON (" + view.ClusterPath + ")"}},
				Action: func(c *ucli.Context) error {
					q, err := newViewClient(c)
					if err != nil {
						return err
					}
					return clusterFromQuotad(c, q)
				}},
			{
				Name: "history", Usage: "audit trail of quota changes and of quotad's QOS, account and job changes",
				Flags: append([]ucli.Flag{
					&ucli.IntFlag{Name: "limit", Value: 50},
					&ucli.StringFlag{Name: "kind", Usage: "quota, qos, account, move or reclaim (a claim Slurm made: who claimed, who lost what, minimal or not; --json for the whole judgement)"},
				}, outFlags...),
				Action: withEnv(cmdHistory, readOnly),
			},
			{
				Name: "sync", Usage: "compute the plan quotad would apply now, and apply it (when no quotad is active)",
				Flags:  []ucli.Flag{&ucli.BoolFlag{Name: "dry-run", Usage: "print the plan only"}},
				Action: withEnv(cmdSync, readWrite),
			},
			{Name: "import", Usage: "replace the quota table with a YAML file", ArgsUsage: "FILE", Action: withEnv(cmdImport, readWrite)},
			{Name: "export", Usage: "print the quota table as YAML", Action: withEnv(cmdExport, readOnly)},
		},
	}
}

// withEnv opens the databases for fn: a write command migrates quotad's schema first, a read
// command never changes it.
func withEnv(fn func(c *ucli.Context, e *env) error, access dbAccess) ucli.ActionFunc {
	return func(c *ucli.Context) error {
		log, err := newLogger(os.Stderr, "warn", "console")
		if err != nil {
			return err
		}
		e, err := openEnv(c, log, access)
		if err != nil {
			return err
		}
		defer e.Close()
		return fn(c, e)
	}
}

// ParseGPUList reads "a100=4,v100=2".
func ParseGPUList(s string) (map[string]int, error) {
	out := map[string]int{}
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		t, n, ok := strings.Cut(item, "=")
		if !ok {
			return nil, fmt.Errorf("%q: want TYPE=COUNT, e.g. a100=4", item)
		}
		count, err := strconv.Atoi(n)
		if err != nil || count < 0 {
			return nil, fmt.Errorf("%q: count must be a whole number >= 0", item)
		}
		if _, dup := out[t]; dup {
			return nil, fmt.Errorf("GPU type %s given twice", t)
		}
		out[t] = count
	}
	if len(out) == 0 {
		return nil, errors.New("empty list: want TYPE=COUNT, e.g. a100=4")
	}
	return out, nil
}

func cmdSet(c *ucli.Context, e *env) error {
	ctx := c.Context
	if c.NArg() != 1 {
		return errors.New("usage: quotactl set ACCOUNT --gpus a100=4[,v100=2] [--borrow-limit N] [--lend-limit a100=2|none] [--weight W] [--reclaim-priority-threshold P]")
	}
	account := c.Args().First()
	if err := requireAdmin(ctx, e.reader); err != nil {
		return err
	}
	exists, err := e.reader.AccountExists(ctx, account)
	if err != nil {
		return err
	}
	if !exists {
		return fmt.Errorf("account %s does not exist in slurmdbd on cluster %s (create it with sacctmgr add account first)", account, c.String("cluster"))
	}
	edit := ProjectEdit{Account: account}
	if c.IsSet("gpus") {
		if edit.GPUs, err = ParseGPUList(c.String("gpus")); err != nil {
			return fmt.Errorf("--gpus: %w", err)
		}
	}
	if c.IsSet("lend-limit") {
		edit.LendLimits = map[string]int{}
		if v := strings.TrimSpace(c.String("lend-limit")); v != "none" {
			if edit.LendLimits, err = ParseGPUList(v); err != nil {
				return fmt.Errorf("--lend-limit: %w (or none)", err)
			}
		}
	}
	if len(edit.GPUs) > 0 || len(edit.LendLimits) > 0 {
		tres, err := e.reader.TRESNames(ctx)
		if err != nil {
			return err
		}
		known := slurmdbd.GPUTypes(tres)
		for _, t := range slices.Sorted(maps.Keys(merged(edit.GPUs, edit.LendLimits))) {
			if !known[t] {
				return fmt.Errorf("GPU type %s is not a TRES in slurmdbd (known: %s); add gres/gpu:%s to AccountingStorageTRES", t, strings.Join(slices.Sorted(maps.Keys(known)), ", "), t)
			}
		}
	}
	if c.IsSet("borrow-limit") {
		n := c.Int("borrow-limit")
		edit.BorrowLimit = &n
	}
	if c.IsSet("weight") {
		w := c.Float64("weight")
		edit.Weight = &w
	}
	if c.IsSet("reclaim-priority-threshold") {
		n := c.Int64("reclaim-priority-threshold")
		edit.ReclaimPriorityThreshold = &n
	}
	// The edit applies to the table as it is inside the store's transaction, not to a copy
	// read earlier: a concurrent set of another project is kept.
	var saved *policy.Config
	changes, err := e.store.Update(ctx, actor(), func(cfg *policy.Config) (*policy.Config, error) {
		saved = cfg
		return cfg, edit.Apply(cfg)
	})
	if err != nil {
		return err
	}
	if len(changes) == 0 {
		fmt.Fprintf(c.App.Writer, "%s: unchanged\n", account)
		return nil
	}
	warnOvercommit(ctx, c.App.ErrWriter, e, saved)
	for _, ch := range changes {
		fmt.Fprintf(c.App.Writer, "%s: %s -> %s\n", ch.Subject, cmp.Or(ch.Old, unset), cmp.Or(ch.New, unset))
	}
	return nil
}

// ProjectEdit is what one quotactl set changes in a project; a nil field stays as it is.
type ProjectEdit struct {
	Account     string
	GPUs        map[string]int // replaces the project's list
	BorrowLimit *int           // < 0 removes the limit
	LendLimits  map[string]int // replaces the project's lending limits; empty, not nil, removes them
	Weight      *float64
	// ReclaimPriorityThreshold: < 0 removes it.
	ReclaimPriorityThreshold *int64
}

func merged(a, b map[string]int) map[string]int {
	out := maps.Clone(a)
	if out == nil {
		out = map[string]int{}
	}
	maps.Copy(out, b)
	return out
}

// Apply makes the edit in cfg, adding the project when it has no quota yet.
func (pe ProjectEdit) Apply(cfg *policy.Config) error {
	idx := -1
	for i, p := range cfg.Projects {
		if p.Account == pe.Account {
			idx = i
		}
	}
	if idx < 0 {
		if pe.GPUs == nil {
			return fmt.Errorf("%s has no quota yet: give --gpus", pe.Account)
		}
		cfg.Projects = append(cfg.Projects, policy.Project{Account: pe.Account})
		idx = len(cfg.Projects) - 1
	}
	p := &cfg.Projects[idx]
	if pe.GPUs != nil {
		p.GPUs = pe.GPUs
	}
	if pe.BorrowLimit != nil {
		if *pe.BorrowLimit < 0 {
			p.BorrowLimit = nil
		} else {
			n := *pe.BorrowLimit
			p.BorrowLimit = &n
		}
	}
	if pe.LendLimits != nil {
		p.LendLimitByType = nil
		if len(pe.LendLimits) > 0 {
			p.LendLimitByType = maps.Clone(pe.LendLimits)
		}
	}
	if pe.Weight != nil {
		w := *pe.Weight
		p.Weight = &w
	}
	if pe.ReclaimPriorityThreshold != nil {
		p.ReclaimPriorityThreshold = nil
		if n := *pe.ReclaimPriorityThreshold; n >= 0 {
			p.ReclaimPriorityThreshold = &n
		}
	}
	return nil
}

func cmdLendLimit(c *ucli.Context, e *env) error {
	ctx := c.Context
	if c.NArg() != 2 {
		return errors.New("usage: quotactl lend-limit TYPE N   (N = -1 removes the limit)")
	}
	gpuType := c.Args().Get(0)
	n, err := strconv.Atoi(c.Args().Get(1))
	if err != nil || n < -1 {
		return fmt.Errorf("lend limit %q: want a whole number of GPUs, or -1 for no limit", c.Args().Get(1))
	}
	if err := requireAdmin(ctx, e.reader); err != nil {
		return err
	}
	tres, err := e.reader.TRESNames(ctx)
	if err != nil {
		return err
	}
	if known := slurmdbd.GPUTypes(tres); !known[gpuType] {
		return fmt.Errorf("GPU type %s is not a TRES in slurmdbd (known: %s)", gpuType, strings.Join(slices.Sorted(maps.Keys(known)), ", "))
	}
	changes, err := e.store.Update(ctx, actor(), func(cfg *policy.Config) (*policy.Config, error) {
		if n < 0 {
			delete(cfg.LendLimits, gpuType)
		} else {
			if cfg.LendLimits == nil {
				cfg.LendLimits = map[string]int{}
			}
			cfg.LendLimits[gpuType] = n
		}
		return cfg, nil
	})
	if err != nil {
		return err
	}
	if len(changes) == 0 {
		fmt.Fprintf(c.App.Writer, "lend limit %s: unchanged\n", gpuType)
	}
	for _, ch := range changes {
		fmt.Fprintf(c.App.Writer, "%s: %s -> %s\n", ch.Subject, cmp.Or(ch.Old, unset), cmp.Or(ch.New, unset))
	}
	return nil
}

// warnOvercommit warns when the guarantees of a type add up to more than the pools hold:
// then not every project can get its guarantee at once.
func warnOvercommit(ctx context.Context, w io.Writer, e *env, cfg *policy.Config) {
	nodes, err := e.builder.Live.Nodes(ctx)
	if err != nil {
		fmt.Fprintf(w, "warning: cannot read the GPU pools (%v): overcommit not checked\n", err)
		return
	}
	for _, o := range Overcommits(cfg, snapshot.Nodes(nodes)) {
		fmt.Fprintln(w, "warning:", o)
	}
}

// Overcommit is a GPU type whose guarantees exceed the GPUs the nodes hold.
type Overcommit struct {
	GPUType    string
	Guaranteed int            // the guarantees of every project, added up
	ByProject  map[string]int // each project's guarantee of the type
	Held       int            // the type's GPUs on the nodes
}

// String is the warning quotactl prints.
func (o Overcommit) String() string {
	who := make([]string, 0, len(o.ByProject))
	for _, account := range slices.Sorted(maps.Keys(o.ByProject)) {
		who = append(who, fmt.Sprintf("%s %d", account, o.ByProject[account]))
	}
	return fmt.Sprintf("%s is overcommitted: guarantees add up to %d (%s) but the pools hold %d", o.GPUType, o.Guaranteed, strings.Join(who, ", "), o.Held)
}

// Overcommits lists each GPU type whose guarantees exceed the GPUs the nodes hold, by type.
func Overcommits(cfg *policy.Config, nodes []policy.Node) []Overcommit {
	total := map[string]int{}
	for _, n := range nodes {
		for t, c := range n.GPUs {
			total[t] += c
		}
	}
	guaranteed := map[string]int{}
	who := map[string]map[string]int{}
	for _, p := range cfg.Projects {
		for t, n := range p.GPUs {
			if n > 0 {
				guaranteed[t] += n
				if who[t] == nil {
					who[t] = map[string]int{}
				}
				who[t][p.Account] += n
			}
		}
	}
	var out []Overcommit
	for _, t := range slices.Sorted(maps.Keys(guaranteed)) {
		if guaranteed[t] > total[t] {
			out = append(out, Overcommit{GPUType: t, Guaranteed: guaranteed[t], ByProject: who[t], Held: total[t]})
		}
	}
	return out
}

// planNow builds the plan quotad would build now.
func planNow(ctx context.Context, e *env) (*policy.Plan, *snapshot.Snapshot, error) {
	plan, snap, _, err := planAndConfigNow(ctx, e)
	return plan, snap, err
}

// planAndConfigNow is planNow, with the quota table the plan was built on.
func planAndConfigNow(ctx context.Context, e *env) (*policy.Plan, *snapshot.Snapshot, *policy.Config, error) {
	cfg, err := e.table.Load(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	snap, err := e.builder.Take(ctx, cfg)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("cannot read the cluster: %w", err)
	}
	return policy.BuildPlan(cfg, snap.Snapshot, time.Now()), snap, cfg, nil
}

// ListRow is one line of quotactl list.
type ListRow struct {
	Account  string `json:"account"`
	GPUType  string `json:"gpu_type"`
	Quota    int    `json:"quota"`
	InUse    int    `json:"in_use"`
	Borrowed int    `json:"borrowed"`
	Lent     int    `json:"lent"`
	Pending  int    `json:"pending"`
}

// ListRows turns a plan into quotactl list's rows.
func ListRows(plan *policy.Plan) []ListRow {
	var rows []ListRow
	for _, p := range plan.Projects {
		for _, r := range p.ByType {
			t := r.Type
			if t == "" {
				t = "any"
			}
			rows = append(rows, ListRow{Account: p.Account, GPUType: t, Quota: r.Guaranteed, InUse: r.InUse, Borrowed: r.Borrowed, Lent: view.LentFrom(plan, r), Pending: r.Pending})
		}
	}
	return rows
}

// WriteList prints rows as a table, '|'-separated (parsable) or JSON.
func WriteList(w io.Writer, rows []ListRow, parsable, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if rows == nil {
			rows = []ListRow{}
		}
		return enc.Encode(rows)
	}
	header := []string{"Account", "GPUType", "Quota", "InUse", "Borrowed", "Lent", "Pending"}
	lines := [][]string{}
	for _, r := range rows {
		lines = append(lines, []string{r.Account, r.GPUType, strconv.Itoa(r.Quota), strconv.Itoa(r.InUse), strconv.Itoa(r.Borrowed), strconv.Itoa(r.Lent), strconv.Itoa(r.Pending)})
	}
	return writeTable(w, header, lines, parsable)
}

func writeTable(w io.Writer, header []string, lines [][]string, parsable bool) error {
	if parsable {
		fmt.Fprintln(w, strings.Join(header, "|"))
		for _, l := range lines {
			fmt.Fprintln(w, strings.Join(l, "|"))
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, l := range lines {
		fmt.Fprintln(tw, strings.Join(l, "\t"))
	}
	return tw.Flush()
}

func cmdList(c *ucli.Context, e *env) error {
	plan, _, err := planNow(c.Context, e)
	if err != nil {
		return err
	}
	if !plan.Acting {
		for _, n := range plan.Notes {
			fmt.Fprintln(c.App.ErrWriter, "note:", n)
		}
	}
	return WriteList(c.App.Writer, ListRows(plan), c.Bool("parsable2"), c.Bool("json"))
}

func cmdExplain(c *ucli.Context, e *env) error {
	if c.NArg() != 1 {
		return errors.New("usage: quotactl explain JOBID|ACCOUNT")
	}
	arg := c.Args().First()
	plan, _, cfg, err := planAndConfigNow(c.Context, e)
	if err != nil {
		return err
	}
	notes := c.App.Writer
	if c.Bool("json") {
		notes = c.App.ErrWriter // stdout is the JSON alone
	}
	for _, n := range plan.Notes {
		fmt.Fprintln(notes, "note:", n)
	}
	if c.Bool("json") {
		return ExplainJSON(c.App.Writer, plan, cfg, arg)
	}
	return Explain(c.App.Writer, plan, arg)
}

// Explain prints the plan's explanation of a job id (an array task as squeue prints it,
// 123_7, included) or an account.
func Explain(w io.Writer, plan *policy.Plan, arg string) error {
	if id, isJob, err := jobArg(plan, arg); isJob {
		if err != nil {
			return err
		}
		text, _ := plan.Explain(id)
		fmt.Fprintln(w, text)
		return nil
	}
	lines := plan.ExplainAccount(arg)
	if len(lines) == 0 {
		return fmt.Errorf("account %s has no quota", arg)
	}
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
	return nil
}

// jobArg reads explain's argument as a job: a job id, or an array task (123_7) resolved to
// the record that stands for it. isJob is false for anything else (an account's name); err
// says when the plan has no such job.
func jobArg(plan *policy.Plan, arg string) (id uint32, isJob bool, err error) {
	job, task, isTask, err := view.ParseJobName(arg)
	if err != nil {
		return 0, false, nil
	}
	id, ok := view.PlanJobID(plan, job, task, isTask)
	if !ok {
		return 0, true, noJobError(arg)
	}
	return id, true, nil
}

// NoJobError is a job the plan does not hold: not a GPU job slurmctld knows as pending or running.
type NoJobError struct {
	Job string // as the user named it: 123, or an array task 123_7
}

func (e *NoJobError) Error() string {
	return fmt.Sprintf("job %s is not a GPU job slurmctld knows as pending or running: quotad has nothing to say about it", e.Job)
}

func noJobError(job string) error { return &NoJobError{Job: job} }

// AccountExplanation is quotactl explain --json ACCOUNT: the account's project (null when it
// is none) and its jobs, as the API shows them.
type AccountExplanation struct {
	Project *view.Project `json:"project"`
	Jobs    []view.Job    `json:"jobs"`
}

// ExplainJSON prints as JSON what Explain prints: a job as the API's job view (with its code),
// or an account's project and jobs (those of its sub-accounts included).
func ExplainJSON(w io.Writer, plan *policy.Plan, cfg *policy.Config, arg string) error {
	if id, isJob, err := jobArg(plan, arg); isJob {
		if err != nil {
			return err
		}
		j, _ := view.PlanJob(plan, id)
		return writeJSON(w, j)
	}
	out := AccountExplanation{Jobs: []view.Job{}}
	for _, p := range view.Projects(plan, cfg) {
		if p.Account == arg {
			out.Project = &p
		}
	}
	for _, x := range plan.Jobs {
		if x.Account == arg || x.Project == arg {
			j, _ := view.PlanJob(plan, x.JobID)
			out.Jobs = append(out.Jobs, j)
		}
	}
	if out.Project == nil && len(out.Jobs) == 0 {
		return fmt.Errorf("account %s has no quota", arg)
	}
	return writeJSON(w, out)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func cmdHistory(c *ucli.Context, e *env) error {
	rows, err := e.store.History(c.Context, c.String("kind"), c.Int("limit"))
	if err != nil {
		return err
	}
	if c.Bool("json") {
		enc := json.NewEncoder(c.App.Writer)
		enc.SetIndent("", "  ")
		if rows == nil {
			rows = []store.Entry{}
		}
		return enc.Encode(rows)
	}
	var lines [][]string
	for _, r := range rows {
		lines = append(lines, []string{r.At.Local().Format("2006-01-02T15:04:05"), r.Actor, r.Kind, r.Subject, cmp.Or(r.Old, unset), cmp.Or(r.New, unset)})
	}
	return writeTable(c.App.Writer, []string{"Time", "Who", "Kind", "Subject", "Old", "New"}, lines, c.Bool("parsable2"))
}

func cmdSync(c *ucli.Context, e *env) error {
	ctx := c.Context
	plan, _, err := planNow(ctx, e)
	if err != nil {
		return err
	}
	daemon.WritePlan(c.App.Writer, plan)
	if c.Bool("dry-run") || !plan.Acting || !plan.HasActions() {
		return nil
	}
	if err := requireAdmin(ctx, e.reader); err != nil {
		return err
	}
	// Applying beside an active quotad would race it on the same facts: take its lease.
	lease := &daemon.DBLease{DB: e.quotaDB}
	held, holder, err := lease.Ensure(ctx)
	if err != nil {
		return err
	}
	if !held {
		return fmt.Errorf("a quotad is active (%s) and applies this plan itself every cycle; use --dry-run to see it", holder)
	}
	defer lease.Release(context.Background())
	act := &actuate.Actuator{Slurm: e.slurm, Audit: e.store, Actor: "quotactl sync by " + actor(), Cluster: c.String("cluster"), Log: e.log, Fence: lease}
	res, err := act.Apply(ctx, plan)
	fmt.Fprintf(c.App.Writer, "applied: %d QOS, %d accounts, %d users, %d lends, %d returns\n", res.QOS, res.Accounts, res.Users, res.Lends, res.Returns)
	return err
}

func cmdImport(c *ucli.Context, e *env) error {
	if c.NArg() != 1 {
		return errors.New("usage: quotactl import FILE")
	}
	if err := requireAdmin(c.Context, e.reader); err != nil {
		return err
	}
	cfg, err := policy.LoadConfig(c.Args().First())
	if err != nil {
		return err
	}
	// quotad would refuse every cycle on a table whose QOS patterns pools.yaml contradicts.
	if err := e.table.Check(cfg); err != nil {
		return fmt.Errorf("%s: %w (nothing was imported)", c.Args().First(), err)
	}
	for _, p := range cfg.Projects {
		ok, err := e.reader.AccountExists(c.Context, p.Account)
		if err != nil {
			return err
		}
		if !ok {
			fmt.Fprintf(c.App.ErrWriter, "warning: account %s is not in slurmdbd: quotad will not manage it until it exists\n", p.Account)
		}
	}
	warnOvercommit(c.Context, c.App.ErrWriter, e, cfg)
	changes, err := e.store.Save(c.Context, cfg, actor())
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "imported %s: %d change(s)\n", c.Args().First(), len(changes))
	for _, ch := range changes {
		fmt.Fprintf(c.App.Writer, "  %s: %s -> %s\n", ch.Subject, cmp.Or(ch.Old, unset), cmp.Or(ch.New, unset))
	}
	return nil
}

func cmdExport(c *ucli.Context, e *env) error {
	cfg, err := e.store.Load(c.Context)
	if err != nil {
		return err
	}
	data, err := cfg.Marshal()
	if err != nil {
		return err
	}
	_, err = c.App.Writer.Write(data)
	return err
}

// unset is how quotactl shows a value that is not set: "lend limit a100: (none) -> 6". The
// plan's lines spell it "none" (policy.unsetText); each keeps the text its readers know.
const unset = "(none)"
