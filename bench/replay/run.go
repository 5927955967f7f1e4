package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/bridge/testbed"
	"github.com/slurmbridge/slurmbridge/quotad/policy"
)

// Mode is how quotas work during a run.
type Mode string

const (
	// Static: quotad is stopped, so each project's guaranteed QOS caps it at its quota and
	// nothing is lent; opportunistic jobs run inside their project's quota too.
	Static Mode = "static"
	// Slurmbridge: pools routing plus quotad lending idle GPUs; opportunistic jobs are
	// submitted to the borrow QOS.
	Slurmbridge Mode = "slurmbridge"
)

// BorrowQOS is the testbed's borrow QOS (slurm-conf/testbed/quotas.yaml settings.borrowQOS).
const BorrowQOS = "borrow"

// ParseMode reads a mode name.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case Static, Slurmbridge:
		return m, nil
	}
	return "", fmt.Errorf("unknown mode %q (static, slurmbridge)", s)
}

// TestbedProjects reads the testbed's quota table and pairs each account with its user. A
// project guaranteed several types is given the one it holds most of.
func TestbedProjects(quotasYAML string) ([]Project, error) {
	cfg, err := policy.LoadConfig(quotasYAML)
	if err != nil {
		return nil, err
	}
	users := map[string]string{}
	for u, a := range testbed.Users {
		users[a] = u
	}
	var out []Project
	for _, p := range cfg.Projects {
		pr := Project{Account: p.Account, User: users[p.Account]}
		for _, t := range slices.Sorted(maps.Keys(p.GPUs)) {
			if p.GPUs[t] > pr.GPUs {
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
	Cluster  *testbed.Cluster
	RepoRoot string // for testbed/quotad.sh
	Log      io.Writer
	// Timeout bounds one mode's run after its last submission.
	Timeout time.Duration
}

// Run replays the plan under mode and returns its report. It refuses to start while the
// testbed's users have jobs, since those would share the GPUs being measured.
func (r *Runner) Run(ctx context.Context, mode Mode, pl *Plan, tag string) (Report, []Submitted, error) {
	if err := r.checkIdle(ctx); err != nil {
		return Report{}, nil, err
	}
	if err := r.setMode(ctx, mode); err != nil {
		return Report{}, nil, err
	}
	capacity, err := r.capacity(ctx)
	if err != nil {
		return Report{}, nil, err
	}
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
	recs, err := r.accounting(ctx, subs)
	if err != nil {
		return Report{}, subs, err
	}
	return Analyze(mode, subs, recs, capacity), subs, nil
}

// users are the testbed's users, for squeue -u.
func users() string {
	return strings.Join(slices.Sorted(maps.Keys(testbed.Users)), ",")
}

func (r *Runner) checkIdle(ctx context.Context) error {
	out, err := r.Cluster.Run(ctx, "squeue", "-h", "-u", users(), "-o", "%i")
	if err != nil {
		return err
	}
	if ids := strings.Fields(string(out)); len(ids) > 0 {
		return fmt.Errorf("the testbed's users have %d jobs queued or running (%s...): a replay needs the GPUs to itself", len(ids), ids[0])
	}
	return nil
}

// setMode starts or stops quotad. Static mode needs the guaranteed QOS quotad created.
func (r *Runner) setMode(ctx context.Context, mode Mode) error {
	action := "start"
	if mode == Static {
		action = "stop"
	}
	if _, err := r.quotad(ctx, action); err != nil {
		return fmt.Errorf("quotad %s: %w", action, err)
	}
	if mode == Slurmbridge {
		return nil
	}
	out, err := r.Cluster.Run(ctx, "sacctmgr", "-n", "-P", "show", "qos", "format=name,grptres")
	if err != nil {
		return err
	}
	capped := 0
	for line := range strings.SplitSeq(string(out), "\n") {
		name, tres, _ := strings.Cut(line, "|")
		if strings.HasPrefix(name, "guar-") && strings.Contains(tres, "gres/gpu=") {
			capped++
		}
	}
	if capped == 0 {
		return errors.New("no guaranteed QOS with a GPU cap: run quotad once (testbed/quotad.sh start) so static quotas exist")
	}
	return nil
}

// QuotadRunning says whether the testbed's quotad runs (to restore it after a replay).
func (r *Runner) QuotadRunning(ctx context.Context) bool {
	_, err := r.quotad(ctx, "status")
	return err == nil
}

// SetQuotad starts or stops the testbed's quotad.
func (r *Runner) SetQuotad(ctx context.Context, running bool) error {
	action := "stop"
	if running {
		action = "start"
	}
	_, err := r.quotad(ctx, action)
	return err
}

func (r *Runner) quotad(ctx context.Context, action string) ([]byte, error) {
	run := slurm.ExecRunner{Env: append(r.Cluster.Env(), "TESTBED_DIR="+r.Cluster.Dir), Timeout: time.Minute}
	return run.Run(ctx, "bash", filepath.Join(r.RepoRoot, "testbed", "quotad.sh"), action)
}

// capacity is the GPUs of the nodes that are up.
func (r *Runner) capacity(ctx context.Context) (int, error) {
	nodes, err := slurm.CommandFetcher{Runner: r.Cluster.Runner()}.Nodes(ctx)
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
		id, msg, err := r.Cluster.SubmitWithMessage(ctx, j.Project.User, j.SbatchArgs(mode, tag)...)
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
		out, err := r.Cluster.Run(ctx, "squeue", "-h", "-u", users(), "-o", "%i")
		if err == nil {
			left := 0
			for _, id := range strings.Fields(string(out)) {
				if want[id] {
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
	run := slurm.ExecRunner{Env: append(r.Cluster.Env(), "SLURM_TIME_FORMAT=%s"), Timeout: time.Minute}
	deadline := time.Now().Add(90 * time.Second)
	for {
		out, err := run.Run(ctx, "sacct", "-D", "-X", "-n", "-P", "-j", strings.Join(ids, ","), "-o", SacctFields)
		if err != nil {
			return nil, err
		}
		recs, err := ParseSacct(out)
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

// WriteData writes the report's utilisation timeline and waits as CSV files under dir, named
// by label, for plots.
func WriteData(dir, label string, rep *Report) error {
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
