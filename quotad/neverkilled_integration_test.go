//go:build integration

// Jobs Slurm cannot requeue never borrow. Slurm requeues a preempted job only when it is a
// batch job with Requeue=1 and kills any other ("preempted JobId=N had to be killed" in
// slurmctld.log, and salloc says "Job allocation N has been revoked"). Two reports led here:
// an salloc over quota that quotad lent and alice's claim then killed, and an
// `sbatch --qos=borrow --no-requeue` that ran borrowed and was killed the same way.
package quotad_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/pools"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/bridge/testbed"
	"github.com/slurmbridge/slurmbridge/quotad/policy"
)

// ctldLogSize is where slurmctld.log ends now; assertNoneKilled reads what follows.
func ctldLogSize(t *testing.T, c *testbed.Cluster) int64 {
	t.Helper()
	return c.CtldLogSize(t)
}

// assertNoneKilled fails when slurmctld logged a preempted job it had to kill since offset.
func assertNoneKilled(t *testing.T, c *testbed.Cluster, offset int64) {
	t.Helper()
	c.AssertNoneKilled(t, offset)
}

// assertNotPreempted fails when sacct shows a PREEMPTED record of any of ids.
func assertNotPreempted(t *testing.T, c *testbed.Cluster, ids []string) {
	t.Helper()
	if p := preemptedIn(t, c, ids); len(p) > 0 {
		t.Errorf("jobs %v were preempted", p)
	}
}

// background is a command started by startAs; done is closed when it has ended.
type background struct {
	out  *syncBuffer
	done chan struct{}
}

func (b *background) ended() bool {
	select {
	case <-b.done:
		return true
	default:
		return false
	}
}

// startAs starts a command as a testbed user in their home directory, in the background (salloc
// waits for its allocation); what it prints goes to out. The test's end stops it: salloc then
// gives its allocation back.
func startAs(t *testing.T, c *testbed.Cluster, username, name string, args ...string) *background {
	t.Helper()
	cmd, err := c.UserCommand(username, name, args...)
	if err != nil {
		t.Fatal(err)
	}
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	// Its own process group, so that the end of the test stops salloc's command too.
	cmd.SysProcAttr.Setpgid = true
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	b := &background{out: out, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(b.done) }()
	t.Cleanup(func() {
		pgid := cmd.Process.Pid
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-b.done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-b.done
		}
	})
	return b
}

// syncBuffer is a bytes.Buffer that the command writes and the test reads at once.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// drainAtEnd cancels the jobs when the test ends and waits until slurmctld lists none of them
// (completing ones still hold their GPUs), so the next test starts on an idle cluster. Call it
// after the submissions: clean-ups run last first.
func drainAtEnd(t *testing.T, c *testbed.Cluster, ids *[]string) {
	t.Cleanup(func() {
		c.Cancel(*ids...)
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			rows, err := c.Slurm().Queue(ctx, slurm.QueueRead{Fields: slurm.SummaryFields, JobIDs: *ids})
			cancel()
			if err == nil && len(rows) == 0 {
				return
			}
			time.Sleep(500 * time.Millisecond)
		}
		t.Logf("jobs %v still listed 60s after their cancel", *ids)
	})
}

