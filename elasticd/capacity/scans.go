package capacity

import (
	"slices"

	"github.com/slurmbridge/slurmbridge/bridge/noderoom"
	"github.com/slurmbridge/slurmbridge/bridge/pools"
	"github.com/slurmbridge/slurmbridge/elasticd/policy"
)

// scans holds sums over a snapshot's whole queue, each made the first time a step asks for it.
// The snapshot does not change during a cycle, so neither do they.
type scans struct {
	qosGPUs map[string]map[string]uint64 // GPU type ("" all) → lower-case QOS → GPUs held or asked for
	assoc   map[string]usage             // association scope's name → its jobs' usage
	named   map[string][]uint32          // job name → ids
	pending []policy.WaitingJob          // every pending job, Own unset
	pendIDs []uint32                     // and their ids, in the same order
	free    []noderoom.Free              // each node's unallocated GPUs, CPUs and memory, in node order
	tiers   map[string][]string          // account → the QOS of its borrow size tiers and protected QOS among the snapshot's QOS
}

func (s *Snapshot) scans() *scans {
	if s.sums == nil {
		s.sums = &scans{}
	}
	return s.sums
}

// free is what each node of the snapshot has unallocated (slurm.Node.Free), in the order of
// s.Nodes: every elastic job's capacity asks for it, per GPU type, twice (fits, freeGPUsIn).
func (s *Snapshot) free() []noderoom.Free {
	sc := s.scans()
	if sc.free == nil {
		sc.free = make([]noderoom.Free, len(s.Nodes))
		for i := range s.Nodes {
			sc.free[i] = s.Nodes[i].Free()
		}
	}
	return sc.free
}

// borrowTiers is the QOS of account's borrow size tiers and its protected borrow QOS
// (bridge/pools.BorrowTierName and ProtectedBorrowName under the borrow pattern) among the
// snapshot's QOS: every elastic job's room asks, so the QOS are read once per snapshot.
func (s *Snapshot) borrowTiers(pattern, account string) []string {
	sc := s.scans()
	if sc.tiers == nil {
		sc.tiers = map[string][]string{}
		for q := range s.QOS {
			if acct, _, ok := pools.BorrowTierOf(pattern, q); ok {
				sc.tiers[acct] = append(sc.tiers[acct], q)
			} else if acct, ok := pools.ProtectedBorrowOf(pattern, q); ok {
				sc.tiers[acct] = append(sc.tiers[acct], q)
			}
		}
	}
	return sc.tiers[pools.QOSKey(account)]
}

// qosGPUs is the GPUs of type typ ("" all) that the running jobs in QOS qos hold and its
// pending jobs ask for.
func (s *Snapshot) qosGPUs(qos, typ string) uint64 {
	sc := s.scans()
	byQOS, ok := sc.qosGPUs[typ]
	if !ok {
		byQOS = map[string]uint64{}
		for _, j := range s.Jobs {
			switch {
			case j.Running():
				byQOS[pools.QOSKey(j.QOS)] += j.TRESAlloc.GPUs(typ)
			case j.Pending():
				byQOS[pools.QOSKey(j.QOS)] += j.TRESReq.GPUs(typ)
			}
		}
		if sc.qosGPUs == nil {
			sc.qosGPUs = map[string]map[string]uint64{}
		}
		sc.qosGPUs[typ] = byQOS
	}
	return byQOS[pools.QOSKey(qos)]
}

// usageOf is what the jobs an association scope covers hold or ask for.
func (s *Snapshot) usageOf(sc assocScope) usage {
	sums := s.scans()
	if u, ok := sums.assoc[sc.name]; ok {
		return u
	}
	u := usageOf(sc, s)
	if sums.assoc == nil {
		sums.assoc = map[string]usage{}
	}
	sums.assoc[sc.name] = u
	return u
}

// Named is the ids of the queue's jobs named name: every elastic job's workers are found by
// their name.
func (s *Snapshot) Named(name string) []uint32 {
	sc := s.scans()
	if sc.named == nil {
		sc.named = map[string][]uint32{}
		for id, extra := range s.Jobs {
			sc.named[extra.Name] = append(sc.named[extra.Name], id)
		}
	}
	return sc.named[name]
}

// waitingJobs are the queue's pending jobs as policy.GrowthRoom weighs them; own are the
// elastic job's workers.
func (s *Snapshot) waitingJobs(own []uint32) []policy.WaitingJob {
	sc := s.scans()
	if sc.pending == nil {
		sc.pending = []policy.WaitingJob{}
		for _, j := range s.Jobs {
			if !j.Pending() {
				continue
			}
			sc.pending = append(sc.pending, policy.WaitingJob{
				Reason: j.StateReason, Batch: j.Batch, Requeue: j.Requeue, LendingQOS: s.Pools.IsLendingQOS(j.QOS),
				Partitions: j.Partitions(), GPUsPerTask: int(j.TRESReq.GPUs("")), Tasks: j.TaskCount(),
			})
			sc.pendIDs = append(sc.pendIDs, j.ID)
		}
	}
	mine := make(map[uint32]bool, len(own))
	for _, id := range own {
		mine[id] = true
	}
	out := slices.Clone(sc.pending)
	for i, id := range sc.pendIDs {
		out[i].Own = mine[id]
	}
	return out
}
