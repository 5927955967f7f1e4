package replay

import (
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestParseHistogram(t *testing.T) {
	page := []byte(`# HELP quotad_cycle_duration_seconds Duration of one cycle.
# TYPE quotad_cycle_duration_seconds histogram
quotad_cycle_duration_seconds_bucket{le="0.1"} 3
quotad_cycle_duration_seconds_sum 1.25
quotad_cycle_duration_seconds_count 10
quotad_cycle_duration_seconds_total_other 7
`)
	sum, count, err := ParseHistogram(page, "quotad_cycle_duration_seconds")
	if err != nil || sum != 1.25 || count != 10 {
		t.Errorf("sum %v count %v err %v", sum, count, err)
	}
	if _, _, err := ParseHistogram(page, "elasticd_cycle_seconds"); err == nil {
		t.Error("a page without the histogram read as zero cycles")
	}
}

// The samples sum up per process; memory comes from /proc (this test's own process).
func TestDaemonSamples(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"replay.test", "quotad"} {
		if err := os.WriteFile(filepath.Join(dir, name+".pid"), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mb, ok := rssMB(dir, "replay.test")
	if !ok || mb <= 0 {
		t.Fatalf("this process's RSS: %v %v", mb, ok)
	}
	if _, ok := rssMB(dir, "quotad"); ok {
		t.Error("a pid file naming another program (a stale one after a crash) read as quotad")
	}
	if _, ok := rssMB(dir, "elasticd"); ok {
		t.Error("a missing pid file read as a running process")
	}
	samples := []DaemonSample{
		{T: 0, RSSMB: map[string]float64{"quotad": 20}, CycleS: map[string]float64{}},
		{T: 5, RSSMB: map[string]float64{"quotad": 24, "slurmctld": 40}, CycleS: map[string]float64{"quotad": 0.2}},
		{T: 10, RSSMB: map[string]float64{"quotad": 22, "slurmctld": 41}, CycleS: map[string]float64{"quotad": 0.6}},
		{T: 15, RSSMB: map[string]float64{"quotad": 22, "slurmctld": 41}, CycleS: map[string]float64{"quotad": 0.4}},
	}
	byName := map[string]DaemonSummary{}
	for _, s := range SummarizeDaemons(samples) {
		byName[s.Name] = s
	}
	q := byName["quotad"]
	if q.RSSFirstMB != 20 || q.RSSMaxMB != 24 || q.Cycles != 3 || q.CycleP50 != 0.4 || q.CycleMax != 0.6 {
		t.Errorf("quotad %+v", q)
	}
	if e := byName["elasticd"]; e.SamplesAlive != 0 || !math.IsNaN(e.CycleP50) {
		t.Errorf("elasticd never ran: %+v", e)
	}
	if err := writeDaemons(dir, "m", samples); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "daemons-m.csv"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if lines[0] != "t_s,quotad_rss_mb,quotad_cycle_s,elasticd_rss_mb,elasticd_cycle_s,slurmctld_rss_mb" ||
		lines[2] != "5,24.0000,0.2000,,,40.0000" {
		t.Errorf("csv:\n%s", data)
	}
}
