package slurm

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

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

// Association is one association: an account's own (User "") or one of its users', with the
// QOS it allows and the limits that keep a job pending: its own and, for Max limits, those it
// inherits (sacctmgr prints a user's association with its parents' Max limits filled in where
// it sets none). A user's association may be limited to one Partition. A count of NoLimit is
// no limit. Client.Associations reads it with sacctmgr; slurmdbd.Reader.Associations reads the
// same record from slurmdbd's assoc_table, for quotad, which reads MariaDB directly to keep its
// cycle short. Each field says which of the two fills it.
type Association struct {
	// Cluster, Account, User and Partition: both readers.
	Cluster, Account, User, Partition string
	// ID is the association's id in slurmdbd (assoc_table's id_assoc, sacctmgr's id), which
	// the job table's rows name. Both readers.
	ID uint32
	// ParentAccount is the account above an account's association ("" for root's and for
	// users' associations, whose parent is their Account). Both readers.
	ParentAccount string
	// QOS is the QOS names the association allows, inheritance applied, sorted: what
	// `sacctmgr show assoc format=qos` prints. Both readers.
	QOS []string
	// DefaultQOS is the association's default QOS, inherited from its parent when it sets none
	// (sacctmgr's defaultqos); "" none. Both readers.
	DefaultQOS string
	// OwnQOS and OwnDefaultQOS say the association sets its QOS list (or adds to or removes
	// from its parent's) or its default itself, rather than inheriting the parent's: a change
	// of the parent's then does not reach it. Only slurmdbd.Reader.Associations fills them,
	// from the association's own columns; sacctmgr prints the list and default with
	// inheritance applied and cannot tell, so Client.Associations leaves them false.
	OwnQOS, OwnDefaultQOS bool
	// GrpTRES caps what the association's running jobs (its users' and sub-accounts' too)
	// hold together; MaxTRESPerJob caps each job. Named TRES strings ("gres/gpu=4,cpu=64").
	// Only Client.Associations fills them (slurmdbd.Reader.Associations leaves them "").
	GrpTRES, MaxTRESPerJob string
	// GrpJobs/GrpSubmitJobs cap the jobs running (running and pending) in the association and
	// under it; MaxJobs/MaxSubmitJobs those of each user association. Only
	// Client.Associations fills them (slurmdbd.Reader.Associations leaves them NoLimit).
	GrpJobs, GrpSubmitJobs, MaxJobs, MaxSubmitJobs int
}

// NoLimit is an association count that sacctmgr prints empty.
const NoLimit = -1

// AssociationFilter narrows Client.Associations; empty fields match every association.
type AssociationFilter struct {
	Accounts []string
	Cluster  string
}

// AssociationFields is the format of Client.Associations, in its columns' order.
var AssociationFields = []string{"cluster", "id", "account", "user", "partition", "parentname", "qos", "defaultqos",
	"grptres", "maxtres", "grpjobs", "grpsubmitjobs", "maxjobs", "maxsubmitjobs"}

// associationColumns sets, per sacctmgr format field, the Association field it prints.
var associationColumns = map[string]func(a *Association, s string) error{
	"cluster":       func(a *Association, s string) error { a.Cluster = s; return nil },
	"id":            func(a *Association, s string) (err error) { a.ID, err = assocID(s); return err },
	"account":       func(a *Association, s string) error { a.Account = s; return nil },
	"user":          func(a *Association, s string) error { a.User = s; return nil },
	"partition":     func(a *Association, s string) error { a.Partition = s; return nil },
	"parentname":    func(a *Association, s string) error { a.ParentAccount = s; return nil },
	"qos":           func(a *Association, s string) error { a.QOS = NameList(s); return nil },
	"defaultqos":    func(a *Association, s string) error { a.DefaultQOS = s; return nil },
	"grptres":       func(a *Association, s string) error { a.GrpTRES = s; return nil },
	"maxtres":       func(a *Association, s string) error { a.MaxTRESPerJob = s; return nil },
	"grpjobs":       func(a *Association, s string) (err error) { a.GrpJobs, err = limitCount(s); return err },
	"grpsubmitjobs": func(a *Association, s string) (err error) { a.GrpSubmitJobs, err = limitCount(s); return err },
	"maxjobs":       func(a *Association, s string) (err error) { a.MaxJobs, err = limitCount(s); return err },
	"maxsubmitjobs": func(a *Association, s string) (err error) { a.MaxSubmitJobs, err = limitCount(s); return err },
}

// Associations reads the associations f matches with sacctmgr.
func (c Client) Associations(ctx context.Context, f AssociationFilter) ([]Association, error) {
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
	out, err := c.Runner.Run(ctx, "sacctmgr", append(args, "format="+strings.Join(AssociationFields, ","))...)
	if err != nil {
		return nil, err
	}
	return ParseAssociations(out, AssociationFields)
}

// ParseAssociations reads what `sacctmgr -n -P show assoc format=...` prints with fields as
// its format (AssociationFields for Client.Associations; older captures name fewer). A field
// without a column stays zero, a count NoLimit.
func ParseAssociations(out []byte, fields []string) ([]Association, error) {
	set := make([]func(*Association, string) error, len(fields))
	for i, name := range fields {
		if set[i] = associationColumns[name]; set[i] == nil {
			return nil, fmt.Errorf("sacctmgr show assoc: no reader for field %q", name)
		}
	}
	rows, err := parsePipes(out, len(fields), "sacctmgr show assoc")
	if err != nil {
		return nil, err
	}
	assocs := make([]Association, 0, len(rows))
	for _, f := range rows {
		a := Association{GrpJobs: NoLimit, GrpSubmitJobs: NoLimit, MaxJobs: NoLimit, MaxSubmitJobs: NoLimit}
		for i, s := range f {
			if err := set[i](&a, s); err != nil {
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

// assocID reads an association's id; empty is 0.
func assocID(s string) (uint32, error) {
	if s = strings.TrimSpace(s); s == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("id %q is not an association id", s)
	}
	return uint32(n), nil
}
