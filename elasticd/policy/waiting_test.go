package policy

import "testing"

// Growth yields to the jobs waiting for the GPUs it would take: which pending jobs count, and
// the room and reason left once they have their GPUs.
func TestGrowthRoom(t *testing.T) {
	// queued waits for its turn in a100; Slurm would start it on GPUs that became free.
	queued := WaitingJob{Reason: "Priority", Batch: true, Partitions: []string{"a100"}, GPUsPerTask: 1, Tasks: 1}
	with := func(w WaitingJob, edit func(*WaitingJob)) WaitingJob { edit(&w); return w }
	a100 := []string{"a100"}
	tests := []struct {
		name    string
		waiting []WaitingJob
		parts   []string
		free    int
		gpus    int
		room    int
		why     string
		yields  bool
	}{
		{name: "no job waits: no yielding", parts: a100, free: 4, gpus: 1},
		{
			name: "an over-quota array quotad would lend to takes the free GPUs",
			waiting: []WaitingJob{with(queued, func(w *WaitingJob) {
				w.Reason, w.Requeue, w.Partitions, w.Tasks = "QOSGrpGRES", true, []string{"a100-spot", "a100"}, 4
			})},
			parts: a100, free: 4, gpus: 1,
			room: 0, why: "jobs waiting in a100 ask for 4 GPUs, 4 of a100 free there: growth yields to them", yields: true,
		},
		{
			name:    "what the waiting jobs leave is shared out in whole workers",
			waiting: []WaitingJob{with(queued, func(w *WaitingJob) { w.GPUsPerTask = 2 })},
			parts:   a100, free: 7, gpus: 2,
			room: 2, why: "jobs waiting in a100 ask for 2 GPUs, 7 of a100 free there: growth yields to them", yields: true,
		},
		{
			name:    "waiting jobs asking for more than is free leave no room",
			waiting: []WaitingJob{queued, with(queued, func(w *WaitingJob) { w.Reason, w.GPUsPerTask = "Resources", 8 })},
			parts:   []string{"a100", "a100-spot"}, free: 4, gpus: 1,
			room: 0, why: "jobs waiting in a100,a100-spot ask for 9 GPUs, 4 of a100 free there: growth yields to them", yields: true,
		},
		{
			name:    "a job Slurm has given no reason yet counts",
			waiting: []WaitingJob{with(queued, func(w *WaitingJob) { w.Reason = "" })},
			parts:   a100, free: 3, gpus: 1,
			room: 2, why: "jobs waiting in a100 ask for 1 GPUs, 3 of a100 free there: growth yields to them", yields: true,
		},
		{name: "a held job waits for no GPUs", waiting: []WaitingJob{with(queued, func(w *WaitingJob) { w.Reason = "JobHeldUser" })}, parts: a100, free: 4, gpus: 1},
		{name: "a dependent job waits for no GPUs", waiting: []WaitingJob{with(queued, func(w *WaitingJob) { w.Reason = "Dependency" })}, parts: a100, free: 4, gpus: 1},
		{name: "the job's own pending workers are growth itself", waiting: []WaitingJob{with(queued, func(w *WaitingJob) { w.Own = true })}, parts: a100, free: 4, gpus: 1},
		{name: "a job waiting in other partitions is not in the way", waiting: []WaitingJob{with(queued, func(w *WaitingJob) { w.Partitions = []string{"v100"} })}, parts: a100, free: 4, gpus: 1},
		{
			name:    "an allocation over quota is never lent GPUs",
			waiting: []WaitingJob{with(queued, func(w *WaitingJob) { w.Reason, w.Batch, w.Requeue = "QOSGrpGRES", false, true })},
			parts:   a100, free: 4, gpus: 1,
		},
		{
			name:    "a batch job Slurm cannot requeue over quota is never lent GPUs",
			waiting: []WaitingJob{with(queued, func(w *WaitingJob) { w.Reason, w.Requeue = "QOSGrpGRES", false })},
			parts:   a100, free: 4, gpus: 1,
		},
		{
			name:    "a job at its lending QOS' limit is lent no more",
			waiting: []WaitingJob{with(queued, func(w *WaitingJob) { w.Reason, w.Requeue, w.LendingQOS = "QOSGrpGRES", true, true })},
			parts:   a100, free: 4, gpus: 1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			room, why, yields := GrowthRoom(tc.waiting, tc.parts, "a100", tc.free, tc.gpus)
			if room != tc.room || why != tc.why || yields != tc.yields {
				t.Errorf("GrowthRoom = %d, %q, %v; want %d, %q, %v", room, why, yields, tc.room, tc.why, tc.yields)
			}
		})
	}
}
