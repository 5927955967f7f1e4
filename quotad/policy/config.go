package policy

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/slurmbridge/slurmbridge/bridge/pools"
)

// Defaults for Settings fields left out of the quota table. The QOS name patterns are
// bridge/pools', which the plugin, elasticd and doctor read too.
const (
	DefaultBorrowQOS      = pools.DefaultBorrowQOS
	DefaultElasticQOS     = pools.DefaultElasticQOS
	DefaultGuaranteedQOS  = pools.DefaultGuaranteedQOS
	DefaultMaxSnapshotAge = 15 * time.Second
	accountPlaceholder    = pools.AccountPlaceholder
)

// The lend orders (Settings.LendOrder).
const (
	LendByHoldings     = "holdings"
	LendByDecayedUsage = "decayed-usage"
)

// DefaultReclaimBackoffReset is how long a borrower must run before a reclaim for its
// backoff to start over, when the table does not say; ReclaimWindow is how far back the
// snapshot reads reclaims, and bounds ReclaimBackoffMax.
const (
	DefaultReclaimBackoffReset = 30 * time.Minute
	// MaxBorrowSizeTiers bounds BorrowSizeTiers: 1 to 2^15 GPUs in powers of two.
	MaxBorrowSizeTiers = 16
	ReclaimWindow      = 24 * time.Hour
)

// DefaultLendReasons are the pending reasons with which Slurm says a job is held by its QOS's
// GPU group limit, i.e. the job is over its project's guarantee.
var DefaultLendReasons = []string{"QOSGrpGRES"}

// Config is the quota table: what `quotactl set` edits and quotad enforces.
type Config struct {
	Settings Settings `yaml:"settings,omitempty"`
	// LendLimits caps, per GPU type, how many GPUs all borrowers together may hold. A type
	// without an entry may be lent without limit. Each project's borrow QOS and its elastic QOS
	// get it in their GrpTRES, each on its own (the smaller of it and the project's limit for
	// the type: borrowCaps), so Slurm stops either QOS at it; a project's two QOS together and
	// the sum over all projects are quotad's to keep, since no single QOS counts them.
	LendLimits map[string]int `yaml:"lendLimits,omitempty"`
	Projects   []Project      `yaml:"projects"`

	lines lineIndex // where each value was in the YAML, for validation messages
}

