package slurmdbd

import (
	"database/sql"
	"reflect"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/gpureq"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
)

// Rows as the testbed's slurmdbd wrote them after quotad's first sync.
var (
	testTRES = map[uint32]string{1: "cpu", 2: "mem", 4: "node", 5: "billing", 1001: "gres/gpu", 1002: "gres/gpu:a100", 1003: "gres/gpu:v100"}
	testQOS  = []QOSRow{
		{ID: 1, Name: "normal"},
		{ID: 3, Name: "borrow", PreemptMode: 2, GraceTime: sql.NullInt64{Int64: 2, Valid: true}, PreemptExemptTime: sql.NullInt64{Int64: 20, Valid: true}},
		{ID: 4, Name: "guar-proj-a", GrpTRES: "1001=4,1002=4,1003=0", Preempt: ",3,"},
	}
)

// The rows read as the record sacctmgr's columns give (slurm.ParseQOS): names for ids, the
// mode's words, no GrpTRES as nil.
func TestQOSFromRowsIsSacctmgrsRecord(t *testing.T) {
	qos, err := QOSFromRows(testQOS, testTRES)
	if err != nil {
		t.Fatal(err)
	}
	want := []slurm.QOS{
		{Name: "normal", PreemptMode: "cluster"},
		{Name: "borrow", PreemptMode: "requeue", GraceTime: 2 * time.Second, PreemptExemptTime: 20 * time.Second},
		{Name: "guar-proj-a", GrpTRES: gpureq.TRES{"gres/gpu": 4, "gres/gpu:a100": 4, "gres/gpu:v100": 0}, Preempt: []string{"borrow"}, PreemptMode: "cluster"},
	}
	if !reflect.DeepEqual(qos, want) {
		t.Errorf("QOS = %+v\nwant %+v", qos, want)
	}
	if _, err := QOSFromRows([]QOSRow{{ID: 9, Name: "x", GrpTRES: "1009=1"}}, testTRES); err == nil {
		t.Error("a TRES id missing from tres_table is accepted")
	}
	if _, err := QOSFromRows([]QOSRow{{ID: 9, Name: "x", Preempt: ",7,"}}, testTRES); err == nil {
		t.Error("a preempted QOS id missing from qos_table is accepted")
	}
}

// Unset and INFINITE times are zero, as sacctmgr prints them empty; a NULL priority is zero.
func TestQOSFromRowsTimes(t *testing.T) {
	n := func(v int64) sql.NullInt64 { return sql.NullInt64{Int64: v, Valid: true} }
	qos, err := QOSFromRows([]QOSRow{
		{ID: 1, Name: "infinite", GraceTime: n(infinite32), PreemptExemptTime: n(infinite32 - 1), Priority: n(7)},
		{ID: 2, Name: "null"},
		{ID: 3, Name: "set", GraceTime: n(120), PreemptExemptTime: n(86400)},
	}, testTRES)
	if err != nil {
		t.Fatal(err)
	}
	if q := qos[0]; q.GraceTime != 0 || q.PreemptExemptTime != 0 || q.Priority != 7 {
		t.Errorf("infinite = %+v", q)
	}
	if q := qos[1]; q.GraceTime != 0 || q.PreemptExemptTime != 0 || q.Priority != 0 {
		t.Errorf("null = %+v", q)
	}
	if q := qos[2]; q.GraceTime != 2*time.Minute || q.PreemptExemptTime != 24*time.Hour {
		t.Errorf("set = %+v", q)
	}
}

// qos_table.preempt_mode holds slurm.h's bits: WITHIN is 0x4000 and GANG 0x8000 (a QOS an
// admin set to requeue,within is not quotad's plain requeue), PRIORITY 0x2000 from 25.05.
func TestPreemptModeNameReadsSlurmsBits(t *testing.T) {
	for mode, want := range map[int64]string{
		0:      "cluster",
		0x0002: "requeue",
		0x0008: "cancel",
		0x0001: "suspend",
		0x8001: "suspend,gang",
		0x4002: "requeue,within",
		0x2002: "requeue,priority",
	} {
		if got := preemptModeName(mode); got != want {
			t.Errorf("preempt_mode %#x = %q, want %q", mode, got, want)
		}
	}
}
