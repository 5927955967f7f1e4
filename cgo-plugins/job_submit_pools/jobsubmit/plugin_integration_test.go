//go:build integration

package jobsubmit_test

// These tests drive the real job_submit_pools.so inside the testbed's slurmctld through sbatch,
// srun, salloc and scontrol, as the testbed's users, with slurm-conf/testbed/pools.yaml
// (policy cheapest: a100-spot, then a100 and v100 at equal cost per unit of work). quotad may
// run on the testbed (slurm-conf/testbed/quotas.yaml: proj-a and proj-b 4 a100, proj-c 2 v100),
// so the jobs under test stay within their project's quota, and the load that fills pools is
// submitted by root, whose account has no quota.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/pools"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/bridge/testbed"
	"github.com/slurmbridge/slurmbridge/cgo-plugins/job_submit_pools/jobsubmit"
)

func setup(t *testing.T) (*testbed.Cluster, context.Context) {
	t.Helper()
	c := testbed.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	conf, err := c.Slurm().ShowConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(conf.Get("JobSubmitPlugins"), "pools") {
		t.Fatalf("testbed slurmctld runs without JobSubmitPlugins=pools (was bin/job_submit_pools.so built before `make testbed-up`?)")
	}
	return c, ctx
}

// Held jobs stay PENDING, so the partition list the plugin wrote can be read back.
func TestPluginRoutesPendingJobsToPools(t *testing.T) {
	c, ctx := setup(t)
	cases := []struct {
		name          string
		args          []string
		wantPartition string
		wantMessage   string
	}{
		{"cpu job to the default CPU pool", []string{"--wrap", "true"}, "cpu", "job sent to pool cpu"},
		// From 23.11 -c puts cpu:N (24.05 on: cpu=N) beside any GPUs in tres_per_task.
		{"cpu job with -c 4 to the default CPU pool", []string{"-c", "4", "--wrap", "true"}, "cpu", "job sent to pool cpu"},
		{"typed GPU job with -c 4", []string{"-c", "4", "--gres=gpu:a100:1", "--wrap", "true"}, "a100-spot,a100", "a100-spot,a100"},
		{"--gpus-per-task with -c 2", []string{"--gpus-per-task=1", "-c", "2", "-n", "2", "--wrap", "true"}, "a100-spot,a100,v100", "a100-spot"},
		{"typed GPU job to a100 pools, spot first", []string{"--gres=gpu:a100:1", "--wrap", "true"}, "a100-spot,a100", "a100-spot,a100"},
		{"--gpus=N of any type to every GPU pool", []string{"--gpus=2", "--wrap", "true"}, "a100-spot,a100,v100", "a100-spot,a100,v100"},
		{"--gpus-per-node with type", []string{"--gpus-per-node=v100:2", "--wrap", "true"}, "v100", "pool v100"},
		{"--gpus-per-task", []string{"--gpus-per-task=1", "-n", "2", "--wrap", "true"}, "a100-spot,a100,v100", "a100-spot"},
		{"more GPUs per node than spot nodes hold but fits over 2 nodes", []string{"--gres=gpu:a100:4", "-N", "2", "--wrap", "true"}, "a100", "pool a100"},
		{"named partition kept", []string{"-p", "v100", "--gres=gpu:v100:1", "--wrap", "true"}, "v100", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--hold", "--job-name=pools-route"}, tc.args...)
			id, msg, err := c.SubmitWithMessage(ctx, "alice", args...)
			if err != nil {
				t.Fatalf("sbatch %v: %v", tc.args, err)
			}
			t.Cleanup(func() { c.Cancel(id) })
			got, err := c.Partition(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.wantPartition {
				t.Errorf("partition = %q, want %q", got, tc.wantPartition)
			}
			if tc.wantMessage == "" && strings.Contains(msg, "slurmbridge") {
				t.Errorf("sbatch said %q for a job that named its pool", msg)
			}
			if tc.wantMessage != "" && !strings.Contains(msg, tc.wantMessage) {
				t.Errorf("sbatch said %q, want it to mention %q", msg, tc.wantMessage)
			}
		})
	}
}

