package daemon

import (
	"context"
	"errors"
	"io/fs"
	"testing"

	"github.com/slurmbridge/slurmbridge/bridge/pools"
	"github.com/slurmbridge/slurmbridge/quotad/policy"
)

type tableOf policy.Config

func (t *tableOf) Load(context.Context) (*policy.Config, error) {
	c := policy.Config(*t)
	return &c, nil
}

func TestPoolsQOSPatternsAreTheQuotaTables(t *testing.T) {
	lend := &pools.Config{BorrowQOS: "lend-{account}", ElasticQOS: "grow-{account}"}
	tests := []struct {
		name                    string
		table                   policy.Settings
		pools                   *pools.Config
		poolsErr                error
		wantBorrow, wantElastic string
		wantMismatch            string // the table setting the error names; "" none
	}{
		{"a table naming none takes pools.yaml's", policy.Settings{}, lend, nil, "lend-{account}", "grow-{account}", ""},
		{"a table naming the same is accepted", policy.Settings{BorrowQOS: "lend-{account}"}, lend, nil, "lend-{account}", "grow-{account}", ""},
		{"a table naming another borrow QOS fails", policy.Settings{BorrowQOS: "borrow-{account}"}, lend, nil, "", "", pools.TableBorrowQOS},
		{"a table naming another elastic QOS fails", policy.Settings{ElasticQOS: "elastic-{account}"}, lend, nil, "", "", pools.TableElasticQOS},
		{"without pools.yaml the table's stand", policy.Settings{BorrowQOS: "borrow-{account}"}, nil, fs.ErrNotExist, "borrow-{account}", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			table := tableOf(policy.Config{Settings: tt.table})
			l := &PoolsQOSPatterns{Table: &table, Pools: func() (*pools.Config, error) { return tt.pools, tt.poolsErr }}
			cfg, err := l.Load(context.Background())
			// quotactl import refuses the tables that every cycle would refuse, and no other.
			if checkErr := l.Check(&policy.Config{Settings: tt.table}); (checkErr == nil) != (err == nil) {
				t.Errorf("Check: %v, while Load: %v", checkErr, err)
			}
			var mismatch *pools.QOSPatternMismatch
			if errors.As(err, &mismatch) {
				if mismatch.TableSetting != tt.wantMismatch {
					t.Errorf("mismatch on %s, want %q", mismatch.TableSetting, tt.wantMismatch)
				}
				return
			}
			if err != nil || tt.wantMismatch != "" {
				t.Fatalf("Load: %v, want a mismatch on %q", err, tt.wantMismatch)
			}
			if cfg.Settings.BorrowQOS != tt.wantBorrow || cfg.Settings.ElasticQOS != tt.wantElastic {
				t.Errorf("patterns %q, %q; want %q, %q", cfg.Settings.BorrowQOS, cfg.Settings.ElasticQOS, tt.wantBorrow, tt.wantElastic)
			}
		})
	}
}

// An admin's half-saved pools.yaml, or one moved away, leaves the last good patterns in force:
// quotad neither stops nor lends in other QOS, and says so each cycle.
func TestPoolsQOSPatternsKeepTheLastGoodFile(t *testing.T) {
	table := tableOf(policy.Config{})
	broken := errors.New("pools.yaml:3: unknown key")
	answers := []struct {
		cfg *pools.Config
		err error
	}{
		{&pools.Config{BorrowQOS: "lend-{account}"}, nil},
		{nil, broken},
		{nil, fs.ErrNotExist},
	}
	var heard []error
	l := &PoolsQOSPatterns{Table: &table, Broken: func(err error) { heard = append(heard, err) }}
	for i, a := range answers {
		l.Pools = func() (*pools.Config, error) { return a.cfg, a.err }
		cfg, err := l.Load(context.Background())
		if err != nil {
			t.Fatalf("load %d: %v", i, err)
		}
		if cfg.Settings.BorrowQOS != "lend-{account}" {
			t.Errorf("load %d: borrow QOS %q, want the last good file's", i, cfg.Settings.BorrowQOS)
		}
		// The cluster page gets this load's read as it was, not the last good file.
		if pc, err := l.LastRead(); pc != a.cfg || err != a.err {
			t.Errorf("load %d: LastRead %v, %v; want %v, %v", i, pc, err, a.cfg, a.err)
		}
	}
	if len(heard) != 2 || !errors.Is(heard[0], broken) || !errors.Is(heard[1], fs.ErrNotExist) {
		t.Errorf("heard %v, want the broken file and the missing one", heard)
	}

	// A pools.yaml broken from the start stops the cycle: no patterns are known.
	first := &PoolsQOSPatterns{Table: &table, Pools: func() (*pools.Config, error) { return nil, broken }}
	if _, err := first.Load(context.Background()); !errors.Is(err, broken) {
		t.Errorf("a pools file broken from the start: %v", err)
	}
}
