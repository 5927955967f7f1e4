package slurmdbd

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/slurmbridge/slurmbridge/bridge/slurm"
)

// AssocRow is one <cluster>_assoc_table row as stored: QOS by id, the association's own list
// and default, not what it inherits.
type AssocRow struct {
	ID         uint32        `db:"id_assoc"`
	User       string        `db:"user"`
	Account    string        `db:"acct"`
	ParentAcct string        `db:"parent_acct"`
	Partition  string        `db:"partition"`
	QOS        string        `db:"qos"`       // ",1,2,": set on the association; "" inherits
	DeltaQOS   string        `db:"delta_qos"` // ",+3,-1,": added to or removed from the inherited list
	DefQOSID   sql.NullInt64 `db:"def_qos_id"`
}

// Associations reads the cluster's live associations as the same record
// slurm.Client.Associations reads with sacctmgr, in the order they were created: QOS lists and
// defaults resolved through inheritance as slurmdbd resolves them, and, which sacctmgr cannot
// tell, whether each association sets its own list and default. The limits are not read: they
// stay unset (NoLimit, "").
func (r *Reader) Associations(ctx context.Context) ([]slurm.Association, error) {
	rows, err := r.assocRows(ctx)
	if err != nil {
		return nil, err
	}
	qos, err := r.qosNamesByID(ctx)
	if err != nil {
		return nil, err
	}
	return AssociationsFromRows(r.Cluster, rows, qos)
}

// assocRows reads the cluster's live associations, in the order they were created.
func (r *Reader) assocRows(ctx context.Context) ([]AssocRow, error) {
	var rows []AssocRow
	err := r.DB.SelectContext(ctx, &rows, assocRowsQuery(r.table("assoc_table")))
	if err != nil {
		return nil, fmt.Errorf("reading %s_assoc_table: %w", r.Cluster, err)
	}
	return rows, nil
}

// assocRowsQuery selects the live associations of one <cluster>_assoc_table. It orders by
// id_assoc, not by the lft/rgt tree columns: slurmdbd stopped maintaining those in 23.11 and
// dropped them in 25.05. Inheritance follows parent_acct (accountResolver), so no tree order is
// needed.
func assocRowsQuery(table string) string {
	return "SELECT id_assoc, user, acct, parent_acct, `partition`, qos, delta_qos, def_qos_id FROM " + table +
		" WHERE deleted = 0 ORDER BY id_assoc"
}

// qosNamesByID maps the live QOS's qos_table ids, as slurmdbd's id lists spell them, to their
// names: what an association row's qos, delta_qos and def_qos_id name.
func (r *Reader) qosNamesByID(ctx context.Context) (map[string]string, error) {
	rows, err := r.qosRows(ctx)
	if err != nil {
		return nil, err
	}
	return qosNames(rows), nil
}

// AssociationsFromRows turns cluster's assoc_table rows into associations as sacctmgr prints
// them, in the rows' order; qosName maps QOS ids to names (qosNames). An account's association
// resolves its list over its parent account's, a user's over its account's (accountResolver);
// a NULL def_qos_id inherits the parent's default the same way. A QOS id missing from qos_table
// is an error: a list read without it would be wrong, and quotad acts on these lists.
func AssociationsFromRows(cluster string, rows []AssocRow, qosName map[string]string) ([]slurm.Association, error) {
	resolve := accountResolver(rows)
	out := make([]slurm.Association, 0, len(rows))
	for i := range rows {
		row := &rows[i]
		a := slurm.Association{Cluster: cluster, ID: row.ID, Account: row.Account, User: row.User, Partition: row.Partition,
			OwnQOS: len(ownList(row)) > 0, OwnDefaultQOS: ownDefault(row) != "",
			GrpJobs: slurm.NoLimit, GrpSubmitJobs: slurm.NoLimit, MaxJobs: slurm.NoLimit, MaxSubmitJobs: slurm.NoLimit}
		var res *resolvedAssoc
		who := "account " + row.Account
		if row.User == "" {
			// An account's own association: resolved over its parent account's.
			res = resolve(row.Account)
			if row.ParentAcct != row.Account {
				a.ParentAccount = row.ParentAcct
			}
		} else {
			// A user's association: its parent is its account's association.
			res = resolvedOver(resolve(row.Account), row)
			who = "user " + row.User + " in account " + row.Account
		}
		var err error
		if a.QOS, err = namesOf(res.qos, qosName, who+" allows"); err != nil {
			return nil, err
		}
		slices.Sort(a.QOS) // as sacctmgr prints them
		if res.def != "" {
			name, ok := qosName[res.def]
			// slurmdbd leaves def_qos_id as it was when its QOS is removed. An account's
			// default is an error, as quotad sets accounts' defaults; a user's reads as none,
			// since nothing here acts on it and a cycle must not stop over it.
			if !ok && row.User == "" {
				return nil, fmt.Errorf("%s has default QOS id %s, which is not in qos_table", who, res.def)
			}
			a.DefaultQOS = name
		}
		out = append(out, a)
	}
	return out, nil
}