// Settings are the cluster-wide knobs of the quota model.
type Settings struct {
	// BorrowQOS names each project's borrow QOS, where its lent jobs run; "{account}" is
	// replaced by the account. One per project, so that reclaim can follow each project's
	// usage: a guaranteed QOS may preempt a project's borrow QOS only while that project holds
	// more than its guarantee, and the QOS priority orders who loses first.
	BorrowQOS string `yaml:"borrowQOS,omitempty"`
	// ElasticQOS names each project's elastic QOS, where elasticd runs the workers it grows a
	// job by beyond the project's guarantee; "{account}" is replaced by the account. It lends
	// like the borrow QOS (the project's borrowing limits count both together) but every
	// elastic QOS has a lower Priority than every borrow QOS, so a claim reclaims elastic
	// workers first: losing one costs a job a transition, not its progress.
	ElasticQOS string `yaml:"elasticQOS,omitempty"`
	// GuaranteedQOS names each project's guaranteed QOS; "{account}" is replaced by the account.
	GuaranteedQOS string `yaml:"guaranteedQOS,omitempty"`
	// GraceTime is each borrow and elastic QOS' time between SIGTERM and SIGKILL on reclaim.
	GraceTime time.Duration `yaml:"graceTime,omitempty"`
	// PreemptExemptTime is each borrow and elastic QOS' minimum run time before a borrower may be reclaimed.
	PreemptExemptTime time.Duration `yaml:"preemptExemptTime,omitempty"`
	// GuaranteedPriority sets the guaranteed QOS' Priority; nil leaves it unmanaged.
	// BorrowPriority is the base of the elastic and borrow QOS' Priority (nil: 0). quotad sets
	// each elastic QOS to the base plus its project's slot in the reclaim order, and each
	// borrow QOS to the base plus the scale's size plus one plus the slot's band (slots.go):
	// Slurm's QOS preemption takes the lowest priority first, so elastic workers before any
	// other borrower. The highest must stay within 65535 (preempt/qos compares 16 bits).
	GuaranteedPriority *int `yaml:"guaranteedPriority,omitempty"`
	BorrowPriority     *int `yaml:"borrowPriority,omitempty"`
	// BorrowSizeTiers splits each project's borrow QOS by job size, so that a claim takes the
	// project's smallest borrowers first. Slurm's QOS preemption tries the lowest QOS Priority
	// first and, among equals, the oldest job whatever its size: with one borrow QOS a claim
	// for one GPU can requeue a 4-GPU borrower although a 1-GPU one would do. With tiers
	// [1, 2, 4, 8] a job lent with at most N GPUs (the smallest tier that holds it) borrows
	// in its own QOS (BorrowTierQOSName, e.g. borrow-proj-b-g2) and a larger one in the borrow
	// QOS itself; inside the project's place in the reclaim order each tier's Priority is one
	// above the smaller tier's. A table that names none gets DefaultBorrowSizeTiers (ParseConfig
	// and the store fill them in); `borrowSizeTiers: []` asks for one borrow QOS per project,
	// which is what an empty list means here. Never omitted when written, so that [] survives.
	BorrowSizeTiers []int `yaml:"borrowSizeTiers,flow"`
	// ReclaimBackoff is how long a borrower that a claim took back (Slurm preempted and
	// requeued it) waits in its guaranteed QOS before it is lent again, so it does not
	// start on lent GPUs only to lose its work again at once. Each further reclaim in a row
	// doubles the wait, up to ReclaimBackoffMax; a run of ReclaimBackoffReset or longer before a
	// reclaim starts the count again. 0 (the default) lends it again as soon as GPUs are idle.
	ReclaimBackoff      time.Duration `yaml:"reclaimBackoff,omitempty"`
	ReclaimBackoffMax   time.Duration `yaml:"reclaimBackoffMax,omitempty"`   // 0: 16 × ReclaimBackoff
	ReclaimBackoffReset time.Duration `yaml:"reclaimBackoffReset,omitempty"` // 0: DefaultReclaimBackoffReset
	// LendOrder is how idle GPUs are divided among borrowers. LendByHoldings (the default):
	// each project's weighted share of what borrowers hold now. LendByDecayedUsage: the same
	// shares, each weight scaled by Slurm's own fair-share factor of the project's decayed GPU
	// usage (sshare; the site's PriorityDecayHalfLife), so a project that used much of the
	// cluster lately gets less of what is idle now.
	LendOrder string `yaml:"lendOrder,omitempty"`
	// MaxSnapshotAge: a snapshot older than this yields a plan without actions.
	MaxSnapshotAge time.Duration `yaml:"maxSnapshotAge,omitempty"`
	// LendReasons are the pending reasons that make a job a candidate for lending.
	LendReasons []string `yaml:"lendReasons,omitempty"`
}

// Project is one Slurm account's quota.
type Project struct {
	Account string `yaml:"account"`
	// GPUs is the guaranteed number of GPUs per GPU type.
	GPUs map[string]int `yaml:"gpus,omitempty"`
	// TotalGPUs is the guarantee on gres/gpu (any type); nil means the sum of GPUs. A value
	// above that sum guarantees GPUs of any type for jobs that name no type.
	TotalGPUs *int `yaml:"totalGPUs,omitempty"`
	// BorrowLimit caps the GPUs the project may hold borrowed, all types together; nil: no cap.
	BorrowLimit *int `yaml:"borrowLimit,omitempty"`
	// BorrowLimitByType caps borrowed GPUs per type; a type without an entry has no cap.
	BorrowLimitByType map[string]int `yaml:"borrowLimitByType,omitempty"`
	// LendLimitByType caps, per type, how many of the project's guaranteed GPUs others may
	// borrow while it does not use them (Kueue's lendingLimit): the rest of its guarantee,
	// when idle, stays idle for its own jobs, which then start without waiting for a reclaim.
	// A type without an entry lends all of its idle guarantee.
	LendLimitByType map[string]int `yaml:"lendLimitByType,omitempty"`
	// Weight is the project's share when idle GPUs are divided among borrowers; nil means 1.
	Weight *float64 `yaml:"weight,omitempty"`
	// ReclaimPriorityThreshold protects the project's most important borrowed work from
	// low-priority claims (Kueue's maxPriorityThreshold): a job lent while its Slurm priority
	// is at least this borrows in the project's protected QOS (ProtectedBorrowQOSName), which
	// only claims of at least this priority may preempt. nil: every borrower is reclaimable
	// by any claim.
	ReclaimPriorityThreshold *int64 `yaml:"reclaimPriorityThreshold,omitempty"`
}

