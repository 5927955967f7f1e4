//go:build integration

package attacks

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/slurm"
)

// Jobs Slurm could not requeue never enter a lending QOS, where a reclaim would kill them:
// alice's --no-requeue batch job naming a borrow or elastic QOS (alone or in a list), her
// salloc into one, and her own pending job moved into one by scontrol update, are all refused
// by the job_submit plugin. bob cannot submit into alice's project.
func TestAttackLendingQOSAndForeignAccount(t *testing.T) {
	a := begin(t)
	ctx := ctxFor(t, 2*time.Minute)
	held, running := a.victims(ctx, t)
	own := a.submit(ctx, t, "alice", "-p", "a100", "--gres=gpu:a100:1", "--hold", "-t", "10", "--job-name=attack-own", "--wrap", "true")
	w := a.c.CaptureWorld(ctx, t, []string{held, running, own}, nil)
	before := a.jobsOf(ctx, t, "alice", "bob")

	requeue := []string{"requeue"}
	for _, qos := range []string{"borrow-proj-a", "elastic-proj-a", "normal,borrow-proj-a"} {
		args := []string{"--parsable", "-p", "a100", "--gres=gpu:a100:1", "--no-requeue", "--qos=" + qos, "-t", "5", "--job-name=attack-qos", "-o", "/dev/null", "--wrap", "true"}
		a.refused(ctx, t, "alice", requeue, "sbatch", args...)
	}
	a.refused(ctx, t, "alice", requeue, "salloc", "--no-shell", "-p", "a100", "--gres=gpu:a100:1", "--qos=borrow-proj-a", "-t", "5", "--job-name=attack-salloc")
	// 22.05's job_modify has no message for the user: scontrol says only the error code's text.
	lending := []string{"only quotad moves jobs into QOS", "Invalid qos specification"}
	a.refused(ctx, t, "alice", lending, "scontrol", "update", "jobid="+own, "qos=borrow-proj-a")
	a.refused(ctx, t, "alice", lending, "scontrol", "update", "jobid="+own, "qos=elastic-proj-a")
	a.refused(ctx, t, "bob", []string{"invalid account"}, "sbatch", "--parsable", "-A", "proj-a", "-p", "cpu", "-t", "5", "--job-name=attack-account", "-o", "/dev/null", "--wrap", "true")
	a.refused(ctx, t, "bob", []string{"invalid account"}, "salloc", "--no-shell", "-A", "proj-a", "-p", "cpu", "-t", "5", "--job-name=attack-account")

	if after := a.jobsOf(ctx, t, "alice", "bob"); after != before {
		t.Errorf("a refused request left a job behind:\n%s\nwas\n%s", after, before)
	}
	w.AssertUnchanged(ctx, t, a.c)
}

// jobsOf lists the users' jobs (id, name, state) as squeue shows them, for "nothing new".
func (a *attack) jobsOf(ctx context.Context, t *testing.T, users ...string) string {
	t.Helper()
	out, err := a.c.Run(ctx, "squeue", "-h", "-u", strings.Join(users, ","), "-o", "%i %j %T")
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// alice, from her shell and from inside a job of hers, cannot change, hold, release, requeue,
// cancel or signal bob's jobs: Slurm refuses each, and bob's jobs are as they were.
func TestAttackUpdateAndCancelAnotherUsersJob(t *testing.T) {
	a := begin(t)
	ctx := ctxFor(t, 3*time.Minute)
	held, running := a.victims(ctx, t)
	w := a.c.CaptureWorld(ctx, t, []string{held, running}, nil)

	// 22.05 calls the job_submit plugin before it checks who owns the job (job_mgr.c
	// _update_job), and its job_modify has no message: a QOS or GPU change meets the plugin's
	// refusal first, as Slurm's plain "Invalid qos specification" or "Invalid generic resource
	// (gres) specification".
	denied := []string{"denied", "not permitted", "Invalid user", "Invalid qos specification", "Invalid generic resource"}
	for _, id := range []string{held, running} {
		for _, change := range [][]string{
			{"partition=a100"}, {"qos=borrow-proj-b"}, {"requeue=0"}, {"timelimit=1"}, {"priority=1"}, {"nice=10000"},
			{"account=proj-a"}, {"gres=gpu:a100:4"}, {"numnodes=2"},
		} {
			a.refused(ctx, t, "alice", denied, "scontrol", append([]string{"update", "jobid=" + id}, change...)...)
		}
		a.refused(ctx, t, "alice", denied, "scontrol", "hold", id)
		a.refused(ctx, t, "alice", denied, "scontrol", "requeue", id)
		a.refused(ctx, t, "alice", denied, "scancel", id)
		a.refused(ctx, t, "alice", denied, "scancel", "--signal=KILL", id)
	}
	a.refused(ctx, t, "alice", denied, "scontrol", "release", held)
	a.refused(ctx, t, "alice", denied, "scontrol", "suspend", running)

	// The same from inside alice's job: a job's credentials give it no more than its owner.
	dir := sharedDir(t)
	out := filepath.Join(dir, "attack.out")
	script := filepath.Join(dir, "attack.sh")
	body := "#!/bin/bash\n" +
		"try() { \"$@\" 2>&1; echo \"rc=$? $*\"; }\n" +
		"try scontrol update jobid=" + held + " partition=a100\n" +
		"try scontrol update jobid=" + held + " qos=borrow-proj-b\n" +
		"try scontrol release " + held + "\n" +
		"try scontrol update jobid=" + running + " timelimit=1\n" +
		"try scontrol requeue " + running + "\n" +
		"try scancel " + running + "\n" +
		"try scancel --signal=KILL " + held + "\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	job := a.submit(ctx, t, "alice", "-p", "cpu", "-t", "5", "--job-name=attack-from-job", "-o", out, script)
	if _, err := a.c.WaitState(ctx, job, "COMPLETED"); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	tries := 0
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "rc="); ok {
			tries++
			if strings.HasPrefix(rest, "0 ") {
				t.Errorf("from alice's job, %q succeeded:\n%s", rest[2:], data)
			}
		}
	}
	if tries != 7 || !containsAny(string(data), denied) {
		t.Errorf("alice's job ran %d of 7 attempts, or none was refused as denied:\n%s", tries, data)
	}
	w.AssertUnchanged(ctx, t, a.c)
}

