//go:build integration

package testbed

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/slurm"
)

// demoLimit is what the README promises for `make demo` once the testbed is up.
const demoLimit = 3 * time.Minute

// make demo's script (testbed/demo.sh) on the testbed: routing, a borrow, a reclaim that sacct
// shows as PREEMPTED and then running again, an elastic grow and the cluster page, each step
// checked by the script itself, in under three minutes, and none of its jobs left behind.
func TestDemoShowsEveryCapability(t *testing.T) {
	c := Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), demoLimit+2*time.Minute)
	defer cancel()
	var stderr strings.Builder
	r := slurm.ExecRunner{Env: mergeEnv(c.env, map[string]string{"TESTBED_DIR": c.Dir}), Stderr: &stderr}
	start := time.Now()
	out, err := r.Run(ctx, "bash", filepath.Join(repoRoot(), "testbed", "demo.sh"))
	took := time.Since(start)
	t.Logf("testbed/demo.sh took %s:\n%s", took.Round(time.Second), out)
	if err != nil {
		t.Fatalf("testbed/demo.sh: %v", err)
	}
	for i := 1; i <= 5; i++ {
		if !regexp.MustCompile(fmt.Sprintf(`(?m)^✔ \[%d/5 [^]]+\] \S`, i)).Match(out) {
			t.Errorf("no line saying what step %d/5 proved", i)
		}
	}
	if took > demoLimit {
		t.Errorf("the demo took %s, over %s", took.Round(time.Second), demoLimit)
	}
	rows, err := c.Slurm().QueueRows(ctx, slurm.QueueFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range rows {
		if strings.HasPrefix(row.Name, "demo-") || strings.HasPrefix(row.Name, "elastic-worker-") {
			t.Errorf("the demo left job %s (%s, %s) behind", row.ID, row.Name, row.State)
		}
	}
}
