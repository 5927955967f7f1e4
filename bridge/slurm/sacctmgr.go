package slurm

import (
	"context"
	"fmt"
	"iter"
	"strconv"
	"strings"
	"time"
)

// ClearTRES as a TRESLimit's Limit removes the limit (sacctmgr's -1).
const ClearTRES = -1

// TRESLimit is one TRES of a QOS's GrpTRES, e.g. gres/gpu:a100=4.
type TRESLimit struct {
	Name  string // "gres/gpu", "gres/gpu:a100"
	Limit int64  // ClearTRES removes it
}

// QOSSettings are the fields ModifyQOS sets; nil (or empty GrpTRES) leaves a field as it is.
type QOSSettings struct {
	GrpTRES     []TRESLimit
	Preempt     *[]string // the QOS this one may preempt; empty clears the list
	PreemptMode *string
	GraceTime   *time.Duration
	// PreemptExemptTime is sent as [days-]hh:mm:ss: sacctmgr reads a bare number as minutes.
	PreemptExemptTime *time.Duration
	Priority          *int
}

// Args is the settings as sacctmgr's set clause takes them, one per field set.
func (s QOSSettings) Args() []string {
	var set []string
	if len(s.GrpTRES) > 0 {
		parts := make([]string, 0, len(s.GrpTRES))
		for _, t := range s.GrpTRES {
			parts = append(parts, t.Name+"="+strconv.FormatInt(t.Limit, 10))
		}
		set = append(set, "grptres="+strings.Join(parts, ","))
	}
	if s.Preempt != nil {
		set = append(set, "preempt="+strings.Join(*s.Preempt, ","))
	}
	if s.PreemptMode != nil {
		set = append(set, "preemptmode="+*s.PreemptMode)
	}
	if s.GraceTime != nil {
		set = append(set, "gracetime="+strconv.FormatInt(int64(*s.GraceTime/time.Second), 10)) // seconds
	}
	if s.PreemptExemptTime != nil {
		set = append(set, "preemptexempttime="+clock(*s.PreemptExemptTime))
	}
	if s.Priority != nil {
		set = append(set, "priority="+strconv.Itoa(*s.Priority))
	}
	return set
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

// MaxQOSPerRun bounds the QOS names of one sacctmgr run: its name= list is one argument, which
// Linux caps at 128 KiB (1000 names of up to 64 characters stay within it). A run costs about
// the same whether it names one QOS or 200 (0.27-0.29 s on the testbed's slurmdbd, 22.05), so a
// cycle's runs, not its QOS, set how long acting takes.
const MaxQOSPerRun = 1000

// maxNamesArg bounds the bytes of one run's name list, below Linux's 128 KiB for one argument,
// for sites whose names are long.
const maxNamesArg = 100 << 10

// QOSRuns cuts items into the sacctmgr runs that name them (name(item) each): at most
// MaxQOSPerRun names and maxNamesArg bytes of list a run, in the order given.
func QOSRuns[T any](items []T, name func(T) string) iter.Seq[[]T] {
	return func(yield func([]T) bool) {
		start, size := 0, 0
		for i, it := range items {
			n := len(name(it)) + 1
			if i > start && (i-start == MaxQOSPerRun || size+n > maxNamesArg) {
				if !yield(items[start:i:i]) {
					return
				}
				start, size = i, 0
			}
			size += n
		}
		if start < len(items) {
			yield(items[start:len(items):len(items)])
		}
	}
}

func itself(s string) string { return s }

// AddQOS creates QOS with Slurm's defaults (-i: without asking for confirmation), all named in
// one sacctmgr run (more for over MaxQOSPerRun), so a table of many projects is created in a
// few runs rather than one per QOS.
func (c Client) AddQOS(ctx context.Context, names ...string) error {
	for batch := range QOSRuns(names, itself) {
		if _, err := c.Runner.Run(ctx, "sacctmgr", "-i", "add", "qos", strings.Join(batch, ",")); err != nil {
			return err
		}
	}
	return nil
}

// ModifyQOS sets the same fields of every QOS in names, in one sacctmgr run (more for over
// MaxQOSPerRun names): one commit in slurmdbd and one update pushed to slurmctld, where a run
// per QOS costs a process, a commit and an update each. With nothing to set it runs nothing.
func (c Client) ModifyQOS(ctx context.Context, names []string, s QOSSettings) error {
	set := s.Args()
	if len(set) == 0 {
		return nil
	}
	for batch := range QOSRuns(names, itself) {
		if _, err := c.Runner.Run(ctx, "sacctmgr", append([]string{"-i", "modify", "qos", "where", "name=" + strings.Join(batch, ","), "set"}, set...)...); err != nil {
			return err
		}
	}
	return nil
}

// AccountSettings are the fields ModifyAccount sets; nil leaves a field as it is.
type AccountSettings struct {
	QOS        *[]string
	DefaultQOS *string
}

// ModifyAccount sets an account's QOS list and default QOS, on cluster when it is not empty (so
// a multi-cluster slurmdbd is not touched elsewhere). Users inherit both unless they override
// them.
func (c Client) ModifyAccount(ctx context.Context, account, cluster string, s AccountSettings) error {
	args := []string{"-i", "modify", "account", "where", "name=" + account}
	if cluster != "" {
		args = append(args, "cluster="+cluster)
	}
	args = append(args, "set")
	if s.QOS != nil {
		args = append(args, "qos="+strings.Join(*s.QOS, ","))
	}
	if s.DefaultQOS != nil {
		args = append(args, "defaultqos="+*s.DefaultQOS)
	}
	_, err := c.Runner.Run(ctx, "sacctmgr", args...)
	return err
}

// AddUserQOS adds QOS to the QOS lists of a user's associations in account (only the one of
// partition when it is not empty), on cluster when it is not empty, with sacctmgr's qos+=: the
// QOS already there stay.
func (c Client) AddUserQOS(ctx context.Context, user, account, partition, cluster string, qos []string) error {
	if len(qos) == 0 {
		return nil
	}
	args := []string{"-i", "modify", "user", "where", "name=" + user, "account=" + account}
	if partition != "" {
		args = append(args, "partition="+partition)
	}
	if cluster != "" {
		args = append(args, "cluster="+cluster)
	}
	args = append(args, "set", "qos+="+strings.Join(qos, ","))
	_, err := c.Runner.Run(ctx, "sacctmgr", args...)
	return err
}

// UserAdminLevel is a user's AdminLevel in slurmdbd ("Administrator", "Operator", "None"), ""
// when the user is not in the database.
func (c Client) UserAdminLevel(ctx context.Context, user string) (string, error) {
	out, err := c.Runner.Run(ctx, "sacctmgr", "-n", "-P", "show", "user", user, "format=adminlevel")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// UserIsOperator says whether a user has AdminLevel Operator or Administrator in slurmdbd: the
// users Slurm shows every job to when PrivateData=jobs is set.
func (c Client) UserIsOperator(ctx context.Context, user string) (bool, error) {
	level, err := c.UserAdminLevel(ctx, user)
	return strings.EqualFold(level, "Operator") || strings.EqualFold(level, "Administrator"), err
}

// QOSLimits is a QOS's name, its GrpTRES ("gres/gpu=4", "" when none) and the QOS it may
// preempt ("borrow-proj-a,borrow-proj-c", "" when none), as sacctmgr prints them.
type QOSLimits struct {
	Name, GrpTRES, Preempt string
}

// ShowQOS lists every QOS with its GrpTRES and Preempt list.
func (c Client) ShowQOS(ctx context.Context) ([]QOSLimits, error) {
	out, err := c.Runner.Run(ctx, "sacctmgr", "-n", "-P", "show", "qos", "format=name,grptres,preempt")
	if err != nil {
		return nil, err
	}
	rows, err := parsePipes(out, 3, "sacctmgr show qos")
	if err != nil {
		return nil, err
	}
	qos := make([]QOSLimits, len(rows))
	for i, f := range rows {
		qos[i] = QOSLimits{Name: f[0], GrpTRES: f[1], Preempt: f[2]}
	}
	return qos, nil
}

// QOSPreempts lists, by QOS name, the QOS each one may preempt (sacctmgr's Preempt).
func (c Client) QOSPreempts(ctx context.Context) (map[string][]string, error) {
	out, err := c.Runner.Run(ctx, "sacctmgr", "-n", "-P", "show", "qos", "format=name,preempt")
	if err != nil {
		return nil, err
	}
	rows, err := parsePipes(out, 2, "sacctmgr show qos")
	if err != nil {
		return nil, err
	}
	preempts := make(map[string][]string, len(rows))
	for _, f := range rows {
		var names []string
		for n := range strings.SplitSeq(f[1], ",") {
			if n = strings.TrimSpace(n); n != "" {
				names = append(names, n)
			}
		}
		preempts[f[0]] = names
	}
	return preempts, nil
}

// Association is one association: an account's own (User "") or one of its users'.
type Association struct {
	Account, User, DefaultQOS string
}

// AssociationFilter narrows ShowAssociations; empty fields match every association.
type AssociationFilter struct {
	Accounts []string
	Cluster  string
}

// ShowAssociations lists associations with their default QOS.
func (c Client) ShowAssociations(ctx context.Context, f AssociationFilter) ([]Association, error) {
	args := []string{"-n", "-P", "show", "assoc"}
	var where []string
	if len(f.Accounts) > 0 {
		where = append(where, "account="+strings.Join(f.Accounts, ","))
	}
	if f.Cluster != "" {
		where = append(where, "cluster="+f.Cluster)
	}
	if len(where) > 0 {
		args = append(append(args, "where"), where...)
	}
	out, err := c.Runner.Run(ctx, "sacctmgr", append(args, "format=account,user,defaultqos")...)
	if err != nil {
		return nil, err
	}
	rows, err := parsePipes(out, 3, "sacctmgr show assoc")
	if err != nil {
		return nil, err
	}
	assocs := make([]Association, len(rows))
	for i, f := range rows {
		assocs[i] = Association{Account: f[0], User: f[1], DefaultQOS: f[2]}
	}
	return assocs, nil
}

// parsePipes reads -n -P output (one record a line, fields split by "|") with n fields a line;
// the last field takes any further "|" (a job name may have one).
func parsePipes(out []byte, n int, what string) ([][]string, error) {
	var rows [][]string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		f := strings.SplitN(line, "|", n)
		if len(f) != n {
			return nil, fmt.Errorf("%s line %q: want %d fields", what, line, n)
		}
		rows = append(rows, f)
	}
	return rows, nil
}

// AssociationLimits is one association with the limits that keep a job pending: its own
// and, for Max limits, those it inherits (sacctmgr prints a user's association with its
// parents' Max limits filled in where it sets none). Account associations have User ""; a
// user's association may be limited to one Partition. A count of NoLimit is no limit.
type AssociationLimits struct {
	Cluster, Account, User, Partition string
	// ParentAccount is the account above an account's association ("" for root's and for
	// users' associations, whose parent is their Account).
	ParentAccount string
	// GrpTRES caps what the association's running jobs (its users' and sub-accounts' too)
	// hold together; MaxTRESPerJob caps each job. Named TRES strings ("gres/gpu=4,cpu=64").
	GrpTRES, MaxTRESPerJob string
	// GrpJobs/GrpSubmitJobs cap the jobs running (running and pending) in the association and
	// under it; MaxJobs/MaxSubmitJobs those of each user association.
	GrpJobs, GrpSubmitJobs, MaxJobs, MaxSubmitJobs int
}

// NoLimit is an association count that sacctmgr prints empty.
const NoLimit = -1

// associationLimitFields is the format of ShowAssociationLimits, in its columns' order.
const associationLimitFields = "cluster,account,user,partition,parentname,grptres,maxtres,grpjobs,grpsubmitjobs,maxjobs,maxsubmitjobs"

// ShowAssociationLimits lists the associations of cluster ("" every cluster) with their limits.
func (c Client) ShowAssociationLimits(ctx context.Context, cluster string) ([]AssociationLimits, error) {
	args := []string{"-n", "-P", "show", "assoc"}
	if cluster != "" {
		args = append(args, "where", "cluster="+cluster)
	}
	out, err := c.Runner.Run(ctx, "sacctmgr", append(args, "format="+associationLimitFields)...)
	if err != nil {
		return nil, err
	}
	return ParseAssociationLimits(out)
}

// ParseAssociationLimits reads what ShowAssociationLimits's sacctmgr prints.
func ParseAssociationLimits(out []byte) ([]AssociationLimits, error) {
	rows, err := parsePipes(out, strings.Count(associationLimitFields, ",")+1, "sacctmgr show assoc")
	if err != nil {
		return nil, err
	}
	assocs := make([]AssociationLimits, 0, len(rows))
	for _, f := range rows {
		a := AssociationLimits{Cluster: f[0], Account: f[1], User: f[2], Partition: f[3], ParentAccount: f[4],
			GrpTRES: f[5], MaxTRESPerJob: f[6]}
		for i, n := range []*int{&a.GrpJobs, &a.GrpSubmitJobs, &a.MaxJobs, &a.MaxSubmitJobs} {
			if *n, err = limitCount(f[7+i]); err != nil {
				return nil, fmt.Errorf("sacctmgr show assoc line %q: %w", strings.Join(f, "|"), err)
			}
		}
		assocs = append(assocs, a)
	}
	return assocs, nil
}

// limitCount reads a count limit: empty is NoLimit.
func limitCount(s string) (int, error) {
	if s = strings.TrimSpace(s); s == "" {
		return NoLimit, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("limit %q is not a count", s)
	}
	return n, nil
}
