package policy

import (
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/pools"
)

const (
	gpuTRES       = "gres/gpu"
	gpuTRESPrefix = "gres/gpu:"
)

// typedTRES is the accounting name of a GPU type's TRES.
func typedTRES(t string) string { return gpuTRESPrefix + t }

// gpuTypes is every GPU type the QOS must speak about: guaranteed or capped in the table, or
// present in the cluster. Sorted.
func gpuTypes(cfg *Config, snap *Snapshot) []string {
	set := map[string]bool{}
	for _, p := range cfg.Projects {
		for t := range p.GPUs {
			set[t] = true
		}
	}
	for t := range cfg.LendLimits {
		set[t] = true
	}
	for _, n := range snap.Nodes {
		for t := range n.GPUs {
			if t != "" {
				set[t] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// desiredQOS is one QOS as the quota table wants it; nil pointers are not managed.
type desiredQOS struct {
	name              string
	project           string           // the project whose reclaim band it is in (borrow, tier, protected, elastic QOS)
	grpTRES           map[string]int64 // GPU entries; entries absent here are cleared
	preempt           *[]string
	preemptMode       *string
	graceTime         *time.Duration
	preemptExemptTime *time.Duration
	priority          *int
	// guaranteeOf is the project whose guaranteed QOS this is; "" for the others.
	guaranteeOf string
	// bandPlace is a borrow QOS's place in its project's band, from the bottom; elastic marks
	// an elastic QOS instead, below every band. withReclaimFields sets Priority from them.
	bandPlace int
	elastic   bool
}

// reclaimOrder is who may lose borrowers to a claim now, and in which order: the accounts
// whose projects hold more than their guarantee, first to lose first. Projects not in it are
// within their guarantee, borrowers counted, and no guaranteed QOS may preempt them.
type reclaimOrder struct {
	reclaimable []string
	// claims is, per project with a claim waiting (an in-quota job pending for GPUs), the
	// highest Slurm priority among those claims: it opens the protected borrow QOS of each
	// project in reclaimable whose reclaim priority threshold it reaches.
	claims map[string]int64
	// former is each former borrow QOS (former.go), with the guaranteed QOS whose Preempt
	// lists keep it.
	former map[string][]string
}

// desiredQOSList is every QOS the table wants, its reclaim fields left out (the guaranteed QOS'
// Preempt lists and the elastic and borrow QOS' Priority): each project's borrow QOS (its size
// tiers first), then each project's elastic QOS, then each project's guaranteed QOS. That is the
// structure lends rest on; withReclaimFields adds the rest once the reclaim order is known. kept
// is the borrow QOS kept beside each project's borrow QOS (keptBorrowQOSOf).
func desiredQOSList(cfg *Config, types []string, kept keptBorrowQOS) []desiredQOS {
	s := cfg.Settings
	requeue := "requeue"
	grace, exempt := s.GraceTime, s.PreemptExemptTime
	none := []string{} // a borrow or elastic QOS preempts nobody
	band := bandWidth(kept)
	var borrows, elastics, guars []desiredQOS
	for _, p := range cfg.Projects {
		lending := func(name string, bandPlace int, elastic bool) desiredQOS {
			return desiredQOS{
				name:              name,
				project:           p.Account,
				grpTRES:           borrowCaps(cfg, p, types),
				preempt:           &none,
				preemptMode:       &requeue,
				graceTime:         &grace,
				preemptExemptTime: &exempt,
				bandPlace:         bandPlace,
				elastic:           elastic,
			}
		}
		for i, size := range kept.tiers[p.Account] {
			borrows = append(borrows, lending(s.borrowTierName(p.Account, size), i, false))
		}
		top := band - 1
		if kept.protected[p.Account] {
			borrows = append(borrows, lending(s.ProtectedBorrowQOSName(p.Account), top, false))
		}
		if len(kept.protected) > 0 {
			top--
		}
		borrows = append(borrows, lending(s.BorrowQOSName(p.Account), top, false))
		elastics = append(elastics, lending(s.ElasticQOSName(p.Account), 0, true))
		limits := map[string]int64{gpuTRES: int64(p.Total())}
		// Types without a guarantee get 0: a job of such a type in the guaranteed QOS would
		// hold GPUs no one can reclaim; it pends (QOSGrpGRES) and can only borrow.
		for _, t := range types {
			limits[typedTRES(t)] = int64(p.GPUs[t])
		}
		guars = append(guars, desiredQOS{
			name:        s.GuaranteedQOSName(p.Account),
			guaranteeOf: p.Account,
			grpTRES:     limits,
			priority:    s.GuaranteedPriority,
		})
	}
	return slices.Concat(borrows, elastics, guars)
}

// bandWidth is how many Priority values each project's band of borrow QOS takes: one per size
// tier and one for its borrow QOS, with one more for a protected QOS once any is kept.
func bandWidth(kept keptBorrowQOS) int {
	band := 1
	for _, ts := range kept.tiers {
		band = max(band, len(ts)+1)
	}
	if len(kept.protected) > 0 {
		band++
	}
	return band
}

// withReclaimFields is structure (desiredQOSList's) with the reclaim fields order decides: the
// guaranteed QOS' Preempt lists and the elastic and borrow QOS' Priority.
//
// Priorities, with base BorrowPriority, a scale of S slots (slotSpace) and at most k tiers in a
// project: a project's elastic QOS gets base plus its slot s, its borrow QOS base+S+1 plus
// s×(k+1) plus k, its tiers the same plus their place, smallest first (0 up). The projects in
// the order are on rising slots; a project out of it keeps the slot it had (its value only
// avoids churn). With any protected QOS kept the band is k+2 wide and each project's protected
// QOS takes its top, above its borrow QOS: its protected borrowers are the last of it to go.
// Every elastic QOS is below every borrow QOS, so Slurm's preemption (lowest QOS priority
// first) takes elastic workers before any other borrower, and within each kind follows the
// order; inside a project, its smaller borrowers go first.
//
// A project's protected borrow QOS (its reclaim priority threshold) sits above its borrow QOS in
// its band, and is in a guaranteed QOS' Preempt list only while that project has a claim
// waiting of at least the threshold's priority (order.claims); with the threshold removed, in
// every list, as any borrow QOS.
//
// A former borrow QOS (former.go, order.former) stays in the Preempt lists that name it now,
// and is added to no other.
func withReclaimFields(cfg *Config, structure []desiredQOS, order reclaimOrder, kept keptBorrowQOS, current map[string]*QOS) []desiredQOS {
	s := cfg.Settings
	base, band := 0, bandWidth(kept)
	if s.BorrowPriority != nil {
		base = *s.BorrowPriority
	}
	threshold := map[string]*int64{}
	for _, p := range cfg.Projects {
		threshold[p.Account] = p.ReclaimPriorityThreshold
	}
	space := slotSpace(len(cfg.Projects), band, base)
	preempt := make([]string, 0, 2*len(order.reclaimable))
	for _, acct := range order.reclaimable {
		for _, size := range kept.tiers[acct] {
			preempt = append(preempt, s.borrowTierName(acct, size))
		}
		preempt = append(preempt, s.BorrowQOSName(acct), s.ElasticQOSName(acct))
		if kept.protected[acct] && threshold[acct] == nil {
			preempt = append(preempt, s.ProtectedBorrowQOSName(acct))
		}
	}
	accounts := make([]string, len(cfg.Projects))
	was := map[string]int{}
	for i, p := range cfg.Projects {
		accounts[i] = p.Account
		if q := current[pools.QOSKey(s.ElasticQOSName(p.Account))]; q != nil {
			was[p.Account] = q.Priority - base
		}
	}
	slots := reclaimSlots(order.reclaimable, accounts, was, space)
	out := slices.Clone(structure)
	for i := range out {
		q := &out[i]
		switch {
		case q.guaranteeOf != "":
			own := preempt
			if claim, ok := order.claims[q.guaranteeOf]; ok {
				own = slices.Clone(preempt)
				for _, acct := range order.reclaimable {
					if t := threshold[acct]; acct != q.guaranteeOf && kept.protected[acct] && t != nil && claim >= *t {
						own = append(own, s.ProtectedBorrowQOSName(acct))
					}
				}
			}
			for _, f := range slices.Sorted(maps.Keys(order.former)) {
				if slices.Contains(order.former[f], q.name) {
					own = append(slices.Clone(own), f)
				}
			}
			q.preempt = &own
		case q.elastic:
			priority := base + slots[q.project]
			q.priority = &priority
		default:
			priority := bandStart(base, space, band, slots[q.project]) + q.bandPlace
			q.priority = &priority
		}
	}
	return out
}

// keptBorrowQOS is, per project, the borrow QOS beside its borrow QOS itself that quotad keeps:
// its size tiers, smallest first, and whether its protected borrow QOS is kept.
type keptBorrowQOS struct {
	tiers     map[string][]int
	protected map[string]bool
}

// keptBorrowQOSOf is what the table asks (its tiers, a protected QOS where a project has a
// reclaim priority threshold), and any other tier or protected QOS a job still runs or waits
// in (the table dropped it: it must stay in the claimants' Preempt lists until it empties,
// then it is left alone).
func keptBorrowQOSOf(cfg *Config, snap *Snapshot) keptBorrowQOS {
	out := map[string][]int{}
	protected := map[string]bool{}
	projects := map[string]bool{}
	// A project's own borrow QOS is never another's tier: account team-g2's borrow-team-g2
	// reads like tier 2 of team.
	own := map[string]bool{}
	for _, p := range cfg.Projects {
		projects[p.Account] = true
		own[cfg.Settings.BorrowQOSName(p.Account)] = true
		out[p.Account] = slices.Clone(cfg.Settings.BorrowSizeTiers)
		if p.ReclaimPriorityThreshold != nil {
			protected[p.Account] = true
		}
	}
	add := func(qos string) {
		if own[pools.QOSKey(qos)] {
			return
		}
		if acct, ok := cfg.Settings.protectedBorrowOf(qos); ok && projects[acct] {
			protected[acct] = true
			return
		}
		if acct, size, ok := cfg.Settings.borrowTierOf(qos); ok && projects[acct] && !slices.Contains(out[acct], size) {
			out[acct] = append(out[acct], size)
			slices.Sort(out[acct])
		}
	}
	seen := map[string]bool{}
	for i := range snap.Jobs {
		if q := snap.Jobs[i].QOS; !seen[q] {
			seen[q] = true
			add(q)
		}
	}
	for _, u := range snap.Unreadable {
		add(u.QOS)
	}
	return keptBorrowQOS{tiers: out, protected: protected}
}

// borrowCaps is a project's borrow QOS GrpTRES, and its elastic QOS', so that Slurm enforces
// what quotad's lends respect (in each QOS on its own: the sum of both is quotad's and
// elasticd's to keep): per type the smaller of the project's borrowing limit and the cluster's lending
// limit (the cluster-wide sum of lends is quotad's to keep), and in all the project's
// borrowing limit or, with every type capped, the sum of the type caps. An untyped borrower
// counts only against gres/gpu, so the total keeps it in bounds too.
func borrowCaps(cfg *Config, p Project, types []string) map[string]int64 {
	caps := map[string]int64{}
	total, allCapped := int64(0), len(types) > 0
	for _, t := range types {
		limit, ok := p.BorrowLimitByType[t]
		if lend, lok := cfg.LendLimits[t]; lok && (!ok || lend < limit) {
			limit, ok = lend, true
		}
		if !ok {
			allCapped = false
			continue
		}
		caps[typedTRES(t)] = int64(limit)
		total += int64(limit)
	}
	switch {
	case p.BorrowLimit != nil && (!allCapped || int64(*p.BorrowLimit) < total):
		caps[gpuTRES] = int64(*p.BorrowLimit)
	case allCapped:
		caps[gpuTRES] = total
	}
	return caps
}

// diffQOS returns the changes that turn cur (nil: absent) into want, or false when equal.
func diffQOS(want desiredQOS, cur *QOS) (QOSChange, bool) {
	c := QOSChange{Name: want.name, Create: cur == nil, Band: want.project}
	if cur == nil {
		cur = &QOS{}
	}
	names := map[string]bool{}
	for k := range want.grpTRES {
		names[k] = true
	}
	for k := range cur.GrpTRES {
		if isGPUTRES(k) {
			names[k] = true
		}
	}
	for _, k := range slices.Sorted(maps.Keys(names)) {
		from, ok := cur.GrpTRES[k]
		if !ok {
			from = ClearLimit
		}
		to, ok := want.grpTRES[k]
		if !ok {
			to = ClearLimit
		}
		if from != to {
			c.GrpTRES = append(c.GrpTRES, TRESChange{Name: k, From: from, To: to})
		}
	}
	if want.preempt != nil {
		if from, to := normalizeNames(cur.Preempt), normalizeNames(*want.preempt); !slices.Equal(from, to) {
			c.Preempt = &Change[[]string]{From: from, To: to}
		}
	}
	if want.preemptMode != nil && !strings.EqualFold(cur.PreemptMode, *want.preemptMode) {
		c.PreemptMode = &Change[string]{From: cur.PreemptMode, To: *want.preemptMode}
	}
	if want.graceTime != nil && cur.GraceTime != *want.graceTime {
		c.GraceTime = &Change[time.Duration]{From: cur.GraceTime, To: *want.graceTime}
	}
	if want.preemptExemptTime != nil && cur.PreemptExemptTime != *want.preemptExemptTime {
		c.PreemptExemptTime = &Change[time.Duration]{From: cur.PreemptExemptTime, To: *want.preemptExemptTime}
	}
	if want.priority != nil && cur.Priority != *want.priority {
		c.Priority = &Change[int]{From: cur.Priority, To: *want.priority}
	}
	changed := c.Create || len(c.GrpTRES) > 0 || c.Preempt != nil || c.PreemptMode != nil ||
		c.GraceTime != nil || c.PreemptExemptTime != nil || c.Priority != nil
	return c, changed
}

func isGPUTRES(name string) bool {
	return name == gpuTRES || strings.HasPrefix(name, gpuTRESPrefix)
}

// normalizeNames sorts a QOS name list and writes each name as its pools.QOSKey: Slurm compares
// QOS names without case and keeps lists unordered. Never nil, so an empty list compares equal to an absent one.
func normalizeNames(names []string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		if n != "" {
			out = append(out, pools.QOSKey(n))
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// structureSync is what it takes to bring slurmdbd to the quota table, the QOS' reclaim fields
// aside: the structure lends rest on. Accounts missing from slurmdbd are reported (notes), never
// created: creating accounts is the administrator's call.
type structureSync struct {
	current  map[string]*QOS // the snapshot's QOS, by pools.QOSKey
	kept     keptBorrowQOS
	want     []desiredQOS // desiredQOSList: the QOS, their reclaim fields left out
	qos      []QOSChange  // what makes the QOS want
	accounts []AccountChange
	users    []UserChange
	notes    []string
}

// syncStructure diffs the QOS objects (their reclaim fields left out), accounts and user
// associations against the quota table.
func syncStructure(cfg *Config, snap *Snapshot, types []string) structureSync {
	out := structureSync{current: map[string]*QOS{}, kept: keptBorrowQOSOf(cfg, snap)}
	for i := range snap.QOS {
		out.current[pools.QOSKey(snap.QOS[i].Name)] = &snap.QOS[i]
	}
	out.want = desiredQOSList(cfg, types, out.kept)
	out.qos = diffQOSList(out.want, out.current)
	accts := map[string]*Account{}
	for i := range snap.Accounts {
		accts[snap.Accounts[i].Name] = &snap.Accounts[i]
	}
	projects := slices.Clone(cfg.Projects)
	sort.Slice(projects, func(a, b int) bool { return projects[a].Account < projects[b].Account })
	for _, p := range projects {
		if _, ok := accts[p.Account]; !ok {
			out.notes = append(out.notes, "account "+p.Account+" is in the quota table but not in slurmdbd: it is not managed until an administrator creates it")
		}
	}
	out.accounts = accountChanges(cfg, snap.Accounts, out.kept)
	out.users = userChanges(cfg, snap.Accounts, snap.Users, out.kept)
	return out
}

// behind counts the changes that would bring the structure to the table. Until it is 0, the
// plan moves no job. The reclaim fields are left out because they follow the lends the plan is
// about to make: syncQOS plans them after the lends, with the reclaim order.
func (st structureSync) behind() int {
	return len(st.qos) + len(st.accounts) + len(st.users)
}

// syncQOS diffs the QOS objects against the quota table, reclaim fields included: the plan's
// QOS changes.
func syncQOS(cfg *Config, st structureSync, order reclaimOrder) []QOSChange {
	return diffQOSList(withReclaimFields(cfg, st.want, order, st.kept, st.current), st.current)
}

// diffQOSList is the changes that turn the current QOS into the wanted ones, in want's order.
func diffQOSList(want []desiredQOS, current map[string]*QOS) []QOSChange {
	var out []QOSChange
	for _, w := range want {
		if c, changed := diffQOS(w, current[w.name]); changed {
			out = append(out, c)
		}
	}
	return out
}

// projectQOS is every QOS of the project's an account (or user) under it must be allowed,
// normalized: the guaranteed, borrow (with its size tiers and protected QOS) and elastic QOS.
func projectQOS(cfg *Config, proj string, kept keptBorrowQOS) []string {
	s := cfg.Settings
	names := []string{s.GuaranteedQOSName(proj), s.BorrowQOSName(proj), s.ElasticQOSName(proj)}
	for _, size := range kept.tiers[proj] {
		names = append(names, s.borrowTierName(proj, size))
	}
	if kept.protected[proj] {
		names = append(names, s.ProtectedBorrowQOSName(proj))
	}
	return normalizeNames(names)
}

// userChanges adds the project's QOS (projectQOS) to every user association under a project
// that sets its own QOS list and lacks any: such a user does not inherit the account's list, so
// Slurm would refuse to move their job into the borrow QOS (or back), or elasticd's worker of
// their job into the elastic QOS. Only
// what is missing is added; the QOS the site gave the user stay, unlike an account's list,
// which quotad owns.
func userChanges(cfg *Config, accounts []Account, users []UserAssociation, kept keptBorrowQOS) []UserChange {
	tree := newAccountTree(cfg, accounts)
	var out []UserChange
	for _, u := range users {
		proj := tree.projectOf(u.Account)
		if proj == "" {
			continue
		}
		have := normalizeNames(u.QOS)
		var add []string
		for _, q := range projectQOS(cfg, proj, kept) {
			if !slices.Contains(have, q) {
				add = append(add, q)
			}
		}
		if len(add) > 0 {
			out = append(out, UserChange{User: u.User, Account: u.Account, Partition: u.Partition, From: have, Add: add})
		}
	}
	sort.Slice(out, func(a, b int) bool {
		x, y := out[a], out[b]
		if x.Account != y.Account {
			return x.Account < y.Account
		}
		if x.User != y.User {
			return x.User < y.User
		}
		return x.Partition < y.Partition
	})
	return out
}

// accountChanges keeps every account a project covers (the project and its sub-accounts, see
// accountTree) allowed exactly the project's guaranteed, borrow and elastic QOS, with the
// guaranteed one as default: any other allowed QOS would let its jobs run outside the quota,
// unreclaimable. A sub-account that inherits both from its parent needs no change of its own
// once the parent is right, so accounts are walked from the root down and a change is planned
// only where inheritance will not give the wanted values.
func accountChanges(cfg *Config, accounts []Account, kept keptBorrowQOS) []AccountChange {
	tree := newAccountTree(cfg, accounts)
	byName := map[string]*Account{}
	children := map[string][]string{}
	var roots []string
	for i := range accounts {
		byName[accounts[i].Name] = &accounts[i]
	}
	for _, a := range accounts {
		if _, ok := byName[a.Parent]; ok && a.Parent != a.Name {
			children[a.Parent] = append(children[a.Parent], a.Name)
		} else {
			roots = append(roots, a.Name)
		}
	}
	type after struct {
		qos []string
		def string
	}
	var out []AccountChange
	var walk func(name string, parent *after, depth int)
	walk = func(name string, parent *after, depth int) {
		cur := byName[name]
		// What the account resolves to once the changes planned above it are applied.
		res := &after{qos: normalizeNames(cur.QOS), def: cur.DefaultQOS}
		if parent != nil && !cur.OwnQOS {
			res.qos = parent.qos
		}
		if parent != nil && !cur.OwnDefaultQOS {
			res.def = parent.def
		}
		if proj := tree.projectOf(name); proj != "" {
			guar := cfg.Settings.GuaranteedQOSName(proj)
			want := projectQOS(cfg, proj, kept)
			c := AccountChange{Account: name}
			if !slices.Equal(res.qos, want) {
				c.QOS = &Change[[]string]{From: normalizeNames(cur.QOS), To: want}
				res.qos = want
			}
			if pools.QOSKey(res.def) != guar {
				c.DefaultQOS = &Change[string]{From: cur.DefaultQOS, To: guar}
				res.def = guar
			}
			if c.QOS != nil || c.DefaultQOS != nil {
				out = append(out, c)
			}
		}
		if depth >= maxTreeDepth {
			return
		}
		kids := slices.Clone(children[name])
		sort.Strings(kids)
		for _, k := range kids {
			walk(k, res, depth+1)
		}
	}
	sort.Strings(roots)
	for _, r := range roots {
		walk(r, nil, 0)
	}
	// Parents before children, as the walk found them, so a child's change is applied after
	// the parent's it may otherwise inherit.
	return out
}
