package capacity

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/slurmbridge/slurmbridge/bridge/gpureq"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/elasticd/policy"
)

// assocScope is one association that limits the main job's user: its limits, the jobs they
// count, and how the status names it.
type assocScope struct {
	limits slurm.Association
	covers func(slurm.Job) bool
	name   string
	user   bool // a user's association, where Max limits apply
}

// associationRoom is how many more workers of shape s and GPU type t (in one of parts) the
// associations of the main job's user and account, up the account tree, admit: Slurm keeps a
// job pending while any of them would go over a limit, so elasticd submits none that would.
// why names the tightest limit; Unlimited when none applies.
//
// qos is the GrpTRES of the QOS the worker runs in (nil: unknown). Slurm checks a job's QOS
// first and skips an association's GrpTRES on a TRES that QOS limits itself: a project's
// guarantee QOS, which limits gres/gpu, overrides an association's gres/gpu limit for the
// jobs in it. The partition's QOS, and QOS limits other than GrpTRES, are not read: those
// association limits always count, which can only hold a worker back that Slurm would start.
func associationRoom(snap *Snapshot, main slurm.Job, s Shape, t policy.GPUType, parts []string, qos gpureq.TRES) (n int, why string) {
	if snap.AssocErr != nil {
		return 0, fmt.Sprintf("association limits unreadable: %v", snap.AssocErr)
	}
	users, accounts := associationChain(snap.Assocs, main, parts)
	worker := s.tres(t)
	room := tightest{n: Unlimited}
	for _, sc := range append(slices.Clone(users), accounts...) {
		use := snap.usageOf(sc)
		room.grpLimits(sc, use, worker, qos)
		if sc.user {
			// Max limits apply to each user's association; one that sets none inherits its
			// account's, then that account's parent's.
			room.maxLimits(sc, append([]assocScope{sc}, accounts...), use, worker)
		}
	}
	return room.n, room.why
}

// tightest is the fewest workers any limit admits so far (Unlimited: none applies), and why.
type tightest struct {
	n   int
	why string
}

// limit counts a limit that admits room more workers, for why.
func (r *tightest) limit(room int64, why string) {
	if r.n == Unlimited || room < int64(r.n) {
		r.n, r.why = int(max(room, 0)), why
	}
}

// usage is what the jobs an association covers hold or ask for: running jobs with what they
// hold, pending ones with what they ask for (they are ahead of a new worker).
type usage struct {
	held    gpureq.TRES
	running int64
	queued  int64 // running or pending
}

func usageOf(sc assocScope, snap *Snapshot) usage {
	u := usage{held: gpureq.TRES{}}
	for _, j := range snap.Jobs {
		if !sc.covers(j) {
			continue
		}
		switch {
		case j.Running():
			u.running++
			u.queued++
			for k, v := range j.TRESAlloc {
				u.held[k] += v
			}
		case j.Pending():
			u.queued += int64(j.TaskCount())
			for k, v := range j.TRESReq {
				u.held[k] += v * uint64(j.TaskCount())
			}
		}
	}
	return u
}

// grpLimits counts the association's GrpTRES (but on TRES the worker's QOS limits itself),
// GrpJobs and GrpSubmitJobs.
func (r *tightest) grpLimits(sc assocScope, use usage, worker, qos gpureq.TRES) {
	grp, err := gpureq.ParseTRES(sc.limits.GrpTRES)
	if err != nil {
		r.limit(0, fmt.Sprintf("%s: GrpTRES %q unreadable", sc.name, sc.limits.GrpTRES))
	}
	for _, k := range slices.Sorted(maps.Keys(grp)) {
		if _, byQOS := qos[k]; byQOS {
			continue
		}
		if need := worker[k]; need > 0 {
			r.limit((int64(grp[k])-int64(use.held[k]))/int64(need),
				fmt.Sprintf("%s has GrpTRES %s=%d, and its jobs hold or wait for %d", sc.name, k, grp[k], use.held[k]))
		}
	}
	if l := sc.limits.GrpJobs; l != slurm.NoLimit {
		r.limit(int64(l)-use.running, fmt.Sprintf("%s has GrpJobs=%d, and %d of its jobs run", sc.name, l, use.running))
	}
	if l := sc.limits.GrpSubmitJobs; l != slurm.NoLimit {
		r.limit(int64(l)-use.queued, fmt.Sprintf("%s has GrpSubmitJobs=%d, and %d of its jobs run or wait", sc.name, l, use.queued))
	}
}