// MaxJobPriority is the highest priority Slurm gives a job (a uint32; 0 means held).
const MaxJobPriority = 1<<32 - 2

// protects says whether p's borrower of the given Slurm priority goes to its protected QOS.
func (p Project) protects(priority int64) bool {
	return p.ReclaimPriorityThreshold != nil && priority >= *p.ReclaimPriorityThreshold
}

// BorrowQOSName is the name of account's borrow QOS (bridge/pools.QOSName: lower case).
func (s Settings) BorrowQOSName(account string) string {
	return pools.QOSName(s.borrowPattern(), account)
}

func (s Settings) borrowPattern() string { return cmp.Or(s.BorrowQOS, DefaultBorrowQOS) }

// BorrowTierQOSName is the QOS a job lent with gpus GPUs borrows in: its size tier's
// (BorrowSizeTiers), or the project's borrow QOS when no tier holds it.
func (s Settings) BorrowTierQOSName(account string, gpus int) string {
	for _, n := range s.BorrowSizeTiers {
		if gpus <= n {
			return s.borrowTierName(account, n)
		}
	}
	return s.BorrowQOSName(account)
}

// borrowTierName is the QOS of account's borrowers of at most n GPUs (bridge/pools.BorrowTierName).
func (s Settings) borrowTierName(account string, n int) string {
	return pools.BorrowTierName(s.borrowPattern(), account, n)
}

// borrowTierOf reads a borrow tier's QOS name: the project's account and the tier's GPUs. It
// knows tiers the table no longer lists, whose borrowers may still run.
func (s Settings) borrowTierOf(qos string) (account string, n int, ok bool) {
	return pools.BorrowTierOf(s.borrowPattern(), qos)
}

// ProtectedBorrowQOSName is the QOS of account's borrowers above its reclaim priority
// threshold (bridge/pools.ProtectedBorrowName, e.g. borrow-proj-b-hipri).
func (s Settings) ProtectedBorrowQOSName(account string) string {
	return pools.ProtectedBorrowName(s.borrowPattern(), account)
}

// protectedBorrowOf reads a protected borrow QOS' name: the project's account.
func (s Settings) protectedBorrowOf(qos string) (account string, ok bool) {
	return pools.ProtectedBorrowOf(s.borrowPattern(), qos)
}

// IsBorrowQOS says whether qos is a borrow QOS or a size tier of one, of any project (by the
// pattern, bridge/pools.MatchQOS).
func (s Settings) IsBorrowQOS(qos string) bool { return pools.MatchQOS(s.borrowPattern(), qos) }

// isLendingQOS says whether qos is a borrow QOS (tiers too) or an elastic QOS of any project:
// its jobs run on lent GPUs.
func (s Settings) isLendingQOS(qos string) bool {
	return s.IsBorrowQOS(qos) || pools.MatchQOS(s.elasticPattern(), qos)
}

// BorrowQOSNames is every QOS account's borrowers run in: its size tiers, smallest first,
// then its borrow QOS.
func (s Settings) BorrowQOSNames(account string) []string {
	out := make([]string, 0, len(s.BorrowSizeTiers)+1)
	for _, n := range s.BorrowSizeTiers {
		out = append(out, s.borrowTierName(account, n))
	}
	return append(out, s.BorrowQOSName(account))
}

// ElasticQOSName is the name of account's elastic QOS (bridge/pools.QOSName: lower case).
func (s Settings) ElasticQOSName(account string) string {
	return pools.QOSName(s.elasticPattern(), account)
}

