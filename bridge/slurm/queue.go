package slurm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/gpureq"
)

// The queue is read one way, Client.Queue, which lists jobs as Job; QueueRead says which jobs
// and JobFields what of them. squeue --json (AllFields) has every field but costs 0.3-0.6 ms a
// job on 22.05, which makes a cycle at tens of thousands of jobs older than quotad's
// freshness limit before it is parsed, and 22.05 ignores squeue's filters with it. The other
// fields are squeue's --Format text, read by field name: each JobFields is a list of named
// fields, the same list gives the --Format argument and the reader of each field.
//
// The field names exist, spelled so, in squeue's --Format of 22.05, 24.11 and 26.05
// (src/squeue/opts.c at each tag); each is printed whole (":0") and followed by queueSep.
//
// squeue's text output has three traps that the command line and its environment close:
//   - Without --array it folds the pending tasks of an array that Slurm split into records of
//     their own (a task moved to another QOS, say) back into the array's record, whatever their
//     QOS. With --array every task of a record is one line, which the read folds back by
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
// In the fast read the reason comes last: it may be Slurm's free-text description (state_desc) instead of the
// reason's name, and only a last field may hold any character, the separator included.

// JobFields are what a queue read reads of each job.
type JobFields int

const (
	// SchedulingFields are what quotad decides on, for every job of the queue at once, from
	// squeue's text (the fast read). A pending array record comes as one Job with all its
	// pending tasks (ArrayTasks). Any line that does not parse fails the whole read: never a
	// partial queue. A line whose TRES alone cannot be read is a job with Unreadable set,
	// never a failed read: one user's job must not blind every reader of the queue.
	SchedulingFields JobFields = iota
	// AllFields are every field of Job but PrintedID and ArrayThrottle, from squeue --json: for
	// poolctl and elasticd. Slurm 22.05 ignores squeue's filters with --json and lists every
	// job slurmctld still holds, finished ones included (for MinJobAge): a read of AllFields
	// takes no filter, and callers filter by state.
	AllFields
	// NameFields are ID and Name. A name may hold any character, and only a last field may,
	// so names are not in the fast read: elastic workers are found by name
	// (ElasticWorkerName), and a second read lists the names of the jobs in the QOS where
	// workers run (a few lines). Names only explain jobs, nothing is decided on them, so a
	// line that does not parse (a name with a newline in it) is skipped, not fatal.
	NameFields
	// ThrottleFields are ArrayJobID and ArrayThrottle of each pending array record (ID is
	// not read). The throttle (sbatch --array=0-99%N) is not in the fast read: with --array
	// squeue drops the "%N" from each task's id. Without --array a pending array record's
	// ArrayTaskId is its task list followed by "%N" (Slurm appends it after formatting the
	// list, however short SLURM_BITSTR_LEN cuts the list). One trap: without --array squeue
	// folds the array's split-off pending tasks of the same name and partition into its
	// record and prints the merged list without the "%N". Read it therefore only over the QOS
	// whose jobs may be lent (the guaranteed ones): a task quotad lent waits in a borrow QOS
	// and is left out. Any line that does not parse fails the read.
	ThrottleFields
	// TimeLimitFields are PrintedID, ID and TimeLimit (TimeLimitUnknown where Slurm reports none):
	// a line per job and per pending array task ("12_3"), not folded back by record, for the
	// jobs a daemon is about to move to another QOS (QOSMoveMayChangeTimeLimit).
	TimeLimitFields
	// SummaryFields are what a person checks of a few jobs (by id, name or user): ID,
	// PrintedID, User, Account, QOS, Partition, the state, StateReason, Nodes and Name. One
	// line per record, as squeue prints it without --array.
	SummaryFields
)

// QueueRead says which jobs a queue read lists and what it reads of them. Empty filters match
// every job.
type QueueRead struct {
	Fields JobFields
	JobIDs []string // ids as squeue takes them: "12", "12_3"
	Names  []string
	Users  []string
	QOS    []string
	// PendingOnly lists pending jobs alone; AllStates adds the jobs that have ended but that
	// slurmctld still holds (MinJobAge). Neither: pending, running, suspended and completing.
	PendingOnly, AllStates bool
}

func (r QueueRead) filtered() bool {
	return len(r.JobIDs) > 0 || len(r.Names) > 0 || len(r.Users) > 0 || len(r.QOS) > 0 || r.PendingOnly || r.AllStates
}

