package policy

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/slurmbridge/slurmbridge/bridge/quotaapi"
)

// KeptIdle is what one project's lending limit keeps idle of one GPU type for the project's own
// jobs now, as quotad's plan counts it: GPUs no borrower may take, so that the owner's next
// jobs start at once instead of waiting for a reclaim.
type KeptIdle struct {
	Account string
	// Type is quotad's gpu_type: a GPU type, or quotaapi.AnyType.
	Type string
	GPUs int
}

// Lending is quotad's plan as borrowed workers need it: the GPUs the projects' lending limits
// keep idle. Fresh says the plan was read whole and is current; else Why says why not
// (quotad unreachable, no plan yet, a stale plan), and no worker borrows: the zero value lends
// nothing, since no daemon acts on data it could not read.
type Lending struct {
	Fresh bool
	Why   string
	Kept  []KeptIdle
}

// LendingRoom is how many of free, the GPUs of type t free where the job's workers may run,
// the job's workers may take once borrowed ones run among them, leaving idle what the other
// projects' lending limits keep for their owners' own jobs; limited says that room is less
// than free (then why says which limits hold it, or why quotad's count is not there). The
// job's own project (account) is not counted: its idle guarantee is its own to use, and its
// workers take that first, in its guarantee.
//
// The kept GPUs are counted, not placed, as quotad counts them: elasticd cannot know on which
// nodes they stay idle, so it leaves that many idle where its workers run (it lends less than
// it could where the type also has nodes its workers do not use). A worker of any type (t
// "gpu") may land on every type, so every type's kept GPUs count against it; a typed worker
// counts those of its type and those kept for requests of no type, which any GPU serves.
func LendingRoom(l Lending, account string, t GPUType, free int) (room int, limited bool, why string) {
	if !l.Fresh {
		why := l.Why
		if why == "" {
			why = "quotad's plan was not read"
		}
		return 0, true, why + ": no worker borrows GPUs while other projects' lending limits cannot be counted"
	}
	kept := 0
	keepers := map[string]int{}
	for _, k := range l.Kept {
		if k.Account == account || k.GPUs <= 0 {
			continue
		}
		if t != "gpu" && k.Type != string(t) && k.Type != quotaapi.AnyType {
			continue
		}
		kept += k.GPUs
		keepers[k.Account] += k.GPUs
	}
	if kept == 0 {
		return free, false, ""
	}
	var parts []string
	for _, a := range slices.Sorted(maps.Keys(keepers)) {
		parts = append(parts, fmt.Sprintf("%s keeps %d", a, keepers[a]))
	}
	return max(free-kept, 0), true, fmt.Sprintf("lending limits keep %d idle %s for their owners' own jobs (%s), %d of %s free: borrowed workers leave them idle",
		kept, t, strings.Join(parts, ", "), free, t)
}