// lentJob submits alice's one-GPU a100 jobs, with --requeue, one more than her guarantee, and
// waits until quotad has lent one of them (its QOS is her borrow QOS) and it runs; it returns
// that job.
func (a *attack) lentJob(ctx context.Context, t *testing.T) string {
	t.Helper()
	for range 5 {
		a.submit(ctx, t, "alice", "-p", "a100", "--gres=gpu:a100:1", "--requeue", "-t", "10", "--job-name=attack-lent", "--wrap", "sleep 600")
	}
	for {
		rows, err := a.c.Slurm().Queue(ctx, slurm.QueueRead{Fields: slurm.SummaryFields, Names: []string{"attack-lent"}})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if r.QOS == "borrow-proj-a" && r.StateName() == "RUNNING" {
				return r.PrintedID
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("quotad lent none of alice's jobs: %+v", rows)
		case <-time.After(time.Second):
		}
	}
}

// A job quotad lent GPUs to must stay one Slurm can requeue: were its owner to turn requeue
// off, the reclaim of those GPUs would kill it. alice's update is refused and the job keeps
// its flag.
func TestAttackRequeueOffOnALentJob(t *testing.T) {
	a := begin(t)
	ctx := ctxFor(t, 2*time.Minute)
	held, running := a.victims(ctx, t)
	lent := a.lentJob(ctx, t)
	w := a.c.CaptureWorld(ctx, t, []string{held, running, lent}, nil)
	why := []string{"requeue", "borrow"}
	release, err := a.c.Release(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !release.ModifyRefusalReachesUser() {
		// 22.05's job_modify has no message: the user sees the errno of the lending QOS refusal.
		why = []string{"Invalid qos specification"}
	}
	a.refused(ctx, t, "alice", why, "scontrol", "update", "jobid="+lent, "requeue=0")
	w.AssertUnchanged(ctx, t, a.c)
}

// Any user may pass a variable to a job with sbatch --export=ALL,NAME=VALUE. Slurm then sets
// SLURM_GET_USER_ENV=1, and slurmd loads the user's login environment in a child cloned into
// new PID and mount namespaces; where slurmd may not make namespaces (an unprivileged
// container, as the release containers run it) the slurmd of 24.11 and 26.05 dies on "fatal: clone:
// Operation not permitted" and the node goes down. alice's job must run and every node stay up.
// When a node does go down, the test brings it back for the tests after it.
func TestAttackExportedVariableKeepsNodeUp(t *testing.T) {
	a := begin(t)
	ctx := ctxFor(t, 3*time.Minute)
	held, running := a.victims(ctx, t)
	w := a.c.CaptureWorld(ctx, t, []string{held, running}, nil)
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if now := a.c.CaptureWorld(cctx, t, nil, nil); len(now.UnwellNodes()) > 0 {
			t.Logf("bringing back %v", now.UnwellNodes())
			if err := a.c.Up(cctx); err != nil {
				t.Errorf("testbed up after the attack: %v", err)
			}
		}
	})
	job := a.submit(ctx, t, "alice", "-p", "cpu", "-t", "5", "--job-name=attack-export", "--export=ALL,ATTACK=1", "--wrap", "test \"$ATTACK\" = 1")
	// On an idle CPU node a job of `test` ends in seconds; slurmctld retries one whose node died.
	if state, err := a.c.WaitState(ctxFor(t, 45*time.Second), job, "COMPLETED"); err != nil {
		t.Fatalf("alice's job with --export=ALL,ATTACK=1 did not complete: %s: %v (did a slurmd die? see its slurmd-NODE.log)", state, err)
	}
	// slurmctld notices a dead slurmd only after SlurmdTimeout (60 s): ask the node itself.
	nodes, err := a.c.Nodes(ctx, job)
	if err != nil || nodes == "" {
		t.Fatalf("job %s ran on no node: %v", job, err)
	}
	check := a.submit(ctx, t, "alice", "-p", "cpu", "-w", nodes, "-t", "5", "--job-name=attack-export-after", "--wrap", "true")
	if state, err := a.c.WaitState(ctxFor(t, 30*time.Second), check, "COMPLETED"); err != nil {
		t.Errorf("a job on %s after the attack: %s: %v (slurmd-%s.log says why)", nodes, state, err, nodes)
	}
	w.AssertUnchanged(ctx, t, a.c)
}
