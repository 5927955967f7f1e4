//go:build integration

package spankelastic

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/bridge/testbed"
)

// The attacks on the elastic SPANK plugin through a job's environment. Slurm hands a SPANK
// option to slurmstepd as the job environment's _SLURM_SPANK_OPTION_<plugin>_<option>
// (src/common/plugstack.c, spank.c from 23.02 on: _opt_env_name), and the user sets the job's
// environment: a variable exported before sbatch or srun reaches slurmstepd with any value,
// past sbatch's own checks of the options. With `required` in plugstack.conf, a callback's error in slurmstepd fails the
// launch: 22.05 drained the node ("batch job complete failure"), 26.05 left the job RUNNING.
// Each attack must end with the job COMPLETED, every node as it was, and the node's log saying
// what was wrong.

// optionEnv is the variable slurmstepd reads option --NAME of the plugin from.
func optionEnv(name string) string {
	return "_SLURM_SPANK_OPTION_elastic_" + strings.ReplaceAll(name, "-", "_")
}

// ready is the testbed once it can run the attacks: it loads the plugin as a required one
// (the attacks mean nothing without it), and quotad has finished a cycle. A fresh testbed's
// quotad spends its first cycle creating the QOS the pools plugin gives jobs: a job submitted
// meanwhile gets QOS normal, which alice may not use, and once requeued it stays pending
// (InvalidQOS).
func ready(t *testing.T) *testbed.Cluster {
	t.Helper()
	c := testbed.Require(t)
	requirePlugin(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), testbed.Patience(90*time.Second))
	defer cancel()
	for {
		if quotadCycled(ctx, c) {
			return c
		}
		select {
		case <-ctx.Done():
			t.Fatalf("quotad (%s) has not finished a cycle", c.QuotadURL())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// quotadCycled reports whether quotad's metrics show a successful cycle.
func quotadCycled(ctx context.Context, c *testbed.Cluster) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(c.QuotadURL(), "/")+"/metrics", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, "quotad_last_successful_cycle_timestamp_seconds "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return err == nil && f > 0
		}
	}
	return false
}

// requirePlugin fails unless the testbed loads the plugin as a required one.
func requirePlugin(t *testing.T, c *testbed.Cluster) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(c.Dir, "etc", "plugstack.conf"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "required" && strings.HasSuffix(f[1], "spank_elastic.so") {
			return
		}
	}
	t.Fatalf("the testbed's plugstack.conf does not load spank_elastic.so as required:\n%s", data)
}

// nodeRow is one node as sinfo shows it.
type nodeRow struct{ state, reason string }

// nodes is every node's state and reason (sinfo lists a node once per partition).
func nodes(ctx context.Context, t *testing.T, c *testbed.Cluster) map[string]nodeRow {
	t.Helper()
	out, err := c.Run(ctx, "sinfo", "-h", "-N", "-o", "%N|%T|%E")
	if err != nil {
		t.Fatalf("sinfo: %v: %s", err, out)
	}
	rows := map[string]nodeRow{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.SplitN(line, "|", 3)
		if len(f) != 3 {
			t.Fatalf("sinfo line %q", line)
		}
		rows[f[0]] = nodeRow{state: f[1], reason: f[2]}
	}
	if len(rows) == 0 {
		t.Fatal("sinfo lists no node")
	}
	return rows
}

// held reports whether sinfo's state keeps the scheduler off the node.
func held(state string) bool {
	return strings.Contains(state, "drain") || strings.Contains(state, "down") || strings.Contains(state, "fail")
}

