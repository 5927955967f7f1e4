// Package slurmdb reads what quotad needs from slurmdbd's MariaDB (Slurm 22.05 schema): the
// TRES table, QOS, account and user associations, admin levels and job history. It only reads: every
// change to Slurm's own objects goes through sacctmgr, so slurmdbd stays the one writer.
package slurmdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/slurmbridge/slurmbridge/bridge/gpureq"
	"github.com/slurmbridge/slurmbridge/quotad/policy"
)

// Reader reads one cluster's accounting database.
type Reader struct {
	DB      *sqlx.DB
	Cluster string // ClusterName: the per-cluster tables are <cluster>_assoc_table, <cluster>_job_table
}

// clusterName is what a cluster name may be before it is used in a table name.
var clusterName = regexp.MustCompile(`^[a-z0-9_][a-z0-9_-]*$`)

// NewReader checks the cluster name, which becomes part of table names.
func NewReader(db *sqlx.DB, cluster string) (*Reader, error) {
	if !clusterName.MatchString(cluster) {
		return nil, fmt.Errorf("cluster name %q is not a Slurm cluster name", cluster)
	}
	return &Reader{DB: db, Cluster: cluster}, nil
}

func (r *Reader) table(suffix string) string { return "`" + r.Cluster + "_" + suffix + "`" }

// TRESNames maps tres_table ids to their names as accounting prints them: "cpu", "mem",
// "gres/gpu", "gres/gpu:a100". GRES ids are assigned by slurmdbd, so they are always looked up.
func (r *Reader) TRESNames(ctx context.Context) (map[uint32]string, error) {
	var rows []struct {
		ID   uint32 `db:"id"`
		Type string `db:"type"`
		Name string `db:"name"`
	}
	if err := r.DB.SelectContext(ctx, &rows, "SELECT id, type, name FROM tres_table WHERE deleted = 0"); err != nil {
		return nil, fmt.Errorf("reading tres_table: %w", err)
	}
	names := make(map[uint32]string, len(rows))
	for _, row := range rows {
		names[row.ID] = TRESName(row.Type, row.Name)
	}
	return names, nil
}

// TRESName spells a tres_table row the way sacct and sacctmgr do.
func TRESName(typ, name string) string {
	if name == "" {
		return typ
	}
	return typ + "/" + name
}

// GPUTypes returns the typed GPU TRES known to slurmdbd ("a100" for gres/gpu:a100).
func GPUTypes(names map[uint32]string) map[string]bool {
	types := map[string]bool{}
	for _, n := range names {
		if t, ok := strings.CutPrefix(n, "gres/gpu:"); ok {
			types[t] = true
		}
	}
	return types
}

// QOSRow is one qos_table row as stored.
type QOSRow struct {
	ID                uint32        `db:"id"`
	Name              string        `db:"name"`
	GrpTRES           string        `db:"grp_tres"`
	Preempt           string        `db:"preempt"`
	PreemptMode       int64         `db:"preempt_mode"`
	GraceTime         sql.NullInt64 `db:"grace_time"`
	PreemptExemptTime sql.NullInt64 `db:"preempt_exempt_time"`
	Priority          sql.NullInt64 `db:"priority"`
}

