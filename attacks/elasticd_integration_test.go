//go:build integration

package attacks

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/auth"
	"github.com/slurmbridge/slurmbridge/bridge/quotaapi"
	"github.com/slurmbridge/slurmbridge/elasticd/api"
)

// bobsElasticJob submits bob's elastic job (one to two one-GPU workers, a sleep: it reports no
// throughput, so elasticd holds it at its size) and waits until it runs.
func (a *attack) bobsElasticJob(ctx context.Context, t *testing.T) string {
	t.Helper()
	script := filepath.Join(sharedDir(t), "elastic.sh")
	body := "#!/bin/bash\n#SBATCH --elastic=1:2:1\n#SBATCH --elastic-pools=a100\nsleep 600\n"
	if err := os.WriteFile(script, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	id := a.submit(ctx, t, "bob", "-p", "a100", "--gres=gpu:a100:1", "-t", "30", "--job-name=victim-elastic", script)
	if _, err := a.c.WaitState(ctx, id, "RUNNING"); err != nil {
		t.Fatal(err)
	}
	return id
}

// pin sends a pin (n > 0) or an unpin (n == 0) of job id to elasticd with auth.
func (a *attack) pin(ctx context.Context, t *testing.T, id string, n int, auth string) answer {
	t.Helper()
	num, _ := strconv.ParseUint(id, 10, 32)
	method := http.MethodPut
	if n == 0 {
		method = http.MethodDelete
	}
	return call(ctx, t, method, a.c.ElasticdURL()+api.PinPath(uint32(num), n), auth)
}

// pinAuth is user's credential for the pin of job id at n (0: unpin), as elasticd wants it.
func (a *attack) pinAuth(ctx context.Context, t *testing.T, user, id string, n int) string {
	num, _ := strconv.ParseUint(id, 10, 32)
	method := http.MethodPut
	if n == 0 {
		method = http.MethodDelete
	}
	return auth.Scheme + " " + a.credential(ctx, t, user, api.RequestPayload(method, api.PinPath(uint32(num), n)))
}

// alice cannot pin or unpin bob's elastic job, with her own credential, one made for quotad,
// one of bob's made for another size, or a replay of bob's; bob can. Nor can she write into
// the job's directory under elasticd's state directory, its reports, or elasticd's jobs
// directory, or read bob's reports.
func TestAttackElasticJobOfAnotherUser(t *testing.T) {
	a := begin(t)
	ctx := ctxFor(t, 3*time.Minute)
	held, running := a.victims(ctx, t)
	job := a.bobsElasticJob(ctx, t)

	// elasticd answers 404 until it follows the running job; then alice's pin must be refused.
	var got answer
	for {
		got = a.pin(ctx, t, job, 2, a.pinAuth(ctx, t, "alice", job, 2))
		if got.Code != http.StatusNotFound || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Second)
	}
	expect(t, "alice pins bob's job", got, http.StatusForbidden, "only the job's owner or root")

	state := filepath.Join(a.c.Dir, "elastic")
	jobDir := filepath.Join(state, "jobs", job)
	if _, err := os.Stat(filepath.Join(jobDir, "declaration.json")); err != nil {
		t.Fatalf("bob's elastic job has no declaration: %v", err)
	}
	guarded := []string{
		filepath.Join(jobDir, "declaration.json"),
		filepath.Join(jobDir, "hosts"),
		filepath.Join(jobDir, "reports", "alice.json"),
		filepath.Join(jobDir, "forged.json"),
		filepath.Join(state, "jobs", "999999", "declaration.json"),
		filepath.Join(state, "forged"),
	}
	w := a.c.CaptureWorld(ctx, t, []string{held, running, job}, guarded)

	expect(t, "alice unpins bob's job", a.pin(ctx, t, job, 0, a.pinAuth(ctx, t, "alice", job, 0)), http.StatusForbidden, "only the job's owner or root")
	expect(t, "no credential", a.pin(ctx, t, job, 2, ""), http.StatusUnauthorized, "")
	quotadCred := auth.Scheme + " " + a.credential(ctx, t, "alice", quotaapi.CredentialPayload(http.MethodPut, api.PinPath(mustID(t, job), 2)))
	expect(t, "a credential made for quotad", a.pin(ctx, t, job, 2, quotadCred), http.StatusUnauthorized, "was made for")
	expect(t, "bob's credential for another size", a.pin(ctx, t, job, 2, a.pinAuth(ctx, t, "bob", job, 1)), http.StatusUnauthorized, "was made for")
	expect(t, "a pin beyond the job's MAX", a.pin(ctx, t, job, 9, a.pinAuth(ctx, t, "bob", job, 9)), http.StatusBadRequest, "cannot pin it at 9")
	bobs := a.pinAuth(ctx, t, "bob", job, 1)
	expect(t, "bob pins his own job", a.pin(ctx, t, job, 1, bobs), http.StatusNoContent, "")
	expect(t, "bob's pin replayed", a.pin(ctx, t, job, 1, bobs), http.StatusUnauthorized, "does not decode")
	expect(t, "bob unpins his own job", a.pin(ctx, t, job, 0, a.pinAuth(ctx, t, "bob", job, 0)), http.StatusNoContent, "")

	denied := []string{"permission denied"}
	a.refused(ctx, t, "alice", denied, "touch", filepath.Join(jobDir, "forged.json"))
	a.refused(ctx, t, "alice", denied, "tee", "-a", filepath.Join(jobDir, "declaration.json"))
	a.refused(ctx, t, "alice", denied, "touch", filepath.Join(jobDir, "reports", "alice.json"))
	a.refused(ctx, t, "alice", denied, "ls", filepath.Join(jobDir, "reports"))
	a.refused(ctx, t, "alice", denied, "mkdir", filepath.Join(state, "jobs", "999999"))
	a.refused(ctx, t, "alice", denied, "touch", filepath.Join(state, "forged"))
	a.refused(ctx, t, "alice", denied, "tee", "-a", filepath.Join(jobDir, "hosts"))
	w.AssertUnchanged(ctx, t, a.c)
}