// Queue lists the jobs r asks for. A read limited to QOS (NameFields, ThrottleFields) with
// none listed reads nothing.
func (c Client) Queue(ctx context.Context, r QueueRead) ([]Job, error) {
	if r.Fields == AllFields {
		if r.filtered() {
			return nil, errors.New("squeue --json: Slurm 22.05 ignores filters with it")
		}
		return fetch(ctx, wholeTaskLists(c.Runner), parseJSON, "squeue", QueueArgs(r)...)
	}
	format := textFormats[r.Fields]
	if format == nil {
		return nil, fmt.Errorf("no queue read of fields %d", r.Fields)
	}
	if format.byQOS && len(r.QOS) == 0 {
		return []Job{}, nil
	}
	out, err := withEnv(c.Runner, format.env).Run(ctx, "squeue", QueueArgs(r)...)
	if err != nil {
		return nil, err
	}
	return format.parse(out)
}

// ParseQueue reads what squeue printed for a read of fields: `squeue --json` for AllFields,
// else the text of QueueArgs.
func ParseQueue(out []byte, fields JobFields) ([]Job, error) {
	if fields == AllFields {
		return parseJSON(out)
	}
	format := textFormats[fields]
	if format == nil {
		return nil, fmt.Errorf("no queue read of fields %d", fields)
	}
	return format.parse(out)
}

// QueueArgs is the squeue command line of a read.
func QueueArgs(r QueueRead) []string {
	format := textFormats[r.Fields]
	if format == nil {
		return []string{"--json"}
	}
	var args []string
	if format.everyPartition {
		args = append(args, "--all")
	}
	if format.perTask || format.taskLines {
		args = append(args, "--array")
	}
	args = append(args, "--noheader")
	switch {
	case r.AllStates:
		args = append(args, "--states=all")
	case r.PendingOnly || format.pendingOnly:
		args = append(args, "--states=PENDING")
	}
	for _, f := range []struct {
		flag string
		list []string
	}{{"--jobs=", r.JobIDs}, {"--name=", r.Names}, {"--user=", r.Users}, {"--qos=", r.QOS}} {
		if len(f.list) > 0 {
			args = append(args, f.flag+strings.Join(f.list, ","))
		}
	}
	return append(args, "--Format="+format.spec())
}

// queueSep separates fields: an ASCII unit separator, which no Slurm name holds.
const queueSep = "\x1f"

// textField is one field of squeue's --Format output: its name there, and how its text lands
// in the line's Job.
type textField struct {
	name string
	read func(l *textLine, v string) error
}

// textLine is one line of squeue's text output as it is read.
type textLine struct {
	job    Job
	task   uint32 // the ArrayTaskId of a line of the fast read
	isTask bool
	tres   string // tres-alloc, which is the request or the allocation by the state
}

// textFormat is one text read: its fields in the order squeue prints them, and how squeue runs.
type textFormat struct {
	fields         []textField
	everyPartition bool // --all: hidden partitions' jobs too
	perTask        bool // --array: a line per pending array task, folded back by record
	taskLines      bool // --array, each task's line a Job of its own
	pendingOnly    bool // --states=PENDING
	byQOS          bool // reads only the QOS it is given; none, no read
	skipBad        bool // a line that does not parse is skipped (the names only explain)
	skipBlank      bool
	env            func([]string) []string
	// check reads what takes more than one field, after the fields; nil: nothing.
	check func(l *textLine) error
}

// spec is the --Format argument: each field printed whole (":0") and followed by queueSep.
func (f *textFormat) spec() string {
	parts := make([]string, len(f.fields))
	for i, field := range f.fields {
		parts[i] = field.name + ":0"
		if i < len(f.fields)-1 {
			parts[i] += queueSep
		}
	}
	return strings.Join(parts, ",")
}

// index is the position of the field named name.
func (f *textFormat) index(name string) int {
	return slices.IndexFunc(f.fields, func(t textField) bool { return t.name == name })
}

func (f *textFormat) names() []string {
	names := make([]string, len(f.fields))
	for i, field := range f.fields {
		names[i] = field.name
	}
	return names
}

