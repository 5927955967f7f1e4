package daemon

import (
	"context"
	"errors"
	"io/fs"

	"github.com/slurmbridge/slurmbridge/bridge/pools"
	"github.com/slurmbridge/slurmbridge/quotad/policy"
)

// PoolsQOSPatterns loads the quota table with pools.yaml's QOS name patterns (borrow_qos,
// elastic_qos), their one source: the job_submit plugin guards the borrow and elastic QOS by
// them, so quotad must lend in no other. A table that names its own (settings.borrowQOS,
// settings.elasticQOS, from before) loads only while they name the same QOS; otherwise the
// load fails with a *pools.QOSPatternMismatch naming both settings. Without a pools.yaml (a
// site without the plugin) the table's patterns stand.
type PoolsQOSPatterns struct {
	Table ConfigLoader
	Pools func() (*pools.Config, error)
}

// Load implements ConfigLoader.
func (l PoolsQOSPatterns) Load(ctx context.Context) (*policy.Config, error) {
	cfg, err := l.Table.Load(ctx)
	if err != nil {
		return nil, err
	}
	pc, err := l.Pools()
	if errors.Is(err, fs.ErrNotExist) {
		return cfg, nil
	}
	if err != nil {
		return nil, err
	}
	patterns := pc.QOSPatterns()
	if err := patterns.CheckTable(cfg.Settings.BorrowQOS, cfg.Settings.ElasticQOS); err != nil {
		return nil, err
	}
	// A copy: the table loader may hand out the same Config again.
	withPatterns := *cfg
	withPatterns.Settings.BorrowQOS, withPatterns.Settings.ElasticQOS = patterns.Borrow, patterns.Elastic
	return &withPatterns, nil
}
