//go:build integration

package attacks

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/bridge/testbed"
)

// StormSeedEnv replays a storm: the seed a failed run printed.
const StormSeedEnv = "SLURMBRIDGE_STORM_SEED"

// stormFor is how long the users submit and update; checking after takes about as long again.
const stormFor = 60 * time.Second

// stormName is every storm job's name, so that the clean-up finds them all.
const stormName = "storm"

// tally counts one kind of request: tried, accepted, refused.
type tally struct{ tried, accepted, refused int }

// storm is the state the users' goroutines share.
type storm struct {
	c        *testbed.Cluster
	mu       sync.Mutex
	submits  map[string]*tally
	updates  map[string]*tally
	accepted []string            // every job id sbatch or salloc gave
	own      map[string][]string // user -> the ids of that user's jobs
	arrays   map[string]bool
	problems []string // requests that had to be refused and were not, or that stalled
}

func (s *storm) count(m map[string]*tally, kind string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tl := m[kind]
	if tl == nil {
		tl = &tally{}
		m[kind] = tl
	}
	tl.tried++
	if ok {
		tl.accepted++
	} else {
		tl.refused++
	}
}

func (s *storm) problem(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.problems = append(s.problems, fmt.Sprintf(format, args...))
}

// gpuType is the GPU type of each user's project (the testbed's quotas: alice and bob a100,
// carol v100).
var gpuType = map[string]string{"alice": "a100", "bob": "a100", "carol": "v100"}

var account = map[string]string{"alice": "proj-a", "bob": "proj-b", "carol": "proj-c"}

// shape is one kind of submission: the sbatch options for a user, whether Slurm or the plugin
// must refuse it, and whether it goes through salloc.
type shape struct {
	kind       string
	mustRefuse bool
	salloc     bool
	args       func(r *rand.Rand, user string, prev string) []string
}

func sleepFor(r *rand.Rand) string { return "sleep " + strconv.Itoa(3+r.IntN(25)) }

var shapes = []shape{
	{kind: "cpu", args: func(r *rand.Rand, u, _ string) []string {
		return []string{"-p", "cpu", "-c", strconv.Itoa(1 + r.IntN(4))}
	}},
	{kind: "cpu-routed", args: func(r *rand.Rand, u, _ string) []string { return []string{"-c", "1"} }},
	{kind: "gres-typed", args: func(r *rand.Rand, u, _ string) []string {
		return []string{"--gres=gpu:" + gpuType[u] + ":" + strconv.Itoa(1+r.IntN(4))}
	}},
	{kind: "gres-untyped", args: func(r *rand.Rand, u, _ string) []string { return []string{"--gres=gpu:" + strconv.Itoa(1+r.IntN(2))} }},
	{kind: "gpus-per-node", args: func(r *rand.Rand, u, _ string) []string {
		n := strconv.Itoa(1 + r.IntN(2))
		return []string{"--gpus=" + n, "--gpus-per-node=" + n}
	}},
	{kind: "gpus-per-node-typed", args: func(r *rand.Rand, u, _ string) []string {
		return []string{"--gpus-per-node=" + gpuType[u] + ":" + strconv.Itoa(1+r.IntN(2))}
	}},
	{kind: "array", args: func(r *rand.Rand, u, _ string) []string {
		return []string{"--array=0-" + strconv.Itoa(1+r.IntN(4)) + "%2", "--gres=gpu:" + gpuType[u] + ":1"}
	}},
	{kind: "multi-node", args: func(r *rand.Rand, u, _ string) []string {
		return []string{"-N", "2", "--gres=gpu:" + gpuType[u] + ":" + strconv.Itoa(1+r.IntN(2))}
	}},
	{kind: "held", args: func(r *rand.Rand, u, _ string) []string { return []string{"--hold", "--gres=gpu:" + gpuType[u] + ":1"} }},
	{kind: "dependent", args: func(r *rand.Rand, u, prev string) []string {
		return []string{"--dependency=afterany:" + prev, "--gres=gpu:" + gpuType[u] + ":1"}
	}},
	// What Slurm or the plugin refuses whatever the cluster's state. A user's job straight into
	// a borrow QOS, --requeue or not: only quotad lends.
	{kind: "bad-borrow-qos-requeue", mustRefuse: true, args: func(r *rand.Rand, u, _ string) []string {
		return []string{"--requeue", "--qos=borrow-" + account[u], "--gres=gpu:" + gpuType[u] + ":1"}
	}},
	{kind: "bad-borrow-no-requeue", mustRefuse: true, args: func(r *rand.Rand, u, _ string) []string {
		return []string{"--no-requeue", "--qos=borrow-" + account[u], "--gres=gpu:" + gpuType[u] + ":1"}
	}},
	{kind: "bad-typed-and-untyped", mustRefuse: true, args: func(r *rand.Rand, u, _ string) []string {
		return []string{"--gres=gpu:" + gpuType[u] + ":1,gpu:1"}
	}},
	{kind: "bad-partition", mustRefuse: true, args: func(r *rand.Rand, u, _ string) []string { return []string{"-p", "nosuch"} }},
	{kind: "bad-too-many-gpus", mustRefuse: true, args: func(r *rand.Rand, u, _ string) []string {
		return []string{"--gres=gpu:" + gpuType[u] + ":99"}
	}},
	{kind: "bad-foreign-account", mustRefuse: true, args: func(r *rand.Rand, u, _ string) []string {
		others := []string{"proj-a", "proj-b", "proj-c"}
		others = slices.DeleteFunc(others, func(a string) bool { return a == account[u] })
		return []string{"-A", others[r.IntN(len(others))], "-p", "cpu"}
	}},
	{kind: "bad-salloc-borrow", mustRefuse: true, salloc: true, args: func(r *rand.Rand, u, _ string) []string {
		return []string{"--qos=borrow-" + account[u], "--gres=gpu:" + gpuType[u] + ":1"}
	}},
	{kind: "salloc-cpu", salloc: true, args: func(r *rand.Rand, u, _ string) []string { return []string{"-p", "cpu", "-c", "1"} }},
}

