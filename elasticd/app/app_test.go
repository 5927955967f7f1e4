package app

import (
	"strings"
	"testing"

	"github.com/slurmbridge/slurmbridge/bridge/pools"
	"github.com/slurmbridge/slurmbridge/elasticd/daemon"
	"github.com/slurmbridge/slurmbridge/elasticd/policy"
)

func TestPricesForRefusesAnObjectiveWithoutPrices(t *testing.T) {
	load := func(yaml string) *pools.Config {
		t.Helper()
		cfg, err := pools.Parse([]byte(yaml), "test")
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	priced := load("pools:\n  - name: a100\n    gpu_type: a100\n    price_per_gpu_hour: 3\n    node: {gpus: 4, cpus: 8, memory_mb: 32000}\n")
	unpriced := load("pools:\n  - name: a100\n    gpu_type: a100\n    node: {gpus: 4, cpus: 8, memory_mb: 32000}\n")
	perDollar := policy.Settings{Objective: policy.MaxThroughputPerDollar}
	valued := policy.Settings{ValuePerMillionSamples: 2}
	for _, tc := range []struct {
		name    string
		cfg     daemon.Config
		wantErr string
	}{
		{"throughput needs no price", daemon.Config{Pools: unpriced}, ""},
		{"throughput without pools", daemon.Config{}, ""},
		{"per dollar, priced", daemon.Config{Pools: priced, Settings: perDollar}, ""},
		{"value, priced", daemon.Config{Pools: priced, Settings: valued}, ""},
		{"per dollar, unpriced pool", daemon.Config{Pools: unpriced, Settings: perDollar}, "pool a100 has no price_per_gpu_hour"},
		{"value, unpriced pool", daemon.Config{Pools: unpriced, Settings: valued}, "pool a100 has no price_per_gpu_hour"},
		{"value without pools", daemon.Config{Settings: valued}, "need --pools"},
	} {
		err := pricesFor(tc.cfg)
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.wantErr)
		}
	}
}
