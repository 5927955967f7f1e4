package reconcile_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/elasticd/policy"
	"github.com/slurmbridge/slurmbridge/elasticd/reconcile"
)

func TestFollowRun(t *testing.T) {
	first, second := t0, t0.Add(time.Hour)
	declared := reconcile.Declared{UID: 1000, Recorded: first.Unix()}
	workers := []reconcile.Worker{{ID: 101, Since: first.Add(time.Minute)}, {ID: 102, Since: second.Add(time.Minute)}}
	tests := []struct {
		name string
		run  reconcile.Run
		code policy.Code // of the hold; "": no decision
		want reconcile.RunPlan
	}{
		{
			name: "the followed run goes on",
			run:  reconcile.Run{Running: true, Start: first, Followed: first, Declared: declared, Workers: workers},
			want: reconcile.RunPlan{GoOn: true},
		},
		{
			name: "a requeued main job stops every worker, forgets its run and holds",
			run:  reconcile.Run{State: "PENDING", Start: first, Followed: first, Declared: declared, Workers: workers},
			code: reconcile.CodeMainNotRunning,
			want: reconcile.RunPlan{Stop: []uint32{101, 102}, StopWhy: "main job requeued", ForgetRun: true},
		},
		{
			name: "a restarted main job holds until its new declaration is recorded",
			run:  reconcile.Run{Running: true, Start: second, Followed: first, Declaration: &declared, Declared: declared, Workers: workers},
			code: reconcile.CodeMainRestarted,
		},
		{
			name: "a restarted main job without a readable declaration holds",
			run:  reconcile.Run{Running: true, Start: second, Followed: first, Declared: declared, Workers: workers},
			code: reconcile.CodeMainRestarted,
		},
		{
			name: "a declaration of another owner is not taken",
			run: reconcile.Run{Running: true, Start: second, Followed: first, Declared: declared, Workers: workers,
				Declaration: &reconcile.Declared{UID: 1001, Recorded: second.Unix()}},
			code: reconcile.CodeMainRestarted,
		},
		{
			name: "the restarted run's declaration is taken and the earlier run's workers stopped",
			run: reconcile.Run{Running: true, Start: second, Followed: first, Declared: declared, Workers: workers,
				Declaration: &reconcile.Declared{UID: 1000, Recorded: second.Unix()}},
			want: reconcile.RunPlan{Stop: []uint32{101}, StopWhy: "worker of the main job's earlier run", NewRun: true, GoOn: true},
		},
		{
			// elasticd restarted after the declaration was recorded anew but before it saw the
			// run: the same record, recorded after the start, is this run's.
			name: "a declaration recorded at the restart is this run's",
			run: reconcile.Run{Running: true, Start: second, Followed: first, Workers: workers,
				Declared: reconcile.Declared{UID: 1000, Recorded: second.Unix()}, Declaration: &reconcile.Declared{UID: 1000, Recorded: second.Unix()}},
			want: reconcile.RunPlan{Stop: []uint32{101}, StopWhy: "worker of the main job's earlier run", NewRun: true, GoOn: true},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := reconcile.FollowRun(tc.run)
			switch {
			case tc.code == "" && got.Decision != nil:
				t.Errorf("decision %s (%s), want none", got.Decision.Action, got.Decision.Reason)
			case tc.code != "" && (got.Decision == nil || got.Decision.Action != policy.Hold || got.Decision.Code != tc.code):
				t.Errorf("decision %+v, want hold %s", got.Decision, tc.code)
			}
			got.Decision = nil
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("plan %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestFinishStops(t *testing.T) {
	grace := 30 * time.Second
	stopping := map[uint32]time.Time{
		101: settled.Add(-time.Minute),      // past its grace, still running
		102: settled.Add(-time.Second),      // within its grace
		103: settled.Add(-time.Minute),      // gone from the queue
		104: settled.Add(-time.Minute),      // Slurm is ending it
		105: settled.Add(-30 * time.Second), // its grace just over
	}
	queue := map[uint32]reconcile.Stop{101: {Queued: true}, 102: {Queued: true}, 104: {Queued: true, Completing: true}, 105: {Queued: true}}
	cancel, forget := reconcile.FinishStops(stopping, queue, grace, settled)
	if !reflect.DeepEqual(cancel, []uint32{101, 105}) || !reflect.DeepEqual(forget, []uint32{103}) {
		t.Errorf("cancel %v, forget %v; want cancel [101 105], forget [103]", cancel, forget)
	}
}

func TestSortWorkers(t *testing.T) {
	queue := []reconcile.Queued{
		{ID: 101, Running: true},
		{ID: 102, Running: true},              // submitted last cycle, now running
		{ID: 103, Pending: true},              // waiting for its first start
		{ID: 104, Pending: true, Restarts: 1}, // requeued by Slurm: reclaimed
		{ID: 105, Pending: true, Restarts: 1}, // requeued, but being stopped already
		{ID: 106},                             // neither: completing
	}
	stopping := map[uint32]time.Time{105: settled}
	submitted := map[uint32]time.Time{
		102: settled.Add(-time.Minute),
		107: settled.Add(-2 * time.Minute), // accepted, never seen: gone
		108: settled.Add(-time.Second),     // accepted just now: not in the queue yet
	}
	seen := map[uint32]bool{102: true}
	got := reconcile.SortWorkers(queue, stopping, submitted, seen, settled)
	want := reconcile.Sorted{Running: []uint32{101, 102}, Pending: []uint32{103, 105}, Reclaimed: []uint32{104},
		Started: []uint32{102}, Vanished: []uint32{107}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}
