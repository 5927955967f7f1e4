package pools

import "testing"

// The builders of this package's own tests, for its external tests (package pools_test), which
// read the shared captures of poolstest: poolstest imports pools, so only an external test may
// import it.
var (
	TestbedConfig = testbedConfig
	MustNew       = mustNew
	GPUPool       = gpuPool
)

// ProblemAt is an expected problem: its line and a substring of its message.
type ProblemAt = problemAt

func CheckProblems(t *testing.T, got Problems, want []ProblemAt) {
	t.Helper()
	checkProblems(t, got, want)
}
