package policy_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/quotad/policy"
	"github.com/slurmbridge/slurmbridge/quotad/policy/policytest"
)

// withBackoff is the testbed table with a reclaim backoff of base, doubling up to max, reset by
// a run of 10 minutes.
func withBackoff(base, max time.Duration) *policy.Config {
	cfg := twoProjects().Obj()
	cfg.Settings.ReclaimBackoff, cfg.Settings.ReclaimBackoffMax, cfg.Settings.ReclaimBackoffReset = base, max, 10*time.Minute
	return cfg
}

func TestReclaimBackoff(t *testing.T) {
	const borrowB = "borrow-proj-b"
	tests := []struct {
		name    string
		cfg     *policy.Config
		snap    func(*policytest.SnapshotWrapper) *policytest.SnapshotWrapper
		want    []string
		explain map[uint32]policytest.Says
		backing int // proj-b's jobs waiting out a backoff, for the page
	}{
		{
			name: "a job a claim took back 30 s ago waits out its 1 min backoff; another is lent",
			cfg:  withBackoff(time.Minute, 0),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Jobs(pendingA100(5, 2, "proj-b")...).Reclaimed(5, borrowB, 2*time.Minute, 30*time.Second)
			},
			want: []string{"lend 6 proj-b"},
			explain: map[uint32]policytest.Says{5: {Code: policy.CodeReclaimBackoff,
				Words: "claims took it back once, the last at 11:59:30 UTC: it is lent again from 12:00:30 UTC (reclaim backoff 1m0s)"}},
			backing: 1,
		},
		{
			name: "once its backoff has passed it is lent again",
			cfg:  withBackoff(time.Minute, 0),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Jobs(pendingA100(5, 1, "proj-b")...).Reclaimed(5, borrowB, 2*time.Minute, 61*time.Second)
			},
			want:    []string{"lend 5 proj-b"},
			explain: map[uint32]policytest.Says{5: {Code: policy.CodeLent}},
		},
		{
			name: "three short runs in a row, each taken back: 4 min",
			cfg:  withBackoff(time.Minute, 0),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Jobs(pendingA100(5, 1, "proj-b")...).
					Reclaimed(5, borrowB, 2*time.Minute, 20*time.Minute).
					Reclaimed(5, borrowB, 2*time.Minute, 10*time.Minute).
					Reclaimed(5, borrowB, 2*time.Minute, 3*time.Minute)
			},
			explain: map[uint32]policytest.Says{5: {Code: policy.CodeReclaimBackoff,
				Words: "claims took it back 3 times in a row, each after a run shorter than 10m0s, the last at 11:57:00 UTC: it is lent again from 12:01:00 UTC (reclaim backoff 4m0s)"}},
			backing: 1,
		},
		{
			name: "a long run before the last reclaim starts the count over",
			cfg:  withBackoff(time.Minute, 0),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Jobs(pendingA100(5, 1, "proj-b")...).
					Reclaimed(5, borrowB, 2*time.Minute, time.Hour).
					Reclaimed(5, borrowB, 2*time.Minute, 50*time.Minute).
					Reclaimed(5, borrowB, 30*time.Minute, 2*time.Minute)
			},
			want:    []string{"lend 5 proj-b"},
			explain: map[uint32]policytest.Says{5: {Code: policy.CodeLent}},
		},
		{
			name: "the backoff stops doubling at its maximum",
			cfg:  withBackoff(time.Minute, 3*time.Minute),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				b.Jobs(pendingA100(5, 1, "proj-b")...)
				for i := 4; i >= 0; i-- { // five short runs, the last taken back 30 s ago
					b.Reclaimed(5, borrowB, time.Minute, time.Duration(i)*8*time.Minute+30*time.Second)
				}
				return b
			},
			explain: map[uint32]policytest.Says{5: {Code: policy.CodeReclaimBackoff, Words: "(reclaim backoff 3m0s)"}},
			backing: 1,
		},
		{
			name: "requeued into its borrow QOS, it is returned to its guarantee until the backoff ends",
			cfg:  withBackoff(time.Minute, 0),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Jobs(policytest.MakeJob(5, "proj-b").GPU("a100", 1).Borrowed().Reason("Resources").Obj()).
					Reclaimed(5, borrowB, 2*time.Minute, 10*time.Second)
			},
			want:    []string{"return 5 proj-b"},
			explain: map[uint32]policytest.Says{5: {Code: policy.CodeReturnBackoff}},
			backing: 1,
		},
		{
			name: "preempted in a QOS that is no borrow QOS: not a reclaim",
			cfg:  withBackoff(time.Minute, 0),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Jobs(pendingA100(5, 1, "proj-b")...).Reclaimed(5, "normal", 2*time.Minute, 10*time.Second)
			},
			want:    []string{"lend 5 proj-b"},
			explain: map[uint32]policytest.Says{5: {Code: policy.CodeLent}},
		},
		{
			name: "without a backoff in the table a reclaimed job is lent again at once",
			cfg:  withBackoff(0, 0),
			snap: func(b *policytest.SnapshotWrapper) *policytest.SnapshotWrapper {
				return b.Jobs(pendingA100(5, 1, "proj-b")...).Reclaimed(5, borrowB, 2*time.Minute, 10*time.Second)
			},
			want:    []string{"lend 5 proj-b"},
			explain: map[uint32]policytest.Says{5: {Code: policy.CodeLent}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := tt.snap(policytest.MakeSnapshot().Testbed(4, 0, 8).Jobs(bobInQuota()...)).Synced(t, tt.cfg).Obj()
			plan := policy.BuildPlan(tt.cfg, snap, policytest.T0)
			if got := policytest.MoveLines(plan); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("moves %q, want %q", got, tt.want)
			}
			policytest.CheckExplains(t, plan, tt.explain)
			for _, p := range plan.Projects {
				if p.Account == "proj-b" && p.BackingOff != tt.backing {
					t.Errorf("proj-b has %d jobs backing off, want %d", p.BackingOff, tt.backing)
				}
			}
		})
	}
}

func TestReclaimBackoffSettings(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want string
	}{
		{"settings:\n  reclaimBackoff: 2m\n  reclaimBackoffMax: 1m\nprojects:\n  - account: p\n", "settings.reclaimBackoffMax: 1m0s is shorter than reclaimBackoff 2m0s"},
		{"settings:\n  reclaimBackoff: 2h\nprojects:\n  - account: p\n", "settings.reclaimBackoffMax: 32h0m0s is longer than the 24h0m0s of reclaims quotad reads"},
		{"settings:\n  reclaimBackoffReset: -1s\nprojects:\n  - account: p\n", "settings.reclaimBackoffReset: must not be negative"},
	} {
		if _, err := policy.ParseConfig([]byte(tc.yaml)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err %v, want %q", tc.yaml, err, tc.want)
		}
	}
}