// maxLimits counts a user's association's MaxJobs, MaxSubmitJobs and MaxTRES per job, each
// from the nearest of lineage (the association, then its accounts up the tree) that sets it.
func (r *tightest) maxLimits(sc assocScope, lineage []assocScope, use usage, worker gpureq.TRES) {
	inherited := func(get func(slurm.Association) int) int {
		for _, up := range lineage {
			if v := get(up.limits); v != slurm.NoLimit {
				return v
			}
		}
		return slurm.NoLimit
	}
	if l := inherited(func(a slurm.Association) int { return a.MaxJobs }); l != slurm.NoLimit {
		r.limit(int64(l)-use.running, fmt.Sprintf("%s has MaxJobs=%d, and %d of its jobs run", sc.name, l, use.running))
	}
	if l := inherited(func(a slurm.Association) int { return a.MaxSubmitJobs }); l != slurm.NoLimit {
		r.limit(int64(l)-use.queued, fmt.Sprintf("%s has MaxSubmitJobs=%d, and %d of its jobs run or wait", sc.name, l, use.queued))
	}
	for _, up := range lineage {
		if up.limits.MaxTRESPerJob == "" {
			continue
		}
		perJob, err := gpureq.ParseTRES(up.limits.MaxTRESPerJob)
		if err != nil {
			r.limit(0, fmt.Sprintf("%s: MaxTRES %q unreadable", up.name, up.limits.MaxTRESPerJob))
		}
		for _, k := range slices.Sorted(maps.Keys(perJob)) {
			if worker[k] > perJob[k] {
				r.limit(0, fmt.Sprintf("%s has MaxTRES %s=%d per job, and a worker asks for %d", sc.name, k, perJob[k], worker[k]))
			}
		}
		return
	}
}

// associationChain is the main job's user's associations in its account (those of the
// partitions its workers may use, or of none), and its account's and every account's above,
// nearest first.
func associationChain(assocs []slurm.Association, main slurm.Job, parts []string) (users, accounts []assocScope) {
	parent := map[string]string{}
	byName := map[string]slurm.Association{}
	for _, a := range assocs {
		switch {
		case a.User == "" && a.Partition == "":
			acct := strings.ToLower(a.Account)
			byName[acct] = a
			parent[acct] = strings.ToLower(a.ParentAccount)
		case strings.EqualFold(a.User, main.User) && strings.EqualFold(a.Account, main.Account) &&
			(a.Partition == "" || slices.ContainsFunc(parts, func(p string) bool { return strings.EqualFold(p, a.Partition) })):
			name := fmt.Sprintf("the association of user %s in account %s", a.User, a.Account)
			if a.Partition != "" {
				name += " on partition " + a.Partition
			}
			users = append(users, assocScope{limits: a, user: true, name: name, covers: func(j slurm.Job) bool {
				return strings.EqualFold(j.User, a.User) && strings.EqualFold(j.Account, a.Account) &&
					(a.Partition == "" || strings.EqualFold(j.Partition, a.Partition))
			}})
		}
	}
	// under: account acct is a or below it.
	under := func(acct, a string) bool {
		seen := map[string]bool{}
		for acct = strings.ToLower(acct); acct != "" && !seen[acct]; acct = parent[acct] {
			if acct == a {
				return true
			}
			seen[acct] = true
		}
		return false
	}
	seen := map[string]bool{}
	for acct := strings.ToLower(main.Account); acct != "" && !seen[acct]; acct = parent[acct] {
		seen[acct] = true
		a, ok := byName[acct]
		if !ok {
			break
		}
		accounts = append(accounts, assocScope{limits: a, name: "account " + a.Account, covers: func(j slurm.Job) bool { return under(j.Account, acct) }})
	}
	return users, accounts
}