// assertNodesAsBefore fails when a node got a reason it did not have (sinfo -R), is newly
// drained or down, or, idle before, is not idle again once the jobs' ends are through.
func assertNodesAsBefore(ctx context.Context, t *testing.T, c *testbed.Cluster, before map[string]nodeRow) {
	t.Helper()
	deadline := time.Now().Add(testbed.Patience(30 * time.Second))
	for {
		after := nodes(ctx, t, c)
		var problems []string
		// A reason or a drain is there for good; a node still completing may yet settle.
		lasting := false
		for name, b := range before {
			a, ok := after[name]
			switch {
			case !ok:
				problems, lasting = append(problems, name+" is gone"), true
			case a.reason != b.reason:
				problems, lasting = append(problems, fmt.Sprintf("%s has reason %q (before: %q)", name, a.reason, b.reason)), true
			case held(a.state) && !held(b.state):
				problems, lasting = append(problems, fmt.Sprintf("%s is %s, was %s", name, a.state, b.state)), true
			case b.state == "idle" && a.state != "idle":
				problems = append(problems, fmt.Sprintf("%s is %s, was idle", name, a.state))
			}
		}
		if len(problems) == 0 {
			return
		}
		if lasting || time.Now().After(deadline) {
			t.Fatalf("nodes changed by the attack:\n%s", strings.Join(problems, "\n"))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// slurmdLogs notes where every slurmd's log (slurmstepd writes there too) ends now; since
// returns what they gained after.
type slurmdLogs struct {
	dir  string
	size map[string]int64
}

func markSlurmdLogs(t *testing.T, c *testbed.Cluster) slurmdLogs {
	t.Helper()
	l := slurmdLogs{dir: filepath.Join(c.Dir, "log"), size: map[string]int64{}}
	paths, err := filepath.Glob(filepath.Join(l.dir, "slurmd-*.log"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no slurmd log in %s (%v)", l.dir, err)
	}
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		l.size[p] = st.Size()
	}
	return l
}

func (l slurmdLogs) since(t *testing.T) string {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(l.dir, "slurmd-*.log"))
	var b strings.Builder
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if off := l.size[p]; off <= int64(len(data)) {
			data = data[off:]
		}
		b.Write(data)
	}
	return b.String()
}

// waitLog waits until the slurmd logs gained every one of wants, or fails.
func (l slurmdLogs) waitLog(ctx context.Context, t *testing.T, what string, wants ...string) {
	t.Helper()
	for {
		got := l.since(t)
		missing := slices.DeleteFunc(slices.Clone(wants), func(w string) bool { return strings.Contains(got, w) })
		if len(missing) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: the slurmd logs do not say %q; they gained:\n%s", what, missing, lastLines(got, 40))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// runWithEnv runs a Slurm command as username, in its home directory, with the testbed's
// environment and env on top, as the user's shell would after `export NAME=VALUE`. (Not
// sbatch's --export=ALL,NAME=VALUE: that makes slurmd load the user's login environment, which
// 24.11's slurmd does in new namespaces, and a container without CAP_SYS_ADMIN kills it.)
func runWithEnv(ctx context.Context, c *testbed.Cluster, username string, env []string, name string, args ...string) (stdout []byte, stderr string, err error) {
	u, err := user.Lookup(username)
	if err != nil {
		return nil, "", err
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	full := append(c.Env(), "HOME="+u.HomeDir, "USER="+username, "LOGNAME="+username)
	full = append(full, env...)
	var buf strings.Builder
	r := slurm.ExecRunner{Env: full, Dir: u.HomeDir, Stderr: &buf,
		Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	stdout, err = r.Run(ctx, name, args...)
	return stdout, buf.String(), err
}

// submitWithEnv is sbatch --parsable ARGS as username with env exported; it returns the job id.
func submitWithEnv(ctx context.Context, c *testbed.Cluster, username string, env []string, args ...string) (string, error) {
	out, stderr, err := runWithEnv(ctx, c, username, env, "sbatch", append([]string{"--parsable", "--output=/dev/null"}, args...)...)
	if err != nil {
		return "", fmt.Errorf("sbatch: %w: %s", err, stderr)
	}
	id, _, _ := strings.Cut(strings.TrimSpace(string(out)), ";")
	if _, err := strconv.ParseUint(id, 10, 32); err != nil {
		return "", fmt.Errorf("sbatch printed %q, not a job id", out)
	}
	return id, nil
}

// hostileEnvs are the job environments of the attacks, each with what the node's log must say.
var hostileEnvs = []struct {
	name string
	env  []string
	says []string
}{
	{"pools without elastic", []string{optionEnv("elastic-pools") + "=a100"}, []string{"--elastic-pools without --elastic"}},
	{"value without elastic", []string{optionEnv("elastic-value") + "=2.5"}, []string{"--elastic-value without --elastic"}},
	{"max batch without elastic", []string{optionEnv("elastic-max-batch") + "=64"}, []string{"--elastic-max-batch without --elastic"}},
	{"over-long pools", []string{optionEnv("elastic") + "=1:1", optionEnv("elastic-pools") + "=" + strings.Repeat("a", 3000)},
		[]string{"invalid --elastic-pools: \"" + strings.Repeat("a", 40) + "...\": the list is longer than"}},
	{"over-long max batch", []string{optionEnv("elastic") + "=1:1", optionEnv("elastic-max-batch") + "=" + strings.Repeat("1", 200)},
		[]string{"invalid --elastic-max-batch: \"" + strings.Repeat("1", 40) + "...\""}},
	{"garbage elastic spec", []string{optionEnv("elastic") + "=x:\"y\\z:1:2"}, []string{`invalid --elastic: "x:\x22y\x5cz:1:2"`}},
	{"elastic spec not UTF-8", []string{optionEnv("elastic") + "=\xff\xfe:2"}, []string{`MIN "\xff\xfe" must be a whole number`}},
	{"huge elastic spec", []string{optionEnv("elastic") + "=" + strings.Repeat("9", 60000)}, []string{"invalid --elastic: \"" + strings.Repeat("9", 40) + "...\""}},
	{"unknown pool", []string{optionEnv("elastic") + "=1:1", optionEnv("elastic-pools") + "=h9x"}, []string{"invalid --elastic-pools: unknown pool h9x"}},
	{"worker role with garbage elastic", []string{"ELASTIC_ROLE=worker", optionEnv("elastic") + "=garbage"},
		[]string{`invalid --elastic: "garbage"`}},
	{"value not a number", []string{optionEnv("elastic") + "=1:1", optionEnv("elastic-value") + "=1e9"}, []string{`invalid --elastic-value: "1e9"`}},
}

// Every hostile environment in a batch job: the job completes as a plain one, no node changes,
// and the node's log says what was wrong. Before the plugin's remote callbacks stopped
// returning errors, the first one drained its node on 22.05.
func TestAttackSpankOptionsInBatchJobEnvironment(t *testing.T) {
	c := ready(t)
	ctx, cancel := context.WithTimeout(context.Background(), testbed.Patience(3*time.Minute))
	defer cancel()
	before := nodes(ctx, t, c)
	logs := markSlurmdLogs(t, c)
	offset := c.CtldLogSize(t)
	ids := make([]string, len(hostileEnvs))
	for i, h := range hostileEnvs {
		id, err := submitWithEnv(ctx, c, "alice", h.env, "-t", "2", "--wrap", "sleep 1")
		if err != nil {
			t.Fatalf("%s: %v", h.name, err)
		}
		ids[i] = id
		defer c.Cancel(id)
	}
	for i, h := range hostileEnvs {
		if state, err := c.WaitState(ctx, ids[i], "COMPLETED"); err != nil {
			t.Errorf("%s: job %s: %s: %v", h.name, ids[i], state, err)
		}
	}
	for _, h := range hostileEnvs {
		logs.waitLog(ctx, t, h.name, h.says...)
	}
	if !strings.Contains(logs.since(t), "the job runs as a plain job") {
		t.Error("the slurmd logs do not say the jobs run as plain jobs")
	}
	assertNodesAsBefore(ctx, t, c, before)
	c.AssertNoneKilled(t, offset)
}

// A user's own ELASTIC_* contract variables do not survive into a job the plugin did not
// record: its script must not take itself for an elastic main job.
func TestAttackUserContractVariablesLeaveAPlainJob(t *testing.T) {
	c := ready(t)
	ctx, cancel := context.WithTimeout(context.Background(), testbed.Patience(2*time.Minute))
	defer cancel()
	before := nodes(ctx, t, c)
	// Where alice's job can write its output and root read it (t.TempDir's parent is root's
	// alone).
	dir := testbed.SharedDir(t, "spank-attack-", 0o1777)
	out := filepath.Join(dir, "env.out")
	env := []string{"ELASTIC_ROLE=main", "ELASTIC_REPORT_DIR=/etc", "ELASTIC_MAX_BATCH=999", optionEnv("elastic") + "=1:nine"}
	id, err := submitWithEnv(ctx, c, "alice", env, "-t", "2", "--output="+out, "--wrap", "env")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Cancel(id)
	if state, err := c.WaitState(ctx, id, "COMPLETED"); err != nil {
		t.Fatalf("job %s: %s: %v", id, state, err)
	}
	var data []byte
	for data, err = os.ReadFile(out); (err != nil || !strings.Contains(string(data), "SLURM_JOB_ID=")) && ctx.Err() == nil; data, err = os.ReadFile(out) {
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "ELASTIC_") {
			t.Errorf("the plain job's environment has %s", line)
		}
	}
	assertNodesAsBefore(ctx, t, c, before)
}

// A step srun launches (not a batch step) with the option variables in its environment, and an
// srun inside salloc's allocation: each completes, and no node changes.
func TestAttackSpankOptionsInSrunSteps(t *testing.T) {
	c := ready(t)
	ctx, cancel := context.WithTimeout(context.Background(), testbed.Patience(3*time.Minute))
	defer cancel()
	before := nodes(ctx, t, c)
	logs := markSlurmdLogs(t, c)
	env := []string{optionEnv("elastic-pools") + "=a100", optionEnv("elastic-value") + "=x"}
	for _, run := range []struct {
		name string
		argv []string
	}{
		{"srun", []string{"srun", "-t", "2", "-N1", "-n1", "printenv", "SLURM_JOB_ID"}},
		{"salloc and srun", []string{"salloc", "-t", "2", "-N1", "-n1", "srun", "printenv", "SLURM_JOB_ID"}},
	} {
		out, stderr, err := runWithEnv(ctx, c, "alice", env, run.argv[0], run.argv[1:]...)
		if err != nil {
			t.Errorf("%s as alice: %v\n%s%s", run.name, err, out, stderr)
			continue
		}
		id := strings.TrimSpace(string(out))
		if state, err := c.WaitState(ctx, id, "COMPLETED"); err != nil {
			t.Errorf("%s: job %q: %s: %v", run.name, id, state, err)
		}
	}
	logs.waitLog(ctx, t, "srun steps", "--elastic-pools without --elastic", `invalid --elastic-value: "x"`)
	assertNodesAsBefore(ctx, t, c, before)
}

// A requeued elastic job finds its job directory (root's) and its reports directory, in which
// the user left links to root's files and directories: the job runs again and is recorded
// again, and root follows none of the links (their targets keep owner and mode).
func TestAttackRequeuedJobsReportLinksAreNotFollowed(t *testing.T) {
	c := ready(t)
	ctx, cancel := context.WithTimeout(context.Background(), testbed.Patience(4*time.Minute))
	defer cancel()
	before := nodes(ctx, t, c)
	victimDir := t.TempDir()
	if err := os.Chmod(victimDir, 0o711); err != nil {
		t.Fatal(err)
	}
	victimFile := filepath.Join(victimDir, "secret")
	if err := os.WriteFile(victimFile, []byte("root's\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf("ln -sfn %s \"$ELASTIC_REPORT_DIR/1.jsonl\"; ln -sfn %s \"$ELASTIC_REPORT_DIR/dir\"; sleep 300", victimFile, victimDir)
	id, err := c.Submit(ctx, "alice", "--elastic=1:1", "-p", "a100", "--gres=gpu:a100:1", "--requeue", "-t", "10", "--wrap", script)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Cancel(id)
	jobDir := filepath.Join(c.Dir, "elastic", "jobs", id)
	declaration := filepath.Join(jobDir, "declaration.json")
	links := []string{filepath.Join(jobDir, "reports", "1.jsonl"), filepath.Join(jobDir, "reports", "dir")}
	waitFiles := func(what string, since time.Time) {
		for {
			st, err := os.Lstat(declaration)
			ok := err == nil && !st.ModTime().Before(since)
			for _, l := range links {
				if _, err := os.Lstat(l); err != nil {
					ok = false
				}
			}
			if ok {
				return
			}
			select {
			case <-ctx.Done():
				state, _ := c.JobState(ctx, id)
				t.Fatalf("%s: job %s (%s) has no declaration recorded since %s, or not the user's links", what, id, state, since.Format(time.TimeOnly))
			case <-time.After(250 * time.Millisecond):
			}
		}
	}
	if _, err := c.WaitState(ctx, id, "RUNNING"); err != nil {
		t.Fatal(err)
	}
	waitFiles("first run", time.Time{})
	victims := map[string]syscall.Stat_t{}
	for _, p := range []string{victimDir, victimFile} {
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		victims[p] = st
	}

	// Whole seconds: the declaration's mtime must show the second run recorded it.
	requeued := time.Now().Truncate(time.Second).Add(time.Second)
	time.Sleep(time.Until(requeued))
	if out, err := c.Run(ctx, "scontrol", "requeue", id); err != nil {
		t.Fatalf("scontrol requeue %s: %v: %s", id, err, out)
	}
	waitFiles("after the requeue", requeued)
	if state, err := c.WaitState(ctx, id, "RUNNING"); err != nil {
		t.Fatalf("job %s after the requeue: %s: %v", id, state, err)
	}
	for p, was := range victims {
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		if st.Uid != was.Uid || st.Gid != was.Gid || st.Mode != was.Mode {
			t.Errorf("%s: owner %d:%d mode %o, was %d:%d %o: a link in reports/ was followed", p, st.Uid, st.Gid, st.Mode, was.Uid, was.Gid, was.Mode)
		}
	}
	var reports syscall.Stat_t
	if err := syscall.Lstat(filepath.Join(jobDir, "reports"), &reports); err != nil {
		t.Fatal(err)
	}
	if reports.Mode&syscall.S_IFMT != syscall.S_IFDIR || reports.Mode&0o7777 != 0o700 {
		t.Errorf("reports/ has mode %o, want a directory of mode 0700", reports.Mode)
	}
	c.Cancel(id)
	if _, err := c.WaitState(ctx, id, "CANCELLED"); err != nil {
		t.Fatal(err)
	}
	assertNodesAsBefore(ctx, t, c, before)
}
