package snapshot

import (
	"testing"

	"github.com/slurmbridge/slurmbridge/bridge/gpureq"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
)

// FuzzConvertJob feeds a job's user-controlled GPU strings (tres_per_*, and the tres_req_str
// Slurm builds from them) to ConvertJob: a job that cannot be read keeps its id, account and
// state for the worst case; one that can has no negative count.
func FuzzConvertJob(f *testing.F) {
	f.Add("PENDING", "gres/gpu:a100:2", "", "", "", "cpu=4,mem=8000M,gres/gpu=2,gres/gpu:a100=2")
	f.Add("RUNNING", "gres:gpu:a100:1(S:0)", "", "", "", "cpu=1,gres/gpu=1,gres/gpu:a100=1")
	f.Add("PENDING", "", "gres/gpu:a100:x", "", "gres/gpu=1", "")
	f.Add("RUNNING", "", "", "gres/gpu:1", "cpu=4,license/matlab@flex=1", "gres/gpu=18446744073709551615")
	f.Add("RUNNING", "", "", "", "", "gres/gpu:a100=9223372036854775808")
	f.Fuzz(func(t *testing.T, state, perNode, perJob, perSocket, perTask, tres string) {
		j := slurm.Job{ID: 7, Account: "proj-b", User: "bob", QOS: "guar-proj-b", State: state, NodeCount: 2,
			TRESPerNode: perNode, TRESPerJob: perJob, TRESPerSocket: perSocket, TRESPerTask: perTask}
		if parsed, err := gpureq.ParseTRES(tres); err != nil {
			j.Unreadable = "tres-alloc: " + err.Error()
		} else if j.Pending() {
			j.TRESReq = parsed
		} else {
			j.TRESAlloc = parsed
		}
		pj, ok, err := ConvertJob(&j)
		if err != nil {
			if pj.ID != 7 || pj.Account != "proj-b" || pj.QOS != "guar-proj-b" || pj.State == "" || !ok {
				t.Fatalf("an unreadable job lost what could be read: %+v (ok %v)", pj, ok)
			}
			return
		}
		for _, m := range []map[string]int{pj.GPUsPerNode, pj.GPUsPerJob, pj.AllocatedGPUs} {
			for ty, n := range m {
				if n < 0 {
					t.Fatalf("%d GPUs of %q in %+v", n, ty, pj)
				}
			}
		}
	})
}