// loggedRefusal says whether slurmctld's log holds a refusal by the plugin of kind code: its
// line ends with code=KIND.
func loggedRefusal(log string, code pools.Refusal) bool {
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, " refused: ") && strings.HasSuffix(strings.TrimSpace(line), " code="+string(code)) {
			return true
		}
	}
	return false
}

// Each refusal is logged with its kind, and sbatch prints the plugin's message, then Slurm's
// error. The message's words (which pool, what to do) are bridge/pools' to word and test.
func TestPluginRejectsImpossibleRequestsWithUsefulMessage(t *testing.T) {
	c, ctx := setup(t)
	cases := []struct {
		name string
		args []string
		code pools.Refusal
	}{
		{"GPU job to the CPU pool", []string{"-p", "cpu", "--gpus=1"}, pools.RefusedNamedPools},
		{"GPU type the pool lacks", []string{"-p", "a100", "--gres=gpu:v100:1"}, pools.RefusedNamedPools},
		{"more GPUs per node than any node has", []string{"-p", "v100", "--gpus-per-node=8"}, pools.RefusedNamedPools},
		{"unknown GPU type", []string{"--gres=gpu:h100:1"}, pools.RefusedNoGPUPool},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--hold", "--job-name=pools-reject"}, tc.args...)
			args = append(args, "--wrap", "true")
			logStart := c.CtldLogSize(t)
			id, msg, err := c.SubmitWithMessage(ctx, "bob", args...)
			if err == nil {
				c.Cancel(id)
				t.Fatalf("job %s accepted; want a refusal", id)
			}
			if log := c.CtldLogSince(t, logStart); !loggedRefusal(log, tc.code) {
				t.Errorf("slurmctld.log lacks a refusal with code=%s:\n%s", tc.code, log)
			}
			if !strings.Contains(msg, "slurmbridge: ") {
				t.Errorf("sbatch said %q; want the plugin's message", msg)
			}
			if !strings.Contains(msg, "Invalid generic resource") {
				t.Errorf("sbatch said %q; want Slurm's GRES error after ours", msg)
			}
		})
	}
}

// A routed GPU job really runs, in the cheapest pool, and is accounted there.
func TestRoutedGPUJobRunsInCheapestPool(t *testing.T) {
	c, ctx := setup(t)
	id, err := c.Submit(ctx, "bob", "--job-name=pools-run", "--gres=gpu:a100:1", "--wrap", "test \"$SLURM_GPUS_ON_NODE\" = 1")
	if err != nil {
		t.Fatal(err)
	}
	if state, err := c.WaitState(ctx, id, "COMPLETED"); err != nil {
		t.Fatalf("%v (state %s)", err, state)
	}
	rec, err := c.Accounting(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Partition != "a100-spot" || rec.Account != "proj-b" || rec.TRES("gres/gpu:a100") != "1" {
		t.Fatalf("accounted as %+v, want proj-b in a100-spot with one a100", rec)
	}
}

// Spot full: Slurm starts the job in the on-demand fallback listed after it. That is the
// availability-aware choice, made by Slurm itself from the list the plugin wrote.
func TestFullSpotPoolFallsBackToOnDemand(t *testing.T) {
	c, ctx := setup(t)
	filler, err := c.Submit(ctx, "root", "--job-name=pools-fill", "-p", "a100-spot", "--gres=gpu:a100:4", "--wrap", "sleep 60")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Cancel(filler) })
	if _, err := c.WaitState(ctx, filler, "RUNNING"); err != nil {
		t.Fatal(err)
	}
	id, err := c.Submit(ctx, "bob", "--job-name=pools-fallback", "--gres=gpu:a100:1", "--wrap", "true")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitState(ctx, id, "COMPLETED"); err != nil {
		t.Fatal(err)
	}
	rec, err := c.Accounting(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Partition != "a100" {
		t.Fatalf("ran in %q, want the on-demand fallback a100 while a100-spot is full", rec.Partition)
	}
}

