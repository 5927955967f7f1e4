package slurm

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/gpureq"
)

// The fast queue read: `squeue --Format` text instead of `squeue --json`, which costs 0.3-0.6 ms
// a job on 22.05 and makes a cycle at tens of thousands of jobs older than quotad's freshness
// limit before it is parsed. The field names below exist, spelled so, in squeue's --Format of
// 22.05, 24.11 and 26.05 (src/squeue/opts.c at each tag); each is printed whole (":0") and
// followed by queueSep.
//
// squeue's text output has three traps that the command line and its environment close:
//   - Without --array it folds the pending tasks of an array that Slurm split into records of
//     their own (a task moved to another QOS, say) back into the array's record, whatever their
//     QOS. With --array every task of a record is one line, which ParseQueue folds back by
//     record (JobId), never across records.
//   - SQUEUE_* variables (SQUEUE_USERS, SQUEUE_STATES, SQUEUE_FORMAT...) filter or reshape the
//     output; they are removed, so the default states (pending, running, suspended,
//     completing) of every user, account and partition are listed (--all adds hidden ones).
//   - Times follow SLURM_TIME_FORMAT; it is set to "%s", seconds since the epoch.
//
// TZ is set to UTC, which cannot change an epoch second: glibc's strftime("%s") calls mktime,
// which without TZ stat()s /etc/localtime for every time printed, two per line. On a container's
// overlay file system that is most of squeue's time at tens of thousands of lines.
//
// The reason comes last: it may be Slurm's free-text description (state_desc) instead of the
// reason's name, and only a last field may hold any character, the separator included.

// queueSep separates fields: an ASCII unit separator, which no Slurm name holds.
const queueSep = "\x1f"

// queueFields are the --Format fields, in the order ParseQueue reads them.
var queueFields = []string{
	"JobId",           // the record's own job id: shared by the lines of one array record
	"ArrayJobId",      // the array's id; the job id for a job that is not in an array
	"ArrayTaskId",     // the task id, "N/A" for a job that is not in an array
	"UserName",        //
	"Account",         //
	"QOS",             //
	"Partition",       // comma-separated for a pending job in several partitions
	"State",           // one name: a flag (COMPLETING, REQUEUE_HOLD...) instead of the base state when one is set
	"BatchFlag",       // 0 for salloc/srun allocations, 1 or more for batch jobs
	"Requeue",         // 0 or 1
	"PriorityLong",    // the integer priority
	"SubmitTime",      // epoch seconds, or N/A, Unknown, None
	"StartTime",       // epoch seconds, or N/A, Unknown, None
	"NumNodes",        //
	"NodeList",        // "" while pending
	"tres-per-node",   // "N/A" when unset; hidden (but accepted) from 23.02
	"tres-per-job",    //
	"tres-per-task",   //
	"tres-per-socket", //
	"tres-alloc",      // tres_alloc_str, or tres_req_str while nothing is allocated
	"Reason",          // last: may be free text
}

// QueueFormat is the --Format argument of the fast read.
func QueueFormat() string {
	parts := make([]string, len(queueFields))
	for i, f := range queueFields {
		parts[i] = f + ":0"
		if i < len(queueFields)-1 {
			parts[i] += queueSep
		}
	}
	return strings.Join(parts, ",")
}

// QueueArgs is the squeue command line of the fast read.
func QueueArgs() []string {
	return []string{"--all", "--array", "--noheader", "--Format=" + QueueFormat()}
}

// QueueEnv edits the environment of the fast read (see above).
func QueueEnv(env []string) []string {
	out := make([]string, 0, len(env)+2)
	for _, kv := range env {
		if strings.HasPrefix(kv, "SQUEUE_") || strings.HasPrefix(kv, "SLURM_TIME_FORMAT=") || strings.HasPrefix(kv, "SLURM_BITSTR_LEN=") || strings.HasPrefix(kv, "TZ=") {
			continue
		}
		out = append(out, kv)
	}
	// SLURM_BITSTR_LEN=0: the whole task list of an array record, never cut with "...".
	return append(out, "SLURM_TIME_FORMAT=%s", "SLURM_BITSTR_LEN=0", "TZ=UTC")
}

