//go:build integration

// Scenario tests of quotad acting only on what is true: sub-accounts count in their project's
// guarantee, users with their own QOS list borrow like the others, and jobs that cannot start
// (held, dependent) keep nothing in the borrow QOS.
package quotad_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/bridge/testbed"
	"github.com/slurmbridge/slurmbridge/quotad/policy"
)

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// sacctmgrRun runs sacctmgr -i ARGS as root against the testbed.
func sacctmgrRun(t *testing.T, c *testbed.Cluster, args ...string) {
	t.Helper()
	if out, err := c.Run(ctxFor(t, 30*time.Second), "sacctmgr", append([]string{"-i"}, args...)...); err != nil {
		t.Fatalf("sacctmgr %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// addSubAccount creates account name under parent, with user in it, and removes both when
// the test ends (after its jobs are cancelled: Cleanup runs last-in first-out).
func addSubAccount(t *testing.T, c *testbed.Cluster, name, parent, user string, extra ...string) {
	t.Helper()
	cluster := c.Vars["SLURMBRIDGE_CLUSTER"]
	// A leftover of an interrupted run would make "add" fail; start clean.
	_, _ = c.Run(ctxFor(t, 30*time.Second), "sacctmgr", "-i", "delete", "user", user, "where", "account="+name, "cluster="+cluster)
	_, _ = c.Run(ctxFor(t, 30*time.Second), "sacctmgr", "-i", "delete", "account", name, "cluster="+cluster)
	sacctmgrRun(t, c, append([]string{"add", "account", name, "parent=" + parent, "cluster=" + cluster, "description=sub-account of " + parent, "organization=slurmbridge"}, extra...)...)
	sacctmgrRun(t, c, "add", "user", user, "account="+name, "cluster="+cluster)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		// sacctmgr refuses to delete an association with jobs still known to slurmctld.
		for ctx.Err() == nil {
			rows, _ := c.Slurm().Queue(ctx, slurm.QueueRead{Fields: slurm.SummaryFields, Users: []string{user}})
			if len(rows) == 0 {
				break
			}
			time.Sleep(time.Second)
		}
		_, _ = c.Run(ctx, "sacctmgr", "-i", "delete", "user", user, "where", "account="+name, "cluster="+cluster)
		_, _ = c.Run(ctx, "sacctmgr", "-i", "delete", "account", name, "cluster="+cluster)
	})
}

// submitAs is submitN with the job's own arguments: one a100 in partition a100.
func submitAs(t *testing.T, c *testbed.Cluster, user string, extra ...string) string {
	t.Helper()
	args := append([]string{"-p", "a100", "--gres=gpu:a100:1"}, extra...)
	id, err := c.Submit(ctxFor(t, 30*time.Second), user, append(args, "--wrap", "sleep 600")...)
	if err != nil {
		t.Fatalf("sbatch as %s %v: %v", user, extra, err)
	}
	t.Cleanup(func() { c.Cancel(id) })
	return id
}

// sacctQOS is the QOS and account sacct records for each job (its latest record).
func sacctQOS(t *testing.T, c *testbed.Cluster, ids []string) map[string]string {
	t.Helper()
	recs, err := c.Slurm().SacctJobs(ctxFor(t, 10*time.Second), slurm.SacctFilter{JobIDs: ids}, "JobID", "QOS", "Account")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, r := range recs {
		out[r["JobID"]] = r["QOS"] + "/" + r["Account"]
	}
	return out
}

// A sub-account inherits its project's QOS: its jobs run in the project's guaranteed QOS and
// fill its guarantee, so the project's own job over quota is lent instead of waiting for room
// that Slurm does not give; the sub-account's own over-quota job borrows as the project's.
// A sub-account with its own QOS list is brought into the project's by quotad's sync.
func TestSubAccountCountsInProjectGuarantee(t *testing.T) {
	c := testbed.Require(t)
	ensureQuotad(t, c)
	addSubAccount(t, c, "team-a1", "proj-a", "carol")
	addSubAccount(t, c, "team-a2", "proj-a", "bob", "qos=normal", "defaultqos=normal")

	// carol's two jobs in the sub-account take 2 of proj-a's 4 guaranteed a100.
	sub := []string{submitAs(t, c, "carol", "-A", "team-a1"), submitAs(t, c, "carol", "-A", "team-a1")}
	waitQueue(t, c, sub, "carol's 2 team-a1 jobs running in guar-proj-a", 20*time.Second, exactly(2, sub, runningIn("guar-proj-a")))
	// alice's 4: 2 fit what is left of the guarantee, 2 are over it and must be lent.
	alice := submitN(t, c, "alice", 4)
	waitLent(t, c, alice, "guar-proj-a", 2, "borrow-proj-a", 2, 30*time.Second)
	// carol's third team-a1 job is over proj-a's guarantee too and borrows.
	third := submitAs(t, c, "carol", "-A", "team-a1")
	waitQueue(t, c, []string{third}, "carol's third team-a1 job lent and running", 30*time.Second,
		exactly(1, []string{third}, runningIn("borrow-proj-a")))
	wantCode(t, c, third, runsBorrowed...)
	// One in quota starts when the sub-account's guaranteed jobs end.
	c.Cancel(sub...)
	late := submitN(t, c, "alice", 1)[0]
	waitQueue(t, c, []string{late}, "alice's new job running within the guarantee", 30*time.Second,
		exactly(1, []string{late}, runningIn("guar-proj-a")))

	// slurmdbd learns a just-started job's QOS a moment later (22.05's sacct shows "Unknown"
	// until then): wait for every record to name one.
	var got map[string]string
	waitFor(t, "sacct naming each job's QOS", 20*time.Second, func() bool {
		got = sacctQOS(t, c, append(append([]string{third, late}, alice...), sub...))
		for _, v := range got {
			if strings.HasPrefix(v, "Unknown/") || strings.HasPrefix(v, "/") {
				return false
			}
		}
		return true
	})
	if got[third] != "borrow-proj-a/team-a1" || got[late] != "guar-proj-a/proj-a" || got[sub[0]] != "guar-proj-a/team-a1" {
		t.Errorf("sacct QOS/account: %v", got)
	}
	nBorrow := 0
	for _, id := range alice {
		if got[id] == "borrow-proj-a/proj-a" {
			nBorrow++
		}
	}
	if nBorrow != 2 {
		t.Errorf("sacct has %d of alice's first 4 jobs in borrow-proj-a, want 2: %v", nBorrow, got)
	}

	// team-a2 was created with its own QOS list (normal): quotad's sync gives it proj-a's.
	waitFor(t, "team-a2's association synced to guar-proj-a", 30*time.Second, func() bool {
		assocs, err := c.Slurm().Associations(ctxFor(t, 10*time.Second), slurm.AssociationFilter{Accounts: []string{"team-a2"}})
		if err != nil || len(assocs) == 0 {
			return false
		}
		for _, a := range assocs {
			if a.DefaultQOS != "guar-proj-a" {
				return false
			}
		}
		return true
	})
	assertNoneKilled(t, c, 0)
}

// A held or dependent job in the borrow QOS keeps no idle GPUs promised: quotad returns it to
// its guaranteed QOS. Released, the held job is over quota and is lent again, and runs.
func TestHeldBorrowerIsReturned(t *testing.T) {
	c := testbed.Require(t)
	ensureQuotad(t, c)
	bob := submitN(t, c, "bob", 4)
	waitQueue(t, c, bob, "bob's 4 in-quota jobs running", 20*time.Second, exactly(4, bob, running))
	held := submitAs(t, c, "bob", "--hold")
	dependent := submitAs(t, c, "bob", "--dependency=afterok:"+bob[0])
	// As if both had been lent before they were held or made to wait: an administrator moves
	// them into the borrow QOS (a pending job's QOS may be changed).
	for _, id := range []string{held, dependent} {
		if out, err := c.Run(ctxFor(t, 10*time.Second), "scontrol", "update", "jobid="+id, "qos=borrow-proj-b"); err != nil {
			t.Fatalf("moving job %s to borrow-proj-b: %v\n%s", id, err, out)
		}
	}
	waitQueue(t, c, []string{held, dependent}, "the held and the dependent job returned to guar-proj-b, still pending", 30*time.Second,
		exactly(2, []string{held, dependent}, both(pending, inQOS("guar-proj-b"))))
	r := row(t, c, held)
	if r.reason != "JobHeldUser" {
		t.Errorf("held job's reason is %q, want JobHeldUser", r.reason)
	}
	wantCode(t, c, held, policy.CodeNotStartable)
	// Held in its guaranteed QOS, it is not lent either.
	time.Sleep(5 * time.Second) // two cycles of the test's quotad
	if r := row(t, c, held); r.qos != "guar-proj-b" || r.state != "PENDING" {
		t.Fatalf("held job is %s in %s, want PENDING in guar-proj-b", r.state, r.qos)
	}

	// Released, it is over quota (QOSGrpGRES), so it is lent and runs.
	if out, err := c.RunAs(ctxFor(t, 10*time.Second), "bob", "scontrol", "release", held); err != nil {
		t.Fatalf("scontrol release %s: %v\n%s", held, err, out)
	}
	waitQueue(t, c, []string{held}, "released job lent and running", 30*time.Second, exactly(1, []string{held}, runningIn("borrow-proj-b")))
	if got := sacctQOS(t, c, []string{held, dependent}); got[held] != "borrow-proj-b/proj-b" || got[dependent] != "guar-proj-b/proj-b" {
		t.Errorf("sacct QOS/account: %v, want the released job in borrow and the dependent one in guar-proj-b", got)
	}
	assertNoneKilled(t, c, 0)
}

// assocQOS is the QOS list sacctmgr shows for user's associations in account, sorted and
// joined; one line per association.
func assocQOS(t *testing.T, c *testbed.Cluster, user, account string) string {
	t.Helper()
	out, err := c.Run(ctxFor(t, 10*time.Second), "sacctmgr", "-n", "-P", "show", "assoc", "where", "user="+user, "account="+account, "format=qos")
	if err != nil {
		t.Fatalf("sacctmgr show assoc: %v\n%s", err, out)
	}
	var lines []string
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		qos := strings.Split(strings.TrimSpace(line), ",")
		slices.Sort(qos)
		lines = append(lines, strings.Join(qos, ","))
	}
	return strings.Join(lines, "\n")
}