// The fields, by --Format name. Only a last field may hold any character, the separator
// included.
var (
	jobIDField      = textField{"JobId", func(l *textLine, v string) (err error) { l.job.ID, err = parseID(v); return prefixed("JobId", err) }}
	arrayJobIDField = textField{"ArrayJobId", func(l *textLine, v string) (err error) {
		l.job.ArrayJobID, err = parseID(v)
		return prefixed("ArrayJobId", err)
	}}
	// ArrayTaskId under --array: one task id, "N/A" for a job that is not in an array.
	arrayTaskField = textField{"ArrayTaskId", func(l *textLine, v string) error {
		if v == "N/A" {
			return nil
		}
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return fmt.Errorf("ArrayTaskId %q is not a task id (a task range means squeue ran without --array)", v)
		}
		l.task, l.isTask = uint32(n), true
		return nil
	}}
	// ArrayTaskId without --array: a record's task list, cut short by SLURM_BITSTR_LEN,
	// followed by "%N" for a throttled array.
	arrayThrottleField = textField{"ArrayTaskId", func(l *textLine, v string) error {
		_, limit, throttled := strings.Cut(v, "%")
		if !throttled {
			return nil
		}
		n, err := strconv.ParseUint(limit, 10, 31)
		if err != nil || n == 0 {
			return fmt.Errorf("array throttle %q is not a positive number", limit)
		}
		l.job.ArrayThrottle = int(n)
		return nil
	}}
	printedIDField = textField{"JobArrayID", func(l *textLine, v string) error {
		if v == "" || strings.ContainsAny(v, " \t") {
			return fmt.Errorf("JobArrayID %q", v)
		}
		l.job.PrintedID = v
		return nil
	}}
	userField      = textField{"UserName", nameField("UserName", func(j *Job) *string { return &j.User }, true)}
	accountField   = textField{"Account", nameField("Account", func(j *Job) *string { return &j.Account }, false)}
	qosField       = textField{"QOS", nameField("QOS", func(j *Job) *string { return &j.QOS }, false)}
	partitionField = textField{"Partition", nameField("Partition", func(j *Job) *string { return &j.Partition }, true)}
	// State is one name: a flag (COMPLETING, REQUEUE_HOLD...) instead of the base state when
	// one is set.
	stateField = textField{"State", func(l *textLine, v string) error {
		state := strings.ToUpper(v)
		if !slices.Contains(queueStateNames, state) {
			return fmt.Errorf("unknown state %q", v)
		}
		l.job.State, l.job.StateFlags = splitState(stateNames{state}, jobBaseStates)
		return nil
	}}
	// BatchFlag is 0 for salloc/srun allocations, 1 or more for batch jobs.
	batchField = textField{"BatchFlag", func(l *textLine, v string) error {
		batch, err := strconv.ParseUint(v, 10, 16)
		if err != nil {
			return fmt.Errorf("BatchFlag %q", v)
		}
		l.job.Batch = batch > 0
		return nil
	}}
	requeueField = textField{"Requeue", func(l *textLine, v string) error {
		switch v {
		case "0":
		case "1":
			l.job.Requeue = true
		default:
			return fmt.Errorf("Requeue %q, want 0 or 1", v)
		}
		return nil
	}}
	priorityField = textField{"PriorityLong", func(l *textLine, v string) error {
		prio, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return fmt.Errorf("PriorityLong %q", v)
		}
		l.job.Priority = uint32(prio)
		return nil
	}}
	submitField = textField{"SubmitTime", func(l *textLine, v string) (err error) {
		l.job.Submit, err = parseQueueTime(v)
		return prefixed("SubmitTime", err)
	}}
	startField = textField{"StartTime", func(l *textLine, v string) (err error) {
		l.job.Start, err = parseQueueTime(v)
		return prefixed("StartTime", err)
	}}
	nodeCountField = textField{"NumNodes", func(l *textLine, v string) error {
		nodes, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return fmt.Errorf("NumNodes %q", v)
		}
		l.job.NodeCount = uint32(nodes)
		return nil
	}}
	// TimeLimit is "UNLIMITED", "NOT_SET" (a job with neither a limit of its own nor a
	// partition), "INVALID" (over a year) or [days-][hours:]minutes:seconds, as squeue prints
	// it on every supported release.
	timeLimitField = textField{"TimeLimit", func(l *textLine, v string) error {
		switch v {
		case "UNLIMITED":
			l.job.TimeLimit = 0
		case "NOT_SET", "INVALID":
			l.job.TimeLimitUnknown = true
		default:
			minutes, err := parseDuration(v)
			if err != nil {
				return fmt.Errorf("TimeLimit %q: %w", v, err)
			}
			l.job.TimeLimit = minutes
		}
		return nil
	}}
	nodesField = textField{"NodeList", func(l *textLine, v string) error { l.job.Nodes = orEmpty(v); return nil }}
	// The tres-per-* fields print "N/A" when unset; hidden (but accepted) from 23.02.
	tresPerNodeField   = textField{"tres-per-node", func(l *textLine, v string) error { l.job.TRESPerNode = orEmpty(v); return nil }}
	tresPerJobField    = textField{"tres-per-job", func(l *textLine, v string) error { l.job.TRESPerJob = orEmpty(v); return nil }}
	tresPerTaskField   = textField{"tres-per-task", func(l *textLine, v string) error { l.job.TRESPerTask = orEmpty(v); return nil }}
	tresPerSocketField = textField{"tres-per-socket", func(l *textLine, v string) error { l.job.TRESPerSocket = orEmpty(v); return nil }}
	// tres-alloc is tres_alloc_str, or tres_req_str while nothing is allocated.
	tresAllocField = textField{"tres-alloc", func(l *textLine, v string) error { l.tres = orEmpty(v); return nil }}
	// Reason may be Slurm's free-text description (state_desc) instead of the reason's name.
	reasonField = textField{"Reason", func(l *textLine, v string) error {
		if v == "" {
			return errors.New("no Reason")
		}
		l.job.StateReason = v
		return nil
	}}
	nameOfJobField = textField{"Name", func(l *textLine, v string) error { l.job.Name = v; return nil }}
)

