package policy

import (
	"testing"

	"github.com/slurmbridge/slurmbridge/bridge/quotaapi"
)

// Borrowed workers leave idle what other projects' lending limits keep for their owners' own
// jobs: which kept GPUs count against a job of proj-b, and the room and reason left.
func TestLendingRoom(t *testing.T) {
	// proj-a lends at most 2 of its 4 idle guaranteed a100: it keeps 2 for alice's next jobs.
	keptA := KeptIdle{Account: "proj-a", Type: "a100", GPUs: 2}
	fresh := func(kept ...KeptIdle) Lending { return Lending{Fresh: true, Kept: kept} }
	with := func(k KeptIdle, edit func(*KeptIdle)) KeptIdle { edit(&k); return k }
	tests := []struct {
		name    string
		lending Lending
		t       GPUType
		free    int
		room    int
		limited bool
		why     string
	}{
		{name: "no lending limit keeps anything: all the free GPUs", lending: fresh(), t: "a100", free: 4, room: 4},
		{
			name:    "another project's kept GPUs stay idle",
			lending: fresh(keptA), t: "a100", free: 4,
			room: 2, limited: true,
			why: "lending limits keep 2 idle a100 for their owners' own jobs (proj-a keeps 2), 4 of a100 free: borrowed workers leave them idle",
		},
		{
			name:    "kept GPUs beyond what is free leave no room",
			lending: fresh(keptA, with(keptA, func(k *KeptIdle) { k.Account = "proj-c" })), t: "a100", free: 3,
			room: 0, limited: true,
			why: "lending limits keep 4 idle a100 for their owners' own jobs (proj-a keeps 2, proj-c keeps 2), 3 of a100 free: borrowed workers leave them idle",
		},
		{name: "the job's own project's idle guarantee is its own", lending: fresh(with(keptA, func(k *KeptIdle) { k.Account = "proj-b" })), t: "a100", free: 4, room: 4},
		{name: "GPUs kept of another type are not in the way", lending: fresh(with(keptA, func(k *KeptIdle) { k.Type = "v100" })), t: "a100", free: 4, room: 4},
		{name: "a project that keeps none is not named", lending: fresh(with(keptA, func(k *KeptIdle) { k.GPUs = 0 })), t: "a100", free: 4, room: 4},
		{
			name:    "GPUs kept for requests of no type count against every type",
			lending: fresh(with(keptA, func(k *KeptIdle) { k.Type = quotaapi.AnyType; k.GPUs = 1 })), t: "a100", free: 4,
			room: 3, limited: true,
			why: "lending limits keep 1 idle a100 for their owners' own jobs (proj-a keeps 1), 4 of a100 free: borrowed workers leave them idle",
		},
		{
			name:    "a worker of any type counts every type's kept GPUs",
			lending: fresh(keptA, with(keptA, func(k *KeptIdle) { k.Type = "v100"; k.GPUs = 1 })), t: "gpu", free: 8,
			room: 5, limited: true,
			why: "lending limits keep 3 idle gpu for their owners' own jobs (proj-a keeps 3), 8 of gpu free: borrowed workers leave them idle",
		},
		{
			name:    "quotad unreachable: nothing is lent, and why",
			lending: Lending{Why: "cannot read quotad's plan: connection refused", Kept: []KeptIdle{keptA}}, t: "a100", free: 4,
			room: 0, limited: true,
			why: "cannot read quotad's plan: connection refused: no worker borrows GPUs while other projects' lending limits cannot be counted",
		},
		{
			name:    "the zero value lends nothing",
			lending: Lending{}, t: "a100", free: 4,
			room: 0, limited: true,
			why: "quotad's plan was not read: no worker borrows GPUs while other projects' lending limits cannot be counted",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			room, limited, why := LendingRoom(tc.lending, "proj-b", tc.t, tc.free)
			if room != tc.room || limited != tc.limited || why != tc.why {
				t.Errorf("LendingRoom = %d, %v, %q; want %d, %v, %q", room, limited, why, tc.room, tc.limited, tc.why)
			}
		})
	}
}