// submitOne submits one job of a random shape as user.
func (s *storm) submitOne(ctx context.Context, r *rand.Rand, user string) {
	sh := shapes[r.IntN(len(shapes))]
	prev := s.someJob(r, user)
	if sh.kind == "dependent" && prev == "" {
		sh = shapes[0]
	}
	args := append([]string{"--job-name=" + stormName, "-t", strconv.Itoa(1 + r.IntN(5))}, sh.args(r, user, prev)...)
	if !sh.mustRefuse && !sh.salloc && r.IntN(3) == 0 && !slices.ContainsFunc(args, func(a string) bool { return strings.Contains(a, "requeue") }) {
		args = append(args, []string{"--requeue", "--no-requeue"}[r.IntN(2)])
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var id, msg string
	var err error
	if sh.salloc {
		// --immediate: salloc gives up, and Slurm ends the request, when nothing is free now.
		var stderr string
		_, stderr, err = s.c.RunAsWithStderr(cctx, user, "salloc", append([]string{"--no-shell", "--immediate=5"}, args...)...)
		msg = stderr
		if m := grantedRE.FindStringSubmatch(stderr); m != nil {
			id = m[1]
		}
		if err == nil && id == "" {
			err = fmt.Errorf("salloc granted no allocation")
		}
	} else {
		args = append(args, "-o", "/dev/null", "--wrap", sleepFor(r))
		id, msg, err = s.c.SubmitWithMessage(cctx, user, args...)
	}
	if cctx.Err() != nil {
		s.problem("%s: %s %s took over 30 s (slurmctld stalled?)", user, sh.kind, strings.Join(args, " "))
	}
	if id != "" {
		s.mu.Lock()
		s.accepted = append(s.accepted, id)
		s.own[user] = append(s.own[user], id)
		if sh.kind == "array" {
			s.arrays[id] = true
		}
		s.mu.Unlock()
	}
	s.count(s.submits, sh.kind, err == nil)
	if sh.mustRefuse && err == nil {
		s.problem("%s: %s was accepted as job %s: %s", user, sh.kind, id, strings.Join(args, " "))
	}
	if sh.mustRefuse && err != nil && strings.TrimSpace(msg) == "" {
		s.problem("%s: %s was refused without a message: %v", user, sh.kind, err)
	}
}

var grantedRE = regexp.MustCompile(`Granted job allocation (\d+)`)

func (s *storm) someJob(r *rand.Rand, user string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := s.own[user]
	if len(ids) == 0 {
		return ""
	}
	// The recent jobs are the ones still pending.
	return ids[max(0, len(ids)-1-r.IntN(min(len(ids), 8)))]
}

// update is one kind of change of a user's own job: scontrol's arguments for job id.
type update struct {
	kind       string
	mustRefuse bool
	args       func(r *rand.Rand, user, id string) []string
}

var updates = []update{
	{kind: "partition", args: func(r *rand.Rand, u, id string) []string {
		return []string{"update", "jobid=" + id, "partition=" + []string{"cpu", "a100", "v100", "a100,a100-spot", "a100-spot"}[r.IntN(5)]}
	}},
	{kind: "qos-guaranteed", args: func(r *rand.Rand, u, id string) []string {
		return []string{"update", "jobid=" + id, "qos=guar-" + account[u]}
	}},
	{kind: "gres", args: func(r *rand.Rand, u, id string) []string {
		return []string{"update", "jobid=" + id, "gres=" + []string{"gpu:" + gpuType[u] + ":2", "gpu:1", "gpu:a100:1", "gpu:v100:1"}[r.IntN(4)]}
	}},
	{kind: "requeue", args: func(r *rand.Rand, u, id string) []string {
		return []string{"update", "jobid=" + id, "requeue=" + strconv.Itoa(r.IntN(2))}
	}},
	{kind: "timelimit", args: func(r *rand.Rand, u, id string) []string {
		return []string{"update", "jobid=" + id, "timelimit=" + strconv.Itoa(1+r.IntN(4))}
	}},
	{kind: "hold", args: func(r *rand.Rand, u, id string) []string { return []string{"hold", id} }},
	{kind: "release", args: func(r *rand.Rand, u, id string) []string { return []string{"release", id} }},
	{kind: "arraytaskthrottle", args: func(r *rand.Rand, u, id string) []string {
		return []string{"update", "jobid=" + id, "arraytaskthrottle=" + strconv.Itoa(1+r.IntN(3))}
	}},
	// Only root, SlurmUser and quotad move a job into a lending QOS.
	{kind: "bad-qos-borrow", mustRefuse: true, args: func(r *rand.Rand, u, id string) []string {
		return []string{"update", "jobid=" + id, "qos=borrow-" + account[u]}
	}},
	{kind: "bad-qos-elastic", mustRefuse: true, args: func(r *rand.Rand, u, id string) []string {
		return []string{"update", "jobid=" + id, "qos=elastic-" + account[u]}
	}},
}

// updateOne changes one of user's own jobs in a random way.
func (s *storm) updateOne(ctx context.Context, r *rand.Rand, user string) {
	id := s.someJob(r, user)
	if id == "" {
		return
	}
	u := updates[r.IntN(len(updates))]
	if u.kind == "arraytaskthrottle" {
		s.mu.Lock()
		for a := range s.arrays {
			if slices.Contains(s.own[user], a) {
				id = a
				break
			}
		}
		s.mu.Unlock()
	}
	args := u.args(r, user, id)
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err := s.c.RunAs(cctx, user, "scontrol", args...)
	if cctx.Err() != nil {
		s.problem("%s: scontrol %s took over 30 s (slurmctld stalled?)", user, strings.Join(args, " "))
	}
	s.count(s.updates, u.kind, err == nil)
	// A job that has left PENDING refuses a QOS change anyway; one still pending must refuse it
	// for the lending QOS.
	if u.mustRefuse && err == nil {
		s.problem("%s: scontrol %s was accepted", user, strings.Join(args, " "))
	}
}

// quotadCounters sums quotad's lends and observed reclaims from its /metrics.
func quotadCounters(ctx context.Context, t *testing.T, c *testbed.Cluster) (lends, reclaims float64) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.QuotadURL()+"/metrics", nil)
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("quotad /metrics: %v", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		name, rest, _ := strings.Cut(line, " ")
		if i := strings.IndexByte(name, '{'); i >= 0 {
			name = name[:i]
			rest = line[strings.LastIndexByte(line, ' ')+1:]
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
		if err != nil {
			continue
		}
		switch name {
		case "quotad_lends_total":
			lends += v
		case "quotad_reclaims_observed_total":
			reclaims += v
		}
	}
	return lends, reclaims
}

