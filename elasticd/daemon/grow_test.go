package daemon

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/gpureq"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/elasticd/elastictest"
	"github.com/slurmbridge/slurmbridge/elasticd/policy"
	"github.com/slurmbridge/slurmbridge/elasticd/reconcile"
)

// The shipped torchrun example asks for --gpus-per-node=4 in its #SBATCH lines: a worker asks
// for the main job's request as Slurm recorded it, typed, entirely on the command line, and its
// copy of the script carries no option sbatch would merge with it.
func TestWorkerInheritsTheMainJobsRequestOnTheCommandLineOnly(t *testing.T) {
	h := newHarness(t, 2, 4)
	h.slurm.script = "#!/bin/bash\n#SBATCH --elastic=2:4\n#SBATCH --nodes=1 --ntasks=1 --gpus-per-node=4 --cpus-per-task=8\nset -e\nexec python3 train.py\n"
	main := h.slurm.jobs[mainID]
	main.QOS, main.TRESReq, main.Start = "guar-proj-a", elastictest.MustTRES(t, "cpu=8,mem=16000M,node=1,gres/gpu=1,gres/gpu:a100=1"), h.now.Add(-10*time.Minute)
	h.slurm.jobs[mainID] = main
	extra := h.slurm.extras[mainID]
	extra.Tasks, extra.Features, extra.TimeLimit = 1, "a100", 60
	h.slurm.extras[mainID] = extra
	h.cycle()
	if len(h.slurm.submits) != 1 {
		t.Fatalf("%d submissions, want 1 (decision %+v)", len(h.slurm.submits), h.decision())
	}
	req := h.slurm.submits[0]
	argv := req.Options.Argv()
	for _, want := range []string{"--qos=guar-proj-a", "--ntasks=1", "--cpus-per-task=8", "--gpus-per-node=a100:1", "--mem=16000M",
		"--constraint=a100", "--requeue", "--time=50", "--ignore-pbs"} {
		if !slices.Contains(argv, want) {
			t.Errorf("sbatch args %q lack %s", argv, want)
		}
	}
	if slices.ContainsFunc(argv, func(a string) bool { return strings.HasPrefix(a, "--gres") }) {
		t.Errorf("sbatch args %q ask for GPUs twice", argv)
	}
	for _, line := range strings.Split(string(req.Script), "\n") {
		if strings.HasPrefix(line, "#SBATCH") {
			t.Errorf("the worker's script still has the directive %q", line)
		}
	}
	if !strings.Contains(string(req.Script), "exec python3 train.py") {
		t.Errorf("the worker's script lost its commands: %q", req.Script)
	}
}

// proj-a's guarantee is 4 a100, 3 of them held: the first worker fills the guarantee, the
// second runs on borrowed GPUs in the elastic QOS (reclaimed before other borrowers). The
// borrowing limit, which counts the borrow QOS' jobs too, bounds the capacity the policy sees
// (elasticd/capacity: TestRoomForCountsTheBorrowingLimit).
func TestWorkersBeyondTheGuaranteeRunInTheElasticQOS(t *testing.T) {
	h := newHarness(t, 3, 6)
	h.slurm.qos = []slurm.QOS{{Name: "guar-proj-a", GrpTRES: gpureq.TRES{"gres/gpu:a100": 4}}, {Name: "borrow-proj-a", GrpTRES: gpureq.TRES{"gres/gpu:a100": 3}},
		{Name: "elastic-proj-a", GrpTRES: gpureq.TRES{"gres/gpu:a100": 3}}}
	growWithThreeOfFourGuaranteedHeld(t, h)
	qos := submittedQOS(h)
	if !slices.Equal(qos, []string{"guar-proj-a", "elastic-proj-a"}) {
		t.Fatalf("workers in %v, want one in the guarantee then one in the elastic QOS (decision %+v)", qos, h.decision())
	}
	// The borrowed one was submitted in the guarantee to begin later, and lent by elasticd: the
	// plugin refuses the user's own job straight into the elastic QOS.
	if o := h.slurm.submits[1].Options; o.QOS != "guar-proj-a" || !slices.Contains(o.Args, "--begin=now+60") {
		t.Fatalf("the borrowed worker was submitted as %q %q, want guar-proj-a with a begin time", o.QOS, o.Args)
	}
}

