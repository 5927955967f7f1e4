package pools

import (
	"fmt"
	"strings"
)

// QOSPatterns are the borrow and elastic QOS name patterns. pools.yaml's borrow_qos and
// elastic_qos are their one source: the job_submit plugin, elasticd and doctor read them there,
// and quotad takes them from there too. A quota table (quotas.yaml) from before names its own
// (settings.borrowQOS, settings.elasticQOS); quotad accepts one only where it names the same
// QOS, so the plugin never guards other QOS than those quotad lends in.
type QOSPatterns struct {
	Borrow, Elastic string
}

// QOSPatterns are the config's patterns, the defaults where it names none.
func (c *Config) QOSPatterns() QOSPatterns {
	return QOSPatterns{Borrow: c.BorrowQOSPattern(), Elastic: c.ElasticQOSPattern()}
}

// The settings that name the patterns, in pools.yaml and in the quota table.
const (
	PoolsBorrowQOS  = "borrow_qos"
	PoolsElasticQOS = "elastic_qos"
	TableBorrowQOS  = "settings.borrowQOS"
	TableElasticQOS = "settings.elasticQOS"
	poolsFile       = "pools.yaml"
	quotaTableFile  = "quotas.yaml"
)

// QOSPatternMismatch is a quota table naming another QOS pattern than pools.yaml.
type QOSPatternMismatch struct {
	PoolsSetting, PoolsValue string // e.g. borrow_qos, borrow-{account}
	TableSetting, TableValue string // e.g. settings.borrowQOS, lend-{account}
}

func (e *QOSPatternMismatch) Error() string {
	return fmt.Sprintf("%s %s %q differs from %s %s %q: pools.yaml names the QOS patterns that the job_submit plugin, elasticd and quotad use; remove %s from the quota table or make it equal",
		quotaTableFile, e.TableSetting, e.TableValue, poolsFile, e.PoolsSetting, e.PoolsValue, e.TableSetting)
}

// CheckTable says whether a quota table's settings.borrowQOS and settings.elasticQOS ("" when
// it names none) agree with p: each is accepted when empty or naming the same QOS (compared as
// Slurm compares QOS names, QOSKey). The first that differs is a *QOSPatternMismatch.
func (p QOSPatterns) CheckTable(borrow, elastic string) error {
	for _, s := range []struct{ table, tableValue, pools, poolsValue string }{
		{TableBorrowQOS, borrow, PoolsBorrowQOS, p.Borrow},
		{TableElasticQOS, elastic, PoolsElasticQOS, p.Elastic},
	} {
		if strings.TrimSpace(s.tableValue) != "" && QOSKey(s.tableValue) != QOSKey(s.poolsValue) {
			return &QOSPatternMismatch{PoolsSetting: s.pools, PoolsValue: s.poolsValue, TableSetting: s.table, TableValue: s.tableValue}
		}
	}
	return nil
}
