package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/pools"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/bridge/testbed"
	"github.com/slurmbridge/slurmbridge/elasticd/daemon"
	"github.com/slurmbridge/slurmbridge/quotad/policy"
)

// Mode is how quotas work during a run.
type Mode string

const (
	// Static: quotad is stopped, so each project's guaranteed QOS caps it at its quota and
	// nothing is lent; opportunistic jobs run inside their project's quota too.
	Static Mode = "static"
	// Slurmbridge: pools routing plus quotad lending idle GPUs; opportunistic jobs are
	// submitted with --requeue, for quotad to lend.
	Slurmbridge Mode = "slurmbridge"
	// Elastic: slurmbridge plus elasticd, with the plan's elastic jobs submitted as elastic
	// training jobs (ElasticRule). elasticd runs in this mode only.
	Elastic Mode = "elastic"
)

// testbedQOS names the testbed's QOS: its pools.yaml and quotas.yaml leave the borrow and
// elastic QOS at their defaults (borrow-{account}, elastic-{account}).
var testbedQOS *pools.Config

// IsBorrowQOS says whether qos is a QOS of borrowed GPUs on the testbed: some project's borrow
// QOS, or its elastic QOS.
func IsBorrowQOS(qos string) bool { return testbedQOS.IsLendingQOS(qos) }

// ParseMode reads a mode name.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case Static, Slurmbridge, Elastic:
		return m, nil
	}
	return "", fmt.Errorf("unknown mode %q (static, slurmbridge, elastic)", s)
}

// TestbedProjects reads the testbed's quota table and pairs each account with its user. A
// project guaranteed several types is given the one it holds most of.
func TestbedProjects(quotasYAML string) ([]Project, error) {
	return readProjects(quotasYAML, false)
}

// AnyTypeProjects reads a quota table like TestbedProjects, each project with its whole
// guarantee and no type of its own: on a cluster of a site's size a project holds several
// types and its jobs ask for any, or for their pod's.
func AnyTypeProjects(quotasYAML string) ([]Project, error) {
	return readProjects(quotasYAML, true)
}

func readProjects(quotasYAML string, anyType bool) ([]Project, error) {
	cfg, err := policy.LoadConfig(quotasYAML)
	if err != nil {
		return nil, err
	}
	byUser, err := testbed.Users()
	if err != nil {
		return nil, err
	}
	users := map[string]string{}
	for u, a := range byUser {
		users[a] = u
	}
	var out []Project
	for _, p := range cfg.Projects {
		pr := Project{Account: p.Account, User: users[p.Account], GuaranteedQOS: cfg.Settings.GuaranteedQOSName(p.Account), ByType: maps.Clone(p.GPUs)}
		for _, t := range slices.Sorted(maps.Keys(p.GPUs)) {
			switch {
			case anyType:
				pr.GPUs += p.GPUs[t]
			case p.GPUs[t] > pr.GPUs:
				pr.GPUType, pr.GPUs = t, p.GPUs[t]
			}
		}
		if pr.User == "" || pr.GPUs == 0 {
			continue // no testbed user or no guarantee: nothing to replay for it
		}
		out = append(out, pr)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no project with a testbed user and a GPU guarantee", quotasYAML)
	}
	return out, nil
}

// Runner replays plans on the testbed.
type Runner struct {
	Cluster *testbed.Cluster
	Log     io.Writer
	// Timeout bounds one mode's run after its last submission.
	Timeout time.Duration
	// Elastic is what mode elastic needs (nil: that mode is refused).
	Elastic *ElasticSetup
	// ElasticdMetrics is elasticd's /metrics URL, where mode elastic counts grows and shrinks.
	ElasticdMetrics string
	// QuotadInterval, when set, is quotad's cycle during the replay (quotad is restarted with
	// it). Time is compressed, so the daemons' intervals are too: at ÷240 the testbed's 5 s
	// cycle stands for 20 minutes of trace time, a production 30 s one for 0.125 s.
	QuotadInterval time.Duration
	// QuotaSettings are lines added to the testbed quota table's settings for the modes where
	// quotad runs (e.g. "reclaimBackoff: 15s", "lendOrder: decayed-usage"), to compare quota
	// policies on one window.
	QuotaSettings []string
	// SampleEvery is how often the daemons' cycles and memory are sampled (default 5 s).
	SampleEvery time.Duration
}

func (r *Runner) sampleEvery() time.Duration {
	if r.SampleEvery > 0 {
		return r.SampleEvery
	}
	return 5 * time.Second
}