// EnvRunner is a Runner that can change one command's environment: edit gets the environment
// the command would inherit and returns the one it runs with.
type EnvRunner interface {
	Runner
	RunEnv(ctx context.Context, edit func([]string) []string, name string, args ...string) ([]byte, error)
}

// RunEnv implements EnvRunner.
func (r ExecRunner) RunEnv(ctx context.Context, edit func([]string) []string, name string, args ...string) ([]byte, error) {
	env := r.Env
	if env == nil {
		env = os.Environ()
	}
	r.Env = edit(slices.Clone(env))
	return r.run(ctx, nil, name, args)
}

// QueueJobs lists every job slurmctld holds that is pending, running, suspended or completing,
// from squeue's formatted text output: the fast path for daemons that read the whole queue
// each cycle. A pending array record comes as one Job with all its pending tasks (ArrayTasks).
// Any line that does not parse fails the whole read: never a partial queue. A line whose TRES
// alone cannot be read is a job with Unreadable set, never a failed read: one user's job must
// not blind every reader of the queue.
func (c Client) QueueJobs(ctx context.Context) ([]Job, error) {
	out, err := withEnv(c.Runner, QueueEnv).Run(ctx, "squeue", QueueArgs()...)
	if err != nil {
		return nil, err
	}
	return ParseQueue(out)
}

// QueueVariant leaves a part out of the fast read, to measure what that part costs.
type QueueVariant struct {
	// PerRecord drops --array: one line per array record instead of one per pending task.
	PerRecord bool
	// LocalTime leaves TZ unset: glibc then stat()s /etc/localtime for each time printed.
	LocalTime bool
}

// QueueOutput runs the fast read's squeue, as varied, and returns what it printed, unparsed:
// what squeue itself costs, for benchmarks.
func (c Client) QueueOutput(ctx context.Context, v QueueVariant) ([]byte, error) {
	args := QueueArgs()
	if v.PerRecord {
		args = slices.DeleteFunc(args, func(a string) bool { return a == "--array" })
	}
	edit := QueueEnv
	if v.LocalTime {
		edit = func(env []string) []string {
			return slices.DeleteFunc(QueueEnv(env), func(kv string) bool { return strings.HasPrefix(kv, "TZ=") })
		}
	}
	return withEnv(c.Runner, edit).Run(ctx, "squeue", args...)
}

// QueueError names the line of squeue's output that could not be read.
type QueueError struct {
	Line int // 1-based
	Text string
	Err  error
}

func (e *QueueError) Error() string {
	text := e.Text
	if len(text) > 200 {
		text = text[:200] + "..."
	}
	return fmt.Sprintf("squeue line %d: %v (line %q)", e.Line, e.Err, strings.ReplaceAll(text, queueSep, "|"))
}

func (e *QueueError) Unwrap() error { return e.Err }

// queueStateNames are the names squeue's State field may print: base states and the flags
// that replace them.
var queueStateNames = append(slices.Clone(jobBaseStates), flagsBeforeState...)

