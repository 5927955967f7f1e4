package capacity

import (
	"testing"

	"github.com/slurmbridge/slurmbridge/bridge/gpureq"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/elasticd/elastictest"
	"github.com/slurmbridge/slurmbridge/elasticd/policy"
)

// proj-a's guarantee of 4 a100 is full (the main job's 1, another job's 2, a worker's 1); of
// its borrowing limit (3) an elastic worker holds 1 and an ordinary borrower of proj-a waits
// for 1: 1 GPU is left to borrow in elastic-proj-a. The borrowing limit counts proj-a's
// borrowers in its size tiers and its protected borrow QOS too, never another project's.
func TestRoomForCountsTheBorrowingLimit(t *testing.T) {
	a100 := func(n string) gpureq.TRES { return elastictest.MustTRES(t, "gres/gpu:a100="+n) }
	main := asking(t, mainJob(), "cpu=1,gres/gpu=1,gres/gpu:a100=1")
	queue := []slurm.Job{
		elastictest.QOSJob(50, "guar-proj-a", "RUNNING", a100("2")),
		elastictest.QOSJob(201, "guar-proj-a", "RUNNING", a100("1")),
		elastictest.QOSJob(202, "elastic-proj-a", "RUNNING", a100("1")),
		elastictest.QOSJob(203, "borrow-proj-a", "PENDING", a100("1")),
		elastictest.QOSJob(204, "borrow-proj-b", "RUNNING", a100("2")),
	}
	cases := map[string]struct {
		mainQOS string // "": guar-proj-a
		qos     []string
		jobs    []slurm.Job
		want    qosRoom // guar, borrowQOS and borrow
		workers int
	}{
		"the guarantee full, 1 GPU left to borrow": {
			want: qosRoom{guar: 0, borrowQOS: "elastic-proj-a", borrow: 1}, workers: 1,
		},
		"a borrower of proj-a in one of its size tiers counts, one of proj-b's does not": {
			qos: []string{"borrow-proj-a-g1", "borrow-proj-b-g1"},
			jobs: []slurm.Job{elastictest.QOSJob(205, "borrow-proj-a-g1", "RUNNING", a100("1")),
				elastictest.QOSJob(206, "borrow-proj-b-g1", "RUNNING", a100("1"))},
			want: qosRoom{guar: 0, borrowQOS: "elastic-proj-a", borrow: 0},
		},
		"a borrower in proj-a's protected borrow QOS counts": {
			qos:  []string{"borrow-proj-a-hipri"},
			jobs: []slurm.Job{elastictest.QOSJob(207, "borrow-proj-a-hipri", "RUNNING", a100("1"))},
			want: qosRoom{guar: 0, borrowQOS: "elastic-proj-a", borrow: 0},
		},
		"a main job that borrows itself has no guarantee room: its workers borrow, beside its own GPU": {
			mainQOS: "borrow-proj-a",
			want:    qosRoom{guar: 0, borrowQOS: "elastic-proj-a", borrow: 0},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m := main
			if tc.mainQOS != "" {
				m.QOS = tc.mainQOS
			}
			snap := snapshotOf(nil, append(append([]slurm.Job{m}, queue...), tc.jobs...)...)
			snap.Lending = policy.Lending{Fresh: true}
			snap.QOS = map[string]gpureq.TRES{"guar-proj-a": a100("4"), "borrow-proj-a": a100("3"), "elastic-proj-a": a100("3")}
			for _, q := range tc.qos {
				snap.QOS[q] = a100("3")
			}
			r := roomFor(snap, m, "a100", []string{"a100"})
			if r.guar != tc.want.guar || r.borrowQOS != tc.want.borrowQOS || r.borrow != tc.want.borrow || r.workers(1) != tc.workers {
				t.Fatalf("room %+v (%d workers), want guarantee %d, %d GPUs to borrow in %q (%d workers)",
					r, r.workers(1), tc.want.guar, tc.want.borrow, tc.want.borrowQOS, tc.workers)
			}
		})
	}
}
