package noderoom

import "testing"

func TestFits(t *testing.T) {
	node := Free{GPUs: map[string]int{"a100": 4, "t4": 2}, CPUs: 32, MemoryMB: 128000}
	for _, tc := range []struct {
		name  string
		free  Free
		shape Shape
		want  int
	}{
		{"GPUs bind", node, Shape{GPUs: []GPUCount{{"a100", 2}}, CPUs: 4, MemoryMB: 8000}, 2},
		{"CPUs bind", node, Shape{GPUs: []GPUCount{{"a100", 1}}, CPUs: 16}, 2},
		{"memory binds", node, Shape{GPUs: []GPUCount{{"a100", 1}}, CPUs: 1, MemoryMB: 64001}, 1},
		{"a type the node lacks", node, Shape{GPUs: []GPUCount{{"h100", 1}}, CPUs: 1}, 0},
		{"two types at once: the scarcer binds", node, Shape{GPUs: []GPUCount{{"a100", 1}, {"t4", 1}}, CPUs: 1}, 2},
		{"any type counts every free GPU", node, Shape{GPUs: []GPUCount{{AnyType, 2}}, CPUs: 1}, 3},
		{"any type counts untyped GPUs too", Free{GPUs: map[string]int{"": 3}, CPUs: 8}, Shape{GPUs: []GPUCount{{AnyType, 1}}, CPUs: 1}, 3},
		{"no CPU free: a job takes at least one", Free{GPUs: map[string]int{"a100": 4}}, Shape{GPUs: []GPUCount{{"a100", 1}}}, 0},
		{"a shape of no CPUs counts as one", node, Shape{GPUs: []GPUCount{{"t4", 1}}}, 2},
		{"a CPU-only shape", node, Shape{CPUs: 8, MemoryMB: 1000}, 4},
		{"negative free counts as none", Free{GPUs: map[string]int{"a100": -1}, CPUs: -4, MemoryMB: -1}, Shape{CPUs: 1}, 0},
		{"zero GPUs asked are not asked", node, Shape{GPUs: []GPUCount{{"h100", 0}}, CPUs: 16}, 2},
	} {
		if got := tc.free.Fits(tc.shape); got != tc.want {
			t.Errorf("%s: Fits = %d, want %d", tc.name, got, tc.want)
		}
		if got := tc.free.Holds(tc.shape); got != (tc.want > 0) {
			t.Errorf("%s: Holds = %v, want %v", tc.name, got, tc.want > 0)
		}
	}
}
