//go:build integration

package jobsubmit_test

// The attacker's side of job_modify: alice, an ordinary user, changes her own jobs after
// submission with scontrol update, trying to undo what submission checked. Each refusal must
// leave the job exactly as it was (partition, QOS, requeue flag, GPU request, account, state),
// leave bob's job and the nodes alone, and say why: the plugin's message from Slurm 23.02 on
// (job_modify's err_msg), a Slurm error naming what was refused on 22.05.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/pools"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/bridge/testbed"
)

// jobFields is the part of `scontrol show job -o` an update could change.
var jobFields = []string{"JobState", "Partition", "QOS", "Requeue", "TresPerNode", "Account", "TimeLimit", "BatchFlag"}

func showJob(t *testing.T, c *testbed.Cluster, ctx context.Context, id string) map[string]string {
	t.Helper()
	out, err := c.Run(ctx, "scontrol", "show", "job", "-o", id)
	if err != nil {
		t.Fatalf("scontrol show job %s: %v\n%s", id, err, out)
	}
	all := map[string]string{}
	for _, word := range strings.Fields(string(out)) {
		if k, v, ok := strings.Cut(word, "="); ok {
			if _, seen := all[k]; !seen {
				all[k] = v
			}
		}
	}
	job := map[string]string{}
	for _, k := range jobFields {
		job[k] = all[k]
	}
	return job
}

// attack is one attacker's scene: alice's job under attack, bob's job beside it, and what the
// cluster looked like before.
type attack struct {
	t         *testing.T
	c         *testbed.Cluster
	ctx       context.Context
	release   slurm.Release
	bystander string
	before    map[string]string // bob's job
	drained   string            // sinfo -R before
	logStart  int64
}

func newAttack(t *testing.T) *attack {
	c, ctx := setup(t)
	release, err := c.Release(ctx)
	if err != nil {
		t.Fatal(err)
	}
	a := &attack{t: t, c: c, ctx: ctx, release: release, logStart: c.CtldLogSize(t)}
	// quotad would return a lent job that waits (and may lend one): it is stopped for the test,
	// after one sync of what it keeps in Slurm (the borrow QOS and the accounts' access to
	// them), which a testbed just brought up may not have yet.
	c.PauseDaemon(t, "quotad")
	if out, err := c.Daemon(ctx, "quotad", "sync"); err != nil {
		t.Fatalf("quotad sync: %v\n%s", err, out)
	}
	a.bystander, err = c.Submit(ctx, "bob", "--hold", "--job-name=attack-bystander", "--gres=gpu:a100:1", "--wrap", "true")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Cancel(a.bystander) })
	a.before = showJob(t, c, ctx, a.bystander)
	a.drained = a.sinfoReasons()
	t.Cleanup(a.assertNothingElseChanged)
	return a
}

func (a *attack) sinfoReasons() string {
	out, err := a.c.Run(a.ctx, "sinfo", "-R", "-h", "-o", "%N %E")
	if err != nil {
		a.t.Fatalf("sinfo -R: %v\n%s", err, out)
	}
	return string(out)
}

func (a *attack) assertNothingElseChanged() {
	if got := showJob(a.t, a.c, a.ctx, a.bystander); !equal(got, a.before) {
		a.t.Errorf("bob's job changed: %v, was %v", got, a.before)
	}
	if got := a.sinfoReasons(); got != a.drained {
		a.t.Errorf("nodes drained or down since the attack began:\n%s\nwas:\n%s", got, a.drained)
	}
	a.c.AssertNoneKilled(a.t, a.logStart)
}

