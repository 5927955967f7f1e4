// Package stats holds the small summaries that several components report: elasticd's straggler
// policy, poolctl's learned speeds and the benchmarks all take the median of what they measured.
package stats

import "slices"

// Number is what Median summarises: measurements (float64) and durations (time.Duration).
type Number interface {
	~int | ~int32 | ~int64 | ~uint32 | ~uint64 | ~float32 | ~float64
}

// Median is the middle of values, or the mean of the two middle ones when there is an even
// number of them (for integer types such as time.Duration that mean is truncated towards zero);
// it is 0 for no values. values is left as it was: Median sorts a copy.
func Median[T Number](values []T) T {
	if len(values) == 0 {
		return 0
	}
	s := slices.Clone(values)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
