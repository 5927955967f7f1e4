package policy

import "testing"

func TestGrowToTarget(t *testing.T) {
	room := func(typ GPUType, n int, why string) TypeRoom { return TypeRoom{Type: typ, Workers: n, Why: why} }
	for _, tc := range []struct {
		name     string
		bounds   Bounds
		pinnedBy string
		active   int
		rooms    []TypeRoom
		below    bool
		want     Decision
	}{
		{"at the min: not below", Bounds{MinWorkers: 2, MaxWorkers: 8}, "", 2, []TypeRoom{room("a100", Unlimited, "")}, false, Decision{}},
		{"below the min, no limit: grows all the way", Bounds{MinWorkers: 3, MaxWorkers: 8}, "", 1, []TypeRoom{room("a100", Unlimited, "")}, true,
			Decision{Action: Grow, Type: "a100", Count: 2, Reason: "below the declared min: 1 of 3 workers"}},
		{"the first type whose room holds them all", Bounds{MinWorkers: 4, MaxWorkers: 8}, "", 1, []TypeRoom{room("a100", 2, "GrpJobs=3"), room("h100", 3, "")}, true,
			Decision{Action: Grow, Type: "h100", Count: 3, Reason: "below the declared min: 1 of 4 workers"}},
		{"else the roomiest, saying what stops the rest", Bounds{MinWorkers: 4, MaxWorkers: 8}, "", 1, []TypeRoom{room("a100", 1, "GrpJobs=2"), room("h100", 2, "GrpTRES=gres/gpu=2")}, true,
			Decision{Action: Grow, Type: "h100", Count: 2, Reason: "below the declared min: 1 of 4 workers; adding 2: GrpTRES=gres/gpu=2"}},
		{"no room anywhere: hold naming each limit once", Bounds{MinWorkers: 2, MaxWorkers: 8}, "", 1, []TypeRoom{room("a100", 0, "GrpJobs=2"), room("h100", 0, "GrpJobs=2")}, true,
			Decision{Action: Hold, Reason: "below the declared min: 1 of 2 workers; no worker can start: GrpJobs=2"}},
		{"a pin above the min is the target", Bounds{MinWorkers: 1, MaxWorkers: 8, Pin: 4}, "alice", 2, []TypeRoom{room("a100", Unlimited, "")}, true,
			Decision{Action: Grow, Type: "a100", Count: 2, Reason: "below the size pinned by alice: 2 of 4 workers"}},
		{"at a pin: not below (pinned holds or shrinks it)", Bounds{MinWorkers: 1, MaxWorkers: 8, Pin: 4}, "alice", 4, []TypeRoom{room("a100", Unlimited, "")}, false, Decision{}},
	} {
		got, below := GrowToTarget(tc.bounds, tc.pinnedBy, tc.active, tc.rooms)
		if below != tc.below || got.Action != tc.want.Action || got.Type != tc.want.Type || got.Count != tc.want.Count || got.Reason != tc.want.Reason {
			t.Errorf("%s: got %v %+v, want %v %+v", tc.name, below, got, tc.below, tc.want)
		}
	}
}
