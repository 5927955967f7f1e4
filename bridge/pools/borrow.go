package pools

// BorrowQOSPattern is the borrow QOS name or pattern the config names, or DefaultBorrowQOS.
func (c *Config) BorrowQOSPattern() string {
	if c == nil || c.BorrowQOS == "" {
		return DefaultBorrowQOS
	}
	return c.BorrowQOS
}

// IsBorrowQOS says whether qos is a QOS quotad lends in, per the config (nil: the default).
func (c *Config) IsBorrowQOS(qos string) bool {
	return MatchQOS(c.BorrowQOSPattern(), qos)
}

// ElasticQOSPattern is the elastic QOS name or pattern the config names, or DefaultElasticQOS.
func (c *Config) ElasticQOSPattern() string {
	if c == nil || c.ElasticQOS == "" {
		return DefaultElasticQOS
	}
	return c.ElasticQOS
}

// IsElasticQOS says whether qos is a QOS where elasticd runs workers on borrowed GPUs.
func (c *Config) IsElasticQOS(qos string) bool {
	return MatchQOS(c.ElasticQOSPattern(), qos)
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
