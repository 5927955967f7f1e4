package slurmdb

import (
	"database/sql"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/gpureq"
	"github.com/slurmbridge/slurmbridge/bridge/slurmdbd"
	"github.com/slurmbridge/slurmbridge/quotad/policy"
)

// The policy.QOS quotad gets through bridge's typed record (slurmdbd.QOSFromRows, then
// policyQOS) are those it got when this package turned qos_table rows into them itself
// (convertQOSBefore, kept here as it was), errors included.
func TestQOSThroughTheRecordIsAsBefore(t *testing.T) {
	n := func(v int64) sql.NullInt64 { return sql.NullInt64{Int64: v, Valid: true} }
	cases := map[string][]slurmdbd.QOSRow{
		"the testbed's QOS": testQOS,
		"no QOS":            nil,
		"times unset, INFINITE and set": {
			{ID: 1, Name: "a", GraceTime: n(0xffffffff), PreemptExemptTime: n(0xfffffffe), Priority: n(7)},
			{ID: 2, Name: "b", GraceTime: n(0xfffffffe), PreemptExemptTime: n(0xfffffffd)},
			{ID: 3, Name: "c", GraceTime: n(-1), PreemptExemptTime: n(0), Priority: n(-3)},
			{ID: 4, Name: "d", GraceTime: n(120), PreemptExemptTime: n(86400), Priority: n(0)},
		},
		"preempt lists": {
			{ID: 10, Name: "guar", Preempt: ",11,12,", GrpTRES: "1=16,2=4096,1001=2"},
			{ID: 11, Name: "borrow-a", Preempt: ""},
			{ID: 12, Name: "borrow-b", Preempt: ",", GrpTRES: ",1001=0,"},
		},
		"a TRES id not in tres_table":  {{ID: 1, Name: "x", GrpTRES: "1009=1"}},
		"a GrpTRES that is not ids":    {{ID: 1, Name: "x", GrpTRES: "gres/gpu=1"}},
		"a preempted QOS not in table": {{ID: 1, Name: "x", Preempt: ",2,"}},
	}
	var modes []slurmdbd.QOSRow
	for _, bits := range []int64{0, 0x1, 0x2, 0x8, 0x3, 0xb, 0x2000, 0x4000, 0x8000, 0x4002, 0x8001, 0x2002, 0xe00b, 0x10} {
		modes = append(modes, slurmdbd.QOSRow{ID: uint32(len(modes) + 1), Name: "m" + strconv.FormatInt(bits, 16), PreemptMode: bits})
	}
	cases["every preempt_mode bit"] = modes
	for name, rows := range cases {
		t.Run(name, func(t *testing.T) {
			want, wantErr := convertQOSBefore(rows, testTRES)
			records, err := slurmdbd.QOSFromRows(rows, testTRES)
			var got []policy.QOS
			if err == nil {
				got = policyQOS(records)
			}
			if fmt.Sprint(err) != fmt.Sprint(wantErr) || !reflect.DeepEqual(got, want) {
				t.Errorf("got %#v, %v\nwant %#v, %v", got, err, want, wantErr)
			}
		})
	}
}

// convertQOSBefore is ConvertQOS as this package had it before bridge/slurmdbd read the record.
func convertQOSBefore(rows []slurmdbd.QOSRow, tres map[uint32]string) ([]policy.QOS, error) {
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
		q := policy.QOS{Name: row.Name, GrpTRES: map[string]int64{}, PreemptMode: preemptModeNameBefore(row.PreemptMode)}
		for name, v := range named {
			q.GrpTRES[name] = int64(v)
		}
		for _, id := range splitIDListBefore(row.Preempt) {
			name, ok := byID[id]
			if !ok {
				return nil, fmt.Errorf("qos %s: preempts QOS id %s, which is not in qos_table", row.Name, id)
			}
			q.Preempt = append(q.Preempt, name)
		}
		if row.GraceTime.Valid && row.GraceTime.Int64 > 0 && row.GraceTime.Int64 < 0xffffffff {
			q.GraceTime = time.Duration(row.GraceTime.Int64) * time.Second
		}
		if row.PreemptExemptTime.Valid && row.PreemptExemptTime.Int64 > 0 && row.PreemptExemptTime.Int64 < 0xffffffff-1 {
			q.PreemptExemptTime = time.Duration(row.PreemptExemptTime.Int64) * time.Second
		}
		if row.Priority.Valid {
			q.Priority = int(row.Priority.Int64)
		}
		out = append(out, q)
	}
	return out, nil
}

func preemptModeNameBefore(mode int64) string {
	var parts []string
	switch {
	case mode&0x0008 != 0:
		parts = append(parts, "cancel")
	case mode&0x0002 != 0:
		parts = append(parts, "requeue")
	case mode&0x0001 != 0:
		parts = append(parts, "suspend")
	}
	if mode&0x8000 != 0 {
		parts = append(parts, "gang")
	}
	if mode&0x4000 != 0 {
		parts = append(parts, "within")
	}
	if mode&0x2000 != 0 {
		parts = append(parts, "priority")
	}
	if len(parts) == 0 {
		return "cluster"
	}
	return strings.Join(parts, ",")
}

func splitIDListBefore(s string) []string {
	var out []string
	for id := range strings.SplitSeq(s, ",") {
		if id = strings.TrimSpace(id); id != "" {
			out = append(out, id)
		}
	}
	return out
}
