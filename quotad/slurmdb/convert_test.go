package slurmdb

import (
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/slurmdbd"
)

func TestSumUsageClipsToWindow(t *testing.T) {
	since, now := time.Unix(1000, 0), time.Unix(2000, 0)
	rows := []slurmdbd.UsageRow{
		{Account: "proj-a", TRESAlloc: "1=1,1001=2,1002=2", Start: 500, End: 1500}, // 500 s in window × 2
		{Account: "proj-a", TRESAlloc: "1=1,1001=1", Start: 1900, End: 0},          // running: 100 s
		{Account: "proj-b", TRESAlloc: "1=4", Start: 1000, End: 2000},              // no GPU
		{Account: "proj-b", TRESAlloc: "1=1,11001=3", Start: 1000, End: 2000},      // another id that merely contains 1001
	}
	u, err := SumUsage(rows, 1001, since, now)
	if err != nil {
		t.Fatal(err)
	}
	if u["proj-a"] != 1100 || u["proj-b"] != 0 {
		t.Errorf("usage = %v, want proj-a 1100, proj-b 0", u)
	}
}

// The rollup's hours are slurmdbd's local ones: in a zone of +5:30 they start at :30 UTC, and
// the window's first whole hour is counted back from the rollup's end, not cut at a UTC hour.
func TestFirstRolledHourFollowsSlurmdbdsHours(t *testing.T) {
	rolled := time.Date(2026, 12, 4, 12, 30, 0, 0, time.UTC) // 18:00 in +5:30
	for since, want := range map[time.Time]time.Time{
		time.Date(2026, 12, 4, 6, 30, 0, 0, time.UTC): time.Date(2026, 12, 4, 6, 30, 0, 0, time.UTC),
		time.Date(2026, 12, 4, 6, 10, 0, 0, time.UTC): time.Date(2026, 12, 4, 6, 30, 0, 0, time.UTC),
		time.Date(2026, 12, 4, 6, 50, 0, 0, time.UTC): time.Date(2026, 12, 4, 7, 30, 0, 0, time.UTC),
	} {
		if got := FirstRolledHour(since, rolled); !got.Equal(want) {
			t.Errorf("window from %s: first rolled hour %s, want %s", since.Format("15:04"), got.Format("15:04"), want.Format("15:04"))
		}
	}
}
