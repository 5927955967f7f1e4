package policy

import "fmt"

// Unlimited is a room no limit bounds.
const Unlimited = -1

// TypeRoom is how many more workers of one GPU type may start (Unlimited: no limit is known to
// bound them) and, when a limit does, which one in words.
type TypeRoom struct {
	Type    GPUType
	Workers int
	Why     string
}

// Target is the size a job is brought to at once, whatever its throughput: the declared min
// (below it the training cannot start: torchrun waits for MIN nodes, so there is no throughput
// to wait for), or the size its owner pinned when larger (which throughput does not decide).
func (b Bounds) Target() int { return max(b.MinWorkers, b.Pin) }

// GrowToTarget is the one rule for a job below its target (Bounds.Target): grow at once by
// the missing workers, of the first type in rooms (the caller's preference) whose room holds
// them all; else by as many as the roomiest type admits, saying which limit stops the rest;
// else hold, naming the limits. A worker past a limit would only wait in the queue until
// elasticd ends it, and be submitted again. ok is false when the job is not below its target.
// pinnedBy names who pinned the size ("" when unknown).
func GrowToTarget(b Bounds, pinnedBy string, active int, rooms []TypeRoom) (d Decision, ok bool) {
	target := b.Target()
	if active >= target || len(rooms) == 0 {
		return Decision{}, false
	}
	below := "the declared min"
	if b.Pin > b.MinWorkers {
		below = "the size pinned by its owner"
		if pinnedBy != "" {
			below = "the size pinned by " + pinnedBy
		}
	}
	reason := fmt.Sprintf("below %s: %d of %d workers", below, active, target)
	need := target - active
	best := -1
	for i, r := range rooms {
		if r.Workers == Unlimited || r.Workers >= need {
			return Decision{Action: Grow, Code: CodeBelowTarget, Type: r.Type, Count: need, Reason: reason}, true
		}
		if best < 0 || r.Workers > rooms[best].Workers {
			best = i
		}
	}
	r := rooms[best]
	if r.Workers <= 0 {
		var whys []string
		for _, r := range rooms {
			whys = append(whys, r.Why)
		}
		return hold(CodeBelowTarget, "%s; no worker can start: %s", reason, joinDistinct(whys)), true
	}
	return Decision{Action: Grow, Code: CodeBelowTarget, Type: r.Type, Count: r.Workers, Reason: fmt.Sprintf("%s; adding %d: %s", reason, r.Workers, r.Why)}, true
}

// joinDistinct joins the non-empty texts, each once, in their order.
func joinDistinct(texts []string) string {
	out := ""
	seen := map[string]bool{}
	for _, t := range texts {
		if t == "" || seen[t] {
			continue
		}
		seen[t] = true
		if out != "" {
			out += "; "
		}
		out += t
	}
	return out
}
