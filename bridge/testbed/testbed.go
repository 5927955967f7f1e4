// Package testbed lets integration tests use the local Slurm testbed started by
// `make testbed-up` (testbed/testbed.sh): submit jobs as the testbed's users, wait for job
// states with a deadline, and read accounting records from sacct.
//
// It never skips: a test that asks for the testbed and cannot reach it fails, because an
// integration test that silently skips in CI is a missing test.
package testbed

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/bridge/testbed/facts"
)

// DefaultDir is where testbed.sh puts the testbed unless TESTBED_DIR says otherwise.
const DefaultDir = "/tmp/slurmbridge-testbed"

// Users maps each testbed user to the project (Slurm account) it belongs to, as the testbed's
// facts say (Facts).
func Users() (map[string]string, error) {
	f, err := Facts()
	if err != nil {
		return nil, err
	}
	return f.Users(), nil
}

// Dir is the running testbed's folder: $TESTBED_DIR, as make and testbed.sh set it, or
// DefaultDir.
func Dir() string {
	if dir := os.Getenv("TESTBED_DIR"); dir != "" {
		return dir
	}
	return DefaultDir
}

// PresetFacts is where a preset testbed in dir keeps its facts (a cluster of a site's size);
// a testbed brought up from the repository's facts has no such file.
func PresetFacts(dir string) string { return filepath.Join(dir, "etc", "preset", "facts.yaml") }

// Facts are the facts the testbed in $TESTBED_DIR was brought up from: a preset's copy
// (etc/preset/facts.yaml: a cluster of a site's size, make testbed-up PRESET=...) where it
// has one, else the repository's (slurm-conf/testbed/facts.yaml).
func Facts() (*facts.Facts, error) {
	preset := PresetFacts(Dir())
	if _, err := os.Stat(preset); err == nil {
		return facts.Load(preset)
	}
	return facts.LoadRepo()
}

// Cluster is a handle on a running testbed.
type Cluster struct {
	Dir string
	// Vars are the variables exported by $TESTBED_DIR/env (SLURM_CONF, SLURMBRIDGE_DB_*, ...).
	Vars map[string]string
	env  []string
}

// Open reads $TESTBED_DIR/env and checks that slurmctld answers.
func Open(ctx context.Context) (*Cluster, error) {
	dir := Dir()
	vars, err := readEnvFile(filepath.Join(dir, "env"))
	if err != nil {
		return nil, fmt.Errorf("testbed not set up (run `make testbed-up`): %w", err)
	}
	c := &Cluster{Dir: dir, Vars: vars, env: mergeEnv(os.Environ(), vars)}
	if err := c.Slurm().Ping(ctx); err != nil {
		return nil, fmt.Errorf("testbed slurmctld does not answer (run `make testbed-up`): %w", err)
	}
	return c, nil
}

// Require returns the testbed or fails the test.
func Require(t testing.TB) *Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Release is the Slurm release the testbed runs, as the adapter learns it.
func (c *Cluster) Release(ctx context.Context) (slurm.Release, error) {
	return c.Slurm().SlurmRelease(ctx)
}

// Slurm is the Slurm adapter as root (the testbed's admin).
func (c *Cluster) Slurm() slurm.Client { return slurm.NewClient(c.Runner()) }

// SlurmAs is the Slurm adapter as a testbed user, in that user's home directory, so Slurm's own
// permission checks apply; what the commands print on stderr also goes to stderr when it is
// not nil.
func (c *Cluster) SlurmAs(username string, stderr io.Writer) (slurm.Client, error) {
	r, err := c.userRunner(username)
	if err != nil {
		return slurm.Client{}, err
	}
	r.Stderr = stderr
	return slurm.NewClient(r), nil
}

// Examples is the testbed's copy of elasticd/examples, which every test user can read wherever
// the checkout is (testbed.sh publishes it); jobs that run an example name it from here.
func (c *Cluster) Examples() string {
	if d := c.Vars["SLURMBRIDGE_EXAMPLES"]; d != "" {
		return d
	}
	return filepath.Join(c.Dir, "share", "elasticd", "examples")
}