// nameField reads a name that holds no blank: "(null)" (a job without accounting has no
// account or QOS) and "N/A" are "", which a required name may not be.
func nameField(name string, of func(*Job) *string, required bool) func(*textLine, string) error {
	return func(l *textLine, v string) error {
		v = orEmpty(v)
		if (v == "" && required) || strings.ContainsAny(v, " \t") {
			return fmt.Errorf("%s %q", name, v)
		}
		*of(&l.job) = v
		return nil
	}
}

func prefixed(field string, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %w", field, err)
	}
	return nil
}

var textFormats = map[JobFields]*textFormat{
	SchedulingFields: {
		fields: []textField{
			jobIDField,      // the record's own job id: shared by the lines of one array record
			arrayJobIDField, // the array's id; the job id for a job that is not in an array
			arrayTaskField,
			userField, accountField, qosField,
			partitionField, // comma-separated for a pending job in several partitions
			stateField, batchField, requeueField, priorityField,
			submitField, startField, // epoch seconds, or N/A, Unknown, None
			nodeCountField,
			nodesField, // "" while pending
			tresPerNodeField, tresPerJobField, tresPerTaskField, tresPerSocketField,
			tresAllocField,
			reasonField, // last: may be free text
		},
		everyPartition: true, perTask: true, env: QueueEnv, check: checkSchedulingLine,
	},
	NameFields: {
		fields:         []textField{jobIDField, nameOfJobField},
		everyPartition: true, byQOS: true, skipBad: true, skipBlank: true, env: QueueEnv,
	},
	ThrottleFields: {
		fields:         []textField{arrayJobIDField, arrayThrottleField},
		everyPartition: true, pendingOnly: true, byQOS: true, skipBlank: true, env: throttleEnv,
	},
	TimeLimitFields: {
		fields:         []textField{printedIDField, jobIDField, timeLimitField},
		everyPartition: true, taskLines: true, pendingOnly: true, skipBlank: true, env: QueueEnv,
	},
	SummaryFields: {
		fields: []textField{jobIDField, printedIDField, userField, accountField, qosField, partitionField, stateField,
			reasonField, nodesField, nameOfJobField},
		skipBlank: true, env: QueueEnv,
	},
}

// checkSchedulingLine reads the array task and the TRES of a line of the fast read.
func checkSchedulingLine(l *textLine) error {
	j := &l.job
	if l.isTask {
		j.ArrayTasks = []uint32{l.task}
	} else if j.ArrayJobID != j.ID {
		return fmt.Errorf("ArrayJobId %d without an ArrayTaskId", j.ArrayJobID)
	} else {
		j.ArrayJobID = 0
	}
	// squeue prints the request until something is allocated.
	if tres, err := gpureq.ParseTRES(l.tres); err != nil {
		j.Unreadable = fmt.Sprintf("tres-alloc: %v", err) // the job is kept (see Job.Unreadable)
	} else if j.Pending() {
		j.TRESReq = tres
	} else {
		j.TRESAlloc = tres
	}
	return nil
}

