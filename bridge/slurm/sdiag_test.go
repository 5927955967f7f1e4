package slurm

import "testing"

// The shape sdiag prints on every supported release (the rows' printf formats are the same in
// 22.05, 24.11 and 26.05; 26.05 may append queued:/cycle_last: fields when RPC queueing is on).
const sdiagOut = `*******************************************************
sdiag output at Sat Nov 28 04:10:00 2026 (1796011800)
Data since      Sat Nov 28 04:00:00 2026 (1796011200)
*******************************************************
Server thread count:  1
Jobs submitted: 12

Main schedule statistics (microseconds):
	Last cycle:   512
	Total cycles: 40

Remote Procedure Call statistics by message type
	REQUEST_PARTITION_INFO                  ( 2009) count:120    ave_time:131    total_time:15720
	REQUEST_JOB_INFO                        ( 2003) count:80     ave_time:900    total_time:72000
	REQUEST_SUBMIT_BATCH_JOB                ( 4003) count:12     ave_time:2000   total_time:24000 queued:0      cycle_last:0      cycle_max:0      dropped:0

Remote Procedure Call statistics by user
	root            (       0) count:190    ave_time:400    total_time:76000
	team01          (    2001) count:22     ave_time:1624   total_time:35720
	nobody          (    4001) count:1      ave_time:10     total_time:10
	nobody          (    4002) count:2      ave_time:10     total_time:20

Pending RPC statistics
	No pending RPCs
`

func TestParseDiagAndSince(t *testing.T) {
	before, err := ParseDiag([]byte(sdiagOut))
	if err != nil {
		t.Fatal(err)
	}
	if len(before.ByType) != 3 || len(before.ByUser) != 3 {
		t.Fatalf("types %v, users %v", before.ByType, before.ByUser)
	}
	if r := before.ByType["REQUEST_SUBMIT_BATCH_JOB"]; r.Count != 12 || r.TotalMicros != 24000 {
		t.Errorf("submit row %+v (a row with queue fields after it)", r)
	}
	if r := before.ByUser["team01"]; r.Count != 22 || r.TotalMicros != 35720 {
		t.Errorf("team01 %+v", r)
	}
	if r := before.ByUser["nobody"]; r.Count != 3 || r.TotalMicros != 30 {
		t.Errorf("two uids printed as nobody: %+v, want them added up", r)
	}
	if n, us := Total(before.ByUser); n != 215 || us != 111750 {
		t.Errorf("users' total %d RPCs, %d us", n, us)
	}
	after := Diag{ByType: map[string]RPCCount{
		"REQUEST_PARTITION_INFO": {Name: "REQUEST_PARTITION_INFO", Count: 150, TotalMicros: 20000},
		"REQUEST_JOB_INFO":       {Name: "REQUEST_JOB_INFO", Count: 80, TotalMicros: 72000},
		"REQUEST_UPDATE_QOS":     {Name: "REQUEST_UPDATE_QOS", Count: 3, TotalMicros: 90},
	}, ByUser: map[string]RPCCount{
		"root": {Name: "root", Count: 5, TotalMicros: 100}, // reset in between
	}}
	d := after.Since(before)
	if r := d.ByType["REQUEST_PARTITION_INFO"]; r.Count != 30 || r.TotalMicros != 4280 {
		t.Errorf("partition info since: %+v", r)
	}
	if _, ok := d.ByType["REQUEST_JOB_INFO"]; ok {
		t.Error("a type with no new RPCs is listed")
	}
	if r := d.ByType["REQUEST_UPDATE_QOS"]; r.Count != 3 {
		t.Errorf("a new type: %+v", r)
	}
	if r := d.ByUser["root"]; r.Count != 5 {
		t.Errorf("a reset counter: %+v, want all of the later count", r)
	}
	if top := Top(d.ByType, 2); len(top) != 2 || top[0].Name != "REQUEST_PARTITION_INFO" || top[1].Name != "REQUEST_UPDATE_QOS" {
		t.Errorf("top %v", top)
	}
	if _, err := ParseDiag([]byte("sdiag: error: Unable to contact slurm controller\n")); err == nil {
		t.Error("output without the tables was read as no RPCs")
	}
}