// QuotadURL is where the testbed's quotad serves its API, cluster page and /metrics, as
// testbed.sh up chose its port.
func (c *Cluster) QuotadURL() string { return c.Vars["SLURMBRIDGE_QUOTAD_URL"] }

// ElasticdURL is where the testbed's elasticd serves its status and /metrics.
func (c *Cluster) ElasticdURL() string { return c.Vars["SLURMBRIDGE_ELASTICD_URL"] }

// Env is the environment Slurm commands need to reach the testbed.
func (c *Cluster) Env() []string { return slices.Clone(c.env) }

// Runner returns a runner for Slurm commands as root (the testbed's admin).
func (c *Cluster) Runner() slurm.Runner { return slurm.ExecRunner{Env: c.env} }

// Run runs a Slurm command as root against the testbed.
func (c *Cluster) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	return c.Runner().Run(ctx, name, args...)
}

// RunAs runs a command as a testbed user, in that user's home directory, so Slurm's own
// permission checks apply to it.
func (c *Cluster) RunAs(ctx context.Context, username, name string, args ...string) ([]byte, error) {
	r, err := c.userRunner(username)
	if err != nil {
		return nil, err
	}
	return r.Run(ctx, name, args...)
}

// RunAsWithStderr is RunAs that also returns what the command printed on stderr.
func (c *Cluster) RunAsWithStderr(ctx context.Context, username, name string, args ...string) (stdout []byte, stderr string, err error) {
	r, err := c.userRunner(username)
	if err != nil {
		return nil, "", err
	}
	var buf strings.Builder
	r.Stderr = &buf
	stdout, err = r.Run(ctx, name, args...)
	return stdout, buf.String(), err
}