// A user association with its own QOS list (`sacctmgr modify user ... set qos=...`) does not
// inherit its account's, so it lacks the borrow QOS quotad gave the account and Slurm would
// refuse the move of the user's job there. quotad adds the project's QOS to the user's list,
// keeping the site's own, and bob's job over quota is lent and runs borrowed; nothing is killed.
func TestUserWithOwnQOSListBorrows(t *testing.T) {
	c := testbed.Require(t)
	ensureQuotad(t, c)
	logStart := ctldLogSize(t, c)
	cluster := c.Vars["SLURMBRIDGE_CLUSTER"]
	sacctmgrRun(t, c, "modify", "user", "where", "name=bob", "account=proj-b", "cluster="+cluster, "set", "qos=guar-proj-b,normal")
	t.Cleanup(func() {
		// Back to inheriting proj-b's list (qos= with nothing clears the user's own).
		if out, err := c.Run(context.Background(), "sacctmgr", "-i", "modify", "user", "where", "name=bob", "account=proj-b", "cluster="+cluster, "set", "qos="); err != nil {
			t.Errorf("restoring bob's QOS list: %v\n%s", err, out)
		}
	})
	waitFor(t, "quotad adding borrow-proj-b and elastic-proj-b to bob's own QOS list", 30*time.Second, func() bool {
		return assocQOS(t, c, "bob", "proj-b") == "borrow-proj-b,elastic-proj-b,guar-proj-b,normal"
	})

	bob := submitN(t, c, "bob", 5)
	waitLent(t, c, bob, "guar-proj-b", 4, "borrow-proj-b", 1, 30*time.Second)
	var lent string
	for id, r := range queue(t, c, bob) {
		if r.qos == "borrow-proj-b" {
			lent = id
		}
	}
	var got map[string]string
	waitFor(t, "sacct naming the lent job's QOS", 20*time.Second, func() bool {
		got = sacctQOS(t, c, []string{lent})
		return got[lent] != "" && !strings.HasPrefix(got[lent], "Unknown/")
	})
	if got[lent] != "borrow-proj-b/proj-b" {
		t.Errorf("sacct: lent job %s ran as %s, want borrow-proj-b/proj-b", lent, got[lent])
	}
	wantCode(t, c, lent, runsBorrowed...)
	assertNotPreempted(t, c, bob)
	assertNoneKilled(t, c, logStart)
}
