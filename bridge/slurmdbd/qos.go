package slurmdbd

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/gpureq"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
)

// QOSRow is one qos_table row as stored: TRES and the QOS it preempts by id, preempt_mode as
// Slurm's bits, times in seconds with Slurm's INFINITE.
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

// QOS reads every live QOS as the same record slurm.Client.QOS reads with sacctmgr, in id
// order; tres maps TRES ids to names (TRESNames).
func (r *Reader) QOS(ctx context.Context, tres map[uint32]string) ([]slurm.QOS, error) {
	rows, err := r.qosRows(ctx)
	if err != nil {
		return nil, err
	}
	return QOSFromRows(rows, tres)
}

// qosRows reads every live qos_table row.
func (r *Reader) qosRows(ctx context.Context) ([]QOSRow, error) {
	var rows []QOSRow
	err := r.DB.SelectContext(ctx, &rows, `SELECT id, name, grp_tres, preempt, preempt_mode, grace_time,
		preempt_exempt_time, priority FROM qos_table WHERE deleted = 0 ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("reading qos_table: %w", err)
	}
	return rows, nil
}

// Slurm's preempt_mode bits (slurm/slurm.h, the same from 22.05 to 26.05; PRIORITY from 25.05);
// 0 means "use the cluster's PreemptMode".
const (
	preemptModeSuspend  = 0x0001
	preemptModeRequeue  = 0x0002
	preemptModeCancel   = 0x0008
	preemptModePriority = 0x2000
	preemptModeWithin   = 0x4000
	preemptModeGang     = 0x8000
)

// infinite32 is Slurm's INFINITE for 32-bit time fields (a value that means "not set").
const infinite32 = 0xffffffff

// QOSFromRows turns qos_table rows into QOS as sacctmgr prints them: TRES ids become names, the
// Preempt id list becomes names, preempt_mode its words, unset or INFINITE times zero.
func QOSFromRows(rows []QOSRow, tres map[uint32]string) ([]slurm.QOS, error) {
	byID := qosNames(rows)
	out := make([]slurm.QOS, 0, len(rows))
	for _, row := range rows {
		ids, err := gpureq.ParseTRESIDs(row.GrpTRES)
		if err != nil {
			return nil, fmt.Errorf("qos %s: grp_tres %q: %w", row.Name, row.GrpTRES, err)
		}
		q := slurm.QOS{Name: row.Name, PreemptMode: preemptModeName(row.PreemptMode)}
		if q.GrpTRES, err = ids.Named(tres); err != nil {
			return nil, fmt.Errorf("qos %s: grp_tres: %w", row.Name, err)
		}
		if len(q.GrpTRES) == 0 {
			q.GrpTRES = nil // no limit, as slurm.ParseQOS has it
		}
		for _, id := range IDList(row.Preempt) {
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

// qosNames maps qos_table ids, as slurmdbd's id lists spell them, to QOS names.
func qosNames(rows []QOSRow) map[string]string {
	names := make(map[string]string, len(rows))
	for _, q := range rows {
		names[strconv.FormatUint(uint64(q.ID), 10)] = q.Name
	}
	return names
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
	if mode&preemptModePriority != 0 {
		parts = append(parts, "priority")
	}
	if len(parts) == 0 {
		return "cluster"
	}
	return strings.Join(parts, ",")
}

// IDList reads slurmdbd's ",1,2," id lists (qos_table.preempt, an association's qos and
// delta_qos, whose entries may carry a "+" or "-").
func IDList(s string) []string {
	var out []string
	for id := range strings.SplitSeq(s, ",") {
		if id = strings.TrimSpace(id); id != "" {
			out = append(out, id)
		}
	}
	return out
}