// ParseQueue reads the output of squeue with QueueArgs. The lines of one array record (same
// JobId, one per pending task) become one Job whose ArrayTasks lists the tasks; they must be
// consecutive, as squeue prints them, and agree on every field but the task.
func ParseQueue(out []byte) ([]Job, error) {
	var jobs []Job
	seen := map[uint32]bool{}
	lineNo := 0
	var prevLine []byte
	for len(out) > 0 {
		lineNo++
		var line []byte
		if i := bytes.IndexByte(out, '\n'); i >= 0 {
			line, out = out[:i], out[i+1:] // after the last line's newline, out is empty
		} else {
			line, out = out, nil
		}
		// A further task of the array record just read differs from the record's last line
		// in its ArrayTaskId alone: only the task is read. Any other difference (a field
		// squeue printed otherwise) goes through the full parse and its checks.
		if n := len(jobs); n > 0 && len(jobs[n-1].ArrayTasks) > 0 && jobs[n-1].Pending() {
			if task, ok := sameButTask(prevLine, line); ok {
				prev := &jobs[n-1]
				if last := prev.ArrayTasks[len(prev.ArrayTasks)-1]; task <= last {
					return nil, &QueueError{Line: lineNo, Text: string(line), Err: fmt.Errorf("array record %d: task %d after task %d", prev.ID, task, last)}
				}
				prev.ArrayTasks = append(prev.ArrayTasks, task)
				prevLine = line
				continue
			}
		}
		prevLine = line
		j, task, err := parseQueueLine(string(line))
		if err != nil {
			return nil, &QueueError{Line: lineNo, Text: string(line), Err: err}
		}
		if n := len(jobs); n > 0 && jobs[n-1].ID == j.ID {
			prev := &jobs[n-1]
			if err := sameRecord(prev, &j, task); err != nil {
				return nil, &QueueError{Line: lineNo, Text: string(line), Err: err}
			}
			prev.ArrayTasks = append(prev.ArrayTasks, task)
			continue
		}
		if seen[j.ID] {
			return nil, &QueueError{Line: lineNo, Text: string(line), Err: fmt.Errorf("job %d appears again after other jobs", j.ID)}
		}
		seen[j.ID] = true
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// sameButTask reports whether line equals prev but for the ArrayTaskId field (the third), and
// returns line's task id. Both must hold all the fields' separators up to the task.
func sameButTask(prev, line []byte) (uint32, bool) {
	pStart, pEnd, ok := taskField(prev)
	if !ok {
		return 0, false
	}
	lStart, lEnd, ok := taskField(line)
	if !ok || !bytes.Equal(prev[:pStart], line[:lStart]) || !bytes.Equal(prev[pEnd:], line[lEnd:]) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(line[lStart:lEnd]), 10, 32)
	if err != nil {
		return 0, false
	}
	return uint32(n), true
}

// taskField returns the bounds of a line's third field (ArrayTaskId).
func taskField(line []byte) (start, end int, ok bool) {
	first := bytes.IndexByte(line, queueSep[0])
	if first < 0 {
		return 0, 0, false
	}
	second := bytes.IndexByte(line[first+1:], queueSep[0])
	if second < 0 {
		return 0, 0, false
	}
	start = first + 1 + second + 1
	third := bytes.IndexByte(line[start:], queueSep[0])
	if third < 0 {
		return 0, 0, false
	}
	return start, start + third, true
}

// sameRecord checks that a further line of an array record continues it.
func sameRecord(prev, next *Job, task uint32) error {
	if prev.ArrayJobID == 0 || next.ArrayJobID != prev.ArrayJobID {
		return fmt.Errorf("job %d is listed twice and is not an array record", next.ID)
	}
	if !prev.Pending() || prev.StateName() != next.StateName() || prev.QOS != next.QOS || prev.Account != next.Account || prev.Partition != next.Partition {
		return fmt.Errorf("array record %d: task %d differs from the record's first line", next.ID, task)
	}
	if last := prev.ArrayTasks[len(prev.ArrayTasks)-1]; task <= last {
		return fmt.Errorf("array record %d: task %d after task %d", next.ID, task, last)
	}
	return nil
}

// parseQueueLine reads one line; task is the array task id of the line (0 when not a task).
func parseQueueLine(line string) (Job, uint32, error) {
	f := strings.SplitN(line, queueSep, len(queueFields))
	if len(f) != len(queueFields) {
		return Job{}, 0, fmt.Errorf("%d fields, want %d", len(f), len(queueFields))
	}
	var j Job
	var err error
	field := func(i int) string { return f[i] }
	if j.ID, err = parseID(field(0)); err != nil {
		return Job{}, 0, fmt.Errorf("JobId: %w", err)
	}
	arrayJob, err := parseID(field(1))
	if err != nil {
		return Job{}, 0, fmt.Errorf("ArrayJobId: %w", err)
	}
	var task uint32
	if t := field(2); t != "N/A" {
		n, err := strconv.ParseUint(t, 10, 32)
		if err != nil {
			return Job{}, 0, fmt.Errorf("ArrayTaskId %q is not a task id (a task range means squeue ran without --array)", t)
		}
		task = uint32(n)
		j.ArrayJobID = arrayJob
		j.ArrayTasks = []uint32{task}
	} else if arrayJob != j.ID {
		return Job{}, 0, fmt.Errorf("ArrayJobId %d without an ArrayTaskId", arrayJob)
	}
	// Without accounting (no slurmdbd) a job has no account or QOS: "(null)".
	j.User, j.Account, j.QOS, j.Partition = field(3), orEmpty(field(4)), orEmpty(field(5)), field(6)
	for i, v := range []string{j.User, j.Account, j.QOS, j.Partition} {
		if (v == "" && (i == 0 || i == 3)) || strings.ContainsAny(v, " \t") {
			return Job{}, 0, fmt.Errorf("%s %q", queueFields[3+i], v)
		}
	}
	state := strings.ToUpper(field(7))
	if !slices.Contains(queueStateNames, state) {
		return Job{}, 0, fmt.Errorf("unknown state %q", field(7))
	}
	j.State, j.StateFlags = splitState(stateNames{state}, jobBaseStates)
	batch, err := strconv.ParseUint(field(8), 10, 16)
	if err != nil {
		return Job{}, 0, fmt.Errorf("BatchFlag %q", field(8))
	}
	j.Batch = batch > 0
	switch field(9) {
	case "0":
	case "1":
		j.Requeue = true
	default:
		return Job{}, 0, fmt.Errorf("Requeue %q, want 0 or 1", field(9))
	}
	prio, err := strconv.ParseUint(field(10), 10, 32)
	if err != nil {
		return Job{}, 0, fmt.Errorf("PriorityLong %q", field(10))
	}
	j.Priority = uint32(prio)
	if j.Submit, err = parseQueueTime(field(11)); err != nil {
		return Job{}, 0, fmt.Errorf("SubmitTime: %w", err)
	}
	if j.Start, err = parseQueueTime(field(12)); err != nil {
		return Job{}, 0, fmt.Errorf("StartTime: %w", err)
	}
	nodes, err := strconv.ParseUint(field(13), 10, 32)
	if err != nil {
		return Job{}, 0, fmt.Errorf("NumNodes %q", field(13))
	}
	j.NodeCount = uint32(nodes)
	j.Nodes = orEmpty(field(14))
	j.TRESPerNode, j.TRESPerJob, j.TRESPerTask, j.TRESPerSocket = orEmpty(field(15)), orEmpty(field(16)), orEmpty(field(17)), orEmpty(field(18))
	// squeue prints the request until something is allocated.
	if tres, err := gpureq.ParseTRES(orEmpty(field(19))); err != nil {
		j.Unreadable = fmt.Sprintf("tres-alloc: %v", err) // the job is kept (see Job.Unreadable)
	} else if j.Pending() {
		j.TRESReq = tres
	} else {
		j.TRESAlloc = tres
	}
	j.StateReason = field(20)
	if j.StateReason == "" {
		return Job{}, 0, fmt.Errorf("no Reason")
	}
	return j, task, nil
}

func parseID(s string) (uint32, error) {
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("%q is not a job id", s)
	}
	return uint32(n), nil
}

// orEmpty maps squeue's "N/A" (and "(null)") for an unset string to "".
func orEmpty(s string) string {
	if s == "N/A" || s == "(null)" {
		return ""
	}
	return s
}

// parseQueueTime reads a time squeue printed with SLURM_TIME_FORMAT=%s; Slurm's default
// format (2006-01-02T15:04:05, local time) is read too, for a runner that cannot set the
// variable. N/A, Unknown and None are the zero time.
func parseQueueTime(s string) (time.Time, error) {
	switch s {
	case "N/A", "Unknown", "None":
		return time.Time{}, nil
	}
	if sec, err := strconv.ParseInt(s, 10, 64); err == nil {
		return unixTime(sec), nil
	}
	t, err := time.ParseInLocation("2006-01-02T15:04:05", s, time.Local)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither epoch seconds nor YYYY-MM-DDTHH:MM:SS (SLURM_TIME_FORMAT?)", s)
	}
	return t.UTC(), nil
}
