//go:build integration

package jobsubmit_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slurmbridge/slurmbridge/bridge/pools"
	"github.com/slurmbridge/slurmbridge/bridge/testbed"
)

// No component of a heterogeneous job may hold GPUs, through any route: Slurm preempts a
// hetjob only through its leader, so a GPU component quotad lent could not be reclaimed (bob's
// lent 4-a100 component kept alice's claim waiting on Resources), and on 26.05 such a component
// ran in guar-proj-b past its GPU limit. sbatch (a hetjob script), salloc and srun (`:`) are
// refused with code hetjob-gpus and a message that says what to do; a CPU-only hetjob still
// runs; an update that gives a component GPUs is refused.
func TestHeterogeneousJobsHoldNoGPUs(t *testing.T) {
	c, ctx := setup(t)
	work := testbed.SharedDir(t, "hetjob-it-", 0o755)
	script := func(name, second string) string {
		path := filepath.Join(work, name)
		body := "#!/bin/bash\n#SBATCH -p cpu -n 1 --job-name=pools-hetjob\n#SBATCH hetjob\n#SBATCH " + second + "\nsrun --het-group=1 true\n"
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	refused := func(what, stderr string, err error, logStart int64) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s accepted; want a refusal", what)
		}
		if log := c.CtldLogSince(t, logStart); !loggedRefusal(log, pools.RefusedHetJobGPUs) {
			t.Errorf("%s: slurmctld.log lacks a refusal with code=%s:\n%s", what, pools.RefusedHetJobGPUs, log)
		}
		if !strings.Contains(stderr, "slurmbridge: a heterogeneous job cannot hold GPUs") || !strings.Contains(stderr, "Invalid generic resource") {
			t.Errorf("%s said %q; want the plugin's message and Slurm's GRES error", what, stderr)
		}
		t.Logf("%s:\n%s", what, strings.TrimSpace(stderr))
	}

	for _, second := range []string{"-p a100 --gres=gpu:a100:4", "-p a100 --gpus=1", "--gres=gpu:1"} {
		logStart := c.CtldLogSize(t)
		id, msg, err := c.SubmitWithMessage(ctx, "bob", "--hold", script("gpu.sbatch", second))
		if err == nil {
			c.Cancel(id)
		}
		refused("sbatch of a hetjob whose second component has "+second, msg, err, logStart)
	}
	for _, cmd := range [][]string{
		{"salloc", "--no-shell", "-p", "cpu", "-n", "1", "-t", "1", ":", "-p", "a100", "--gres=gpu:a100:1", "-t", "1"},
		{"srun", "-p", "cpu", "-n", "1", "-t", "1", "true", ":", "-p", "a100", "--gres=gpu:a100:1", "-t", "1", "true"},
	} {
		logStart := c.CtldLogSize(t)
		_, stderr, err := c.RunAsWithStderr(ctx, "bob", cmd[0], cmd[1:]...)
		refused(strings.Join(cmd, " "), stderr, err, logStart)
	}

	// A CPU-only hetjob runs, the plugin routing each component.
	id, msg, err := c.SubmitWithMessage(ctx, "bob", "--hold", script("cpu.sbatch", "-p cpu -n 1"))
	if err != nil {
		t.Fatalf("a CPU-only hetjob refused: %v\n%s", err, msg)
	}
	t.Cleanup(func() { c.Cancel(id) })
	// bob may not give its second component GPUs afterwards, in a GPU pool.
	logStart := c.CtldLogSize(t)
	_, stderr, err := c.RunAsWithStderr(ctx, "bob", "scontrol", "update", "jobid="+id+"+1", "partition=a100", "gres=gpu:a100:1")
	if err == nil {
		t.Fatalf("bob gave a component of hetjob %s GPUs", id)
	}
	if log := c.CtldLogSince(t, logStart); !loggedRefusal(log, pools.RefusedHetJobGPUs) {
		t.Errorf("update of %s+1: slurmctld.log lacks a refusal with code=%s:\n%s", id, pools.RefusedHetJobGPUs, log)
	}
	t.Logf("scontrol update jobid=%s+1 partition=a100 gres=gpu:a100:1: %s", id, strings.TrimSpace(stderr))
	if _, stderr, err := c.RunAsWithStderr(ctx, "bob", "scontrol", "release", id); err != nil {
		t.Fatalf("scontrol release %s: %v %s", id, err, stderr)
	}
	if state, err := c.WaitState(ctx, id+"+0", "COMPLETED"); err != nil {
		t.Fatalf("the CPU-only hetjob %s did not complete: %s %v", id, state, err)
	}
}
