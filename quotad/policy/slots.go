package policy

// The reclaim order is written into the borrow and elastic QOS' Priority (withReclaimFields). A
// project's place on that scale is its slot. Slots are spread out, and each project keeps the
// slot its QOS already carry wherever the new order allows it: when a lend moves one project
// up the order, that project's QOS are rewritten, not those of every project it passed.

// slotSpacing is how many slots the scale has per project: room to place a project between two
// others without moving either.
const slotSpacing = 4

// maxQOSPriority is the highest QOS Priority the reclaim order may use: preempt/qos compares
// only 16 bits of it.
const maxQOSPriority = 65535

// slotSpace is the number of slots for n projects whose borrow bands are band wide above base:
// slotSpacing per project, for the next power of two of projects, so that a project more or
// less rarely moves every band (the scale sets where the borrow bands start); fewer where the
// highest priority would pass maxQOSPriority, down to one slot per project.
func slotSpace(n, band, base int) int {
	n = max(n, 1)
	pow := 1
	for pow < n {
		pow *= 2
	}
	for space := slotSpacing * pow; space > n; space /= 2 {
		if bandStart(base, space, band, space) <= maxQOSPriority {
			return space
		}
	}
	return n
}

// bandStart is the Priority of the lowest QOS in slot's borrow band, on a scale of space slots
// whose bands are band wide above base and above every elastic QOS (withReclaimFields). Slot
// space, one past the last, bounds the scale: every Priority on it is below.
func bandStart(base, space, band, slot int) int { return base + space + 1 + slot*band }

// reclaimSlots places the projects on [0, space): those in order (the reclaimable, first to
// lose first) on strictly increasing slots, each other project on the slot it had (was), or
// the top slot when it had none, since its place matters only once it is in the order. Of the
// projects in order, the longest run whose old slots already increase keeps them; the others
// are spread evenly in the gaps between their kept neighbours, and where a gap is too small
// its nearest kept neighbours give up their slots too, one by one, until the run fits.
func reclaimSlots(order, projects []string, was map[string]int, space int) map[string]int {
	// Room for every project in order, whatever the caller gives, so the widening below ends.
	space = max(space, len(order))
	// onScale is the slot acct had, or -1 for none on this scale.
	onScale := func(acct string) int {
		if s, ok := was[acct]; ok && s >= 0 && s < space {
			return s
		}
		return -1
	}
	slots := make(map[string]int, len(projects))
	for _, p := range projects {
		if s := onScale(p); s >= 0 {
			slots[p] = s
		} else {
			slots[p] = space - 1
		}
	}
	old := make([]int, len(order))
	for i, acct := range order {
		old[i] = onScale(acct)
	}
	kept := longestIncreasing(old)
	placed, start, end, ok := fillGaps(old, kept, space)
	for !ok {
		// The gap between two kept slots has no room for the run between them: let the
		// nearest kept one go too, until the run fits (at worst the order spreads over the
		// whole scale, which has room for every project).
		switch {
		case start > 0:
			kept[start-1] = false
		case end < len(old):
			kept[end] = false
		}
		placed, start, end, ok = fillGaps(old, kept, space)
	}
	for i, acct := range order {
		slots[acct] = placed[i]
	}
	return slots
}

// fillGaps keeps the slots of the entries kept marks and places each run of the others evenly
// between the kept slots around it (-1 and space at the ends). ok is false when the run
// [start, end) does not fit between its kept neighbours.
func fillGaps(old []int, kept []bool, space int) (out []int, start, end int, ok bool) {
	out = make([]int, len(old))
	lo := -1
	for i := 0; i <= len(old); i++ {
		if i < len(old) && !kept[i] {
			continue
		}
		hi := space
		if i < len(old) {
			hi = old[i]
			out[i] = hi
		}
		if k := i - start; k > 0 {
			if hi-lo-1 < k {
				return nil, start, i, false
			}
			for j := range k {
				out[start+j] = lo + (hi-lo)*(j+1)/(k+1)
			}
		}
		lo, start = hi, i+1
	}
	return out, 0, 0, true
}

// longestIncreasing marks one longest strictly increasing subsequence of the non-negative
// entries of vals (negative ones are never in it), the earliest-ending one among equals.
func longestIncreasing(vals []int) []bool {
	var tails []int // tails[k]: index of the smallest last value of an increasing run of length k+1
	prev := make([]int, len(vals))
	for i, v := range vals {
		prev[i] = -1
		if v < 0 {
			continue
		}
		lo, hi := 0, len(tails)
		for lo < hi {
			mid := (lo + hi) / 2
			if vals[tails[mid]] < v {
				lo = mid + 1
			} else {
				hi = mid
			}
		}
		if lo > 0 {
			prev[i] = tails[lo-1]
		}
		if lo == len(tails) {
			tails = append(tails, i)
		} else {
			tails[lo] = i
		}
	}
	in := make([]bool, len(vals))
	if len(tails) > 0 {
		for i := tails[len(tails)-1]; i >= 0; i = prev[i] {
			in[i] = true
		}
	}
	return in
}