// A cluster whose quotad has not created the elastic QOS yet (an upgrade under way) lends
// workers in the borrow QOS, as before.
// A borrowed worker elasticd cannot lend (its move into the elastic QOS refused) is cancelled,
// not left held in the guarantee, and counts as a refused submission.
func TestWorkerThatCannotBeLentIsCancelled(t *testing.T) {
	h := newHarness(t, 3, 6)
	h.slurm.qos = []slurm.QOS{{Name: "guar-proj-a", GrpTRES: gpureq.TRES{"gres/gpu:a100": 4}}, {Name: "elastic-proj-a", GrpTRES: gpureq.TRES{"gres/gpu:a100": 3}}}
	h.slurm.lendErr = errors.New("scontrol: Invalid qos specification")
	growWithThreeOfFourGuaranteedHeld(t, h)
	if len(h.slurm.submits) != 2 || !slices.Equal(h.slurm.cancel, []uint32{202}) {
		t.Fatalf("submitted %d, cancelled %v; want the guaranteed worker kept and the unlent one (202) cancelled", len(h.slurm.submits), h.slurm.cancel)
	}
	if j := h.d.jobs[mainID]; j.refusals != 1 || !strings.Contains(j.refused, "Invalid qos") {
		t.Fatalf("refusals %d (%q), want the failed lend counted", j.refusals, j.refused)
	}
}

// sbatch runs as the job's owner, who could make it print the id of another job: elasticd lends
// only a pending job of the owner named as its workers are, waiting for its begin time, in the
// QOS it submitted it in,
// and does nothing to any other (as root it must not cancel one).
func TestOnlyTheHeldWorkerSubmittedIsLent(t *testing.T) {
	for name, other := range map[string]slurm.Job{
		"another user's job":                            {ID: 202, Name: WorkerName(mainID), User: "mallory", QOS: "guar-proj-a", State: "PENDING", StateReason: "BeginTime"},
		"the owner's other job":                         {ID: 202, Name: "big-run", QOS: "guar-proj-a", State: "PENDING", StateReason: "BeginTime"},
		"a worker no longer waiting for its begin time": {ID: 202, Name: WorkerName(mainID), QOS: "guar-proj-a", State: "PENDING", StateReason: "Priority"},
		"a worker in another QOS":                       {ID: 202, Name: WorkerName(mainID), QOS: "normal", State: "PENDING", StateReason: "BeginTime"},
		"a worker that started":                         {ID: 202, Name: WorkerName(mainID), QOS: "guar-proj-a", State: "RUNNING"},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, 3, 6)
			h.slurm.qos = []slurm.QOS{{Name: "guar-proj-a", GrpTRES: gpureq.TRES{"gres/gpu:a100": 4}}, {Name: "elastic-proj-a", GrpTRES: gpureq.TRES{"gres/gpu:a100": 3}}}
			if other.User == "" {
				other.User = "alice"
			}
			h.slurm.heldJob = map[uint32]slurm.Job{202: other}
			growWithThreeOfFourGuaranteedHeld(t, h)
			if _, lent := h.slurm.lent[202]; lent || len(h.slurm.cancel) != 0 {
				t.Fatalf("lent %v, cancelled %v; want job 202 neither lent nor cancelled", h.slurm.lent, h.slurm.cancel)
			}
			if j := h.d.jobs[mainID]; j.refusals != 1 || !strings.Contains(j.refused, "not lent") {
				t.Fatalf("refusals %d (%q), want the worker not lent counted", j.refusals, j.refused)
			}
		})
	}
}

// Without an elastic QOS (quotad has not made it yet) a job grows only within its guarantee: the
// job_submit plugin refuses a user's job straight into the borrow QOS, and the worker would be
// the user's.
func TestWorkersDoNotBorrowWithoutAnElasticQOS(t *testing.T) {
	h := newHarness(t, 3, 6)
	h.slurm.qos = []slurm.QOS{{Name: "guar-proj-a", GrpTRES: gpureq.TRES{"gres/gpu:a100": 4}}, {Name: "borrow-proj-a", GrpTRES: gpureq.TRES{"gres/gpu:a100": 2}}}
	growWithThreeOfFourGuaranteedHeld(t, h)
	qos := submittedQOS(h)
	// Below its min the job still asks for both workers: the one past the guarantee waits there.
	if !slices.Equal(qos, []string{"guar-proj-a", "guar-proj-a"}) {
		t.Fatalf("workers in %v, want both in the guarantee and none borrowed (decision %+v)", qos, h.decision())
	}
}