// QOSRows reads every live QOS.
func (r *Reader) QOSRows(ctx context.Context) ([]QOSRow, error) {
	var rows []QOSRow
	err := r.DB.SelectContext(ctx, &rows, `SELECT id, name, grp_tres, preempt, preempt_mode, grace_time,
		preempt_exempt_time, priority FROM qos_table WHERE deleted = 0 ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("reading qos_table: %w", err)
	}
	return rows, nil
}

// QOS reads every live QOS in the policy's terms.
func (r *Reader) QOS(ctx context.Context, tres map[uint32]string) ([]policy.QOS, error) {
	rows, err := r.QOSRows(ctx)
	if err != nil {
		return nil, err
	}
	return ConvertQOS(rows, tres)
}

// Slurm's preempt_mode bits (slurm.h); 0 means "use the cluster's PreemptMode".
const (
	preemptModeSuspend = 0x0001
	preemptModeRequeue = 0x0002
	preemptModeCancel  = 0x0008
	preemptModeGang    = 0x0100
	preemptModeWithin  = 0x0400
)

// infinite32 is Slurm's INFINITE for 32-bit time fields (a value that means "not set").
const infinite32 = 0xffffffff

// ConvertQOS turns qos_table rows into policy.QOS: TRES ids become names and the Preempt id
// list becomes names.
func ConvertQOS(rows []QOSRow, tres map[uint32]string) ([]policy.QOS, error) {
	byID := make(map[string]string, len(rows))
	for _, row := range rows {
		byID[strconv.FormatUint(uint64(row.ID), 10)] = row.Name
	}
	out := make([]policy.QOS, 0, len(rows))
	for _, row := range rows {
		ids, err := gpureq.ParseTRESIDs(row.GrpTRES)
		if err != nil {
			return nil, fmt.Errorf("qos %s: grp_tres %q: %w", row.Name, row.GrpTRES, err)
		}
		named, err := ids.Named(tres)
		if err != nil {
			return nil, fmt.Errorf("qos %s: grp_tres: %w", row.Name, err)
		}
		q := policy.QOS{Name: row.Name, GrpTRES: map[string]int64{}, PreemptMode: preemptModeName(row.PreemptMode)}
		for name, v := range named {
			q.GrpTRES[name] = int64(v)
		}
		for _, id := range splitIDList(row.Preempt) {
			name, ok := byID[id]
			if !ok {
				return nil, fmt.Errorf("qos %s: preempts QOS id %s, which is not in qos_table", row.Name, id)
			}
			q.Preempt = append(q.Preempt, name)
		}
		if row.GraceTime.Valid && row.GraceTime.Int64 > 0 && row.GraceTime.Int64 < infinite32 {
			q.GraceTime = time.Duration(row.GraceTime.Int64) * time.Second
		}
		if row.PreemptExemptTime.Valid && row.PreemptExemptTime.Int64 > 0 && row.PreemptExemptTime.Int64 < infinite32-1 {
			q.PreemptExemptTime = time.Duration(row.PreemptExemptTime.Int64) * time.Second
		}
		if row.Priority.Valid {
			q.Priority = int(row.Priority.Int64)
		}
		out = append(out, q)
	}
	return out, nil
}

// preemptModeName spells preempt_mode as sacctmgr does ("cluster" when unset).
func preemptModeName(mode int64) string {
	var parts []string
	switch {
	case mode&preemptModeCancel != 0:
		parts = append(parts, "cancel")
	case mode&preemptModeRequeue != 0:
		parts = append(parts, "requeue")
	case mode&preemptModeSuspend != 0:
		parts = append(parts, "suspend")
	}
	if mode&preemptModeGang != 0 {
		parts = append(parts, "gang")
	}
	if mode&preemptModeWithin != 0 {
		parts = append(parts, "within")
	}
	if len(parts) == 0 {
		return "cluster"
	}
	return strings.Join(parts, ",")
}

// splitIDList reads slurmdbd's ",1,2," id lists.
func splitIDList(s string) []string {
	var out []string
	for id := range strings.SplitSeq(s, ",") {
		if id = strings.TrimSpace(id); id != "" {
			out = append(out, id)
		}
	}
	return out
}

// AssocRow is one <cluster>_assoc_table row.
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

// AssocRows reads the cluster's live associations, in the order they were created.
func (r *Reader) AssocRows(ctx context.Context) ([]AssocRow, error) {
	var rows []AssocRow
	err := r.DB.SelectContext(ctx, &rows, assocRowsQuery(r.table("assoc_table")))
	if err != nil {
		return nil, fmt.Errorf("reading %s_assoc_table: %w", r.Cluster, err)
	}
	return rows, nil
}

// assocRowsQuery selects the live associations of one <cluster>_assoc_table. It orders by
// id_assoc, not by the lft/rgt tree columns: slurmdbd stopped maintaining those in 23.11 and
// dropped them in 25.05. Inheritance follows parent_acct (ConvertAccounts), so no tree order is
// needed.
func assocRowsQuery(table string) string {
	return "SELECT id_assoc, user, acct, parent_acct, `partition`, qos, delta_qos, def_qos_id FROM " + table +
		" WHERE deleted = 0 ORDER BY id_assoc"
}

// Associations reads each account's own association with its QOS list and default QOS
// resolved through inheritance, as Slurm applies them, and the user associations that set their
// own QOS list, resolved the same way.
func (r *Reader) Associations(ctx context.Context) ([]policy.Account, []policy.UserAssociation, error) {
	assocs, err := r.AssocRows(ctx)
	if err != nil {
		return nil, nil, err
	}
	qos, err := r.QOSRows(ctx)
	if err != nil {
		return nil, nil, err
	}
	accounts, err := ConvertAccounts(assocs, qos)
	if err != nil {
		return nil, nil, err
	}
	users, err := ConvertUsers(assocs, qos)
	if err != nil {
		return nil, nil, err
	}
	return accounts, users, nil
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
	if list := splitIDList(a.QOS); len(list) > 0 {
		return list
	}
	return splitIDList(a.DeltaQOS)
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

// accountResolver resolves the account associations (user "") as slurmdbd does: an own list
// over the parent account's (applyList), and a NULL def_qos_id inherits the parent's default.
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
		if !ok || depth > 64 {
			return &resolvedAssoc{}
		}
		parent := &resolvedAssoc{}
		if a.ParentAcct != "" && a.ParentAcct != acct {
			parent = resolve(a.ParentAcct, depth+1)
		}
		res := &resolvedAssoc{qos: applyList(parent.qos, ownList(a)), def: parent.def}
		if a.DefQOSID.Valid && a.DefQOSID.Int64 > 0 {
			res.def = strconv.FormatInt(a.DefQOSID.Int64, 10)
		}
		cache[acct] = res
		return res
	}
	return func(acct string) *resolvedAssoc { return resolve(acct, 0) }
}

// ConvertAccounts resolves the account associations (user "") as slurmdbd does (see
// accountResolver). Each account keeps its parent, for the account tree.
func ConvertAccounts(assocs []AssocRow, qosRows []QOSRow) ([]policy.Account, error) {
	qosName := qosNames(qosRows)
	resolve := accountResolver(assocs)
	var out []policy.Account
	for _, a := range assocs {
		if a.User != "" || a.Account == "root" {
			continue
		}
		res := resolve(a.Account)
		acct := policy.Account{
			Name: a.Account, OwnQOS: len(ownList(&a)) > 0,
			OwnDefaultQOS: a.DefQOSID.Valid && a.DefQOSID.Int64 > 0,
		}
		if a.ParentAcct != a.Account {
			acct.Parent = a.ParentAcct
		}
		var err error
		if acct.QOS, err = namesOf(res.qos, qosName, "account "+a.Account+" allows"); err != nil {
			return nil, err
		}
		if res.def != "" {
			name, ok := qosName[res.def]
			if !ok {
				return nil, fmt.Errorf("account %s has default QOS id %s, which is not in qos_table", a.Account, res.def)
			}
			acct.DefaultQOS = name
		}
		out = append(out, acct)
	}
	return out, nil
}

// ConvertUsers resolves the user associations that set their own QOS list, absolute or as a
// delta over their account's (whose association is their parent), as slurmdbd does. Users that
// inherit their account's list are left out: the account's sync reaches them.
func ConvertUsers(assocs []AssocRow, qosRows []QOSRow) ([]policy.UserAssociation, error) {
	qosName := qosNames(qosRows)
	resolve := accountResolver(assocs)
	var out []policy.UserAssociation
	for _, a := range assocs {
		own := ownList(&a)
		if a.User == "" || len(own) == 0 {
			continue
		}
		u := policy.UserAssociation{User: a.User, Account: a.Account, Partition: a.Partition}
		var err error
		if u.QOS, err = namesOf(applyList(resolve(a.Account).qos, own), qosName, "user "+a.User+" in account "+a.Account+" allows"); err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}

func qosNames(rows []QOSRow) map[string]string {
	names := make(map[string]string, len(rows))
	for _, q := range rows {
		names[strconv.FormatUint(uint64(q.ID), 10)] = q.Name
	}
	return names
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

// AccountExists says whether slurmdbd has a live association for the account on this cluster.
func (r *Reader) AccountExists(ctx context.Context, account string) (bool, error) {
	var n int
	err := r.DB.GetContext(ctx, &n, "SELECT COUNT(*) FROM "+r.table("assoc_table")+
		" WHERE deleted = 0 AND user = '' AND acct = ?", account)
	if err != nil {
		return false, fmt.Errorf("reading %s_assoc_table: %w", r.Cluster, err)
	}
	return n > 0, nil
}

// Slurm's admin levels in user_table.admin_level.
const (
	AdminNone          = 1
	AdminOperator      = 2
	AdminAdministrator = 3
)

// AdminLevel is the user's AdminLevel in slurmdbd (AdminNone when the user is unknown).
func (r *Reader) AdminLevel(ctx context.Context, user string) (int, error) {
	var level int
	err := r.DB.GetContext(ctx, &level, "SELECT admin_level FROM user_table WHERE deleted = 0 AND name = ?", user)
	if errors.Is(err, sql.ErrNoRows) {
		return AdminNone, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading user_table: %w", err)
	}
	return level, nil
}

// jobStatePreempted is job_state_t JOB_PREEMPTED in the job table.
const jobStatePreempted = 8

// UsageRow is one job's GPU allocation over time, from the job table.
type UsageRow struct {
	Account   string `db:"account"`
	TRESAlloc string `db:"tres_alloc"`
	Start     int64  `db:"time_start"`
	End       int64  `db:"time_end"`
}

// Usage is GPU-seconds per account of jobs that ran in [since, now]. gpuID is gres/gpu's
// tres_table id.
func (r *Reader) Usage(ctx context.Context, gpuID uint32, since, now time.Time) (map[string]float64, error) {
	var rows []UsageRow
	// The LIKE only narrows the scan to rows that mention the GPU id; ParseTRESIDs decides.
	err := r.DB.SelectContext(ctx, &rows, "SELECT IFNULL(account, '') AS account, tres_alloc, time_start, time_end FROM "+
		r.table("job_table")+" WHERE time_start > 0 AND (time_end = 0 OR time_end >= ?) AND time_start <= ?"+
		" AND tres_alloc LIKE ?", since.Unix(), now.Unix(), "%"+strconv.FormatUint(uint64(gpuID), 10)+"=%")
	if err != nil {
		return nil, fmt.Errorf("reading %s_job_table: %w", r.Cluster, err)
	}
	return SumUsage(rows, gpuID, since, now)
}

// SumUsage adds up GPU-seconds per account, clipping each job to [since, now].
func SumUsage(rows []UsageRow, gpuID uint32, since, now time.Time) (map[string]float64, error) {
	usage := map[string]float64{}
	for _, row := range rows {
		ids, err := gpureq.ParseTRESIDs(row.TRESAlloc)
		if err != nil {
			return nil, fmt.Errorf("job of %s: tres_alloc: %w", row.Account, err)
		}
		gpus := ids[gpuID]
		if gpus == 0 {
			continue
		}
		start, end := max(row.Start, since.Unix()), now.Unix()
		if row.End > 0 {
			end = min(row.End, end)
		}
		if end > start {
			usage[row.Account] += float64(gpus) * float64(end-start)
		}
	}
	return usage, nil
}

// Preemption is one requeue of a job recorded by slurmdbd: each requeue closes the job's row
// with state PREEMPTED and opens a new one.
type Preemption struct {
	JobID   uint32 `db:"id_job"`
	Account string `db:"account"`
	End     int64  `db:"time_end"`
}

// Preemptions lists jobs of QOS qosID that slurmdbd recorded as PREEMPTED after since.
func (r *Reader) Preemptions(ctx context.Context, qosID uint32, since time.Time) ([]Preemption, error) {
	var rows []Preemption
	err := r.DB.SelectContext(ctx, &rows, "SELECT id_job, IFNULL(account, '') AS account, time_end FROM "+r.table("job_table")+
		" WHERE state = ? AND id_qos = ? AND time_end > ? ORDER BY time_end", jobStatePreempted, qosID, since.Unix())
	if err != nil {
		return nil, fmt.Errorf("reading %s_job_table: %w", r.Cluster, err)
	}
	return rows, nil
}

// QOSID returns the id of a live QOS, or false.
func (r *Reader) QOSID(ctx context.Context, name string) (uint32, bool, error) {
	var id uint32
	err := r.DB.GetContext(ctx, &id, "SELECT id FROM qos_table WHERE deleted = 0 AND name = ?", name)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("reading qos_table: %w", err)
	}
	return id, true, nil
}