func equal(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// submit is alice's job; it is cancelled when the test ends.
func (a *attack) submit(args ...string) string {
	a.t.Helper()
	id, err := a.c.Submit(a.ctx, "alice", args...)
	if err != nil {
		a.t.Fatal(err)
	}
	a.t.Cleanup(func() { a.c.Cancel(id) })
	return id
}

// update runs `scontrol update jobid=ID ARGS...` as user and returns its stderr.
func (a *attack) update(user, id string, args ...string) (string, error) {
	_, stderr, err := a.c.RunAsWithStderr(a.ctx, user, "scontrol", append([]string{"update", "jobid=" + id}, args...)...)
	return strings.TrimSpace(stderr), err
}

// refused asserts that alice's update of job id is refused: slurmctld's log has the plugin's
// refusal of kind code, the user reads the plugin's message (23.02 on) and slurmErr (every
// release: the errno the plugin returns), and the job is unchanged.
func (a *attack) refused(id string, args []string, code pools.Refusal, slurmErr string) {
	a.t.Helper()
	a.refusedAs(id, id, args, code, slurmErr)
}

// refusedAs is refused for an update that names job id as target (its SLUID, say).
func (a *attack) refusedAs(id, target string, args []string, code pools.Refusal, slurmErr string) {
	a.t.Helper()
	a.refusedBy("alice", id, target, args, code, slurmErr)
}

// refusedBy is refusedAs for an update by user.
func (a *attack) refusedBy(user, id, target string, args []string, code pools.Refusal, slurmErr string) {
	a.t.Helper()
	before := showJob(a.t, a.c, a.ctx, id)
	logStart := a.c.CtldLogSize(a.t)
	stderr, err := a.update(user, target, args...)
	if err == nil {
		a.t.Fatalf("%s's scontrol update %s of job %s was accepted; job now %v", user, strings.Join(args, " "), id, showJob(a.t, a.c, a.ctx, id))
	}
	a.t.Logf("scontrol update %s: %s", strings.Join(args, " "), stderr)
	if !strings.Contains(stderr, slurmErr) {
		a.t.Errorf("refusal says %q, want Slurm's %q", stderr, slurmErr)
	}
	if a.release.ModifyRefusalReachesUser() && !strings.Contains(stderr, "slurmbridge: ") {
		a.t.Errorf("Slurm %s: refusal says %q, want the plugin's message", a.release, stderr)
	}
	if log := a.c.CtldLogSince(a.t, logStart); !loggedRefusal(log, code) {
		a.t.Errorf("slurmctld.log lacks a refusal with code=%s:\n%s", code, log)
	}
	if after := showJob(a.t, a.c, a.ctx, id); !equal(after, before) {
		a.t.Errorf("job %s changed by a refused update: %v, was %v", id, after, before)
	}
}

// The hole the review found: a pending GPU job moved to the CPU pool by partition alone was
// accepted and then waited forever where no node has a GPU.
func TestAttackPartitionOnlyMoveOfAGPUJobToTheCPUPool(t *testing.T) {
	a := newAttack(t)
	id := a.submit("--hold", "--job-name=attack-cpu", "--gres=gpu:a100:1", "--wrap", "true")
	a.refused(id, []string{"partition=cpu"}, pools.RefusedNamedPools, "Invalid generic resource")
	if job := showJob(t, a.c, a.ctx, id); job["JobState"] != "PENDING" || job["Partition"] != "a100-spot,a100" {
		t.Fatalf("job after the refused move: %v, want PENDING in a100-spot,a100", job)
	}
	if a.release.ScontrolNamesJobsBySLUID() {
		out, err := a.c.Run(a.ctx, "scontrol", "-d", "show", "job", "-o", id) // -d: with the SLUID
		if err != nil {
			t.Fatalf("scontrol show job %s: %v\n%s", id, err, out)
		}
		sluid := ""
		for _, word := range strings.Fields(string(out)) {
			if v, ok := strings.CutPrefix(word, "SLUID="); ok {
				sluid = v
			}
		}
		if !strings.HasPrefix(sluid, "s") {
			t.Fatalf("Slurm %s: no SLUID for job %s in %s", a.release, id, out)
		}
		a.refusedAs(id, sluid, []string{"partition=cpu"}, pools.RefusedNamedPools, "Invalid generic resource")
	}
	// A list that still holds a pool that fits is narrowed to it, as on submission.
	if stderr, err := a.update("alice", id, "partition=cpu,a100"); err != nil {
		t.Fatalf("partition=cpu,a100 refused: %v %s", err, stderr)
	}
	if job := showJob(t, a.c, a.ctx, id); job["Partition"] != "a100" {
		t.Fatalf("partition after partition=cpu,a100 is %q, want a100", job["Partition"])
	}
}

// A job array is updated whole (jobid=N) or task by task (jobid=N_2, a task slurmctld already
// split off into a record of its own): either is judged with the job's GPU request. Raising
// its throttle is not the plugin's to refuse.
func TestAttackPartitionMoveOfAGPUJobArray(t *testing.T) {
	a := newAttack(t)
	id := a.submit("--hold", "--array=0-3", "--job-name=attack-array", "--gres=gpu:a100:1", "--wrap", "true")
	// Splitting a task off: a change of that task alone (here its time limit).
	if stderr, err := a.update("alice", id+"_2", "timelimit=7"); err != nil {
		t.Fatalf("time limit of task %s_2: %v %s", id, err, stderr)
	}
	for _, target := range []string{id, id + "_2"} {
		a.refused(target, []string{"partition=cpu"}, pools.RefusedNamedPools, "Invalid generic resource")
	}
	if stderr, err := a.update("alice", id, "arraytaskthrottle=1"); err != nil {
		t.Fatalf("arraytaskthrottle=1: %v %s", err, stderr)
	}
	out, err := a.c.Run(a.ctx, "squeue", "-h", "-r", "-j", id, "-o", "%i %P %T")
	if err != nil {
		t.Fatalf("squeue: %v\n%s", err, out)
	}
	tasks := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(tasks) != 4 {
		t.Fatalf("array %s has %d tasks, want 4:\n%s", id, len(tasks), out)
	}
	for _, task := range tasks {
		if f := strings.Fields(task); len(f) != 3 || f[1] != "a100-spot,a100" || f[2] != "PENDING" {
			t.Errorf("task after the refused moves: %q, want PENDING in a100-spot,a100", task)
		}
	}
}

// A GPU type that no pool the job is listed in has: the job would never start.
func TestAttackGPUTypeNoListedPoolHas(t *testing.T) {
	a := newAttack(t)
	id := a.submit("--hold", "--job-name=attack-type", "-p", "a100", "--gres=gpu:a100:1", "--wrap", "true")
	a.refused(id, []string{"gres=gpu:v100:1"}, pools.RefusedNamedPools, "Invalid generic resource")
	a.refused(id, []string{"gres=gpu:a100:8"}, pools.RefusedNamedPools, "Invalid generic resource")
}

// A job in a lending QOS must stay one Slurm can requeue: with Requeue=0 a reclaim of its
// GPUs would kill it. Pending or running, alice may not turn requeue off, nor move the lent job
// to another account.
func TestAttackRequeueOffOrAccountMoveOfALentJob(t *testing.T) {
	a := newAttack(t)
	// Lent as quotad lends: root moves the pending jobs into the borrow QOS (a user may not
	// submit there), and releases the one that is to run.
	pending := a.submit("--hold", "--requeue", "--job-name=attack-lent", "--gres=gpu:a100:1", "--wrap", "true")
	running := a.submit("--hold", "--requeue", "--job-name=attack-lent-run", "--gres=gpu:a100:1", "--wrap", "sleep 300")
	for _, id := range []string{pending, running} {
		if stderr, err := a.update("root", id, "qos=borrow-proj-a"); err != nil {
			t.Fatalf("root's lend of job %s: %v %s", id, err, stderr)
		}
	}
	if _, stderr, err := a.c.RunAsWithStderr(a.ctx, "root", "scontrol", "release", running); err != nil {
		t.Fatalf("scontrol release %s: %v %s", running, err, stderr)
	}
	if _, err := a.c.WaitState(a.ctx, running, "RUNNING"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{pending, running} {
		a.refused(id, []string{"requeue=0"}, pools.RefusedLentNoRequeue, "Invalid qos specification")
	}
	a.refused(pending, []string{"account=proj-b"}, pools.RefusedLentAccount, "Invalid account")
	if job := showJob(t, a.c, a.ctx, running); job["JobState"] != "RUNNING" || job["Requeue"] != "1" || job["QOS"] != "borrow-proj-a" {
		t.Fatalf("running lent job after the refusals: %v", job)
	}
	// Out of the lending QOS, the job's requeue flag is alice's to set.
	if stderr, err := a.update("alice", pending, "qos=guar-proj-a", "requeue=0"); err != nil {
		t.Fatalf("requeue=0 with a move to guar-proj-a refused: %v %s", err, stderr)
	}
	if job := showJob(t, a.c, a.ctx, pending); job["QOS"] != "guar-proj-a" || job["Requeue"] != "0" {
		t.Fatalf("job after qos=guar-proj-a requeue=0: %v", job)
	}
	// And back into a lending QOS it may not go, by alice's hand.
	a.refused(pending, []string{"qos=borrow-proj-a"}, pools.RefusedBorrowQuotadOnly, "Invalid qos specification")
}

// A lend checks the job as it is at that very moment: alice turns requeue off after quotad has
// read the queue, and quotad's move into the borrow QOS (root's, as the testbed's quotad runs)
// is refused, since Slurm would kill the job instead of requeueing it. Once lent, the job keeps
// the GPUs, nodes and partitions quotad lent for, where every lending limit let it: alice may
// not raise them, but she may move it back into her guarantee with more GPUs in one update.
func TestAttackRequeueOffBeforeALendAndMoreGPUsAfterIt(t *testing.T) {
	a := newAttack(t)
	id := a.submit("--hold", "--requeue", "--job-name=attack-race", "-p", "a100", "--gres=gpu:a100:1", "--wrap", "true")
	if stderr, err := a.update("alice", id, "requeue=0"); err != nil {
		t.Fatalf("alice's requeue=0 of her job, not lent: %v %s", err, stderr)
	}
	a.refusedBy("root", id, id, []string{"qos=borrow-proj-a"}, pools.RefusedBorrowNotRequeueable, "Invalid qos specification")
	if stderr, err := a.update("alice", id, "requeue=1"); err != nil {
		t.Fatalf("alice's requeue=1: %v %s", err, stderr)
	}
	if stderr, err := a.update("root", id, "qos=borrow-proj-a"); err != nil {
		t.Fatalf("root's lend of a job Slurm can requeue: %v %s", err, stderr)
	}
	for _, args := range [][]string{{"gres=gpu:a100:2"}, {"numnodes=2"}, {"partition=a100,a100-spot"}} {
		a.refused(id, args, pools.RefusedLentResources, "Invalid qos specification")
	}
	for _, u := range []struct {
		args []string
		want map[string]string
	}{
		{[]string{"timelimit=5"}, map[string]string{"QOS": "borrow-proj-a", "TimeLimit": "00:05:00"}},
		{[]string{"qos=guar-proj-a", "gres=gpu:a100:2"}, map[string]string{"QOS": "guar-proj-a"}},
	} {
		if stderr, err := a.update("alice", id, u.args...); err != nil {
			t.Fatalf("alice's scontrol update %s refused: %v %s", strings.Join(u.args, " "), err, stderr)
		}
		job := showJob(t, a.c, a.ctx, id)
		for k, v := range u.want {
			if job[k] != v {
				t.Errorf("after %s: %s=%q, want %q", strings.Join(u.args, " "), k, job[k], v)
			}
		}
	}
	if job := showJob(t, a.c, a.ctx, id); !strings.HasSuffix(strings.ReplaceAll(job["TresPerNode"], "=", ":"), ":2") {
		t.Errorf("after the move back with gres=gpu:a100:2: TresPerNode %q, want 2 a100", job["TresPerNode"])
	}
}

// What alice may do still works, and root (the testbed's quotad runs as root) keeps its rights.
func TestAttackLegitimateUpdatesAndAdminMovesStillWork(t *testing.T) {
	a := newAttack(t)
	id := a.submit("--hold", "--requeue", "--job-name=attack-legit", "-p", "a100", "--gres=gpu:a100:1", "--wrap", "true")
	for _, u := range []struct {
		user string
		args []string
		want map[string]string
	}{
		{"alice", []string{"partition=a100,a100-spot"}, map[string]string{"Partition": "a100,a100-spot"}},
		{"alice", []string{"timelimit=5"}, map[string]string{"TimeLimit": "00:05:00"}},
		{"alice", []string{"gres=gpu:a100:2"}, map[string]string{"TresPerNode": ""}}, // spelled per release; checked below
		{"alice", []string{"requeue=0"}, map[string]string{"Requeue": "0"}},          // not lent: alice's choice
		{"alice", []string{"requeue=1"}, map[string]string{"Requeue": "1"}},
		{"root", []string{"qos=borrow-proj-a"}, map[string]string{"QOS": "borrow-proj-a"}}, // quotad lends it
		{"root", []string{"requeue=0"}, map[string]string{"Requeue": "0"}},                 // an admin's call
		{"root", []string{"qos=guar-proj-a", "requeue=1"}, map[string]string{"QOS": "guar-proj-a", "Requeue": "1"}},
		{"root", []string{"partition=a100-spot", "gres=gpu:a100:1"}, map[string]string{"Partition": "a100-spot"}},
	} {
		stderr, err := a.update(u.user, id, u.args...)
		if err != nil {
			t.Fatalf("%s's scontrol update %s refused: %v %s", u.user, strings.Join(u.args, " "), err, stderr)
		}
		job := showJob(t, a.c, a.ctx, id)
		for k, v := range u.want {
			if k == "TresPerNode" {
				if !strings.Contains(job[k], "a100") || !strings.HasSuffix(strings.ReplaceAll(job[k], "=", ":"), ":2") {
					t.Errorf("after %s: TresPerNode %q, want 2 a100", strings.Join(u.args, " "), job[k])
				}
				continue
			}
			if job[k] != v {
				t.Errorf("after %s's %s: %s=%q, want %q", u.user, strings.Join(u.args, " "), k, job[k], v)
			}
		}
	}
	// Released, the job runs where it was sent at last.
	if _, err := a.c.Run(a.ctx, "scontrol", "release", id); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(a.ctx, testbed.Patience(time.Minute))
	defer cancel()
	if state, err := a.c.WaitState(ctx, id, "RUNNING", "COMPLETED"); err != nil {
		t.Fatalf("released job is %s: %v", state, err)
	}
}
