package stats

import (
	"slices"
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	tests := []struct {
		name   string
		values []float64
		want   float64
	}{
		{"none", nil, 0},
		{"one", []float64{7}, 7},
		{"odd count, unsorted", []float64{9, 1, 5}, 5},
		{"even count takes the mean of the middle two", []float64{4, 1, 3, 2}, 2.5},
		{"repeated values", []float64{2, 2, 2, 9}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.values)
			if got := Median(in); got != tt.want {
				t.Errorf("Median(%v) = %v, want %v", tt.values, got, tt.want)
			}
			if !slices.Equal(in, tt.values) {
				t.Errorf("Median reordered its input: %v, was %v", in, tt.values)
			}
		})
	}
}

// poolctl's learned speeds are medians of run times: an even count truncates like Duration
// arithmetic does.
func TestMedianOfDurations(t *testing.T) {
	ds := []time.Duration{3 * time.Second, time.Second, 2 * time.Second, 4*time.Second + 1}
	if got, want := Median(ds), 2500*time.Millisecond; got != want {
		t.Errorf("Median = %v, want %v", got, want)
	}
	if got, want := Median([]time.Duration{1, 2}), time.Duration(1); got != want {
		t.Errorf("Median(1ns, 2ns) = %v, want %v (truncated)", got, want)
	}
}
