package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/quotad/view"
)

// The text page shows what the JSON holds: each pool's counts and bar, each project's row, the
// recent actions, and says so when the numbers are stale.
func TestWriteClusterShowsThePagesNumbers(t *testing.T) {
	at := time.Date(2026, 11, 24, 2, 10, 3, 0, time.UTC)
	four := 4
	r := view.ClusterResponse{
		Status: view.Status{Cluster: "testbed", LastSuccessfulCycleAt: &at, Plan: &view.PlanStatus{SnapshotAgeSeconds: 2}},
		Pools: []view.Pool{
			{Name: "cpu", Partition: "cpu", PricePerCPUHour: 0.05, Nodes: view.PoolNodes{Up: 2}, Jobs: view.PoolJobs{Running: 1}},
			{Name: "a100", Partition: "a100", GPUType: "a100", PricePerGPUHour: 3, Nodes: view.PoolNodes{Up: 1, Down: 1},
				GPUs: view.PoolGPUs{Total: 8, Running: 3, Pending: 2, Free: 1}, Jobs: view.PoolJobs{Running: 3, Pending: 2}},
			{Name: "a100-spot", Partition: "a100-spot", GPUType: "a100", Spot: true, PricePerGPUHour: 1.2, Nodes: view.PoolNodes{Up: 1},
				GPUs: view.PoolGPUs{Total: 4, Free: 4}},
		},
		Projects: []view.Project{{Account: "proj-b", Weight: 1, Limits: view.ProjectLimits{BorrowLimit: &four},
			GPUs: []view.ProjectGPUs{{GPUType: "a100", Guaranteed: 4, InUse: 4, Borrowed: 1}}}},
		RecentActions: []view.Action{{At: at, Kind: "reclaim", Job: "36", Account: "proj-b"},
			{At: at.Add(-time.Minute), Kind: "lend", Job: "36", Account: "proj-b", FromQOS: "guar-proj-b", ToQOS: "borrow-proj-b"}},
	}
	var b strings.Builder
	if err := WriteCluster(&b, r, "http://127.0.0.1:19817/"); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"Cluster testbed  (page: http://127.0.0.1:19817/)",
		"Last successful cycle 2026-11-24 02:10:03 UTC, snapshot 2 s old (current).",
		"a100       a100     3.00/GPU-h  on-demand  1/1            8     3        2        1     3/2            [###.xxxx]",
		"a100-spot  a100     1.20/GPU-h  spot       1/0            4     0        0        4     0/0            [....]",
		"cpu        -        0.05/CPU-h  on-demand  2/0            -     -        -        -     1/0",
		"proj-b   a100     4          4      1         0     0        4 (all types)  none         none      1",
		"reclaim  job 36  proj-b",
		"lend     job 36  proj-b  guar-proj-b -> borrow-proj-b",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}

	r.Status.Plan.Stale = true
	b.Reset()
	if err := WriteCluster(&b, r, ""); err != nil {
		t.Fatal(err)
	}
	// Marked stale, with the time of the last fresh cycle.
	_, stale, marked := strings.Cut(b.String(), "\nSTALE: ")
	if stale, _, _ = strings.Cut(stale, "\n"); !marked || !strings.Contains(stale, " 2026-11-24 02:10:03 UTC") {
		t.Errorf("a stale plan is not shown as stale:\n%s", b.String())
	}
}

// A pool of more GPUs than the bar's width is drawn to scale, its kinds never lost to rounding.
func TestPoolBarScales(t *testing.T) {
	for _, c := range []struct {
		g    view.PoolGPUs
		want string
	}{
		{view.PoolGPUs{Total: 8, Running: 5, Free: 3}, "[#####...]"},
		{view.PoolGPUs{Total: 64, Running: 16, Free: 48}, "[########........................]"},
		{view.PoolGPUs{Total: 64, Running: 31, Free: 1}, "[###############.xxxxxxxxxxxxxxxx]"},
		{view.PoolGPUs{Total: 100, Running: 99, Free: 1}, "[###############################.]"},
		{view.PoolGPUs{Total: 0}, "[]"},
	} {
		if got := poolBar(c.g); got != c.want {
			t.Errorf("poolBar(%+v) = %s, want %s", c.g, got, c.want)
		}
	}
}
