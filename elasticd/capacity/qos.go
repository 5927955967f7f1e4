package capacity

import (
	"slices"

	"github.com/slurmbridge/slurmbridge/bridge/gpureq"
	"github.com/slurmbridge/slurmbridge/bridge/pools"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/elasticd/policy"
)

// qosRoom is where the job's next workers of one GPU type may run: the project's guarantee
// while it has GPUs idle, then its elastic QOS, which Slurm preempts (by requeue) when
// guaranteed work claims the GPUs, before any other borrower (quotad keeps its priority lowest).
type qosRoom struct {
	guarQOS   string // the main job's own QOS; "" when the main job borrows itself (or none is known)
	guar      int    // GPUs of the type free in the guarantee now, or Unlimited
	borrowQOS string // where borrowed workers run; "" when the cluster has no such QOS for the project
	borrow    int    // GPUs the project's borrowing limit leaves there, or Unlimited
	known     bool   // the QOS limits could be read this cycle
	// lend is the GPUs the job's workers may take in all, guaranteed and borrowed, while the
	// GPUs other projects' lending limits keep for their owners stay idle (policy.LendingRoom),
	// or Unlimited; lendWhy says what holds it.
	lend    int
	lendWhy string
}

// roomFor reads the main job's QOS and the project's elastic QOS: their GrpTRES limits for
// GPUs of type t less what running and pending jobs in them hold or wait for. The elastic
// QOS' limit is the project's borrowing limit, which counts its borrow QOS too. A cluster whose
// quotad has not created the elastic QOS yet (an upgrade under way) has workers only within the
// guarantee: the job_submit plugin refuses a user's job straight into the borrow QOS, and
// elasticd submits as the job's user. Borrowed workers also leave idle, of the GPUs free in
// the partitions parts, what other projects' lending limits keep for their owners' own jobs
// (quotad's plan; none borrows when it cannot be read fresh): no QOS limit keeps that, and an
// owner whose kept GPUs a worker took would wait for a reclaim.
func roomFor(snap *Snapshot, main slurm.Job, t policy.GPUType, parts []string) qosRoom {
	r := qosRoom{guar: Unlimited, borrow: Unlimited, known: snap.QOS != nil, lend: Unlimited}
	elastic, borrow := snap.Pools.ElasticQOSFor(main.Account), snap.Pools.BorrowQOSFor(main.Account)
	mainBorrows := snap.Pools.IsLendingQOS(main.QOS)
	if !mainBorrows {
		r.guarQOS = pools.QOSKey(main.QOS)
	}
	if snap.QOS == nil {
		return r // unknown limits: the worker asks for the main job's QOS, as the main job did
	}
	if mainBorrows {
		r.guar = 0 // the project is past its guarantee already
	} else if limit, ok := snap.QOS[r.guarQOS]; ok {
		r.guar = room(limit, snap, t, r.guarQOS)
	}
	if limit, ok := snap.QOS[elastic]; ok {
		// The borrowing limit counts the project's borrowers in every size tier and in its
		// protected borrow QOS too.
		counted := append([]string{elastic, borrow}, snap.borrowTiers(snap.Pools.BorrowQOSPattern(), main.Account)...)
		r.borrowQOS, r.borrow = elastic, room(limit, snap, t, counted...)
		if n, limited, why := policy.LendingRoom(snap.Lending, main.Account, t, freeGPUsIn(snap, parts, t)); limited {
			r.lend, r.lendWhy = n, why
		}
	}
	return r
}

// workers is how many workers of gpus GPUs the QOS room admits: those the guarantee holds,
// then those the borrowing limit and the other projects' lending limits leave room to borrow
// once the guaranteed ones have taken their GPUs; Unlimited when no limit applies.
func (r qosRoom) workers(gpus int) int {
	if !r.known || r.guar == Unlimited {
		return Unlimited
	}
	n := r.guar / gpus
	if r.borrowQOS == "" {
		return n
	}
	borrow := r.borrow
	if r.lend != Unlimited {
		if left := max(r.lend-n*gpus, 0); borrow == Unlimited || left < borrow {
			borrow = left
		}
	}
	if borrow == Unlimited {
		return Unlimited
	}
	return n + borrow/gpus
}

// lendHolds says the other projects' lending limits (or quotad's plan missing) hold the room
// to fewer workers of gpus GPUs than the QOS limits alone would admit.
func (r qosRoom) lendHolds(gpus int) bool {
	free := r
	free.lend = Unlimited
	n, m := r.workers(gpus), free.workers(gpus)
	return r.lendWhy != "" && n != Unlimited && (m == Unlimited || n < m)
}

// take picks the QOS for one more worker of gpus GPUs and counts it: the guarantee while it
// has room, else the elastic QOS while the borrowing limit and the other projects' lending
// limits allow. borrowed says the worker runs on borrowed GPUs.
func (r *qosRoom) take(gpus int) (qos string, borrowed bool) {
	switch {
	case !r.known || r.guar == Unlimited:
		return r.guarQOS, false
	case r.guar >= gpus:
		r.guar -= gpus
		if r.lend != Unlimited {
			r.lend = max(r.lend-gpus, 0) // a guaranteed worker takes free GPUs too
		}
		return r.guarQOS, false
	case r.borrowQOS != "" && (r.borrow == Unlimited || r.borrow >= gpus) && (r.lend == Unlimited || r.lend >= gpus):
		if r.borrow != Unlimited {
			r.borrow -= gpus
		}
		if r.lend != Unlimited {
			r.lend -= gpus
		}
		return r.borrowQOS, true
	}
	return r.guarQOS, false // no room anywhere: it waits in the guarantee like any job
}

// room is a QOS' GrpTRES limit on GPUs of type t (and on all GPUs) less the GPUs the running
// jobs in any of qos hold and their pending jobs ask for; Unlimited without such a limit.
func room(limit gpureq.TRES, snap *Snapshot, t policy.GPUType, qos ...string) int {
	left := Unlimited
	keys := []struct{ key, typ string }{{"gres/gpu", ""}}
	if t != "gpu" {
		keys = append(keys, struct{ key, typ string }{"gres/gpu:" + string(t), string(t)})
	}
	for _, k := range keys {
		lim, ok := limit[k.key]
		if !ok {
			continue
		}
		used := uint64(0)
		for _, q := range distinctFold(qos) {
			used += snap.qosGPUs(q, k.typ)
		}
		free := max(int(lim)-int(used), 0)
		if left == Unlimited || free < left {
			left = free
		}
	}
	return left
}

// distinctFold is qos without repeats, compared as Slurm compares QOS names (pools.QOSKey).
func distinctFold(qos []string) []string {
	var out []string
	for _, q := range qos {
		if !slices.ContainsFunc(out, func(o string) bool { return pools.QOSKey(o) == pools.QOSKey(q) }) {
			out = append(out, q)
		}
	}
	return out
}
