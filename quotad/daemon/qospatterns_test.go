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
			l := PoolsQOSPatterns{Table: &table, Pools: func() (*pools.Config, error) { return tt.pools, tt.poolsErr }}
			cfg, err := l.Load(context.Background())
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