// Slurm refuses the worker's request: after a few tries the job holds and says why, and
// elasticd stops submitting.
func TestRefusedWorkersHoldTheJob(t *testing.T) {
	h := newHarness(t, 2, 4)
	h.slurm.submitErr = errors.New("sbatch: error: Invalid generic resource (gres) specification")
	for range 6 {
		h.cycle()
	}
	if h.slurm.attempts != reconcile.MaxRefusals {
		t.Fatalf("%d submissions tried, want %d", h.slurm.attempts, reconcile.MaxRefusals)
	}
	dec := h.decision()
	// The words are checked for Slurm's answer, which the hold passes on and no code carries.
	if dec.Action != policy.Hold || dec.Code != reconcile.CodeWorkersRefused || !strings.Contains(dec.Reason, "Invalid generic resource") {
		t.Fatalf("decision %+v", dec)
	}
}

// A worker Slurm requeued (its borrowed GPUs reclaimed) is cancelled, not left to rejoin.
func TestReclaimedWorkerIsCancelled(t *testing.T) {
	h := newHarness(t, 1, 4)
	h.slurm.jobs[300] = slurm.Job{ID: 300, User: "alice", Account: "proj-a", QOS: "borrow-proj-a", State: "PENDING", StateReason: "BeginTime"}
	h.slurm.extras[300] = slurm.Job{ID: 300, UserID: h.uid, Name: WorkerName(mainID), Restarts: 1}
	h.cycle()
	if !slices.Equal(h.slurm.cancel, []uint32{300}) {
		t.Fatalf("cancelled %v, want the requeued worker 300", h.slurm.cancel)
	}
	h.cycle()
	if len(h.slurm.cancel) != 1 {
		t.Fatalf("cancelled again within the grace period: %v", h.slurm.cancel)
	}
}

// growWithThreeOfFourGuaranteedHeld runs one cycle of the harness's elastic job with proj-a's
// guarantee of 4 a100 three-quarters held (the main job's 1 and another job's 2).
func growWithThreeOfFourGuaranteedHeld(t *testing.T, h *harness) {
	t.Helper()
	main := h.slurm.jobs[mainID]
	main.QOS, main.TRESAlloc = "guar-proj-a", elastictest.MustTRES(t, "cpu=1,gres/gpu=1,gres/gpu:a100=1")
	h.slurm.jobs[mainID] = main
	h.slurm.jobs[50] = slurm.Job{ID: 50, User: "alice", Account: "proj-a", QOS: "guar-proj-a", State: "RUNNING", TRESAlloc: elastictest.MustTRES(t, "gres/gpu:a100=2")}
	h.slurm.extras[50] = slurm.Job{ID: 50, Name: "other"}
	h.cycle()
}

// submittedQOS is the QOS each worker the harness's daemon submitted runs in, in order: the one
// elasticd lent it into, else the one it was submitted in.
func submittedQOS(h *harness) []string {
	var qos []string
	for i, r := range h.slurm.submits {
		id := uint32(201 + i) // fakeSlurm numbers submissions from 201
		if lent, ok := h.slurm.lent[id]; ok {
			qos = append(qos, lent)
			continue
		}
		qos = append(qos, r.Options.QOS)
	}
	return qos
}

// A worker still pending after the pending timeout is cancelled (the capacity it was counted
// on went elsewhere), once: it is then stopping, and the job holds until it has left.
func TestWorkerPendingTooLongIsCancelled(t *testing.T) {
	h := newHarness(t, 2, 4)
	h.cycle()
	if len(h.slurm.submits) != 1 {
		t.Fatalf("%d submissions, want 1 to reach min 2", len(h.slurm.submits))
	}
	h.slurm.jobs[201] = slurm.Job{ID: 201, User: "alice", Account: "proj-a", Partition: "a100", State: "PENDING", Submit: h.now}
	h.slurm.extras[201] = slurm.Job{ID: 201, UserID: h.uid, Name: WorkerName(mainID)}
	h.cycle()
	if len(h.slurm.cancel) != 0 || h.decision().Code != reconcile.CodeWaitingForWorkers {
		t.Fatalf("cancelled %v, decision %+v; want a hold on the pending worker", h.slurm.cancel, h.decision())
	}
	h.now = h.now.Add(h.d.cfg.PendingTimeout)
	h.cycle()
	h.cycle()
	if !slices.Equal(h.slurm.cancel, []uint32{201}) {
		t.Fatalf("cancelled %v, want worker 201 once, past the pending timeout", h.slurm.cancel)
	}
	if _, stopping := h.d.jobs[mainID].stopping[201]; !stopping {
		t.Fatalf("cancelled worker 201 is not stopping: %v", h.d.jobs[mainID].stopping)
	}
}
