package capacity

import (
	"testing"

	"github.com/slurmbridge/slurmbridge/bridge/gpureq"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/elasticd/elastictest"
	"github.com/slurmbridge/slurmbridge/elasticd/policy"
)

// The builders every test of the package shares: each returns a fresh value that a case then
// changes where it differs.

// nodeWrapper builds a node as `scontrol show nodes` reads it.
type nodeWrapper struct{ n slurm.Node }

// makeNode is an idle node of 8 CPUs and 32000 MB in the partitions, with no GPU yet.
func makeNode(name string, parts ...string) *nodeWrapper {
	return &nodeWrapper{slurm.Node{Name: name, Partitions: parts, State: "idle", CPUs: 8, MemoryMB: 32000}}
}

// gpus configures n GPUs of type t ("" untyped).
func (w *nodeWrapper) gpus(t string, n uint64) *nodeWrapper {
	w.n.Gres = append(w.n.Gres, gpureq.Gres{Name: "gpu", Type: t, Count: n})
	return w
}

// used allocates n GPUs of type t, cpus CPUs and mem MB to jobs: the node is mixed.
func (w *nodeWrapper) used(t string, n uint64, cpus int, mem uint64) *nodeWrapper {
	if n > 0 {
		w.n.GresUsed = append(w.n.GresUsed, gpureq.Gres{Name: "gpu", Type: t, Count: n})
	}
	w.n.AllocCPUs += cpus
	w.n.AllocMemoryMB += mem
	w.n.State = "mixed"
	return w
}

// state sets the base state and flags.
func (w *nodeWrapper) state(base string, flags ...string) *nodeWrapper {
	w.n.State, w.n.StateFlags = base, flags
	return w
}

// reservation puts the node in an active reservation.
func (w *nodeWrapper) reservation(name string) *nodeWrapper {
	w.n.Reservation = name
	return w
}

func (w *nodeWrapper) obj() slurm.Node { return w.n }

// a100Node is an idle node of partition a100 with 4 a100 free.
func a100Node(name string) *nodeWrapper { return makeNode(name, "a100").gpus("a100", 4) }

// mainJob is alice's running main job of proj-a in partition a100 and QOS guar-proj-a: one
// node, one task, asking for 1 CPU, 1000 MB and 1 a100, which it holds.
func mainJob() slurm.Job {
	j := elastictest.GPUJob(100, "alice", "proj-a", "RUNNING", 1)
	j.QOS, j.NodeCount, j.Tasks = "guar-proj-a", 1, 1
	return j
}

// asking is j asking for tres per node instead (it holds it too when running).
func asking(t *testing.T, j slurm.Job, tres string) slurm.Job {
	t.Helper()
	r, err := gpureq.ParseTRES(tres)
	if err != nil {
		t.Fatal(err)
	}
	j.TRESReq = r
	if j.Running() {
		j.TRESAlloc = r
	}
	return j
}

// jobOf is the elastic job of main with workers of gpus GPUs, growing by types (none: the main
// job's), each type's workers in the partition of its name and the main job's in its own.
func jobOf(main slurm.Job, gpus int, types ...policy.GPUType) Job {
	j := Job{Main: main, GPUsPerWorker: gpus, MainType: "a100", Types: types,
		Partitions: map[policy.GPUType][]string{"a100": {main.Partition}}}
	for _, t := range types {
		j.Partitions[t] = []string{string(t)}
	}
	return j
}

// snapshotOf is a cycle's view of nodes and of the queue (the main job among jobs), its
// associations without a limit, the QOS limits unread and quotad's plan fresh, keeping nothing.
func snapshotOf(nodes []slurm.Node, jobs ...slurm.Job) *Snapshot {
	s := &Snapshot{Jobs: map[uint32]slurm.Job{}, Nodes: nodes, Assocs: elastictest.AssocTree(), Lending: policy.Lending{Fresh: true}}
	for _, j := range jobs {
		s.Jobs[j.ID] = j
	}
	return s
}