// Run replays the plan under mode and returns its report. It refuses to start while the
// testbed's users have jobs (after waiting idleWait for them to end), since those would share
// the GPUs being measured.
func (r *Runner) Run(ctx context.Context, mode Mode, pl *Plan, tag string) (Report, []Submitted, error) {
	if err := r.checkIdle(ctx); err != nil {
		return Report{}, nil, err
	}
	if err := r.setMode(ctx, mode, pl.Params.Projects); err != nil {
		return Report{}, nil, err
	}
	capacity, err := r.capacity(ctx)
	if err != nil {
		return Report{}, nil, err
	}
	var before map[string]float64
	if mode == Elastic {
		if before, err = r.elasticdActions(ctx); err != nil {
			return Report{}, nil, err
		}
	}
	// slurmctld's RPCs and the daemons' cycles and memory, throughout the mode.
	diagBefore, diagErr := r.Cluster.Slurm().Diag(ctx)
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	since := time.Now()
	watched := make(chan []DaemonSample, 1)
	go func() {
		watch := newDaemonWatch(filepath.Join(r.Cluster.Dir, "run"),
			map[string]string{"quotad": r.Cluster.QuotadURL() + "/metrics", "elasticd": r.ElasticdMetrics})
		watched <- watch.run(watchCtx, since, r.sampleEvery())
	}()
	fmt.Fprintf(r.Log, "mode %s: submitting %d jobs over %s\n", mode, len(pl.Jobs), pl.Span().Round(time.Second))
	subs, err := r.submit(ctx, mode, pl, tag)
	if err != nil {
		r.cancel(subs)
		return Report{}, subs, err
	}
	if err := r.waitDone(ctx, subs); err != nil {
		r.cancel(subs)
		fmt.Fprintf(r.Log, "mode %s: %v; the jobs left were cancelled and count as lost\n", mode, err)
	}
	stopWatch()
	samples := <-watched
	var rpcs *slurm.Diag
	if diagErr == nil {
		var after slurm.Diag
		if after, diagErr = r.Cluster.Slurm().Diag(ctx); diagErr == nil {
			d := after.Since(diagBefore)
			rpcs = &d
		}
	}
	if diagErr != nil {
		fmt.Fprintf(r.Log, "mode %s: sdiag: %v; no RPC figures\n", mode, diagErr)
	}
	recs, err := r.accounting(ctx, subs)
	if err != nil {
		return Report{}, subs, err
	}
	var workers map[string][]Record
	if mode == Elastic {
		if workers, err = r.workers(ctx, subs, since); err != nil {
			return Report{}, subs, err
		}
	}
	rep := Analyze(mode, subs, recs, workers, capacity)
	rep.DaemonSamples, rep.RPCs = samples, rpcs
	if mode == Elastic {
		after, err := r.elasticdActions(ctx)
		if err != nil {
			return rep, subs, err
		}
		rep.Grows = int(after["grow"] - before["grow"])
		rep.Shrinks = int(after["terminate"] - before["terminate"])
	}
	return rep, subs, nil
}

// usersQueue is the testbed's users' jobs that are queued or running.
func (r *Runner) usersQueue(ctx context.Context) ([]slurm.Job, error) {
	users, err := testbed.Users()
	if err != nil {
		return nil, err
	}
	return r.Cluster.Slurm().Queue(ctx, slurm.QueueRead{Fields: slurm.SummaryFields, Users: slices.Sorted(maps.Keys(users))})
}

// idleWait is how long checkIdle waits for the users' jobs to leave the queue: jobs a previous
// run cancelled a moment ago stay listed (COMPLETING) until their epilog is done.
const idleWait = 60 * time.Second

