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
	start := time.Now()
	out, err := runDemo(ctx, c)
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
	rows, err := c.Slurm().Queue(ctx, slurm.QueueRead{Fields: slurm.SummaryFields})
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range rows {
		if strings.HasPrefix(row.Name, "demo-") || strings.HasPrefix(row.Name, "elastic-worker-") {
			t.Errorf("the demo left job %s (%s, %s) behind", row.PrintedID, row.Name, row.StateName())
		}
	}
}

// A demo that cannot show a step says so and fails: here elasticd is not running.
func TestDemoFailsLoudly(t *testing.T) {
	c := Require(t)
	c.PauseDaemon(t, "elasticd")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := runDemo(ctx, c)
	const want = `demo: FAILED in step "checking the testbed": elasticd does not run on the testbed`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("the demo without elasticd: %v, want an error saying %q; it printed:\n%s", err, want, out)
	}
	if strings.Contains(string(out), "✔") {
		t.Errorf("the demo claimed a step without elasticd:\n%s", out)
	}
}

// runDemo runs testbed/demo.sh on the testbed c as root, as make demo does.
func runDemo(ctx context.Context, c *Cluster) ([]byte, error) {
	r := slurm.ExecRunner{Env: mergeEnv(c.env, map[string]string{"TESTBED_DIR": c.Dir})}
	return r.Run(ctx, "bash", filepath.Join(repoRoot(), "testbed", "demo.sh"))
}