// throttleEnv is QueueEnv with the task lists cut short: only the "%N" after them is read.
func throttleEnv(env []string) []string {
	env = QueueEnv(env)
	for i, kv := range env {
		if strings.HasPrefix(kv, "SLURM_BITSTR_LEN=") {
			env[i] = "SLURM_BITSTR_LEN=32"
		}
	}
	return env
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

// parse reads the output of squeue with this format's QueueArgs. Under --array the lines of
// one array record (same JobId, one per pending task) become one Job whose ArrayTasks lists
// the tasks; they must be consecutive, as squeue prints them, and agree on every field but the
// task.
func (f *textFormat) parse(out []byte) ([]Job, error) {
	jobs := []Job{}
	seen := map[uint32]bool{}
	taskAt := f.index(arrayTaskField.name)
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
		if f.skipBlank && len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		// A further task of the array record just read differs from the record's last line
		// in its ArrayTaskId alone: only the task is read. Any other difference (a field
		// squeue printed otherwise) goes through the full parse and its checks.
		if n := len(jobs); f.perTask && n > 0 && len(jobs[n-1].ArrayTasks) > 0 && jobs[n-1].Pending() {
			if task, ok := sameButTask(prevLine, line, taskAt); ok {
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
		var l textLine
		if err := f.parseLine(string(line), &l); err != nil {
			if f.skipBad {
				continue
			}
			return nil, &QueueError{Line: lineNo, Text: string(line), Err: err}
		}
		if !f.perTask {
			jobs = append(jobs, l.job)
			continue
		}
		j := &l.job
		if n := len(jobs); n > 0 && jobs[n-1].ID == j.ID {
			prev := &jobs[n-1]
			if err := sameRecord(prev, j, l.task); err != nil {
				return nil, &QueueError{Line: lineNo, Text: string(line), Err: err}
			}
			prev.ArrayTasks = append(prev.ArrayTasks, l.task)
			continue
		}
		if seen[j.ID] {
			return nil, &QueueError{Line: lineNo, Text: string(line), Err: fmt.Errorf("job %d appears again after other jobs", j.ID)}
		}
		seen[j.ID] = true
		jobs = append(jobs, *j)
	}
	return jobs, nil
}

// parseLine reads one line into l, each field by its reader.
func (f *textFormat) parseLine(line string, l *textLine) error {
	values := strings.SplitN(line, queueSep, len(f.fields))
	if len(values) != len(f.fields) {
		return fmt.Errorf("%d fields, want %d: %s", len(values), len(f.fields), strings.Join(f.names(), " "))
	}
	for i, field := range f.fields {
		if err := field.read(l, values[i]); err != nil {
			return err
		}
	}
	if f.check != nil {
		return f.check(l)
	}
	return nil
}

// sameButTask reports whether line equals prev but for its field at taskAt (ArrayTaskId), and
// returns line's task id. Both must hold all the fields' separators up to the task.
func sameButTask(prev, line []byte, taskAt int) (uint32, bool) {
	pStart, pEnd, ok := fieldBounds(prev, taskAt)
	if !ok {
		return 0, false
	}
	lStart, lEnd, ok := fieldBounds(line, taskAt)
	if !ok || !bytes.Equal(prev[:pStart], line[:lStart]) || !bytes.Equal(prev[pEnd:], line[lEnd:]) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(line[lStart:lEnd]), 10, 32)
	if err != nil {
		return 0, false
	}
	return uint32(n), true
}

// fieldBounds returns the bounds of a line's field at index i, which is not the last.
func fieldBounds(line []byte, i int) (start, end int, ok bool) {
	for range i {
		sep := bytes.IndexByte(line[start:], queueSep[0])
		if sep < 0 {
			return 0, 0, false
		}
		start += sep + 1
	}
	sep := bytes.IndexByte(line[start:], queueSep[0])
	if sep < 0 {
		return 0, 0, false
	}
	return start, start + sep, true
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
	args := QueueArgs(QueueRead{Fields: SchedulingFields})
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

// parseDuration reads squeue's [days-][hours:]minutes:seconds as whole minutes.
func parseDuration(s string) (uint32, error) {
	var days uint64
	if d, rest, ok := strings.Cut(s, "-"); ok {
		n, err := strconv.ParseUint(d, 10, 16)
		if err != nil {
			return 0, fmt.Errorf("days %q", d)
		}
		days, s = n, rest
	}
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return 0, errors.New("want [days-][hours:]minutes:seconds")
	}
	var secs uint64
	for i, p := range parts {
		n, err := strconv.ParseUint(p, 10, 32)
		if err != nil || i > 0 && n >= 60 {
			return 0, fmt.Errorf("part %q", p)
		}
		secs = secs*60 + n
	}
	total := days*86400 + secs
	if total%60 != 0 || total/60 > math.MaxUint32 {
		return 0, errors.New("not whole minutes")
	}
	return uint32(total / 60), nil
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