// srun and salloc go through the same plugin as sbatch.
func TestPluginRoutesInteractiveJobs(t *testing.T) {
	c, ctx := setup(t)
	// srun runs on the node; salloc runs its command here, inside the allocation's environment.
	for _, cmd := range [][]string{
		{"srun", "--job-name=pools-srun", "--gpus=1", "-t", "1", "printenv", "SLURMD_NODENAME"},
		{"salloc", "--job-name=pools-salloc", "--gpus=1", "-t", "1", "printenv", "SLURM_JOB_NODELIST"},
	} {
		out, stderr, err := c.RunAsWithStderr(ctx, "alice", cmd[0], cmd[1:]...)
		if err != nil {
			t.Fatalf("%s: %v", cmd[0], err)
		}
		if !strings.Contains(stderr, "slurmbridge: job sent to pools") {
			t.Errorf("%s said %q; want the plugin's routing message", cmd[0], stderr)
		}
		// SLURM_JOB_PARTITION holds the whole list; the node says which pool ran it. Which GPU
		// pool depends on what the previous job's node is still doing: Slurm's choice.
		if node := strings.TrimSpace(string(out)); !strings.HasPrefix(node, "a100") && !strings.HasPrefix(node, "v100") {
			t.Errorf("%s ran on %q, want a GPU node", cmd[0], node)
		}
	}
}

// job_modify applies the same rules to a pending job's new partition and GPU request.
func TestPluginChecksUpdatesOfPendingJobs(t *testing.T) {
	c, ctx := setup(t)
	id, err := c.Submit(ctx, "alice", "--hold", "--job-name=pools-modify", "--gres=gpu:a100:1", "--wrap", "true")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Cancel(id) })

	stderr, err := c.UpdateJobAs(ctx, "alice", id, slurm.JobUpdate{Partition: "cpu", Gres: "gpu:a100:1"})
	if err == nil {
		t.Fatalf("moving a GPU job to the CPU pool was accepted")
	}
	if got, _ := c.Partition(ctx, id); got != "a100-spot,a100" {
		t.Errorf("partition after refused update = %q, want it unchanged", got)
	}
	t.Logf("refusal: %s", strings.TrimSpace(stderr))
	// job_modify has an err_msg from 23.02 on: the user reads why, not only a bare errno.
	release, err := c.Release(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if release.ModifyRefusalReachesUser() && !strings.Contains(stderr, "pool cpu cannot run this job") {
		t.Errorf("Slurm %s: refusal says %q, want the plugin's reason", release, stderr)
	}

	if _, err := c.UpdateJobAs(ctx, "alice", id, slurm.JobUpdate{Partition: "v100", Gres: "gpu:v100:2"}); err != nil {
		t.Fatalf("a valid update was refused: %v", err)
	}
	if got, _ := c.Partition(ctx, id); got != "v100" {
		t.Errorf("partition after valid update = %q, want v100", got)
	}
}

// Moving a pending a100 job to the CPU pool without restating its GPUs: the plugin refuses it
// when it can read the job's record (TestAttackPartitionOnlyMoveOfAGPUJobToTheCPUPool). Where it
// cannot (a release without a job_record layout), Slurm itself must never run the job there;
// this pins that either way: the update is refused, or the job stays pending.
func TestPartitionOnlyUpdateOfAGPUJobNeverRunsItOnCPUs(t *testing.T) {
	c, ctx := setup(t)
	id, err := c.Submit(ctx, "alice", "--hold", "--job-name=pools-modify-part", "--gres=gpu:a100:1", "--wrap", "true")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Cancel(id) })
	stderr, err := c.UpdateJobAs(ctx, "alice", id, slurm.JobUpdate{Partition: "cpu"})
	if err != nil {
		t.Logf("Slurm refused the update: %s", strings.TrimSpace(stderr))
		if got, _ := c.Partition(ctx, id); got != "a100-spot,a100" {
			t.Errorf("partition after refused update = %q, want it unchanged", got)
		}
		return
	}
	if got, _ := c.Partition(ctx, id); got != "cpu" {
		t.Fatalf("update accepted but partition = %q", got)
	}
	if _, err := c.Run(ctx, "scontrol", "release", id); err != nil {
		t.Fatal(err)
	}
	// Two scheduling passes at the testbed's bf_interval of 5 s.
	time.Sleep(12 * time.Second)
	row, err := c.Slurm().Queue(ctx, slurm.QueueRead{Fields: slurm.SummaryFields, JobIDs: []string{id}, AllStates: true})
	if err != nil || len(row) != 1 {
		t.Fatalf("squeue of job %s: %v %v", id, row, err)
	}
	if row[0].StateName() != "PENDING" {
		t.Fatalf("a100 job moved to the CPU pool is %s on %q, want it PENDING", row[0].StateName(), row[0].Nodes)
	}
	t.Logf("Slurm accepted the update; the job pends in cpu with reason %s", row[0].StateReason)
}

