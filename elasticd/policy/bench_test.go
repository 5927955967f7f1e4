package policy

import (
	"fmt"
	"testing"
)

// BenchmarkDecide measures one decision over a long history: a job with
// a100 and v100 workers reporting every 10 s, changing size every hour, for
// a day and for a week (what elasticd would keep in memory at most).
func BenchmarkDecide(b *testing.B) {
	for _, reports := range []int{8_640, 60_480} {
		b.Run(fmt.Sprintf("reports=%d", reports), func(b *testing.B) {
			s := newSim(heterogeneous(func(alloc map[GPUType]int) float64 {
				return 1 / (1 + 0.02*float64(totalWorkers(alloc)))
			}), "a100", "a100", "a100", "a100", "v100", "v100", "v100", "v100")
			const perHour = 360
			for hour := 0; len(s.history) < reports; hour++ {
				// Swing between 8 and 16 workers so many sizes are measured.
				if hour%16 < 8 {
					s.add([]GPUType{"a100", "v100"}[hour%2], 1)
				} else {
					s.remove(s.workers[len(s.workers)-1].Worker)
				}
				s.report(min(perHour, reports-len(s.history)), nil)
			}
			in := s.input(elasticJob(4, 32, 8,
				TypeOption{Type: "a100", PricePerGPUHour: 2.5}, TypeOption{Type: "v100", PricePerGPUHour: 0.9}), Settings{})
			if d := Decide(in); d.Action == Hold && len(d.Reason) == 0 {
				b.Fatal("no decision")
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				Decide(in)
			}
		})
	}
}
