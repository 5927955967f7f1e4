package daemon

import (
	"regexp"
	"strings"
	"testing"

	"github.com/slurmbridge/slurmbridge/bridge/gpureq"
	"github.com/slurmbridge/slurmbridge/elasticd/elastictest"
	"github.com/slurmbridge/slurmbridge/elasticd/policy"
)

// Through the daemon: alice's association allows 2 GPUs; her job holds 1 (the main job), so
// growth stops at 2 workers and the status says which limit holds it. Below min, a worker
// the limit would keep pending is not submitted either.
func TestAssociationLimitHoldsGrowthAndBelowMinSaysWhy(t *testing.T) {
	h := newHarness(t, 1, 4)
	gpus := gpureq.TRES{"cpu": 1, "node": 1, "gres/gpu": 1, "gres/gpu:a100": 1}
	h.slurm.assocs = elastictest.AssocTree()
	for i := range h.slurm.assocs {
		if h.slurm.assocs[i].User == "alice" {
			h.slurm.assocs[i].GrpTRES = "gres/gpu=2"
		}
	}
	runGPU := func(id uint32, name string) {
		h.slurm.run(id, name, h.uid, h.now)
		j := h.slurm.jobs[id]
		j.TRESAlloc, j.TRESReq = gpus, gpus
		h.slurm.jobs[id] = j
	}
	runGPU(mainID, "train")
	workers := []uint32{mainID}
	for range 40 {
		h.report(100*float64(len(workers)), workers...)
		h.cycle()
		if n := len(h.slurm.submits); n > len(workers)-1 {
			id := uint32(200 + n)
			runGPU(id, WorkerName(mainID))
			workers = append(workers, id)
		}
	}
	// The limit that holds the job is in its reason alone, which no code carries: read its figures.
	st := h.d.Status()[0]
	if len(workers) != 2 || st.Decision != "hold" || st.ReasonCode != string(policy.CodeNoCapacity) ||
		assocGPULimitIn(st.Reason) != (assocGPULimit{user: "alice", account: "proj-a", limit: "2", held: "2"}) {
		t.Fatalf("%d workers, status %s %q; want 2 and a hold naming the association's GrpTRES", len(workers), st.Decision, st.Reason)
	}

	below := newHarness(t, 3, 4)
	below.slurm.assocs = h.slurm.assocs
	below.slurm.jobs[mainID] = h.slurm.jobs[mainID]
	below.cycle()
	// Here too the reason's figures are checked for the limit that stops the rest.
	if d := below.decision(); len(below.slurm.submits) != 1 || d.Action != policy.Grow || d.Code != policy.CodeBelowTarget || d.Count != 1 ||
		assocGPULimitIn(d.Reason).limit != "2" || assocGPULimitIn(d.Reason).account != "proj-a" {
		t.Fatalf("below min: %d submitted, decision %+v; want 1 worker, as far as the limit allows", len(below.slurm.submits), d)
	}
	below.slurm.run(201, WorkerName(mainID), below.uid, below.now)
	w := below.slurm.jobs[201]
	w.TRESAlloc = gpus
	below.slurm.jobs[201] = w
	below.cycle()
	if d := below.decision(); len(below.slurm.submits) != 1 || d.Action != policy.Hold || d.Code != policy.CodeBelowTarget || !strings.Contains(d.Reason, "GrpTRES gres/gpu=2") {
		t.Fatalf("below min at the limit: %d submitted, decision %+v; want a hold naming the limit", len(below.slurm.submits), d)
	}
}

// assocGPULimit is an association's GrpTRES gres/gpu limit as a reason names it.
type assocGPULimit struct{ user, account, limit, held string }

var assocGPULimitRE = regexp.MustCompile(`user (\S+) in account (\S+) has GrpTRES gres/gpu=(\d+)\D*(\d*)`)

// assocGPULimitIn reads the association's gres/gpu limit from a reason; held is "" when the
// reason gives no figure after the limit.
func assocGPULimitIn(reason string) assocGPULimit {
	m := assocGPULimitRE.FindStringSubmatch(reason)
	if m == nil {
		return assocGPULimit{}
	}
	return assocGPULimit{user: m[1], account: m[2], limit: m[3], held: m[4]}
}
