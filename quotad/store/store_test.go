package store

import (
	"slices"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/quotad/policy"
)

func TestDiffNamesEachChange(t *testing.T) {
	parse := func(s string) *policy.Config {
		t.Helper()
		c, err := policy.ParseConfig([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	old := parse("settings: {graceTime: 2s}\nprojects:\n  - account: proj-a\n    gpus: {a100: 4}\n  - account: proj-b\n    gpus: {a100: 4}\n")
	cur := parse("settings: {graceTime: 5s}\nlendLimits: {a100: 6}\nprojects:\n  - account: proj-a\n    gpus: {a100: 4}\n  - account: proj-b\n    gpus: {a100: 2, v100: 2}\n    borrowLimit: 3\n    weight: 2\n    reclaimPriorityThreshold: 5000\n")
	got := Diff(old, cur)
	want := []Change{
		{Subject: "setting graceTime", Old: "2s", New: "5s"},
		{Subject: "lend limit a100", Old: "", New: "6"},
		{Subject: "project proj-b", Old: "gpus=a100:4", New: "gpus=a100:2,v100:2 borrowLimit=3 weight=2 reclaimPriorityThreshold=5000"},
	}
	if len(got) != len(want) {
		t.Fatalf("Diff = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("change %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if d := Diff(cur, cur); len(d) != 0 {
		t.Errorf("a table differs from itself: %+v", d)
	}
}

func TestSettingsRoundTrip(t *testing.T) {
	prio := 10
	s := policy.Settings{BorrowQOS: "lend", GraceTime: 3e9, PreemptExemptTime: 20e9, BorrowPriority: &prio, LendReasons: []string{"QOSGrpGRES", "QOSGrpTRES"},
		ReclaimBackoff: time.Minute, ReclaimBackoffMax: time.Hour, ReclaimBackoffReset: 10 * time.Minute, LendOrder: policy.LendByDecayedUsage,
		BorrowSizeTiers: []int{1, 2, 4, 8}}
	var back policy.Settings
	for k, v := range settingValues(s) {
		if err := setSetting(&back, k, v); err != nil {
			t.Fatal(k, err)
		}
	}
	if back.BorrowQOS != "lend" || back.GraceTime != s.GraceTime || back.PreemptExemptTime != s.PreemptExemptTime || *back.BorrowPriority != 10 || len(back.LendReasons) != 2 ||
		back.ReclaimBackoff != time.Minute || back.ReclaimBackoffMax != time.Hour || back.ReclaimBackoffReset != 10*time.Minute || back.LendOrder != policy.LendByDecayedUsage ||
		!slices.Equal(back.BorrowSizeTiers, s.BorrowSizeTiers) {
		t.Errorf("round trip = %+v", back)
	}
	if err := setSetting(&back, "futureKnob", "1"); err == nil {
		t.Error("an unknown setting is silently dropped")
	}
	// No size tiers is a row of its own; a table with no row at all (written before size
	// tiers existed) gets the default ones, as a quota table file naming none does.
	var none policy.Settings
	for k, v := range settingValues(policy.Settings{}) {
		if err := setSetting(&none, k, v); err != nil {
			t.Fatal(k, err)
		}
	}
	resolved := func(s policy.Settings) []int {
		c := policy.Config{Settings: s, Projects: []policy.Project{{Account: "p", GPUs: map[string]int{"a100": 1}}}}
		c.ResolveSizeTiers()
		return c.Settings.BorrowSizeTiers
	}
	if got := resolved(none); got != nil {
		t.Errorf("no size tiers read back as %v", got)
	}
	if got := resolved(policy.Settings{}); !slices.Equal(got, policy.DefaultBorrowSizeTiers) {
		t.Errorf("a table without the row has tiers %v, want the default %v", got, policy.DefaultBorrowSizeTiers)
	}
}
