package testbed

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// MustRun runs a command as root against the testbed (Run) and returns what it printed on
// stdout; a failure fails the test with the command's stderr. ctx bounds it (without a deadline,
// the adapter's 30 s). The quotad and elasticd tests run quotactl this way, each with the binary
// it means.
func (c *Cluster) MustRun(ctx context.Context, t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := c.Run(ctx, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	return string(out)
}

// MustContain marks the test failed, and goes on, for each of wants that text lacks; what
// names the text in the message ("doctor output", "stderr"). The doctor and poolctl tests,
// unit and integration, check their reports with it.
func MustContain(t testing.TB, what, text string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(text, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, text)
		}
	}
}
