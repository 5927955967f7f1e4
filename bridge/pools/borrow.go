package pools

import (
	"strings"
)

// DefaultBorrowQOS is the borrow QOS when pools.yaml names none: quotad's own default
// (settings.borrowQOS of the quota table).
const DefaultBorrowQOS = "borrow-{account}"

// AccountPlaceholder in borrow_qos stands for any account: a per-project borrow QOS.
const AccountPlaceholder = "{account}"

// DefaultGuaranteedQOS is each project's guaranteed QOS when the quota table names none
// (quotad's settings.guaranteedQOS).
const DefaultGuaranteedQOS = "guar-{account}"

// QOSName is the QOS pattern names for account: the pattern with the account in place of
// {account} (a pattern without it is one shared name), in lower case. Slurm keeps QOS names in
// lower case and compares them without case, so every name quotad, elasticd, the plugin,
// doctor and the benchmarks build, compare or create comes from here, and "borrow-ProjA" and
// "borrow-proja" are one QOS to all of them, as to Slurm.
func QOSName(pattern, account string) string {
	return strings.ToLower(strings.ReplaceAll(strings.TrimSpace(pattern), AccountPlaceholder, account))
}

// BorrowQOSPattern is the borrow QOS name or pattern the config names, or DefaultBorrowQOS.
func (c *Config) BorrowQOSPattern() string {
	if c == nil || c.BorrowQOS == "" {
		return DefaultBorrowQOS
	}
	return c.BorrowQOS
}

// IsBorrowQOS says whether qos is a QOS quotad lends in, per the config (nil: the default).
func (c *Config) IsBorrowQOS(qos string) bool {
	return MatchBorrowQOS(c.BorrowQOSPattern(), qos)
}

// MatchBorrowQOS says whether qos is the borrow QOS pattern names: that name, or, when pattern
// holds "{account}", the pattern with any non-empty account in its place. Slurm keeps QOS
// names in lower case and compares them without case, and so does this.
func MatchBorrowQOS(pattern, qos string) bool {
	pattern, qos = strings.ToLower(strings.TrimSpace(pattern)), strings.ToLower(strings.TrimSpace(qos))
	if qos == "" {
		return false
	}
	prefix, suffix, templated := strings.Cut(pattern, AccountPlaceholder)
	if !templated {
		return qos == pattern
	}
	return len(qos) > len(prefix)+len(suffix) && strings.HasPrefix(qos, prefix) && strings.HasSuffix(qos, suffix)
}

// DefaultElasticQOS is the elastic QOS when pools.yaml names none: quotad's own default
// (settings.elasticQOS of the quota table).
const DefaultElasticQOS = "elastic-{account}"

// ElasticQOSPattern is the elastic QOS name or pattern the config names, or DefaultElasticQOS.
func (c *Config) ElasticQOSPattern() string {
	if c == nil || c.ElasticQOS == "" {
		return DefaultElasticQOS
	}
	return c.ElasticQOS
}

// IsElasticQOS says whether qos is a QOS where elasticd runs workers on borrowed GPUs.
func (c *Config) IsElasticQOS(qos string) bool {
	return MatchBorrowQOS(c.ElasticQOSPattern(), qos)
}

// IsLendingQOS says whether qos is one quotad lends in: a borrow or an elastic QOS, both
// preemptable, where only jobs Slurm can requeue belong.
func (c *Config) IsLendingQOS(qos string) bool {
	return c.IsBorrowQOS(qos) || c.IsElasticQOS(qos)
}

// ElasticQOSFor is the elastic QOS of account's project, as BorrowQOSFor.
func (c *Config) ElasticQOSFor(account string) string {
	return QOSName(c.ElasticQOSPattern(), account)
}

// BorrowQOSFor is the borrow QOS of account's project: the pattern with the account in it
// (lower case, as Slurm keeps QOS names). A project's sub-accounts borrow in the project's
// QOS, which this cannot know.
func (c *Config) BorrowQOSFor(account string) string {
	return QOSName(c.BorrowQOSPattern(), account)
}