func (s Settings) elasticPattern() string { return cmp.Or(s.ElasticQOS, DefaultElasticQOS) }

// GuaranteedQOSName is the name of account's guaranteed QOS (bridge/pools.QOSName: lower case).
func (s Settings) GuaranteedQOSName(account string) string {
	return pools.QOSName(cmp.Or(s.GuaranteedQOS, DefaultGuaranteedQOS), account)
}

// BackoffMax is the longest reclaim backoff; BackoffReset the run after which it starts over.
func (s Settings) BackoffMax() time.Duration {
	if s.ReclaimBackoffMax > 0 {
		return s.ReclaimBackoffMax
	}
	return 16 * s.ReclaimBackoff
}

func (s Settings) BackoffReset() time.Duration {
	return cmp.Or(s.ReclaimBackoffReset, DefaultReclaimBackoffReset)
}

// ByDecayedUsage says whether borrowers' shares follow their decayed GPU usage.
func (s Settings) ByDecayedUsage() bool { return s.LendOrder == LendByDecayedUsage }

// SnapshotMaxAge is the oldest snapshot that may still lead to actions.
func (s Settings) SnapshotMaxAge() time.Duration {
	if s.MaxSnapshotAge <= 0 {
		return DefaultMaxSnapshotAge
	}
	return s.MaxSnapshotAge
}

// Reasons returns the pending reasons that mark a job as held by its quota.
func (s Settings) Reasons() []string {
	if len(s.LendReasons) == 0 {
		return DefaultLendReasons
	}
	return s.LendReasons
}

// KeptFromLending is how many of the project's guaranteed GPUs of type t are never lent: its
// guarantee less its lending limit; 0 for a type it lends without limit.
func (p Project) KeptFromLending(t string) int {
	lim, ok := p.LendLimitByType[t]
	if !ok {
		return 0
	}
	return max(0, p.GPUs[t]-lim)
}

// Total is the project's guarantee on gres/gpu.
func (p Project) Total() int {
	if p.TotalGPUs != nil {
		return *p.TotalGPUs
	}
	sum := 0
	for _, n := range p.GPUs {
		sum += n
	}
	return sum
}

// ShareWeight is the project's fair-share weight.
func (p Project) ShareWeight() float64 {
	if p.Weight == nil {
		return 1
	}
	return *p.Weight
}

// IsZero keeps the settings in a written table even when none is set: their borrowSizeTiers
// is written whatever it holds, since a table without it reads as the default tiers.
func (s Settings) IsZero() bool { return false }

// DefaultBorrowSizeTiers are the size tiers of a quota table that names none: with one borrow
// QOS per project, Slurm's preemption takes the oldest of a project's borrowers whatever its
// size, so a 1-GPU claim requeued a 3-GPU borrower while a 1-GPU one ran beside it. Minimal
// reclaim is a promise, so it is the default.
var DefaultBorrowSizeTiers = []int{1, 2, 4, 8}

// ResolveSizeTiers fills in the tiers of a table that names none (nil): DefaultBorrowSizeTiers,
// unless they would make the table invalid, as when one project's tier would be another's borrow
// QOS (projects team and team-g2): a default never stops a table that worked before, and such
// a table keeps one borrow QOS per project until it names tiers that fit. An empty list (the
// table's `borrowSizeTiers: []`) means none.
func (c *Config) ResolveSizeTiers() {
	switch {
	case c.Settings.BorrowSizeTiers == nil:
		c.Settings.BorrowSizeTiers = slices.Clone(DefaultBorrowSizeTiers)
		if c.Validate() != nil {
			c.Settings.BorrowSizeTiers = nil
			if c.Validate() != nil {
				// Invalid without tiers too: the table's own fault, which Validate reports.
				c.Settings.BorrowSizeTiers = slices.Clone(DefaultBorrowSizeTiers)
			}
		}
	case len(c.Settings.BorrowSizeTiers) == 0:
		c.Settings.BorrowSizeTiers = nil
	}
}

