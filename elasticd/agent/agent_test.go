package agent

import (
	"context"
	"slices"
	"testing"

	"github.com/rs/zerolog"

	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/elasticd/api"
)

type fakeReader struct {
	available bool
	asked     [][]int
}

func (r *fakeReader) Available() bool { return r.available }

func (r *fakeReader) Read(indices []int) ([]api.GPUSample, error) {
	r.asked = append(r.asked, indices)
	var out []api.GPUSample
	for _, i := range indices {
		out = append(out, api.GPUSample{Index: i})
	}
	return out, nil
}

// queue answers Queue.
type queue struct {
	jobs   []slurm.Job
	extras map[uint32]slurm.JobExtra
}

func (q queue) Queue(context.Context) ([]slurm.Job, map[uint32]slurm.JobExtra, error) {
	return q.jobs, q.extras, nil
}

func TestAgentReadsOnlyTheGPUsOfItsNodesJobs(t *testing.T) {
	q := queue{
		jobs: []slurm.Job{
			{ID: 1, State: "RUNNING", NodeCount: 1, Nodes: "a100-1"},
			{ID: 2, State: "RUNNING", NodeCount: 1, Nodes: "a100-9"}, // another host's node
			{ID: 3, State: "PENDING"},
			{ID: 4, State: "RUNNING", NodeCount: 1, Nodes: "cpu-1"}, // no GPUs
		},
		extras: map[uint32]slurm.JobExtra{
			1: {GresDetail: []string{"gpu:a100:2(IDX:1-2)"}},
			2: {GresDetail: []string{"gpu:a100:1(IDX:0)"}},
			4: {GresDetail: []string{""}},
		},
	}
	var posted []api.SignalReport
	post := func(_ context.Context, r api.SignalReport) error { posted = append(posted, r); return nil }
	r := &fakeReader{available: true}
	a := &Agent{Nodes: []string{"a100-1", "cpu-1"}, Slurm: q, Reader: r, Post: post, Log: zerolog.Nop()}
	if err := a.Cycle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(r.asked) != 1 || !slices.Equal(r.asked[0], []int{1, 2}) {
		t.Fatalf("NVML asked for %v, want only job 1's GPUs 1 and 2", r.asked)
	}
	if len(posted) != 1 || len(posted[0].Jobs) != 1 || posted[0].Jobs[0].JobID != 1 || len(posted[0].Jobs[0].Samples) != 2 {
		t.Fatalf("posted %+v", posted)
	}

	// Without NVML the agent neither reads nor posts (it said so once, at Open).
	r, posted = &fakeReader{}, nil
	a.Reader = r
	if err := a.Cycle(context.Background()); err != nil || len(r.asked) != 0 || len(posted) != 0 {
		t.Fatalf("without NVML: err %v, asked %v, posted %v", err, r.asked, posted)
	}
}
