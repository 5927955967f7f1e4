package pools

import "testing"

// BenchmarkRoute times one routing decision with the testbed's pools; the budget is
// 5 µs per decision in slurmctld's RPC thread.
func BenchmarkRoute(b *testing.B) {
	cfg := mustNew(b, testbedConfig())
	for _, bc := range []struct {
		name string
		job  Request
	}{
		{"cpu-default", job()},
		{"gpu-any", job(gres("gres:gpu:1"), comment("class=resnet"))},
		{"gpu-typed-per-job", job(gpusPerJob("gres:gpu:v100:2"))},
		{"named-pool-ok", job(partition("a100"), gres("gres:gpu:a100:1"))},
		{"named-pool-rejected", job(partition("cpu"), gres("gres:gpu:1"))},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				d := cfg.Route(&bc.job)
				if d.Err != nil {
					b.Fatal(d.Err)
				}
			}
		})
	}
}
