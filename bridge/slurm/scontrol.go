package slurm

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Config is `scontrol show config` as key = value pairs (the first of each key wins: later
// sections such as cgroup.conf's may repeat a name).
type Config map[string]string

// ParseConfig reads what `scontrol show config` prints.
func ParseConfig(out []byte) Config {
	conf := Config{}
	for _, line := range strings.Split(string(out), "\n") {
		k, v, found := strings.Cut(line, " = ")
		k = strings.TrimSpace(k)
		if !found || k == "" || strings.Contains(k, " ") {
			continue
		}
		if _, seen := conf[k]; !seen {
			conf[k] = strings.TrimSpace(v)
		}
	}
	return conf
}

// Get is a setting's value; Slurm prints unset ones as "(null)", returned as "".
func (c Config) Get(key string) string {
	if v := c[key]; v != "(null)" {
		return v
	}
	return ""
}

// List splits a comma-separated setting.
func (c Config) List(key string) []string {
	var out []string
	for _, s := range strings.Split(c.Get(key), ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// ShowConfig reads slurmctld's running configuration; it fails when slurmctld does not answer.
func (c Client) ShowConfig(ctx context.Context) (Config, error) {
	out, err := c.Runner.Run(ctx, "scontrol", "show", "config")
	if err != nil {
		return nil, err
	}
	return ParseConfig(out), nil
}

// Ping fails unless slurmctld answers.
func (c Client) Ping(ctx context.Context) error {
	_, err := c.Runner.Run(ctx, "scontrol", "ping")
	return err
}

// Reconfigure makes slurmctld reread its configuration files (and, from 23.11, restart; see
// Release.ReconfigureRestarts).
func (c Client) Reconfigure(ctx context.Context) error {
	_, err := c.Runner.Run(ctx, "scontrol", "reconfigure")
	return err
}

// BatchScript is a job's batch script as slurmctld keeps it ("-": on stdout, not in a file).
func (c Client) BatchScript(ctx context.Context, jobID uint32) ([]byte, error) {
	out, err := c.Runner.Run(ctx, "scontrol", "write", "batch_script", formatID(jobID), "-")
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("job %d: empty batch script", jobID)
	}
	return out, nil
}

// MaxIDsPerUpdate bounds the job ids of one scontrol run: its jobid= list is one argument,
// which Linux caps at 128 KiB, and one slow run should not hold up every move of a cycle.
const MaxIDsPerUpdate = 1000

// UpdateJobsQOS moves pending jobs to another QOS with as few scontrol runs as
// MaxIDsPerUpdate allows. An id is a job id ("123") or an array task ("123_7"): updating a task
// that is still in its array's pending record splits it off into a record of its own, and
// leaves the other tasks where they are. Where a QOS update of several tasks reaches each
// (Version.QOSUpdateReachesEveryTask), the tasks of one array go as one id (FoldArrayTasks),
// so slurmctld takes one request per array, not per task. scontrol goes on after a failure,
// naming it on stderr; failed maps each id it named (or whose outcome
// a failed run left unknown) to what it said. err is set only when no run could be made
// (ctx ended); the moves made before are in the result's complement.
//
// A move never changes a job's time limit: where slurmctld may give the job its new QOS's
// MaxWall (Version.QOSMoveMayChangeTimeLimit, or a release that cannot be learned), each job's
// limit is read just before and named in the update, one run per distinct limit.
func (c Client) UpdateJobsQOS(ctx context.Context, ids []string, qos string) (failed map[string]string, err error) {
	groups, failed := c.groupByTimeLimit(ctx, ids)
	fold := func(ids []string) []string { return ids }
	if v, err := c.SlurmVersion(ctx); err == nil && v.QOSUpdateReachesEveryTask() {
		fold = FoldArrayTasks
	}
	for gi, g := range groups {
		for start := 0; start < len(g.ids); start += MaxIDsPerUpdate {
			if err := ctx.Err(); err != nil {
				for _, id := range g.ids[start:] {
					failed[id] = "not tried: " + err.Error()
				}
				for _, later := range groups[gi+1:] {
					for _, id := range later.ids {
						failed[id] = "not tried: " + err.Error()
					}
				}
				return failed, err
			}
			batch := g.ids[start:min(start+MaxIDsPerUpdate, len(g.ids))]
			maps.Copy(failed, c.updateQOS(ctx, batch, fold, qos, g.limit))
		}
	}
	return failed, nil
}

// A run of many requests (ids not folded into fewer) takes scontrol's time, one request after
// another: slurmctld spent 0.071 s on 431 UPDATE_JOB that took scontrol 1.1 s (26.05, 152
// nodes). So a long batch goes as up to updateRunsAtOnce runs side by side, of at least
// minIDsPerRun ids each: the requests are independent, and slurmctld serves them one at a time
// under its job lock all the same. quotad's moves come in chunks of 50 (actuate's moveChunk),
// one run each: on 26.05, in the cycle that had just changed 200 QOS, four runs side by side
// were no faster than one, as each request waited on slurmctld taking in the QOS change.
const (
	updateRunsAtOnce = 4
	minIDsPerRun     = 50
)

// updateQOS moves batch in one scontrol run, or in several at once where it makes many
// requests, and returns the failures of all.
func (c Client) updateQOS(ctx context.Context, batch []string, fold func([]string) []string, qos, limit string) map[string]string {
	run := func(ids []string) map[string]string {
		args := []string{"update", "jobid=" + strings.Join(fold(ids), ","), "qos=" + qos}
		if limit != "" {
			args = append(args, "timelimit="+limit)
		}
		_, runErr := c.Runner.Run(ctx, "scontrol", args...)
		return UpdateFailures(ids, runErr)
	}
	parts := min(updateRunsAtOnce, len(fold(batch))/minIDsPerRun)
	if parts <= 1 {
		return run(batch)
	}
	var (
		mu     sync.Mutex
		wg     sync.WaitGroup
		failed = map[string]string{}
	)
	for part := range slices.Chunk(batch, (len(batch)+parts-1)/parts) {
		wg.Go(func() {
			f := run(part)
			mu.Lock()
			defer mu.Unlock()
			maps.Copy(failed, f)
		})
	}
	wg.Wait()
	return failed
}

// timeLimitGroup is the jobs of one QOS update and the time limit it names ("" none).
type timeLimitGroup struct {
	limit string
	ids   []string
}

// groupByTimeLimit splits ids by the time limit a QOS update of them must name: one group
// naming none where this release keeps a job's limit across a QOS update; else one group per
// limit, read now. failed holds the ids it will not move: their limit could not be read, or
// Slurm reports none (NOT_SET, INVALID), which the update could not keep. A job squeue no
// longer lists as pending goes into the update without a limit: scontrol refuses it anyway
// (a QOS changes only while a job is pending) and says why.
func (c Client) groupByTimeLimit(ctx context.Context, ids []string) ([]timeLimitGroup, map[string]string) {
	failed := map[string]string{}
	if len(ids) == 0 {
		return nil, failed
	}
	v, err := c.SlurmVersion(ctx)
	if err == nil && !v.QOSMoveMayChangeTimeLimit() {
		return []timeLimitGroup{{ids: ids}}, failed
	}
	why := "Slurm " + v.String() + " may give a job its new QOS's MaxWall as its time limit"
	if err != nil {
		why = "this Slurm's version is unknown (" + err.Error() + "), and some give a job its new QOS's MaxWall as its time limit"
	}
	byPrinted, byRecord, unknown := map[string]string{}, map[string]string{}, map[string]bool{}
	for start := 0; start < len(ids); start += MaxIDsPerUpdate {
		batch := ids[start:min(start+MaxIDsPerUpdate, len(ids))]
		jobs, err := c.Queue(ctx, QueueRead{Fields: TimeLimitFields, JobIDs: batch})
		if err != nil {
			for _, id := range ids {
				failed[id] = "not moved: " + why + ", and reading its time limit failed: " + err.Error()
			}
			return nil, failed
		}
		for _, j := range jobs {
			limit := TimeLimitArg(j.TimeLimit)
			if j.TimeLimitUnknown {
				limit, unknown[j.PrintedID] = "", true
			}
			byPrinted[j.PrintedID] = limit
			byRecord[formatID(j.ID)] = limit
		}
	}
	var groups []timeLimitGroup
	at := map[string]int{}
	for _, id := range ids {
		limit, ok := byPrinted[id]
		if !ok {
			limit = byRecord[id]
		}
		if unknown[id] {
			failed[id] = "not moved: " + why + ", and " + NoTimeLimitToKeep
			continue
		}
		i, seen := at[limit]
		if !seen {
			i = len(groups)
			at[limit] = i
			groups = append(groups, timeLimitGroup{limit: limit})
		}
		groups[i].ids = append(groups[i].ids, id)
	}
	return groups, failed
}

// TimeLimitArg is a time limit in minutes (0 unlimited) as scontrol's timelimit= takes it.
func TimeLimitArg(minutes uint32) string {
	if minutes == 0 {
		return "UNLIMITED"
	}
	return strconv.FormatUint(uint64(minutes), 10)
}

// LendJob moves one pending job, submitted to start later (--begin), into qos and lets it start
// now: how a privileged daemon (elasticd, for a worker it submitted as its owner) lends a job
// that its user may not put into a lending QOS. Not --hold: slurmctld skips its test of whether
// the nodes could ever run a held job, and a worker no pool can run must be refused at sbatch.
// A job that cannot be moved keeps its begin time and starts then where it was submitted. The
// move keeps the job's time limit, as UpdateJobsQOS does.
func (c Client) LendJob(ctx context.Context, jobID uint32, qos string) error {
	id := formatID(jobID)
	failed, err := c.UpdateJobsQOS(ctx, []string{id}, qos)
	if err != nil {
		return fmt.Errorf("moving job %s to QOS %s: %w", id, qos, err)
	}
	if why, bad := failed[id]; bad {
		return fmt.Errorf("moving job %s to QOS %s: %s", id, qos, why)
	}
	if _, err := c.Runner.Run(ctx, "scontrol", "update", "jobid="+id, "starttime=now"); err != nil {
		return fmt.Errorf("starting job %s now: %w", id, err)
	}
	return nil
}

// FoldArrayTasks writes the tasks of each array among ids as one id, "123_[1-5,7]", in the
// place of the array's first task; other ids stay as they are. scontrol sends each id of a
// jobid= list as its own request, and slurmctld updates every task a request names under one
// lock: 400 tasks of one array cost one request instead of 400 (each a MUNGE credential, a
// connection and a reply).
func FoldArrayTasks(ids []string) []string {
	tasks := map[string][]int{}
	at := map[string]int{} // where each array's id goes in out
	var out []string
	for _, id := range ids {
		job, task, ok := arrayTaskID(id)
		if !ok {
			out = append(out, id)
			continue
		}
		if _, seen := at[job]; !seen {
			at[job] = len(out)
			out = append(out, "")
		}
		tasks[job] = append(tasks[job], task)
	}
	for job, i := range at {
		if ts := tasks[job]; len(ts) == 1 {
			out[i] = job + "_" + strconv.Itoa(ts[0])
		} else {
			out[i] = job + "_[" + taskRanges(ts) + "]"
		}
	}
	return out
}

// arrayTaskID splits "123_7" into its array's job id and task; ok is false for anything else.
func arrayTaskID(id string) (job string, task int, ok bool) {
	job, t, found := strings.Cut(id, "_")
	if !found || job == "" || strings.Trim(job, "0123456789") != "" || t == "" || strings.Trim(t, "0123456789") != "" {
		return "", 0, false
	}
	n, err := strconv.Atoi(t)
	return job, n, err == nil
}

// taskRanges writes task ids as Slurm writes a task set: sorted, "1-5,7".
func taskRanges(ts []int) string {
	ts = slices.Clone(ts)
	slices.Sort(ts)
	ts = slices.Compact(ts)
	var b strings.Builder
	for i := 0; i < len(ts); {
		j := i
		for j+1 < len(ts) && ts[j+1] == ts[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(ts[i]))
		if j > i {
			b.WriteString("-" + strconv.Itoa(ts[j]))
		}
		i = j + 1
	}
	return b.String()
}

// printedIDs are the ids among known that scontrol means by a job id it prints: the id itself,
// or every task of a task set, which it prints as it sent it ("123_1-5,7") or as slurmctld
// wrote it back ("123_1-3,5" in 22.05 and 24.11, "123_[1-3,5]" from 25.05).
func printedIDs(printed string, known map[string]bool) []string {
	if known[printed] {
		return []string{printed}
	}
	job, set, found := strings.Cut(printed, "_")
	if !found {
		return nil
	}
	set = strings.TrimSuffix(strings.TrimPrefix(set, "["), "]")
	type span struct{ lo, hi int }
	var spans []span
	for r := range strings.SplitSeq(set, ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		if !isRange {
			hi = lo
		}
		a, err1 := strconv.Atoi(lo)
		b, err2 := strconv.Atoi(hi)
		if err1 != nil || err2 != nil || a > b {
			return nil
		}
		spans = append(spans, span{a, b})
	}
	var out []string
	for id := range known {
		j, t, ok := arrayTaskID(id)
		if !ok || j != job {
			continue
		}
		if slices.ContainsFunc(spans, func(s span) bool { return s.lo <= t && t <= s.hi }) {
			out = append(out, id)
		}
	}
	return out
}

// truncatedSet reads "123_1-49,51-99,101-1..." (22.05's ARRAY_ID_BUF_SIZE cut): the array's
// job id, and whether the set was cut.
func truncatedSet(printed string) (job string, cut bool) {
	job, set, found := strings.Cut(printed, "_")
	if !found || job == "" || strings.Trim(job, "0123456789") != "" || !strings.HasSuffix(set, "...") {
		return "", false
	}
	return job, true
}

// arrayOf reports whether known holds a task of array job.
func arrayOf(job string, known map[string]bool) bool {
	for id := range known {
		if j, _, ok := arrayTaskID(id); ok && j == job {
			return true
		}
	}
	return false
}

// The reasons a move's failure names, which callers and tests read as codes.
const (
	// OutcomeUnknown starts the reason of an id whose move may or may not have happened.
	OutcomeUnknown = "outcome unknown"
	// SetListCut: Slurm 22.05 cut a failed task set's list at 32 bytes, so which tasks failed
	// is unknown.
	SetListCut = "Slurm cut the set's list short"
	// NoTimeLimitToKeep: a move that must keep the job's time limit cannot read it.
	NoTimeLimitToKeep = "Slurm reports no time limit of it to keep (NOT_SET or INVALID)"
)

// UpdateFailures reads which of ids a `scontrol update jobid=LIST` run failed for. scontrol
// prints "MESSAGE for job ID" when a job's request fails and "ID: MESSAGE" for the tasks of an
// array request that came to the same end (22.05 to 26.05 alike), ID a task set where the
// request named several (FoldArrayTasks); 22.05 and 24.11 print the set that succeeded too,
// as "ID: No error", when others failed. A failed run whose stderr names none of its ids, or
// says more than its named failures, leaves the other ids' outcome unknown: they are reported
// failed too, with the run's error, and the next cycle sees what really happened.
func UpdateFailures(ids []string, runErr error) map[string]string {
	failed := map[string]string{}
	if runErr == nil {
		return failed
	}
	stderr := ""
	var cmdErr *CommandError
	if errors.As(runErr, &cmdErr) {
		stderr = cmdErr.Stderr
	}
	known := map[string]bool{}
	for _, id := range ids {
		known[id] = true
	}
	var unexplained []string
	cutFailures := map[string]string{} // array job id -> what a truncated failed set said
	for line := range strings.SplitSeq(stderr, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if msg, id, ok := cutLast(line, " for job "); ok {
			if named := printedIDs(id, known); len(named) > 0 {
				for _, id := range named {
					failed[id] = msg
				}
				continue
			}
		}
		if id, msg, ok := strings.Cut(line, ": "); ok {
			if named := printedIDs(id, known); len(named) > 0 {
				if msg == "No error" {
					continue
				}
				for _, id := range named {
					failed[id] = msg
				}
				continue
			}
			// 22.05 writes a task set into 32 bytes and ends a longer one with "...": a
			// success so cut says nothing of the others; a failure leaves the array's tasks
			// that no other line names unknown, and no other array's.
			if job, cut := truncatedSet(id); cut && arrayOf(job, known) {
				if msg != "No error" {
					cutFailures[job] = msg
				}
				continue
			}
		}
		unexplained = append(unexplained, line)
	}
	for job, msg := range cutFailures {
		for id := range known {
			if j, _, ok := arrayTaskID(id); ok && j == job {
				if _, named := failed[id]; !named {
					failed[id] = OutcomeUnknown + ", a task set of its array failed (" + msg + ") but " + SetListCut
				}
			}
		}
	}
	if len(failed) > 0 && len(unexplained) == 0 && cmdErr != nil && cmdErr.ExitCode == 1 {
		return failed // every failure named: the other ids were updated
	}
	why := runErr.Error()
	if len(unexplained) > 0 {
		why = strings.Join(unexplained, "; ")
	}
	for _, id := range ids {
		if _, named := failed[id]; !named {
			failed[id] = OutcomeUnknown + ", scontrol failed: " + why
		}
	}
	return failed
}

func cutLast(s, sep string) (before, after string, found bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

// JobUpdate is what UpdateJob changes; empty fields stay as they are.
type JobUpdate struct {
	Partition string
	Gres      string // e.g. "gpu:a100:1"
}

// UpdateJob changes a job's request, as its owner would with scontrol update: the job_submit
// plugin's job_modify sees it.
func (c Client) UpdateJob(ctx context.Context, jobID uint32, u JobUpdate) error {
	args := []string{"update", "jobid=" + formatID(jobID)}
	if u.Partition != "" {
		args = append(args, "partition="+u.Partition)
	}
	if u.Gres != "" {
		args = append(args, "gres="+u.Gres)
	}
	_, err := c.Runner.Run(ctx, "scontrol", args...)
	return err
}

func formatID(id uint32) string { return strconv.FormatUint(uint64(id), 10) }

// PartitionSpec is a partition made at run time (scontrol create), up at once and without a
// time limit: benchmarks make a partition of their own over existing nodes and remove it after.
type PartitionSpec struct {
	Name  string
	Nodes string // a host list: cpu-[1-2]
	// ForceOverSubscribe, when above 0, lets that many jobs share each core (OverSubscribe=FORCE:N).
	ForceOverSubscribe int
	Hidden             bool // left out of sinfo and squeue unless asked for
}

// CreatePartition makes the partition in slurmctld (not in slurm.conf: it is gone after a restart).
func (c Client) CreatePartition(ctx context.Context, p PartitionSpec) error {
	args := []string{"create", "PartitionName=" + p.Name, "Nodes=" + p.Nodes}
	if p.ForceOverSubscribe > 0 {
		args = append(args, "OverSubscribe=FORCE:"+strconv.Itoa(p.ForceOverSubscribe))
	}
	if p.Hidden {
		args = append(args, "Hidden=YES")
	}
	_, err := c.Runner.Run(ctx, "scontrol", append(args, "State=UP", "MaxTime=INFINITE")...)
	return err
}

// DeletePartition removes a partition; slurmctld refuses while jobs of it have not ended.
func (c Client) DeletePartition(ctx context.Context, name string) error {
	_, err := c.Runner.Run(ctx, "scontrol", "delete", "PartitionName="+name)
	return err
}