// TestAttackSubmitAndUpdateStorm: alice, bob and carol submit a seeded random mix of job
// shapes, good and bad, and change their own pending jobs at random, while quotad lends and
// reclaims GPUs. slurmctld keeps running (the same process), no node is drained or down,
// every request that must be refused is, every accepted job reaches accounting, and no
// reclaim kills a job. The seed is printed; SLURMBRIDGE_STORM_SEED replays it.
func TestAttackSubmitAndUpdateStorm(t *testing.T) {
	a := begin(t)
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv(StormSeedEnv); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", StormSeedEnv, v, err)
		}
		seed = n
	}
	t.Logf("storm seed %d (replay: %s=%d)", seed, StormSeedEnv, seed)
	ctx := ctxFor(t, 5*time.Minute)
	s := &storm{c: a.c, submits: map[string]*tally{}, updates: map[string]*tally{}, own: map[string][]string{}, arrays: map[string]bool{}}
	t.Cleanup(func() {
		// Every storm job, accepted or not, whatever happened.
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = a.c.Run(cctx, "scancel", "-n", stormName)
		a.c.Cancel(s.accepted...)
	})
	w := a.c.CaptureWorld(ctx, t, nil, nil)
	logAt := a.c.CtldLogSize(t)
	lends0, reclaims0 := quotadCounters(ctx, t, a.c)

	// alice first takes more a100 GPUs than her quota, so that quotad lends from the start and
	// bob's and carol's GPU jobs make it reclaim.
	for range 6 {
		id := a.submit(ctx, t, "alice", "--job-name="+stormName, "--requeue", "-t", "3", "--gres=gpu:a100:1", "-o", "/dev/null", "--wrap", "sleep 120")
		s.accepted = append(s.accepted, id)
	}

	start := time.Now()
	deadline := start.Add(stormFor)
	var wg sync.WaitGroup
	for i, user := range []string{"alice", "bob", "carol"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(i)))
			for time.Now().Before(deadline) && ctx.Err() == nil {
				if r.IntN(10) < 6 {
					s.submitOne(ctx, r, user)
				} else {
					s.updateOne(ctx, r, user)
				}
			}
		}()
	}
	wg.Wait()
	stormed := time.Since(start)
	lends1, reclaims1 := quotadCounters(ctx, t, a.c)

	report := func(title string, m map[string]*tally) {
		var total tally
		lines := []string{}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			tl := m[k]
			total.tried, total.accepted, total.refused = total.tried+tl.tried, total.accepted+tl.accepted, total.refused+tl.refused
			lines = append(lines, fmt.Sprintf("  %-22s tried %4d accepted %4d refused %4d", k, tl.tried, tl.accepted, tl.refused))
		}
		t.Logf("%s: tried %d, accepted %d, refused %d\n%s", title, total.tried, total.accepted, total.refused, strings.Join(lines, "\n"))
	}
	report("submissions", s.submits)
	report("updates", s.updates)
	t.Logf("storm ran %.1f s; quotad lent %.0f times and saw %.0f reclaims meanwhile", stormed.Seconds(), lends1-lends0, reclaims1-reclaims0)
	for _, p := range s.problems {
		t.Error(p)
	}
	if lends1 == lends0 {
		t.Errorf("quotad lent nothing during the storm: the storm did not exercise lending")
	}

	// slurmctld answers, and is the process it was.
	if err := a.c.Slurm().Ping(ctx); err != nil {
		t.Errorf("slurmctld does not answer after the storm: %v", err)
	}
	w.AssertUnchanged(ctx, t, a.c)
	now := a.c.CaptureWorld(ctx, t, nil, nil)
	t.Logf("RSS after the storm: slurmctld %d MiB (was %d), quotad %d MiB (was %d), elasticd %d MiB (was %d)",
		now.Daemons["slurmctld"].RSSBytes>>20, w.Daemons["slurmctld"].RSSBytes>>20, now.Daemons["quotad"].RSSBytes>>20,
		w.Daemons["quotad"].RSSBytes>>20, now.Daemons["elasticd"].RSSBytes>>20, w.Daemons["elasticd"].RSSBytes>>20)

	// Every job end now; then each accepted one must be in accounting.
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	_, _ = a.c.Run(cctx, "scancel", "-n", stormName)
	cancel()
	missing := a.missingFromAccounting(ctx, t, s.accepted)
	t.Logf("%d accepted jobs, %d missing from sacct, %d preempted (requeued) by a reclaim", len(s.accepted), len(missing), len(a.c.Preempted(t, s.accepted...)))
	if len(missing) > 0 {
		t.Errorf("accepted jobs unknown to sacct: %v", missing)
	}
	a.c.AssertNoneKilled(t, logAt)
}

// missingFromAccounting waits up to a minute for sacct to know every id (an array by its
// tasks) and returns those it still does not.
func (a *attack) missingFromAccounting(ctx context.Context, t *testing.T, ids []string) []string {
	t.Helper()
	deadline := time.Now().Add(testbed.Patience(time.Minute))
	for {
		recs, err := a.c.Slurm().SacctJobs(ctx, slurm.SacctFilter{JobIDs: ids, AllUsers: true}, "JobID", "JobIDRaw")
		if err != nil {
			t.Fatalf("sacct: %v", err)
		}
		known := map[string]bool{}
		for _, r := range recs {
			known[r["JobIDRaw"]] = true
			base, _, _ := strings.Cut(r["JobID"], "_")
			known[base] = true
		}
		var missing []string
		for _, id := range ids {
			if !known[id] {
				missing = append(missing, id)
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			return missing
		}
		time.Sleep(2 * time.Second)
	}
}
