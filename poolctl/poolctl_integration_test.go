//go:build integration

package poolctl

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/bridge/testbed"
)

// runLive runs poolctl against the testbed's Slurm, as root.
func runLive(t *testing.T, c *testbed.Cluster, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	env := Env{Fetcher: slurm.Client{Runner: c.Runner()}, Out: &out, Err: &errOut}
	code := Run(ctx, append([]string{"poolctl"}, args...), env)
	return result{code, out.String(), errOut.String()}
}

func TestLiveValidateOfTheTestbedPoolsIsClean(t *testing.T) {
	c := testbed.Require(t)
	r := runLive(t, c, "validate", testbedPools)
	if r.code != 0 || r.out != testbedPools+": OK, 4 pools match the cluster\n" {
		t.Fatalf("exit %d, out %q, err %q", r.code, r.out, r.errOut)
	}
}

func TestLiveValidateNamesWrongGPUCountAndMissingPartition(t *testing.T) {
	c := testbed.Require(t)
	path := writeBroken(t,
		[2]string{"gpu_type: v100\n    price_per_gpu_hour: 1.5\n    node_count: 2\n    node: {gpus: 4,",
			"gpu_type: v100\n    price_per_gpu_hour: 1.5\n    node_count: 2\n    node: {gpus: 8, # v100\n     "},
		[2]string{"description: On-demand A100 nodes", "description: On-demand A100 nodes\n    partition: a100-typo"},
	)
	r := runLive(t, c, "validate", path)
	if r.code != 1 {
		t.Fatalf("exit %d, want 1; out:\n%s\nerr: %s", r.code, r.out, r.errOut)
	}
	testbed.MustContain(t, "validate output", r.out,
		path+":"+lineOf(t, path, "# v100")+": pool v100: nodes v100-1, v100-2 have 4 GPUs but node.gpus is 8",
		path+":"+lineOf(t, path, "partition: a100-typo")+": pool a100: partition a100-typo does not exist in the cluster",
	)
	testbed.MustContain(t, "stderr", r.errOut, path+": 2 problems")
}

func TestLiveStatusShowsPoolsAndAHeldJob(t *testing.T) {
	c := testbed.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Held, so it stays pending whatever else runs; it lists two pools, so it counts in both.
	id, msg, err := c.SubmitWithMessage(ctx, "alice", "--hold", "-p", "v100,a100-spot", "--gres=gpu:1",
		"-J", "poolctl-status", "--wrap", "true")
	if err != nil {
		t.Fatalf("sbatch: %v (%s)", err, msg)
	}
	t.Cleanup(func() { c.Cancel(id) })

	r := runLive(t, c, "--config", testbedPools, "status", "--json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.errOut)
	}
	var st Status
	if err := json.Unmarshal([]byte(r.out), &st); err != nil {
		t.Fatalf("%v in %s", err, r.out)
	}
	got := map[string]PoolStatus{}
	for _, p := range st.Pools {
		got[p.Name] = p
	}
	if len(st.Pools) != 4 || len(got) != 4 {
		t.Fatalf("pools: %+v", st.Pools)
	}
	for name, total := range map[string]uint64{"a100": 8, "a100-spot": 4, "v100": 8, "cpu": 0} {
		p := got[name]
		if !p.Found || p.GPUs.Total != total || p.GPUs.Allocated+p.GPUs.Free > total {
			t.Errorf("%s: found %v, gpus %+v; want %d in total", name, p.Found, p.GPUs, total)
		}
	}
	// Other tests may have jobs of their own pending; ours is at least one in each pool.
	for _, name := range []string{"v100", "a100-spot"} {
		if j := got[name].Jobs; j.Pending < 1 || j.PendingShared < 1 {
			t.Errorf("%s: jobs %+v; the held job %s (v100,a100-spot) is not counted", name, j, id)
		}
	}

	table := runLive(t, c, "--config", testbedPools, "status")
	testbed.MustContain(t, "status table", table.out, "a100-spot", "* includes pending jobs that list several pools")
	if state, err := c.JobState(ctx, id); err != nil || strings.TrimSpace(state) != "PENDING" {
		t.Fatalf("held job %s is %q (%v), the counts above assumed PENDING", id, state, err)
	}
}

// profile learn reads completed jobs from slurmdbd's job table (bridge/slurmdbd), the class from
// the submit line's --comment, and counts them per pool.
func TestLiveProfileLearnReadsTheJobTable(t *testing.T) {
	c := testbed.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), testbed.Patience(2*time.Minute))
	defer cancel()
	class := fmt.Sprintf("live%d", time.Now().UnixNano()%1_000_000)
	var ids []string
	for range 3 {
		id, err := c.Submit(ctx, "alice", "-p", "cpu", "--comment=class="+class, "--wrap", "sleep 1")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	t.Cleanup(func() { c.Cancel(ids...) })
	for _, id := range ids {
		if rec, err := c.Accounting(ctx, id); err != nil || rec.State != "COMPLETED" {
			t.Fatalf("job %s: %+v, %v", id, rec, err)
		}
	}
	r := runLive(t, c, "--config", testbedPools, "profile", "learn", "--since", "10m", "--min-jobs", "3",
		"--cluster", c.Vars["SLURMBRIDGE_CLUSTER"], "--db-addr", c.Vars["SLURMBRIDGE_DB_ADDR"], "--db-user", c.Vars["SLURMBRIDGE_DB_USER"],
		"--db-password-file", c.Vars["SLURMBRIDGE_DB_PASSWORD_FILE"], "--acct-db", c.Vars["SLURMBRIDGE_DB_NAME"])
	if r.code != 0 {
		t.Fatalf("exit %d, out %q, err %q", r.code, r.out, r.errOut)
	}
	for line := range strings.Lines(r.out) {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "cpu" && f[1] == class {
			if f[2] != "3" {
				t.Fatalf("pool cpu, class %s: %s jobs, want 3:\n%s", class, f[2], r.out)
			}
			return
		}
	}
	t.Fatalf("no row for pool cpu, class %s:\n%s", class, r.out)
}