// LoadConfig reads and validates a quota table file.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// ParseConfig decodes a quota table strictly (unknown keys are errors) and validates it.
// Errors name the YAML line.
func ParseConfig(data []byte) (*Config, error) {
	var cfg Config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("quota table is empty")
		}
		return nil, err
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("quota table must be a single YAML document")
	}
	// A second, untyped pass only to learn line numbers: yaml.v3 keeps them on Nodes only.
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, err
	}
	cfg.lines = indexLines(&root)
	cfg.ResolveSizeTiers()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// Marshal encodes the quota table in the format ParseConfig reads.
func (c *Config) Marshal() ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(c); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Project returns the quota of account, if it has one.
func (c *Config) Project(account string) (Project, bool) {
	for _, p := range c.Projects {
		if p.Account == account {
			return p, true
		}
	}
	return Project{}, false
}

// gpuTypeName is what may safely appear in a GPU type name, which quotad writes into sacctmgr's
// arguments (GrpTRES=gres/gpu:TYPE=N): sacctmgr lowercases names and uses ',' and '=' as
// separators. Accounts and QOS names follow bridge/pools' naming rule.
var gpuTypeName = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]*$`)

// Validate reports every problem of the quota table, each with its YAML line when known.
func (c *Config) Validate() error {
	var errs []error
	bad := func(path, format string, args ...any) {
		errs = append(errs, &ConfigError{Line: c.lines.line(path), Path: path, Msg: fmt.Sprintf(format, args...)})
	}
	s := c.Settings
	// Every QOS is per project (bridge/pools' naming rule): a table from before per-project
	// borrow QOS names one shared QOS, e.g. "borrow".
	guarPattern := cmp.Or(s.GuaranteedQOS, DefaultGuaranteedQOS)
	for _, p := range []struct{ path, pattern, why string }{
		{"settings.guaranteedQOS", guarPattern, ""},
		{"settings.borrowQOS", s.borrowPattern(), fmt.Sprintf(": each project borrows in its own QOS (e.g. %q), so that a project within its guarantee is never reclaimed", DefaultBorrowQOS)},
		{"settings.elasticQOS", s.elasticPattern(), fmt.Sprintf(": each project's elastic workers run in its own QOS (e.g. %q), so that a project within its guarantee is never reclaimed", DefaultElasticQOS)},
	} {
		if !pools.PerProject(p.pattern) {
			bad(p.path, "%q must contain %s exactly once%s", p.pattern, accountPlaceholder, p.why)
		} else if err := pools.CheckQOSPattern(p.pattern); err != nil {
			bad(p.path, "%q %v", p.pattern, err)
		}
	}
	if pools.QOSKey(s.borrowPattern()) == pools.QOSKey(guarPattern) {
		bad("settings.borrowQOS", "%q is also the guaranteed QOS pattern", s.borrowPattern())
	}
	if p := pools.QOSKey(s.elasticPattern()); p == pools.QOSKey(guarPattern) || p == pools.QOSKey(s.borrowPattern()) {
		bad("settings.elasticQOS", "%q is also the guaranteed or borrow QOS pattern", s.elasticPattern())
	}
	for _, d := range []struct {
		path string
		v    time.Duration
	}{{"settings.graceTime", s.GraceTime}, {"settings.preemptExemptTime", s.PreemptExemptTime}, {"settings.maxSnapshotAge", s.MaxSnapshotAge},
		{"settings.reclaimBackoff", s.ReclaimBackoff}, {"settings.reclaimBackoffMax", s.ReclaimBackoffMax}, {"settings.reclaimBackoffReset", s.ReclaimBackoffReset}} {
		if d.v < 0 {
			bad(d.path, "must not be negative, got %s", d.v)
		}
	}
	switch {
	case s.ReclaimBackoffMax > 0 && s.ReclaimBackoffMax < s.ReclaimBackoff:
		bad("settings.reclaimBackoffMax", "%s is shorter than reclaimBackoff %s", s.ReclaimBackoffMax, s.ReclaimBackoff)
	case s.BackoffMax() > ReclaimWindow:
		bad("settings.reclaimBackoffMax", "%s is longer than the %s of reclaims quotad reads", s.BackoffMax(), ReclaimWindow)
	}
	for i, n := range s.BorrowSizeTiers {
		switch {
		case n < 1:
			bad(fmt.Sprintf("settings.borrowSizeTiers.%d", i), "a size tier is a number of GPUs, at least 1; got %d", n)
		case i > 0 && n <= s.BorrowSizeTiers[i-1]:
			bad(fmt.Sprintf("settings.borrowSizeTiers.%d", i), "tiers go from the smallest up: %d follows %d", n, s.BorrowSizeTiers[i-1])
		}
	}
	if s.BorrowPriority != nil {
		// The densest scale: one slot per project, each a band of its tiers, borrow QOS and
		// protected QOS.
		n, band := max(len(c.Projects), 1), len(s.BorrowSizeTiers)+2
		switch {
		case *s.BorrowPriority < 0:
			bad("settings.borrowPriority", "must not be negative, got %d", *s.BorrowPriority)
		case bandStart(*s.BorrowPriority, n, band, n) > maxQOSPriority:
			bad("settings.borrowPriority", "%d leaves no room for %d projects' reclaim order below %d (preempt/qos compares 16 bits of a QOS's Priority): at most %d", *s.BorrowPriority, n, maxQOSPriority, maxQOSPriority-bandStart(0, n, band, n))
		}
	}
	if len(s.BorrowSizeTiers) > MaxBorrowSizeTiers {
		bad("settings.borrowSizeTiers", "%d tiers; at most %d (each is one more QOS per project)", len(s.BorrowSizeTiers), MaxBorrowSizeTiers)
	}
	if s.LendOrder != "" && s.LendOrder != LendByHoldings && s.LendOrder != LendByDecayedUsage {
		bad("settings.lendOrder", "%q is not a lend order (%s or %s)", s.LendOrder, LendByHoldings, LendByDecayedUsage)
	}
	for i, r := range s.LendReasons {
		if strings.TrimSpace(r) == "" {
			bad(fmt.Sprintf("settings.lendReasons.%d", i), "empty reason")
		}
	}
	for _, t := range slices.Sorted(maps.Keys(c.LendLimits)) {
		checkType(bad, "lendLimits."+t, t)
		if c.LendLimits[t] < 0 {
			bad("lendLimits."+t, "lend limit of %s must not be negative, got %d", t, c.LendLimits[t])
		}
	}
	if len(c.Projects) == 0 {
		bad("projects", "no projects")
	}
	seenAccount := map[string]int{}
	seenQOS := map[string]string{}
	for i, p := range c.Projects {
		at := fmt.Sprintf("projects.%d", i)
		name := p.Account
		if name == "" {
			name = "#" + strconv.Itoa(i+1)
		}
		field := func(f string) string { return at + "." + f }
		if p.Account == "" {
			bad(field("account"), "project %s has no account", name)
		} else if err := pools.CheckAccount(p.Account); err != nil {
			bad(field("account"), "account %q %v", p.Account, err)
		} else if first, dup := seenAccount[p.Account]; dup {
			bad(field("account"), "project %s is listed twice (first at line %d)", p.Account, c.lines.line(fmt.Sprintf("projects.%d", first)))
		} else {
			seenAccount[p.Account] = i
			qos := []struct{ kind, name string }{
				{"guaranteed", s.GuaranteedQOSName(p.Account)},
				{"borrow", s.BorrowQOSName(p.Account)},
				{"elastic", s.ElasticQOSName(p.Account)},
			}
			for _, n := range s.BorrowSizeTiers {
				qos = append(qos, struct{ kind, name string }{fmt.Sprintf("borrow tier %d", n), s.borrowTierName(p.Account, n)})
			}
			if p.ReclaimPriorityThreshold != nil {
				qos = append(qos, struct{ kind, name string }{"protected borrow", s.ProtectedBorrowQOSName(p.Account)})
			}
			for _, q := range qos {
				if other, clash := seenQOS[q.name]; clash {
					bad(field("account"), "%s QOS %q of %s is also the %s", q.kind, q.name, p.Account, other)
				} else if err := pools.CheckQOSName(q.name); err != nil {
					bad(field("account"), "%s QOS name %q of %s %v", q.kind, q.name, p.Account, err)
				}
				seenQOS[q.name] = q.kind + " QOS of " + p.Account
			}
		}
		typedSum := 0
		for _, t := range slices.Sorted(maps.Keys(p.GPUs)) {
			checkType(bad, field("gpus."+t), t)
			if p.GPUs[t] < 0 {
				bad(field("gpus."+t), "project %s: guaranteed %s must not be negative, got %d", name, t, p.GPUs[t])
			}
			typedSum += p.GPUs[t]
		}
		if p.TotalGPUs != nil {
			if *p.TotalGPUs < 0 {
				bad(field("totalGPUs"), "project %s: totalGPUs must not be negative, got %d", name, *p.TotalGPUs)
			} else if *p.TotalGPUs < typedSum {
				bad(field("totalGPUs"), "project %s: totalGPUs %d is less than the sum of its typed guarantees %d", name, *p.TotalGPUs, typedSum)
			}
		}
		if p.BorrowLimit != nil && *p.BorrowLimit < 0 {
			bad(field("borrowLimit"), "project %s: borrowLimit must not be negative, got %d", name, *p.BorrowLimit)
		}
		for _, t := range slices.Sorted(maps.Keys(p.BorrowLimitByType)) {
			checkType(bad, field("borrowLimitByType."+t), t)
			if p.BorrowLimitByType[t] < 0 {
				bad(field("borrowLimitByType."+t), "project %s: borrow limit of %s must not be negative, got %d", name, t, p.BorrowLimitByType[t])
			}
		}
		for _, t := range slices.Sorted(maps.Keys(p.LendLimitByType)) {
			checkType(bad, field("lendLimitByType."+t), t)
			switch n, g := p.LendLimitByType[t], p.GPUs[t]; {
			case n < 0:
				bad(field("lendLimitByType."+t), "project %s: lend limit of %s must not be negative, got %d", name, t, n)
			case n > g:
				bad(field("lendLimitByType."+t), "project %s: lend limit of %s is %d, more than its %d guaranteed %s: a project lends only its own guarantee", name, t, n, g, t)
			}
		}
		if t := p.ReclaimPriorityThreshold; t != nil && (*t < 1 || *t > MaxJobPriority) {
			bad(field("reclaimPriorityThreshold"), "project %s: a Slurm job priority, 1 to %d; got %d", name, int64(MaxJobPriority), *t)
		}
		if p.Weight != nil && (!(*p.Weight > 0) || math.IsInf(*p.Weight, 0)) {
			bad(field("weight"), "project %s: weight must be a finite number > 0, got %v", name, *p.Weight)
		}
	}
	return errors.Join(errs...)
}

func checkType(bad func(path, format string, args ...any), path, t string) {
	if !gpuTypeName.MatchString(t) {
		bad(path, "GPU type %q is not a valid name (lowercase letters, digits, '_', '.', '-')", t)
	}
}

// ConfigError is one problem in the quota table.
type ConfigError struct {
	Line int    // 1-based YAML line; 0 when the table was not read from YAML
	Path string // dotted path, e.g. projects.1.weight
	Msg  string
}

func (e *ConfigError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("line %d: %s: %s", e.Line, e.Path, e.Msg)
	}
	return e.Path + ": " + e.Msg
}

// lineIndex maps dotted paths (sequence items by index) to YAML lines.
type lineIndex map[string]int

func indexLines(root *yaml.Node) lineIndex {
	idx := lineIndex{}
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		idx[path] = n.Line
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, path)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				walk(n.Content[i+1], join(path, n.Content[i].Value))
				idx[join(path, n.Content[i].Value)] = n.Content[i].Line // the key's line reads best
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				walk(c, join(path, strconv.Itoa(i)))
			}
		}
	}
	walk(root, "")
	return idx
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// line finds path's line, or that of its nearest ancestor present in the file (a missing field
// is reported at its project).
func (idx lineIndex) line(path string) int {
	for path != "" {
		if l, ok := idx[path]; ok {
			return l
		}
		cut := strings.LastIndexByte(path, '.')
		if cut < 0 {
			break
		}
		path = path[:cut]
	}
	return idx[""]
}