// With every a100 busy (spot and on-demand), a new any-type GPU job starts in v100 at once
// instead of waiting behind the cheaper pools.
func TestBusyPoolsDoNotDelayAJobThatFitsElsewhere(t *testing.T) {
	c, ctx := setup(t)
	var fillers []string
	for _, args := range [][]string{
		{"-p", "a100-spot", "--gres=gpu:a100:4"},
		{"-p", "a100", "-N", "2", "--gres=gpu:a100:4"},
	} {
		args = append(args, "--job-name=pools-busy-fill", "--wrap", "sleep 120")
		id, err := c.Submit(ctx, "root", args...)
		if err != nil {
			t.Fatal(err)
		}
		fillers = append(fillers, id)
	}
	t.Cleanup(func() { c.Cancel(fillers...) })
	for _, id := range fillers {
		if _, err := c.WaitState(ctx, id, "RUNNING"); err != nil {
			t.Fatal(err)
		}
	}
	id, err := c.Submit(ctx, "carol", "--job-name=pools-busy", "--gres=gpu:1", "--wrap", "sleep 1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Cancel(id) })
	waitCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := c.WaitState(waitCtx, id, "RUNNING", "COMPLETED"); err != nil {
		t.Fatalf("job did not start while v100 was free: %v", err)
	}
	node, err := c.Nodes(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(node, "v100") {
		t.Fatalf("job ran on %q, want a v100 node", node)
	}
}

// A broken pools.yaml never blocks submissions: the plugin keeps routing with the last good
// config, slurmctld stays up, its log names the problem, and the fixed file is loaded again.
// Where reconfigure starts a new slurmctld (23.11 on), the new process has no good config to
// keep: jobs pass unrouted until the file is fixed, and are never refused for it.
func TestBrokenConfigIsReportedAndNeverBlocksJobs(t *testing.T) {
	c, ctx := setup(t)
	release, err := c.Release(ctx)
	if err != nil {
		t.Fatal(err)
	}
	freshProcess := release.ReconfigureRestarts()
	path := filepath.Join(c.Dir, "etc", "pools.yaml")
	logPath := filepath.Join(c.Dir, "log", "slurmctld.log")
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	replace := func(content []byte) {
		t.Helper()
		if err := os.WriteFile(path+".new", content, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".new", path); err != nil {
			t.Fatal(err)
		}
		if err := c.Slurm().Reconfigure(ctx); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { replace(good) })
	submit := func() string {
		t.Helper()
		id, msg, err := c.SubmitWithMessage(ctx, "alice", "--hold", "--job-name=pools-config", "--gres=gpu:a100:1", "--wrap", "true")
		if err != nil {
			t.Fatalf("a valid job was refused: %v", err)
		}
		c.Cancel(id)
		return msg
	}
	routed := func(msg string) bool { return strings.Contains(msg, " pools a100-spot,a100") }
	// Submissions go on while the plugin rechecks the file; wait for the log line it writes.
	// lastGoodKept: every job is routed meanwhile (the plugin kept its last good config).
	submitUntilLogged := func(want string, lastGoodKept bool) {
		t.Helper()
		deadline := time.Now().Add(3 * jobsubmit.RecheckInterval)
		for {
			if msg := submit(); lastGoodKept && !routed(msg) {
				t.Fatalf("job not routed with the last good config: %q", msg)
			}
			log, err := os.ReadFile(logPath)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(log), want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("slurmctld.log lacks %q after %v", want, 3*jobsubmit.RecheckInterval)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}

	marker := fmt.Sprintf("colour%d", time.Now().UnixNano())
	replace([]byte("default_cpu_pool: cpu\npools:\n  - name: cpu\n    " + marker + ": blue\n"))
	submitUntilLogged(marker, !freshProcess)
	if err := c.Slurm().Ping(ctx); err != nil {
		t.Fatalf("slurmctld down after a broken config: %v", err)
	}
	if msg := submit(); freshProcess && routed(msg) {
		t.Fatalf("slurmctld %s restarted on a broken pools.yaml still routes: %q", release, msg)
	}

	// A fixed file with a visible change is picked up.
	fixed := strings.Replace(string(good), "policy: cheapest", "policy: default-first", 1)
	if fixed == string(good) {
		t.Fatal("testbed pools.yaml no longer sets policy: cheapest; update this test")
	}
	replace([]byte(fixed))
	submitUntilLogged("(policy default-first,", !freshProcess)
}

// A burst of submissions from 8 parallel submitters, malformed GPU strings among them, leaves
// slurmctld up and every accepted job in its queue.
func TestSubmissionBurstLosesNothing(t *testing.T) {
	c, _ := setup(t)
	// Its own deadline: setup's two minutes are for one request, not 5000 on shared cores.
	ctx, cancel := context.WithTimeout(context.Background(), testbed.Patience(8*time.Minute))
	defer cancel()
	const total, submitters = 5000, 8
	name := fmt.Sprintf("pools-burst-%d", time.Now().UnixNano())
	t.Cleanup(func() {
		cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
		defer ccancel()
		_ = c.Slurm().CancelNamed(cctx, name)
	})
	variants := [][]string{
		{"--wrap", "true"},
		{"--gres=gpu:a100:1", "--wrap", "true"},
		{"--gpus=2", "--wrap", "true"},
		{"-p", "cpu", "--gpus=1", "--wrap", "true"},                // refused by the plugin
		{"--gres=gpu:a100:many", "--wrap", "true"},                 // malformed: refused by sbatch or Slurm
		{"--gres=gpu::1", "--wrap", "true"},                        // refused by 22.05; one GPU of any type from 24.11
		{"--gpus=v100:0x10", "--wrap", "true"},                     // malformed
		{"--comment", "class=;;,,=", "--gpus=1", "--wrap", "true"}, // odd comment, valid job
	}
	// Where each valid variant goes (testbed pools.yaml); the others are refused, but for
	// gpu::1, which only some releases refuse.
	wantPartition := map[int]string{0: "cpu", 1: "a100-spot,a100", 2: "a100-spot,a100,v100", 5: "a100-spot,a100,v100", 7: "a100-spot,a100,v100"}
	users := []string{"alice", "bob", "carol"}
	logFrom := c.CtldLogSize(t)
	var (
		mu       sync.Mutex
		accepted = map[string]int{} // job id: variant
		refused  int
		next     atomic.Int64
		wg       sync.WaitGroup
	)
	for w := 0; w < submitters; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= total || ctx.Err() != nil {
					return
				}
				args := append([]string{"--hold", "--job-name=" + name}, variants[i%int64(len(variants))]...)
				id, _, err := c.SubmitWithMessage(ctx, users[int(i)%len(users)], args...)
				mu.Lock()
				if err == nil {
					accepted[id] = int(i % int64(len(variants)))
				} else {
					refused++
				}
				mu.Unlock()
			}
		}(w)
	}
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatalf("burst did not finish: %v", ctx.Err())
	}
	if err := c.Slurm().Ping(ctx); err != nil {
		t.Fatalf("slurmctld down after the burst: %v", err)
	}
	rows, err := c.Slurm().Queue(ctx, slurm.QueueRead{Fields: slurm.SummaryFields, Names: []string{name}, AllStates: true})
	if err != nil {
		t.Fatal(err)
	}
	inQueue := map[string]string{} // job id: partition
	for _, r := range rows {
		inQueue[r.PrintedID] = r.Partition
	}
	// Most of the burst repeats a few requests, which the plugin answers from its decision
	// cache: each answer must still be the one its own request gets.
	for id, v := range accepted {
		part, ok := inQueue[id]
		switch want, valid := wantPartition[v]; {
		case !ok:
			t.Errorf("accepted job %s is not in squeue", id)
		case !valid:
			t.Errorf("job %s of variant %q was accepted into %s; want it refused", id, variants[v], part)
		case part != want:
			t.Errorf("job %s of variant %q is in %s, want %s", id, variants[v], part, want)
		}
	}
	if hits, windows := cacheAnswers(t, c, logFrom); windows == 0 || hits == 0 {
		t.Errorf("slurmctld.log: %d windows of submissions, %d answered from the decision cache; want some of each", windows, hits)
	} else {
		t.Logf("the decision cache answered %d submissions in %d windows of %d", hits, windows, 1000)
	}
	// 4 of the 8 variants are valid (5 from 24.11); the others must have been refused, not half-accepted.
	if len(accepted) < total/2 || refused < total*3/8 {
		t.Errorf("accepted %d, refused %d of %d: want every valid job accepted and the bad ones refused", len(accepted), refused, total)
	}
	t.Logf("%d submissions: %d accepted (all in squeue), %d refused", total, len(accepted), refused)
}

