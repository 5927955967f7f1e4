package python

import (
	"strings"
	"testing"
)

func TestFailuresGivesEachFailedTestsException(t *testing.T) {
	bar, dash := strings.Repeat("=", 70), strings.Repeat("-", 70)
	report := "test_a ... ok\ntest_b ... FAIL\n\n" + bar + "\nFAIL: test_b (t.T.test_b)\n" + dash +
		"\nTraceback (most recent call last):\n  File \"t.py\", line 3, in test_b\n    self.fail(x)\n" +
		"AssertionError: no world of 2 after world 1 within 60s\n\n" + bar + "\nERROR: test_c (t.T.test_c)\n" + dash +
		"\nTraceback (most recent call last):\n  File \"t.py\", line 9\nKeyError: 'gen'\n\n" + dash + "\nRan 3 tests in 1s\n\nFAILED (failures=1, errors=1)\n"
	got := failures(report)
	want := []string{
		"FAIL: test_b (t.T.test_b): AssertionError: no world of 2 after world 1 within 60s",
		"ERROR: test_c (t.T.test_c): KeyError: 'gen'",
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("failures:\n got %q\nwant %q", got, want)
	}
	if got := failures("test_a ... ok\n\n" + dash + "\nRan 1 test in 0s\n\nOK\n"); len(got) != 0 {
		t.Fatalf("a passing report gave %q", got)
	}
}