func (r *Runner) checkIdle(ctx context.Context) error {
	deadline := time.Now().Add(testbed.Patience(idleWait))
	for {
		rows, err := r.usersQueue(ctx)
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the testbed's users have %d jobs queued or running (%s in state %s...) after %s: a replay needs the GPUs to itself",
				len(rows), rows[0].PrintedID, rows[0].State, testbed.Patience(idleWait))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// setMode starts or stops quotad and elasticd. Static mode needs the guaranteed QOS quotad
// created.
func (r *Runner) setMode(ctx context.Context, mode Mode, projects []Project) error {
	if mode == Elastic {
		if r.Elastic == nil {
			return errors.New("mode elastic needs the trainer, a work directory and the pools (Runner.Elastic)")
		}
		conf, err := os.ReadFile(filepath.Join(r.Cluster.Dir, "etc", "plugstack.conf"))
		if err != nil || !strings.Contains(string(conf), "spank_elastic.so") {
			return errors.New("mode elastic needs the SPANK plugin in the testbed's plugstack.conf: make build, then testbed/testbed.sh up")
		}
	}
	action := "start"
	if mode == Static {
		action = "stop"
	}
	var quotadEnv []string
	if r.QuotadInterval > 0 {
		quotadEnv = []string{"QUOTAD_INTERVAL=" + r.QuotadInterval.String()}
	}
	if len(r.QuotaSettings) > 0 && mode != Static {
		table, err := r.quotaTable()
		if err != nil {
			return err
		}
		quotadEnv = append(quotadEnv, "QUOTAD_QUOTAS="+table)
	}
	if r.QuotadInterval > 0 || mode != Static {
		// Restarted, so the cycle is the replay's whatever quotad ran with before.
		if _, err := r.Cluster.Daemon(ctx, "quotad", "stop"); err != nil {
			return fmt.Errorf("quotad stop: %w", err)
		}
	}
	if mode != Static {
		// quotad lends into its projects' borrow QOS: on a fresh testbed whose quotad has not
		// finished a cycle yet (a run without mode static first) those QOS may not exist, and
		// jobs submitted meanwhile would wait outside the guarantees. Apply quotad's settings
		// once before it starts.
		if out, err := r.Cluster.Daemon(ctx, "quotad", "sync"); err != nil {
			return fmt.Errorf("quotad sync: %w (%s)", err, strings.TrimSpace(string(out)))
		}
	}
	if _, err := r.Cluster.Daemon(ctx, "quotad", action, quotadEnv...); err != nil {
		return fmt.Errorf("quotad %s: %w", action, err)
	}
	// elasticd only in mode elastic: in the others no job declares itself elastic, and a
	// stopped elasticd cannot act on anything.
	action = "stop"
	if mode == Elastic {
		action = "start"
	}
	if _, err := r.Cluster.Daemon(ctx, "elasticd", action); err != nil {
		return fmt.Errorf("elasticd %s: %w", action, err)
	}
	if mode != Static {
		return nil
	}
	// A quotad stopped mid-cycle (as just now, or a fresh testbed's first cycle) may have left
	// some of its QOS and account changes undone: a project without its capped guaranteed QOS
	// would run uncapped and the static baseline would be wrong. Apply what is left, then check.
	if out, err := r.Cluster.Daemon(ctx, "quotad", "sync"); err != nil {
		return fmt.Errorf("quotad sync: %w (%s)", err, strings.TrimSpace(string(out)))
	}
	return r.checkStaticQuotas(ctx, projects)
}

// quotaTable writes the testbed's quota table with QuotaSettings added to its settings, and
// returns its path.
func (r *Runner) quotaTable() (string, error) {
	data, err := os.ReadFile(filepath.Join(r.Cluster.Dir, "etc", "quotas.yaml"))
	if err != nil {
		return "", fmt.Errorf("the testbed's quota table: %w", err)
	}
	table, err := testbed.QuotaTableWith(data, r.QuotaSettings...)
	if err != nil {
		return "", fmt.Errorf("the testbed's quota table: %w", err)
	}
	path := filepath.Join(r.Cluster.Dir, "run", "replay-quotas.yaml")
	if err := os.WriteFile(path, table, 0o600); err != nil {
		return "", err
	}
	return path, nil
}

// checkStaticQuotas makes sure each project runs capped: its account's default QOS is its
// guaranteed QOS, and that QOS caps GPUs.
func (r *Runner) checkStaticQuotas(ctx context.Context, projects []Project) error {
	qos, err := r.Cluster.Slurm().QOS(ctx)
	if err != nil {
		return err
	}
	capped := map[string]bool{}
	for _, q := range qos {
		capped[q.Name] = slices.ContainsFunc(slices.Collect(maps.Keys(q.GrpTRES)), func(t string) bool { return strings.HasPrefix(t, "gres/gpu") })
	}
	// The default QOS of each project user's association: what the replay's jobs run in.
	assocs, err := r.Cluster.Slurm().Associations(ctx, slurm.AssociationFilter{})
	if err != nil {
		return err
	}
	defaults := map[string]string{}
	for _, a := range assocs {
		if a.User != "" {
			defaults[a.Account+"|"+a.User] = a.DefaultQOS
		}
	}
	for _, pr := range projects {
		guar := pr.GuaranteedQOS
		if !capped[guar] {
			return fmt.Errorf("static quotas: QOS %s does not cap GPUs: run quotad once (testbed/quotad.sh start)", guar)
		}
		if got := defaults[pr.Account+"|"+pr.User]; got != guar {
			return fmt.Errorf("static quotas: %s's default QOS in account %s is %q, not %s: run quotad once (testbed/quotad.sh start)",
				pr.User, pr.Account, got, guar)
		}
	}
	return nil
}

// Daemons are slurmbridge's daemons a replay starts and stops (testbed/NAME.sh).
var Daemons = []string{"quotad", "elasticd"}

// sacct is the adapter for sacct: times as Unix seconds, and a minute for slurmdbd to answer.
func (r *Runner) sacct() slurm.Client {
	return slurm.Client{Runner: slurm.ExecRunner{Env: append(r.Cluster.Env(), "SLURM_TIME_FORMAT=%s"), Timeout: time.Minute}}
}

// capacity is the GPUs of the nodes that are up.
func (r *Runner) capacity(ctx context.Context) (int, error) {
	nodes, err := r.Cluster.Slurm().Nodes(ctx)
	if err != nil {
		return 0, err
	}
	seen, total := map[string]bool{}, 0
	for i := range nodes {
		if n := &nodes[i]; !seen[n.Name] && n.Up() {
			seen[n.Name] = true
			total += int(n.GPUs())
		}
	}
	if total == 0 {
		return 0, errors.New("no GPU node is up")
	}
	return total, nil
}

// submit submits each job at its arrival time, as its project's user.
func (r *Runner) submit(ctx context.Context, mode Mode, pl *Plan, tag string) ([]Submitted, error) {
	start := time.Now()
	var subs []Submitted
	for _, j := range pl.Jobs {
		if d := time.Until(start.Add(j.Arrival)); d > 0 {
			select {
			case <-ctx.Done():
				return subs, ctx.Err()
			case <-time.After(d):
			}
		}
		args := j.SbatchArgs(mode, tag)
		if mode == Elastic && j.Elastic {
			args = j.ElasticSbatchArgs(tag, *r.Elastic)
		}
		id, msg, err := r.Cluster.SubmitWithMessage(ctx, j.Project.User, args...)
		if err != nil {
			return subs, fmt.Errorf("submitting %s as %s: %w (%s)", j.Task, j.Project.User, err, strings.TrimSpace(msg))
		}
		subs = append(subs, Submitted{JobID: id, Job: j})
	}
	if late := time.Since(start) - pl.Span(); late > 5*time.Second {
		fmt.Fprintf(r.Log, "mode %s: submissions ran %s behind the schedule\n", mode, late.Round(time.Second))
	}
	return subs, nil
}

// waitDone polls squeue until none of the jobs is queued or running.
func (r *Runner) waitDone(ctx context.Context, subs []Submitted) error {
	ctx, cancel := context.WithTimeout(ctx, r.Timeout)
	defer cancel()
	want := map[string]bool{}
	for _, s := range subs {
		want[s.JobID] = true
	}
	for {
		rows, err := r.usersQueue(ctx)
		if err == nil {
			left := 0
			for _, row := range rows {
				if want[row.PrintedID] {
					left++
				}
			}
			if left == 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("jobs still queued after %s", r.Timeout)
		case <-time.After(2 * time.Second):
		}
	}
}

func (r *Runner) cancel(subs []Submitted) {
	ids := make([]string, 0, len(subs))
	for _, s := range subs {
		ids = append(ids, s.JobID)
	}
	if len(ids) > 0 {
		r.Cluster.Cancel(ids...)
	}
}

// accounting reads every run of the jobs from sacct, waiting until slurmdbd has an end time
// for each (the database lags slurmctld).
func (r *Runner) accounting(ctx context.Context, subs []Submitted) ([]Record, error) {
	ids := make([]string, 0, len(subs))
	for _, s := range subs {
		ids = append(ids, s.JobID)
	}
	sacct := r.sacct()
	deadline := time.Now().Add(90 * time.Second)
	for {
		all, err := sacct.SacctJobs(ctx, slurm.SacctFilter{JobIDs: ids, Duplicates: true}, SacctFields...)
		if err != nil {
			return nil, err
		}
		recs, err := Records(all)
		if err != nil {
			return nil, err
		}
		if settled(recs, ids) || time.Now().After(deadline) {
			return recs, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

// workers waits until elasticd has ended the worker jobs of the elastic jobs (it cancels those
// left when their main job ends) and reads their runs from sacct, by main job id. Worker jobs
// are found by the name elasticd gives them, among the testbed users' jobs since the mode began.
func (r *Runner) workers(ctx context.Context, subs []Submitted, since time.Time) (map[string][]Record, error) {
	mains := map[string]string{} // worker job name -> main job id
	var names []string
	for _, s := range subs {
		if s.Job.Elastic {
			id, err := strconv.ParseUint(s.JobID, 10, 32)
			if err != nil {
				return nil, err
			}
			n := daemon.WorkerName(uint32(id))
			mains[n] = s.JobID
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		rows, err := r.usersQueue(ctx)
		left := 0
		for _, row := range rows {
			if mains[row.Name] != "" {
				left++
			}
		}
		if err == nil && left == 0 {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%d elastic worker jobs still queued 2 minutes after their main jobs ended", left)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
	sacct := r.sacct()
	deadline = time.Now().Add(90 * time.Second)
	for {
		all, err := sacct.SacctJobs(ctx, slurm.SacctFilter{AllUsers: true, Duplicates: true, Since: since.Add(-time.Second), Names: names},
			append(slices.Clone(SacctFields), "JobName")...)
		if err != nil {
			return nil, err
		}
		owners := make([]string, len(all))
		for i, rec := range all {
			owners[i] = mains[rec["JobName"]]
		}
		recs, err := Records(all)
		if err != nil {
			return nil, err
		}
		ok := true
		byMain := map[string][]Record{}
		for i, rec := range recs {
			if rec.Start > 0 && rec.End == 0 || rec.Partition == "" {
				ok = false
			}
			byMain[owners[i]] = append(byMain[owners[i]], rec)
		}
		if ok || time.Now().After(deadline) {
			return byMain, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

// elasticdActions reads elasticd_actions_total by action; elasticd may still be starting.
func (r *Runner) elasticdActions(ctx context.Context) (map[string]float64, error) {
	var last error
	for range 50 {
		m, err := scrapeActions(ctx, r.ElasticdMetrics)
		if err == nil {
			return m, nil
		}
		last = err
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil, fmt.Errorf("elasticd metrics: %w", last)
}

func scrapeActions(ctx context.Context, url string) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return ParseActions(body), nil
}

// ParseActions reads the elasticd_actions_total{action="..."} series of a /metrics page.
func ParseActions(page []byte) map[string]float64 {
	out := map[string]float64{}
	const prefix = `elasticd_actions_total{action="`
	for line := range strings.SplitSeq(string(page), "\n") {
		rest, ok := strings.CutPrefix(line, prefix)
		if !ok {
			continue
		}
		action, value, ok := strings.Cut(rest, `"} `)
		if v, err := strconv.ParseFloat(strings.TrimSpace(value), 64); ok && err == nil {
			out[action] = v
		}
	}
	return out
}

// ElasticPools lists the pools of each GPU type in a pools file (bridge/pools YAML): where an
// elastic job's workers may go. Under "" are all the GPU pools, for jobs of any type.
func ElasticPools(poolsYAML string) (map[string][]string, error) {
	cfg, err := pools.Load(poolsYAML)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, p := range cfg.Pools {
		if p.GPUType != "" {
			out[p.GPUType] = append(out[p.GPUType], p.Name)
			out[""] = append(out[""], p.Name)
		}
	}
	return out, nil
}

// settled: every job has a record and every record that started has ended.
func settled(recs []Record, ids []string) bool {
	have := map[string]bool{}
	for _, r := range recs {
		if r.Start > 0 && r.End == 0 || r.Partition == "" {
			return false
		}
		have[r.JobID] = true
	}
	return len(have) == len(ids)
}

// WriteData writes the report's utilisation timeline, waits and daemon samples as CSV files
// under dir, named by label, for plots.
func WriteData(dir, label string, rep *Report) error {
	if err := writeDaemons(dir, label, rep.DaemonSamples); err != nil {
		return err
	}
	var tl strings.Builder
	tl.WriteString("t_s,gpus\n")
	for _, p := range rep.Timeline {
		fmt.Fprintf(&tl, "%.0f,%d\n", p.T, p.GPUs)
	}
	if err := os.WriteFile(filepath.Join(dir, "timeline-"+label+".csv"), []byte(tl.String()), 0o644); err != nil {
		return err
	}
	for _, c := range Classes {
		var w strings.Builder
		w.WriteString("wait_s,fraction\n")
		waits := rep.Waits[c]
		for i, v := range waits {
			fmt.Fprintf(&w, "%.0f,%.4f\n", v, float64(i+1)/float64(len(waits)))
		}
		if err := os.WriteFile(filepath.Join(dir, "waits-"+label+"-"+string(c)+".csv"), []byte(w.String()), 0o644); err != nil {
			return err
		}
	}
	return nil
}