func (c *Cluster) userRunner(username string) (slurm.ExecRunner, error) {
	u, err := user.Lookup(username)
	if err != nil {
		return slurm.ExecRunner{}, fmt.Errorf("testbed user %q: %w", username, err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	env := mergeEnv(c.env, map[string]string{"HOME": u.HomeDir, "USER": username, "LOGNAME": username})
	return slurm.ExecRunner{Env: env, Dir: u.HomeDir, Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}, nil
}

// UserCommand is a command to run as username, in their home directory with the testbed's
// environment and their HOME, USER and LOGNAME, for what a test starts and waits on itself (a
// salloc that waits for its allocation, a user's slurmrestd).
func (c *Cluster) UserCommand(username, name string, args ...string) (*exec.Cmd, error) {
	r, err := c.userRunner(username)
	if err != nil {
		return nil, err
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	cmd.Dir, cmd.Env = r.Dir, r.Env
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: r.Credential}
	return cmd, nil
}

// Submit runs `sbatch --parsable ARGS...` as username and returns the job id. Output goes to
// /dev/null unless ARGS say otherwise.
func (c *Cluster) Submit(ctx context.Context, username string, args ...string) (string, error) {
	id, _, err := c.SubmitWithMessage(ctx, username, args...)
	return id, err
}

// SubmitWithMessage is Submit that also returns what sbatch printed on stderr: the message of
// a job_submit plugin, on success as on refusal.
func (c *Cluster) SubmitWithMessage(ctx context.Context, username string, args ...string) (id, message string, err error) {
	// Anything the job_submit plugin said to the user comes on stderr.
	var stderr strings.Builder
	s, err := c.SlurmAs(username, &stderr)
	if err != nil {
		return "", "", err
	}
	n, err := s.SubmitBatch(ctx, slurm.SubmitOptions{Output: "/dev/null", Args: args}, nil)
	if err != nil {
		return "", stderr.String(), err
	}
	return strconv.FormatUint(uint64(n), 10), stderr.String(), nil
}

// SubmitIn is Submit run from dir instead of the user's home: the job's SLURM_SUBMIT_DIR, which
// scripts such as the elastic examples find their files and write their checkpoints from.
func (c *Cluster) SubmitIn(ctx context.Context, username, dir string, args ...string) (string, error) {
	r, err := c.userRunner(username)
	if err != nil {
		return "", err
	}
	r.Dir = dir
	n, err := slurm.Client{Runner: r}.SubmitBatch(ctx, slurm.SubmitOptions{Output: "/dev/null", Args: args}, nil)
	if err != nil {
		return "", err
	}
	return strconv.FormatUint(uint64(n), 10), nil
}

// row is the job's line of squeue (every state), or an error when slurmctld does not list it.
func (c *Cluster) row(ctx context.Context, jobID string) (slurm.Job, error) {
	rows, err := c.Slurm().Queue(ctx, slurm.QueueRead{Fields: slurm.SummaryFields, JobIDs: []string{jobID}, AllStates: true})
	if err != nil {
		return slurm.Job{}, err
	}
	for _, r := range rows {
		if r.PrintedID == jobID {
			return r, nil
		}
	}
	return slurm.Job{}, fmt.Errorf("job %s unknown to slurmctld", jobID)
}

// Partition is the job's partition as slurmctld holds it: for a pending job routed to several
// pools, the comma-separated list.
func (c *Cluster) Partition(ctx context.Context, jobID string) (string, error) {
	r, err := c.row(ctx, jobID)
	return r.Partition, err
}

// Nodes is the job's node list as slurmctld holds it ("" while pending).
func (c *Cluster) Nodes(ctx context.Context, jobID string) (string, error) {
	r, err := c.row(ctx, jobID)
	return r.Nodes, err
}

// UpdateJobAs changes a job as a testbed user (scontrol update) and returns what scontrol
// printed on stderr: the job_submit plugin's message on refusal.
func (c *Cluster) UpdateJobAs(ctx context.Context, username, jobID string, u slurm.JobUpdate) (stderr string, err error) {
	id, err := strconv.ParseUint(jobID, 10, 32)
	if err != nil {
		return "", fmt.Errorf("job id %q: %w", jobID, err)
	}
	var buf strings.Builder
	s, err := c.SlurmAs(username, &buf)
	if err != nil {
		return "", err
	}
	err = s.UpdateJob(ctx, uint32(id), u)
	return buf.String(), err
}

// Daemon runs testbed/NAME.sh ACTION for one of slurmbridge's daemons the testbed runs (quotad,
// elasticd): start, stop, status or sync, with env's extra variables (QUOTAD_INTERVAL=2s); a
// minute at most when ctx has no deadline, ten for a sync: a cluster of a site's size has
// hundreds of QOS and account changes to apply, one sacctmgr each.
func (c *Cluster) Daemon(ctx context.Context, name, action string, env ...string) ([]byte, error) {
	vars := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	limit := time.Minute
	if action == "sync" {
		limit = 10 * time.Minute
	}
	return c.script(ctx, limit, vars, name+".sh", action)
}

// DaemonRunning says whether the testbed's daemon runs (its script's status says so).
func (c *Cluster) DaemonRunning(ctx context.Context, name string) bool {
	_, err := c.Daemon(ctx, name, "status")
	return err == nil
}

// SetDaemon starts or stops the testbed's daemon.
func (c *Cluster) SetDaemon(ctx context.Context, name string, running bool) error {
	action := "stop"
	if running {
		action = "start"
	}
	if out, err := c.Daemon(ctx, name, action); err != nil {
		return fmt.Errorf("%s %s: %w (%s)", name, action, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// KeepDaemon notes whether the testbed's daemon runs now and returns what puts it back so,
// whatever was done to it in between: a replay starts and stops the daemons mode by mode.
func (c *Cluster) KeepDaemon(ctx context.Context, name string) (restore func(context.Context) error) {
	running := c.DaemonRunning(ctx, name)
	return func(ctx context.Context) error { return c.SetDaemon(ctx, name, running) }
}

// Pause stops the testbed's daemon and returns what puts it back as it was (KeepDaemon): a
// test or benchmark that runs its own instance, or needs a quiet cluster, must not race the
// testbed's. It stops even a daemon whose status says it is only partly up (elasticd without
// its node agent): stopping what does not run is harmless.
func (c *Cluster) Pause(ctx context.Context, name string) (restore func(context.Context) error, err error) {
	restore = c.KeepDaemon(ctx, name)
	if err := c.SetDaemon(ctx, name, false); err != nil {
		return nil, fmt.Errorf("pause %w", err)
	}
	return restore, nil
}

// PauseDaemon is Pause for the rest of the test: the daemon starts again when the test ends,
// if it was running.
func (c *Cluster) PauseDaemon(t testing.TB, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	restore, err := c.Pause(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := restore(ctx); err != nil {
			t.Errorf("restart %s after the test: %v", name, err)
		}
	})
}

// Stop stops one of the testbed's Slurm-side daemons (mariadb, slurmdbd, slurmctld, munged,
// slurmd-NODE) and waits until it is gone (testbed.sh stop, which knows its processes): fault
// tests use it to take a piece of the cluster away. Up brings it back.
func (c *Cluster) Stop(ctx context.Context, name string) error {
	if _, err := c.script(ctx, 0, nil, "testbed.sh", "stop", name); err != nil {
		return fmt.Errorf("stop %s: %w", name, err)
	}
	return nil
}

// Up starts whatever testbed daemon is down (testbed.sh up) and waits until every node is idle
// or allocated again; slurmbridge's own daemons are left as they are.
func (c *Cluster) Up(ctx context.Context) error {
	_, err := c.script(ctx, 0, map[string]string{"TESTBED_DAEMONS": ""}, "testbed.sh", "up")
	return err
}

// script runs testbed/FILE ARGS with bash, in the testbed's environment with TESTBED_DIR and
// vars set; timeout bounds it when ctx has no deadline (zero: the runner's default).
func (c *Cluster) script(ctx context.Context, timeout time.Duration, vars map[string]string, file string, args ...string) ([]byte, error) {
	env := mergeEnv(c.env, map[string]string{"TESTBED_DIR": c.Dir})
	env = mergeEnv(env, vars)
	r := slurm.ExecRunner{Env: env, Timeout: timeout}
	return r.Run(ctx, "bash", append([]string{filepath.Join(repoRoot(), "testbed", file)}, args...)...)
}

// repoRoot is the source tree this package was built from.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Cancel cancels jobs; for test clean-up, errors are ignored.
func (c *Cluster) Cancel(jobIDs ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ids := make([]uint32, 0, len(jobIDs))
	for _, s := range jobIDs {
		if n, err := strconv.ParseUint(s, 10, 32); err == nil {
			ids = append(ids, uint32(n))
		}
	}
	_ = c.Slurm().Cancel(ctx, ids...)
}

// JobState is the live state of a job as slurmctld reports it (squeue %T), e.g. PENDING,
// RUNNING, COMPLETED.
func (c *Cluster) JobState(ctx context.Context, jobID string) (string, error) {
	r, err := c.row(ctx, jobID)
	return r.StateName(), err
}

// terminalStates end a job; waiting for anything else past one of them is pointless.
var terminalStates = []string{"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "PREEMPTED"}

// WaitState polls until the job is in one of want and returns that state. It gives up with an
// error at the deadline of ctx, or as soon as the job ends in a state not wanted.
func (c *Cluster) WaitState(ctx context.Context, jobID string, want ...string) (string, error) {
	var last string
	for {
		state, err := c.JobState(ctx, jobID)
		if err == nil {
			last = state
			if slices.Contains(want, state) {
				return state, nil
			}
			if slices.Contains(terminalStates, state) {
				return state, fmt.Errorf("job %s ended %s, wanted %s", jobID, state, strings.Join(want, "|"))
			}
		}
		select {
		case <-ctx.Done():
			return last, fmt.Errorf("job %s still %q when waiting for %s ended: %w", jobID, last, strings.Join(want, "|"), ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// AcctRecord is one job's allocation line from sacct (-X).
type AcctRecord struct {
	JobID, User, Account, Partition, QOS, State, ExitCode string
	// AllocTRES as sacct prints it, e.g. "billing=1,cpu=1,gres/gpu:a100=1,gres/gpu=1,mem=1000M,node=1".
	AllocTRES string
}

// TRES returns the value of one TRES in AllocTRES ("" when absent).
func (r AcctRecord) TRES(name string) string {
	for _, kv := range strings.Split(r.AllocTRES, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v
		}
	}
	return ""
}

// Accounting waits until slurmdbd has the job's whole record in a final state and returns it.
// The database lags slurmctld, and a short job's completion can reach it before its start
// message: for a moment the row says COMPLETED with no partition and QOS "Unknown".
func (c *Cluster) Accounting(ctx context.Context, jobID string) (AcctRecord, error) {
	var last AcctRecord
	var lastErr error
	for {
		rec, err := c.sacct(ctx, jobID)
		if err == nil {
			last = rec
			// sacct says e.g. "CANCELLED by 1001": the first word is the state.
			if st := strings.Fields(rec.State); len(st) > 0 && slices.Contains(terminalStates, st[0]) && rec.complete() {
				return rec, nil
			}
		}
		lastErr = err
		select {
		case <-ctx.Done():
			if lastErr != nil {
				return last, fmt.Errorf("sacct for job %s: %w (%v)", jobID, ctx.Err(), lastErr)
			}
			return last, fmt.Errorf("sacct for job %s still shows %q: %w", jobID, last.State, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// Preempted lists those of ids that sacct shows with a PREEMPTED record (-D: every requeue's
// row), each once.
func (c *Cluster) Preempted(t testing.TB, ids ...string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	recs, err := c.Slurm().SacctJobs(ctx, slurm.SacctFilter{JobIDs: ids, Duplicates: true}, "JobID", "State")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		if id := r["JobID"]; r["State"] == "PREEMPTED" && !slices.Contains(got, id) {
			got = append(got, id)
		}
	}
	return got
}

func (r AcctRecord) complete() bool { return r.Partition != "" && r.QOS != "" && r.QOS != "Unknown" }

var errNoRecord = errors.New("no accounting record yet")

func (c *Cluster) sacct(ctx context.Context, jobID string) (AcctRecord, error) {
	recs, err := c.Slurm().SacctJobs(ctx, slurm.SacctFilter{JobIDs: []string{jobID}},
		"JobID", "User", "Account", "Partition", "QOS", "State", "ExitCode", "AllocTRES")
	if err != nil {
		return AcctRecord{}, err
	}
	for _, r := range recs {
		if r["JobID"] == jobID {
			return AcctRecord{JobID: r["JobID"], User: r["User"], Account: r["Account"], Partition: r["Partition"], QOS: r["QOS"],
				State: r["State"], ExitCode: r["ExitCode"], AllocTRES: r["AllocTRES"]}, nil
		}
	}
	return AcctRecord{}, errNoRecord
}

// readEnvFile parses the `export K=V` lines testbed.sh writes.
func readEnvFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	vars := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(strings.TrimPrefix(line, "export "), "=")
		if !ok {
			return nil, fmt.Errorf("%s: cannot read line %q", path, line)
		}
		vars[k] = v
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if vars["SLURM_CONF"] == "" {
		return nil, fmt.Errorf("%s does not set SLURM_CONF", path)
	}
	return vars, nil
}

// mergeEnv returns base with vars set, replacing earlier values of the same names.
func mergeEnv(base []string, vars map[string]string) []string {
	out := make([]string, 0, len(base)+len(vars))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if _, override := vars[k]; !override {
			out = append(out, kv)
		}
	}
	keys := make([]string, 0, len(vars))
	for k := range vars {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		out = append(out, k+"="+vars[k])
	}
	return out
}

// killedMark is what slurmctld logs when preemption kills a job it cannot requeue.
const killedMark = "had to be killed"

// CtldLogSize is where slurmctld.log ends now; AssertNoneKilled reads what follows.
func (c *Cluster) CtldLogSize(t testing.TB) int64 {
	t.Helper()
	st, err := os.Stat(filepath.Join(c.Dir, "log", "slurmctld.log"))
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// CtldLogSince is what slurmctld.log gained after offset (a CtldLogSize); all of it when the
// log was rotated since.
func (c *Cluster) CtldLogSince(t testing.TB, offset int64) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(c.Dir, "log", "slurmctld.log"))
	if err != nil {
		t.Fatal(err)
	}
	if offset > int64(len(data)) {
		offset = 0 // rotated
	}
	return string(data[offset:])
}

// AssertNoneKilled fails when slurmctld logged a preempted job it had to kill since offset.
func (c *Cluster) AssertNoneKilled(t testing.TB, offset int64) {
	t.Helper()
	for _, line := range strings.Split(c.CtldLogSince(t, offset), "\n") {
		if strings.Contains(line, killedMark) {
			t.Errorf("slurmctld.log: %s", line)
		}
	}
}

// PatienceEnv scales the time limits integration tests give the testbed to reach a state
// (a job running, quotad lending): the limits are liveness bounds for a testbed alone on its
// machine, and CI runs three releases' testbeds side by side on the same cores.
const PatienceEnv = "SLURMBRIDGE_TEST_PATIENCE"

// Patience is limit scaled by $SLURMBRIDGE_TEST_PATIENCE (a number from 1 to 10; unset or
// anything else: 1). Latencies a test asserts as a claim (lent within one cycle, say) are not
// scaled; only how long a test waits before it calls the testbed stuck.
func Patience(limit time.Duration) time.Duration {
	f, err := strconv.ParseFloat(os.Getenv(PatienceEnv), 64)
	if err != nil || f < 1 || f > 10 {
		return limit
	}
	return time.Duration(float64(limit) * f)
}

// HeavyLockEnv names a file that the suites running side by side on the same cores (CI runs
// three releases at once) lock around their CPU-heavy tests: a torchrun world is a dozen
// Python processes, and three of them at once on two cores starve torchrun's heartbeats
// until its rendezvous never settles. Unset, as for a suite alone on its machine: no lock.
const HeavyLockEnv = "SLURMBRIDGE_HEAVY_LOCK"

// OneHeavyAtATime blocks until no other suite sharing $SLURMBRIDGE_HEAVY_LOCK runs a heavy
// test, and holds the lock until t ends. Call it first, before the test's deadlines start. It
// waits at most until a quarter of an hour before the test binary's deadline (go test
// -timeout), then fails saying so, rather than let the whole package time out unexplained.
func OneHeavyAtATime(t *testing.T) {
	t.Helper()
	path := os.Getenv(HeavyLockEnv)
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatalf("the heavy tests' lock: %v", err)
	}
	t0 := time.Now()
	giveUp := t0.Add(Patience(20 * time.Minute))
	if d, ok := t.Deadline(); ok {
		giveUp = d.Add(-15 * time.Minute)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			t.Fatalf("the heavy tests' lock %s: %v", path, err)
		}
		if time.Now().After(giveUp) {
			f.Close()
			t.Fatalf("another suite's heavy tests held %s for %s: no time left to run this one", path, time.Since(t0).Round(time.Second))
		}
		time.Sleep(2 * time.Second)
	}
	if waited := time.Since(t0); waited > time.Second {
		t.Logf("waited %s for another suite's heavy test to end (%s)", waited.Round(time.Second), path)
	}
	// Closing the descriptor releases the lock.
	t.Cleanup(func() { f.Close() })
}