// jobNamed is the id of the one live job of that name, or "" while there is none.
func jobNamed(t *testing.T, c *testbed.Cluster, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rows, err := c.Slurm().Queue(ctx, slurm.QueueRead{Fields: slurm.SummaryFields, Names: []string{name}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) > 1 {
		t.Fatalf("%d jobs named %s: %v", len(rows), name, rows)
	}
	if len(rows) == 0 {
		return ""
	}
	return rows[0].PrintedID
}

// The first report: bob's 4 guaranteed a100 are busy and he asks salloc for 4 more on one
// node. quotad must not lend it (Slurm would kill it when alice claims her GPUs): it waits in
// bob's guaranteed QOS, explain says why and what to do, alice's claim kills nothing, and the
// allocation starts in the guarantee once bob's own jobs end.
func TestSallocOverQuotaIsNeverLent(t *testing.T) {
	c := testbed.Require(t)
	ensureQuotad(t, c)
	logStart := ctldLogSize(t, c)
	bob := submitN(t, c, "bob", 4)
	waitQueue(t, c, bob, "bob's 4 in-quota jobs running", 20*time.Second, exactly(4, bob, running))

	name := fmt.Sprintf("nk-salloc-%d", time.Now().UnixNano())
	salloc := startAs(t, c, "bob", "salloc", "-A", "proj-b", "-p", "a100", "-N1", "--gres=gpu:a100:4", "-t", "10", "-J", name, "sleep", "300")
	var id string
	waitFor(t, "bob's salloc queued", 20*time.Second, func() bool { id = jobNamed(t, c, name); return id != "" })
	all := append([]string{id}, bob...)
	drainAtEnd(t, c, &all)

	// Three cycles of the test's quotad, with 4 a100 idle in partition a100 that it would lend.
	time.Sleep(6 * time.Second)
	r := row(t, c, id)
	if r.state != "PENDING" || r.qos != "guar-proj-b" {
		t.Fatalf("bob's salloc %s is %s in %s, want PENDING in guar-proj-b (never lent); salloc said:\n%s", id, r.state, r.qos, salloc.out)
	}
	explain := wantCode(t, c, id, policy.CodeNotRequeueable).Explanation
	t.Logf("quotactl explain %s:\n%s", id, explain)
	// The words themselves are checked here: what to do, and no promise Slurm does not keep.
	if !strings.Contains(explain, "sbatch --requeue") || strings.Contains(explain, "never cancelled") {
		t.Errorf("explain %s does not say what to do, or promises what Slurm does not do:\n%s", id, explain)
	}

	// alice claims her guarantee: it starts on idle GPUs, nothing is preempted or killed.
	alice := submitN(t, c, "alice", 4)
	all = append(all, alice...)
	waitQueue(t, c, alice, "alice's 4 in-quota jobs running", 30*time.Second, exactly(4, alice, running))
	if r := row(t, c, id); r.state != "PENDING" || r.qos != "guar-proj-b" {
		t.Fatalf("bob's salloc %s is %s in %s after alice's claim, want PENDING in guar-proj-b", id, r.state, r.qos)
	}

	// bob's own jobs end: his salloc runs in his guarantee, where no one can reclaim it.
	c.Cancel(append(bob, alice...)...)
	waitQueue(t, c, []string{id}, "bob's salloc running in guar-proj-b", 40*time.Second, exactly(1, []string{id}, runningIn("guar-proj-b")))
	t.Logf("salloc %s runs in guar-proj-b; salloc said:\n%s", id, salloc.out)
	if got := salloc.out.String(); strings.Contains(got, "revoked") || salloc.ended() {
		t.Fatalf("salloc ended or lost its allocation:\n%s", got)
	}
	assertNotPreempted(t, c, append([]string{id}, append(bob, alice...)...))
	assertNoneKilled(t, c, logStart)
}

// The second report: a job sent straight into the borrow QOS that Slurm could not requeue is
// refused at submission, with why and what to do. A user's job sent straight into the borrow QOS
// or one of its tiers is refused even with --requeue: quotad lends only what every project's
// lending limit leaves idle, which no QOS limit can say (a user's 8 jobs there all started past
// proj-a's lending limit of 1). A user cannot move a pending job into borrow with scontrol either.
func TestBorrowQOSTakesOnlyJobsSlurmCanRequeue(t *testing.T) {
	c := testbed.Require(t)
	ensureQuotad(t, c)
	logStart := ctldLogSize(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	release, err := c.Release(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// What to do is checked in the words: telling it is what the refusal is for.
	const todo = "Submit it without --qos: quotad lends idle GPUs to batch jobs Slurm can requeue"

	offset := ctldLogSize(t, c)
	id, msg, err := c.SubmitWithMessage(ctx, "bob", "--qos=borrow-proj-b", "--no-requeue", "-p", "a100", "--gres=gpu:a100:1", "--wrap", "sleep 300")
	if err == nil {
		c.Cancel(id)
		t.Fatalf("sbatch --qos=borrow-proj-b --no-requeue accepted as job %s", id)
	}
	t.Logf("sbatch --qos=borrow-proj-b --no-requeue:\n%s", msg)
	assertRefused(t, c, offset, refusedBorrow, msg)
	for _, want := range []string{todo, "Invalid qos specification"} {
		if !strings.Contains(msg, want) {
			t.Errorf("sbatch --no-requeue refusal lacks %q:\n%s", want, msg)
		}
	}
	for _, tool := range []string{"salloc", "srun"} {
		offset := ctldLogSize(t, c)
		_, stderr, err := c.RunAsWithStderr(ctx, "bob", tool, "--qos=borrow-proj-b", "-A", "proj-b", "-p", "a100", "--gres=gpu:a100:1", "-t", "1", "-J", "nk-"+tool, "true")
		if err == nil {
			t.Errorf("%s --qos=borrow-proj-b ran", tool)
		}
		t.Logf("%s --qos=borrow-proj-b:\n%s", tool, stderr)
		assertRefused(t, c, offset, refusedBorrow, stderr)
		if !strings.Contains(stderr, todo) {
			t.Errorf("%s refusal lacks %q:\n%s", tool, todo, stderr)
		}
	}

	// Over his quota, bob's batch job with --requeue straight into the borrow QOS, a size tier
	// or the protected QOS is refused, with -A and without; the same job without --qos is lent.
	bob := submitN(t, c, "bob", 4)
	all := slices.Clone(bob)
	drainAtEnd(t, c, &all)
	waitQueue(t, c, bob, "bob's 4 in-quota jobs running", 20*time.Second, exactly(4, bob, running))
	for _, tc := range []struct {
		qos  string
		code pools.Refusal
	}{
		{"borrow-proj-b", pools.RefusedBorrowQuotadOnly},
		{"borrow-proj-b-g1", pools.RefusedBorrowTierQuotadOnly},
		{"borrow-proj-b-hipri", pools.RefusedBorrowTierQuotadOnly},
	} {
		for _, args := range [][]string{{"-A", "proj-b"}, {}} {
			offset := ctldLogSize(t, c)
			sbatch := append([]string{"--qos=" + tc.qos, "--requeue", "-p", "a100", "--gres=gpu:a100:1"}, args...)
			tid, msg, err := c.SubmitWithMessage(ctx, "bob", append(sbatch, "--wrap", "sleep 300")...)
			if err == nil {
				c.Cancel(tid)
				t.Fatalf("sbatch %s accepted as job %s", strings.Join(sbatch, " "), tid)
			}
			t.Logf("sbatch %s:\n%s", strings.Join(sbatch, " "), msg)
			assertRefused(t, c, offset, tc.code, msg)
			if !strings.Contains(msg, "Invalid qos specification") {
				t.Errorf("refusal of --qos=%s is not Slurm's invalid QOS:\n%s", tc.qos, msg)
			}
		}
	}
	lent := submitN(t, c, "bob", 1, "--requeue")
	all = append(all, lent...)
	waitQueue(t, c, lent, "bob's --requeue job lent by quotad into borrow-proj-b", 20*time.Second, exactly(1, lent, runningIn("borrow-proj-b")))

	// Nor the elastic QOS: elasticd submits its workers in the guarantee and lends them itself.
	offset = ctldLogSize(t, c)
	id, msg, err = c.SubmitWithMessage(ctx, "bob", "--qos=elastic-proj-b", "--requeue", "-p", "a100", "--gres=gpu:a100:1", "--wrap", "sleep 300")
	if err == nil {
		c.Cancel(id)
		t.Fatalf("sbatch --qos=elastic-proj-b --requeue accepted as job %s", id)
	}
	assertRefused(t, c, offset, pools.RefusedElasticElasticdOnly, msg)

	// A user's own update into borrow: the plugin cannot see whether Slurm could requeue the job.
	held := submitN(t, c, "bob", 1, "--hold")[0]
	all = append(all, held)
	var stderrBuf strings.Builder
	asBob, err := c.SlurmAs("bob", &stderrBuf)
	if err != nil {
		t.Fatal(err)
	}
	offset = ctldLogSize(t, c)
	failed, err := asBob.UpdateJobsQOS(ctx, []string{held}, "borrow-proj-b")
	if err == nil && failed[held] != "" {
		err = errors.New(failed[held])
	}
	stderr := stderrBuf.String()
	t.Logf("scontrol update jobid=%s qos=borrow-proj-b as bob: %v\n%s", held, err, stderr)
	if err == nil {
		t.Fatalf("bob moved his job %s into borrow-proj-b himself", held)
	}
	if r := row(t, c, held); r.qos != "guar-proj-b" {
		t.Errorf("job %s is in %s after a refused update, want guar-proj-b", held, r.qos)
	}
	// job_modify has an err_msg from 23.02 on; 22.05 logs the reason only.
	told := stderr
	if !release.ModifyRefusalReachesUser() {
		told = "slurmbridge: " // nothing reaches the user to check
	}
	assertRefused(t, c, offset, pools.RefusedBorrowQuotadOnly, told)
	assertNoneKilled(t, c, logStart)
}