func mustID(t *testing.T, id string) uint32 {
	t.Helper()
	n, err := strconv.ParseUint(id, 10, 32)
	if err != nil {
		t.Fatal(err)
	}
	return uint32(n)
}

// alice names a job of hers like a worker of bob's elastic job (and sets ELASTIC_ROLE=worker):
// neither elasticd, which follows bob's job, nor the SPANK epilog, which cancels bob's
// workers when his job ends, touches it: both match workers by owner as well as by name.
func TestAttackImpostorWorkerOfAnotherUsersElasticJob(t *testing.T) {
	a := begin(t)
	ctx := ctxFor(t, 3*time.Minute)
	held, running := a.victims(ctx, t)
	job := a.bobsElasticJob(ctx, t)
	for {
		// bob's unpin of his unpinned job answers 204 once elasticd follows it, 404 before.
		got := a.pin(ctx, t, job, 0, a.pinAuth(ctx, t, "bob", job, 0))
		if got.Code == http.StatusNoContent {
			break
		}
		if got.Code != http.StatusNotFound || ctx.Err() != nil {
			t.Fatalf("bob's unpin of his elastic job: %s", got)
		}
		time.Sleep(time.Second)
	}
	// ELASTIC_ROLE=worker is exported in the script, not with sbatch --export=ALL,VAR=...,
	// which has slurmd load the user's login environment (TestAttackExportedVariableKeepsNodeUp).
	impostor := a.submit(ctx, t, "alice", "-p", "cpu", "--job-name=elastic-worker-"+job, "-t", "10", "--wrap", "export ELASTIC_ROLE=worker; sleep 600")
	if _, err := a.c.WaitState(ctx, impostor, "RUNNING"); err != nil {
		t.Fatal(err)
	}
	w := a.c.CaptureWorld(ctx, t, []string{held, running, impostor}, nil)
	// Some of elasticd's cycles (2 s on the testbed) with the impostor in the queue, then bob's
	// job ends and its epilog cancels its workers.
	time.Sleep(6 * time.Second)
	a.c.Cancel(job)
	if state, err := a.c.WaitState(ctx, job, "CANCELLED"); err != nil {
		t.Fatalf("bob's elastic job: %s: %v", state, err)
	}
	time.Sleep(6 * time.Second)
	w.AssertUnchanged(ctx, t, a.c)
}
