package daemon

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sync"

	"github.com/slurmbridge/slurmbridge/bridge/pools"
	"github.com/slurmbridge/slurmbridge/quotad/policy"
)

// PoolsQOSPatterns loads the quota table with pools.yaml's QOS name patterns (borrow_qos,
// elastic_qos), their one source: the job_submit plugin guards the borrow and elastic QOS by
// them, so quotad must lend in no other. A table that names its own (settings.borrowQOS,
// settings.elasticQOS, from before) loads only while they name the same QOS; otherwise the
// load fails with a *pools.QOSPatternMismatch naming both settings. Without a pools.yaml (a
// site without the plugin) the table's patterns stand.
//
// Like the plugin, it keeps the last good file's patterns when pools.yaml turns broken or
// disappears (an admin's half-saved edit): a typo there must not switch quotad to other QOS
// names, nor stop its cycles. Broken hears of each such load.
//
// Each Load reads pools.yaml once; LastRead gives that read to the cluster page, so the page
// shows the file the cycle planned with and the file is not read twice.
type PoolsQOSPatterns struct {
	Table  ConfigLoader
	Pools  func() (*pools.Config, error)
	Broken func(error)

	mu       sync.Mutex
	lastGood *pools.QOSPatterns
	lastRead *pools.Config
	readErr  error
}

// LastRead is the pools file as the latest Load read it, or why it could not.
func (l *PoolsQOSPatterns) LastRead() (*pools.Config, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastRead, l.readErr
}

// Load implements ConfigLoader.
func (l *PoolsQOSPatterns) Load(ctx context.Context) (*policy.Config, error) {
	cfg, err := l.Table.Load(ctx)
	if err != nil {
		return nil, err
	}
	patterns, ok, err := l.check(cfg)
	if err != nil {
		return nil, err
	}
	if !ok {
		return cfg, nil
	}
	// A copy: the table loader may hand out the same Config again.
	withPatterns := *cfg
	withPatterns.Settings.BorrowQOS, withPatterns.Settings.ElasticQOS = patterns.Borrow, patterns.Elastic
	return &withPatterns, nil
}

// Check says whether quotad could plan with cfg as its quota table: a table naming other QOS
// patterns than pools.yaml is refused, as Load would refuse it in every cycle. quotactl import
// checks a new table with it before the table replaces the one in use.
func (l *PoolsQOSPatterns) Check(cfg *policy.Config) error {
	_, _, err := l.check(cfg)
	return err
}

// check is cfg's patterns checked against pools.yaml's, which it returns (false without any
// pools.yaml).
func (l *PoolsQOSPatterns) check(cfg *policy.Config) (pools.QOSPatterns, bool, error) {
	patterns, ok, err := l.patterns()
	if err != nil || !ok {
		return patterns, ok, err
	}
	if err := patterns.CheckTable(cfg.Settings.BorrowQOS, cfg.Settings.ElasticQOS); err != nil {
		return patterns, ok, err
	}
	return patterns, true, nil
}

// patterns are pools.yaml's patterns, the last good ones while it does not load, and false
// when there has never been a pools.yaml.
func (l *PoolsQOSPatterns) patterns() (pools.QOSPatterns, bool, error) {
	pc, err := l.Pools()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lastRead, l.readErr = pc, err
	if err == nil {
		p := pc.QOSPatterns()
		l.lastGood = &p
		return p, true, nil
	}
	if l.lastGood != nil {
		if l.Broken != nil {
			l.Broken(err)
		}
		return *l.lastGood, true, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return pools.QOSPatterns{}, false, nil
	}
	return pools.QOSPatterns{}, false, fmt.Errorf("the pools file names the borrow and elastic QOS, and it does not load: %w", err)
}
