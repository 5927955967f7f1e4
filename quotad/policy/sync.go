package policy

import (
	"slices"
	"sort"
	"strings"
	"time"
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
	for _, g := range snap.GPUs {
		if g.Type != "" {
			set[g.Type] = true
		}
	}
	return sortedKeys(set)
}

// desiredQOS is one QOS as the quota table wants it; nil pointers are not managed.
type desiredQOS struct {
	name              string
	grpTRES           map[string]int64 // GPU entries; entries absent here are cleared
	preempt           []string
	preemptMode       *string
	graceTime         *time.Duration
	preemptExemptTime *time.Duration
	priority          *int
}

func desiredQOSList(cfg *Config, types []string) []desiredQOS {
	s := cfg.Settings
	borrow := s.BorrowQOSName()
	requeue := "requeue"
	grace, exempt := s.GraceTime, s.PreemptExemptTime
	caps := map[string]int64{}
	total, allCapped := int64(0), len(types) > 0
	for _, t := range types {
		limit, ok := cfg.LendLimits[t]
		if !ok {
			allCapped = false
			continue
		}
		caps[typedTRES(t)] = int64(limit)
		total += int64(limit)
	}
	// An untyped borrower counts only against gres/gpu, so the total cap keeps it in bounds
	// too; with any type uncapped there is no finite total.
	if allCapped {
		caps[gpuTRES] = total
	}
	out := []desiredQOS{{
		name:              borrow,
		grpTRES:           caps,
		preempt:           []string{}, // the borrow QOS preempts nobody
		preemptMode:       &requeue,
		graceTime:         &grace,
		preemptExemptTime: &exempt,
		priority:          s.BorrowPriority,
	}}
	for _, p := range cfg.Projects {
		limits := map[string]int64{gpuTRES: int64(p.Total())}
		// Types without a guarantee get 0: a job of such a type in the guaranteed QOS would
		// hold GPUs no one can reclaim; it pends (QOSGrpGRES) and can only borrow.
		for _, t := range types {
			limits[typedTRES(t)] = int64(p.GPUs[t])
		}
		out = append(out, desiredQOS{
			name:     s.GuaranteedQOSName(p.Account),
			grpTRES:  limits,
			preempt:  []string{borrow},
			priority: s.GuaranteedPriority,
		})
	}
	return out
}

// diffQOS returns the changes that turn cur (nil: absent) into want, or false when equal.
func diffQOS(want desiredQOS, cur *QOS) (QOSChange, bool) {
	c := QOSChange{Name: want.name, Create: cur == nil}
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
	for _, k := range sortedKeys(names) {
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
	if from, to := normalizeNames(cur.Preempt), normalizeNames(want.preempt); !slices.Equal(from, to) {
		c.Preempt = &Change[[]string]{From: from, To: to}
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

// normalizeNames sorts and lowercases a QOS name list: Slurm treats QOS names case-insensitively
// and keeps lists unordered. Never nil, so an empty list compares equal to an absent one.
func normalizeNames(names []string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		if n != "" {
			out = append(out, strings.ToLower(n))
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// syncPlan diffs the QOS objects and accounts against the quota table. Accounts missing from
// slurmdbd are reported, never created: creating accounts is the administrator's call.
func syncPlan(cfg *Config, snap *Snapshot, types []string) (qos []QOSChange, accounts []AccountChange, notes []string) {
	current := map[string]*QOS{}
	for i := range snap.QOS {
		current[strings.ToLower(snap.QOS[i].Name)] = &snap.QOS[i]
	}
	// The borrow QOS comes first: each guaranteed QOS names it in its Preempt list.
	for _, want := range desiredQOSList(cfg, types) {
		if c, changed := diffQOS(want, current[want.name]); changed {
			qos = append(qos, c)
		}
	}
	accts := map[string]*Account{}
	for i := range snap.Accounts {
		accts[snap.Accounts[i].Name] = &snap.Accounts[i]
	}
	borrow := cfg.Settings.BorrowQOSName()
	projects := slices.Clone(cfg.Projects)
	sort.Slice(projects, func(a, b int) bool { return projects[a].Account < projects[b].Account })
	for _, p := range projects {
		cur, ok := accts[p.Account]
		if !ok {
			notes = append(notes, "account "+p.Account+" is in the quota table but not in slurmdbd: it is not managed until an administrator creates it")
			continue
		}
		guar := cfg.Settings.GuaranteedQOSName(p.Account)
		// Exactly these two: any other allowed QOS would let the project's jobs run outside
		// its quota, unreclaimable.
		want := normalizeNames([]string{guar, borrow})
		c := AccountChange{Account: p.Account}
		if from := normalizeNames(cur.QOS); !slices.Equal(from, want) {
			c.QOS = &Change[[]string]{From: from, To: want}
		}
		if !strings.EqualFold(cur.DefaultQOS, guar) {
			c.DefaultQOS = &Change[string]{From: cur.DefaultQOS, To: guar}
		}
		if c.QOS != nil || c.DefaultQOS != nil {
			accounts = append(accounts, c)
		}
	}
	return qos, accounts, notes
}