// resolvedAssoc is an association's QOS list and default QOS as ids, inheritance applied.
type resolvedAssoc struct {
	qos []string // ids
	def string   // id, "" none
}

// ownList is what the association sets itself: its qos column, or else its delta_qos column
// (slurmdbd keeps "+id"/"-id" entries there; older rows may have them in qos). Empty: it
// inherits.
func ownList(a *AssocRow) []string {
	if list := IDList(a.QOS); len(list) > 0 {
		return list
	}
	return IDList(a.DeltaQOS)
}

// ownDefault is the default QOS id the association sets itself; "" (a NULL or 0 def_qos_id):
// it inherits its parent's.
func ownDefault(a *AssocRow) string {
	if a.DefQOSID.Valid && a.DefQOSID.Int64 > 0 {
		return strconv.FormatInt(a.DefQOSID.Int64, 10)
	}
	return ""
}

// resolvedOver resolves an association over its parent's resolution: its own list applied to
// the parent's (applyList), its own default or else the parent's.
func resolvedOver(parent *resolvedAssoc, a *AssocRow) *resolvedAssoc {
	return &resolvedAssoc{qos: applyList(parent.qos, ownList(a)), def: cmp.Or(ownDefault(a), parent.def)}
}

// applyList resolves an association's own list over its parent's: an absolute list replaces
// it, a delta list ("+id", "-id") adds to or removes from it, an empty one inherits it.
func applyList(parent, list []string) []string {
	if len(list) == 0 {
		return parent
	}
	set := map[string]bool{}
	if strings.HasPrefix(list[0], "+") || strings.HasPrefix(list[0], "-") {
		for _, id := range parent {
			set[id] = true
		}
	}
	for _, e := range list {
		switch {
		case strings.HasPrefix(e, "+"):
			set[e[1:]] = true
		case strings.HasPrefix(e, "-"):
			delete(set, e[1:])
		default:
			set[e] = true
		}
	}
	out := make([]string, 0, len(set))
	for id := range set {
		out = append(out, id)
	}
	return out
}

// maxAccountDepth bounds how far accountResolver follows parent_acct: slurmdbd does not let an
// account become its own ancestor, but a row edited by hand could, and the walk must end.
const maxAccountDepth = 64

// accountResolver resolves the account associations (user "") as slurmdbd does: an own list
// over the parent account's (applyList), and a NULL def_qos_id inherits the parent's default.
// An account without an association, or one deeper than maxAccountDepth, resolves to nothing.
func accountResolver(assocs []AssocRow) func(acct string) *resolvedAssoc {
	byAcct := map[string]*AssocRow{}
	for i := range assocs {
		if assocs[i].User == "" {
			byAcct[assocs[i].Account] = &assocs[i]
		}
	}
	cache := map[string]*resolvedAssoc{}
	var resolve func(acct string, depth int) *resolvedAssoc
	resolve = func(acct string, depth int) *resolvedAssoc {
		if r, ok := cache[acct]; ok {
			return r
		}
		a, ok := byAcct[acct]
		if !ok || depth > maxAccountDepth {
			return &resolvedAssoc{}
		}
		parent := &resolvedAssoc{}
		if a.ParentAcct != "" && a.ParentAcct != acct {
			parent = resolve(a.ParentAcct, depth+1)
		}
		res := resolvedOver(parent, a)
		cache[acct] = res
		return res
	}
	return func(acct string) *resolvedAssoc { return resolve(acct, 0) }
}

// namesOf turns QOS ids into names; who says whose list it is, for the error.
func namesOf(ids []string, qosName map[string]string, who string) ([]string, error) {
	var out []string
	for _, id := range ids {
		name, ok := qosName[id]
		if !ok {
			return nil, fmt.Errorf("%s QOS id %s, which is not in qos_table", who, id)
		}
		out = append(out, name)
	}
	return out, nil
}