// The plugin answers a request it decided before from its decision cache, without entering Go.
// A changed pools.yaml, which its watcher picks up without a reconfigure (slurmctld keeps
// running on every release), changes the answer for that very request at once.
func TestRepeatedRequestFollowsAChangedConfig(t *testing.T) {
	c, ctx := setup(t)
	path := filepath.Join(c.Dir, "etc", "pools.yaml")
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// v100 at a third of its price becomes the cheapest pool for an untyped request.
	v100 := strings.Index(string(good), "- name: v100")
	price := strings.Index(string(good)[max(v100, 0):], "price_per_gpu_hour: 1.5")
	if v100 < 0 || price < 0 {
		t.Fatal("testbed pools.yaml no longer prices v100 at 1.5; update this test")
	}
	cheapV100 := string(good[:v100+price]) + "price_per_gpu_hour: 0.5" + string(good[v100+price+len("price_per_gpu_hour: 1.5"):])
	replace := func(content string) {
		t.Helper()
		from := c.CtldLogSize(t)
		if err := os.WriteFile(path+".new", []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".new", path); err != nil {
			t.Fatal(err)
		}
		waitLogged(t, c, from, "loaded 4 pools from", 3*jobsubmit.RecheckInterval)
	}
	submit := func(want string) {
		t.Helper()
		for i := 0; i < 3; i++ {
			id, msg, err := c.SubmitWithMessage(ctx, "alice", "--hold", "--job-name=pools-cache", "--gpus=2", "--wrap", "true")
			if err != nil {
				t.Fatal(err)
			}
			c.Cancel(id)
			if !strings.Contains(msg, "job sent to pools "+want+";") {
				t.Fatalf("submission %d told the user %q; want pools %s", i+1, msg, want)
			}
		}
	}
	submit("a100-spot,a100,v100")
	t.Cleanup(func() { replace(string(good)) })
	replace(cheapV100)
	submit("v100,a100-spot,a100")
}

func waitLogged(t *testing.T, c *testbed.Cluster, offset int64, want string, within time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(within); !strings.Contains(c.CtldLogSince(t, offset), want); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("slurmctld.log lacks %q after %v", want, within)
		}
	}
}

// cacheAnswers sums the plugin's per-window lines written after offset: how many submissions
// the decision cache answered, in how many windows.
func cacheAnswers(t *testing.T, c *testbed.Cluster, offset int64) (hits, windows int) {
	t.Helper()
	for _, line := range strings.Split(c.CtldLogSince(t, offset), "\n") {
		i := strings.Index(line, "; ")
		if !strings.Contains(line, "job_submit/pools: submissions ") || i < 0 {
			continue
		}
		var n int
		if _, err := fmt.Sscanf(line[i+2:], "%d answered from the decision cache", &n); err != nil {
			t.Fatalf("unreadable window line %q: %v", line, err)
		}
		hits += n
		windows++
	}
	return hits, windows
}
