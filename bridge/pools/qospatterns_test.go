package pools

import (
	"errors"
	"strings"
	"testing"
)

func TestQOSPatternsCheckTable(t *testing.T) {
	custom := &Config{BorrowQOS: "lend-{account}", ElasticQOS: "grow-{account}"}
	tests := []struct {
		name            string
		pools           *Config
		borrow, elastic string
		want            *QOSPatternMismatch // nil: accepted
	}{
		{"a table naming none takes pools.yaml's", custom, "", "", nil},
		{"a table naming the same patterns", custom, "lend-{account}", "grow-{account}", nil},
		{"the same patterns in another case", custom, "Lend-{account}", "", nil},
		{"defaults on both sides", &Config{}, DefaultBorrowQOS, DefaultElasticQOS, nil},
		{"another borrow pattern", custom, "borrow-{account}", "",
			&QOSPatternMismatch{PoolsSetting: PoolsBorrowQOS, PoolsValue: "lend-{account}", TableSetting: TableBorrowQOS, TableValue: "borrow-{account}"}},
		{"another elastic pattern", custom, "", "elastic-{account}",
			&QOSPatternMismatch{PoolsSetting: PoolsElasticQOS, PoolsValue: "grow-{account}", TableSetting: TableElasticQOS, TableValue: "elastic-{account}"}},
		{"a table's pattern against pools.yaml's default", &Config{}, "lend-{account}", "",
			&QOSPatternMismatch{PoolsSetting: PoolsBorrowQOS, PoolsValue: DefaultBorrowQOS, TableSetting: TableBorrowQOS, TableValue: "lend-{account}"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.pools.QOSPatterns().CheckTable(tt.borrow, tt.elastic)
			var got *QOSPatternMismatch
			if errors.As(err, &got) != (tt.want != nil) || tt.want != nil && *got != *tt.want {
				t.Fatalf("CheckTable = %v, want %+v", err, tt.want)
			}
			// The error names both files, so an operator knows which two settings to align.
			if err != nil && (!strings.Contains(err.Error(), "pools.yaml") || !strings.Contains(err.Error(), "quotas.yaml")) {
				t.Errorf("error %q does not name both files", err)
			}
		})
	}
}
