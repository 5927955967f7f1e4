package slurm

import (
	"bytes"
	"cmp"
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

// Job is one job of the queue, whichever read listed it (Client.Queue): a read fills the fields
// its JobFields name and leaves the others zero. From squeue --json (AllFields) every supported
// release (22.05, 24.11, 26.05) decodes to the same values; see wire.go for what differs.
type Job struct {
	// ID is the record's own job id: an array task with a record of its own has its own id,
	// the pending tasks still in the array's record share the array's.
	ID uint32
	// PrintedID is the id as squeue prints it to people (SummaryFields): "12", "12_3" for an
	// array task, "12_[4-9]" for a pending array record, "12+0" for a heterogeneous job's part.
	PrintedID string
	// Name is the job's name (--job-name); any user may name a job anything.
	Name    string
	User    string
	Account string
	// Partition is the job's partition; for a pending job routed to several pools, the
	// comma-separated list (see Partitions).
	Partition string
	QOS       string
	// State is the base state: PENDING, RUNNING, SUSPENDED, COMPLETED, CANCELLED... It is ""
	// when Slurm 22.05 printed a flag instead (it names only the flag, e.g. COMPLETING).
	State string
	// StateFlags are the flags on the base state: COMPLETING, CONFIGURING, REQUEUE_HOLD...
	StateFlags  []string
	StateReason string // why it is pending: Resources, Priority, JobHeldUser, None...
	// Requeue is the job's effective requeue flag: --requeue/--no-requeue, else slurm.conf's
	// JobRequeue at submission.
	Requeue bool
	// Batch is Slurm's batch_flag: true for sbatch jobs, false for salloc and srun
	// allocations, which Slurm can never requeue.
	Batch bool
	// ArrayJobID is the job array of an array task or of a pending array record; 0 for a job
	// that is not in an array. ArrayTasks are the task ids the record stands for, ascending:
	// one for a task with a record of its own, several for the pending tasks Slurm still keeps
	// in the array's record. SchedulingFields fill both for every record; AllFields (squeue
	// --json) fill ArrayTasks only for a pending array record (a task with a record of its own
	// is one).
	ArrayJobID uint32
	ArrayTasks []uint32
	// The GPU request as Slurm prints it: "gres:gpu:a100:2" (22.05), "gres/gpu:a100:2" or
	// "gres/gpu:a100=2" (later releases); GPURequest reads them.
	TRESPerNode, TRESPerJob, TRESPerTask, TRESPerSocket string
	TRESReq                                             gpureq.TRES // tres_req_str: what the job asks for
	TRESAlloc                                           gpureq.TRES // tres_alloc_str: what it holds; empty while pending
	NodeCount                                           uint32
	Nodes                                               string // allocated nodes as a hostlist, e.g. "a100-[1-2]"; "" while pending
	Submit                                              time.Time
	// Start is when the job started, or for a pending job Slurm's estimate (often far off);
	// zero when unknown.
	Start    time.Time
	Priority uint32
	// ArrayThrottle is the array's limit on tasks running at once (sbatch --array=...%N), 0 for
	// none; only ThrottleFields reads it, for a pending array record.
	ArrayThrottle int
	// Unreadable says what of the job's line the text read could not read ("" when all of it was):
	// its TRES (tres-alloc), whose names come from the user's request (licenses, burst
	// buffers), and which a release may spell in a way we do not know. The job is still
	// listed, with TRESReq and TRESAlloc nil, so that a reader can count it at its worst
	// instead of failing the whole queue for one job. The JSON read never sets it: a field it
	// cannot read fails the read.
	Unreadable string

	// The fields below only squeue --json gives (AllFields): who owns the job numerically, where
	// its batch script runs, which GPU indices it holds on each node, and the parts of its
	// request that elasticd asks for again for an elastic job's workers.
	UserID    uint32
	GroupID   uint32
	BatchHost string // node running the batch script; "" while pending
	WorkDir   string // current_working_directory
	// GresDetail is one entry per allocated node, in the order of the job's node list, e.g.
	// "gpu:a100:1(IDX:0)" or "gpu:a100:2(IDX:0-1)".
	GresDetail []string
	TimeLimit  uint32 // minutes; 0 when unlimited or unknown
	// TimeLimitUnknown says Slurm reported no time limit (squeue's NOT_SET or INVALID):
	// TimeLimit 0 then is not UNLIMITED. Only TimeLimitFields reads it.
	TimeLimitUnknown bool
	// StdOut is the batch script's standard output: expanded (/tmp/slurm-12.out) on 24.11 and,
	// through stdout_expanded, from 25.05; 22.05 prints the pattern as submitted
	// (/tmp/slurm-%j.out). Its directory is the same either way.
	StdOut string
	// Tasks (0 when unknown) and Features (--constraint, "" none) are parts of the request as
	// submitted; the CPUs and memory are in TRESReq.
	Tasks    uint32
	Features string
	// Restarts is how often Slurm requeued the job (restart_cnt).
	Restarts uint32
}

// jobBaseStates are the base states of a job (JOB_STATE_BASE); every other name is a flag.
var jobBaseStates = []string{
	"PENDING", "RUNNING", "SUSPENDED", "COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL",
	"PREEMPTED", "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY",
}

// flagsBeforeState are the flags Slurm 22.05 prints instead of the base state, in the order it
// checks them: a job with any of them set shows the first one alone. squeue's text output does
// the same on every release; 26.05 adds EXPEDITING (an expedited requeue).
var flagsBeforeState = []string{
	"COMPLETING", "STAGE_OUT", "CONFIGURING", "EXPEDITING", "RESIZING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD",
	"SPECIAL_EXIT", "STOPPED", "REVOKED", "RESV_DEL_HOLD", "SIGNALING",
}

// StateName is the job's state as one name, the way Slurm 22.05 prints it: the first of
// flagsBeforeState that is set, else the base state. It reads the same on every release.
func (j *Job) StateName() string {
	for _, f := range flagsBeforeState {
		if slices.Contains(j.StateFlags, f) {
			return f
		}
	}
	return j.State
}

// pendingStates wait for an allocation: PENDING, and the names 22.05 (and squeue's text output
// on every release) prints instead of it when a flag is set: a requeued or held job, and from
// 26.05 an expedited requeue.
var pendingStates = []string{"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD", "SPECIAL_EXIT", "EXPEDITING"}

// runningStates hold an allocation: RUNNING and the flag names 22.05 prints for a running job
// (CONFIGURING while nodes boot, COMPLETING until the epilog is done).
var runningStates = []string{"RUNNING", "CONFIGURING", "COMPLETING", "RESIZING", "SIGNALING", "STAGE_OUT"}

// Pending reports whether the job waits for an allocation.
func (j *Job) Pending() bool { return slices.Contains(pendingStates, j.StateName()) }

// Running reports whether the job holds an allocation (suspended jobs do not count).
func (j *Job) Running() bool { return slices.Contains(runningStates, j.StateName()) }

// TaskCount is how many jobs the record stands for: its pending array tasks, else 1.
func (j *Job) TaskCount() int { return max(1, len(j.ArrayTasks)) }

// Partitions splits Partition: a pending job may list several.
func (j *Job) Partitions() []string {
	var parts []string
	for p := range strings.SplitSeq(j.Partition, ",") {
		if p != "" {
			parts = append(parts, p)
		}
	}
	return parts
}

// GPURequest reads the job's GPU request from its tres_per_* fields.
func (j *Job) GPURequest() (gpureq.Request, error) {
	return gpureq.Parse(gpureq.Fields{
		PerJob: j.TRESPerJob, PerNode: j.TRESPerNode, PerSocket: j.TRESPerSocket, PerTask: j.TRESPerTask,
	})
}

type wireJob struct {
	JobID         uint32     `json:"job_id"`
	UserName      string     `json:"user_name"`
	Account       string     `json:"account"`
	Partition     string     `json:"partition"`
	QOS           string     `json:"qos"`
	JobState      stateNames `json:"job_state"`
	StateReason   string     `json:"state_reason"`
	Requeue       *bool      `json:"requeue"`
	BatchFlag     *bool      `json:"batch_flag"`
	TRESPerNode   string     `json:"tres_per_node"`
	TRESPerJob    string     `json:"tres_per_job"`
	TRESPerTask   string     `json:"tres_per_task"`
	TRESPerSocket string     `json:"tres_per_socket"`
	TRESReqStr    string     `json:"tres_req_str"`
	TRESAllocStr  string     `json:"tres_alloc_str"`
	NodeCount     number     `json:"node_count"`
	Nodes         string     `json:"nodes"`
	SubmitTime    number     `json:"submit_time"`
	StartTime     number     `json:"start_time"`
	Priority      number     `json:"priority"`
	ArrayJobID    number     `json:"array_job_id"`
	// The pending tasks an array record still holds, as a range list ("2-3%2", "0-9:3,12");
	// "" for any other job. Printed whole only when SLURM_BITSTR_LEN=0 (Queue sets it).
	ArrayTaskString string `json:"array_task_string"`

	Name       string   `json:"name"`
	UserID     uint32   `json:"user_id"`
	GroupID    uint32   `json:"group_id"`
	BatchHost  string   `json:"batch_host"`
	WorkDir    string   `json:"current_working_directory"`
	GresDetail []string `json:"gres_detail"`
	TimeLimit  number   `json:"time_limit"`
	// standard_output is expanded by 24.11 (data_parser v0.0.42) only; from v0.0.43 (25.05)
	// stdout_expanded has the expanded path.
	StdOut         string `json:"standard_output"`
	StdOutExpanded string `json:"stdout_expanded"`
	Tasks          number `json:"tasks"`
	Features       string `json:"features"`
	Restarts       number `json:"restart_cnt"`
}

// parseJSON reads the output of `squeue --json` of any supported release. An answer with
// errors, or without a "jobs" array, is an error: never a partial list that makes the queue
// look shorter than it is.
func parseJSON(data []byte) ([]Job, error) {
	var resp struct {
		envelope
		Jobs *[]wireJob `json:"jobs"`
	}
	if err := decode(data, "squeue", &resp, &resp.envelope); err != nil {
		return nil, err
	}
	if resp.Jobs == nil {
		return nil, errors.New(`squeue JSON has no "jobs" array`)
	}
	jobs := make([]Job, 0, len(*resp.Jobs))
	for _, w := range *resp.Jobs {
		j, err := w.job()
		if err != nil {
			return nil, fmt.Errorf("squeue JSON: job %d: %w", w.JobID, err)
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

func (w *wireJob) job() (Job, error) {
	if w.JobID == 0 {
		return Job{}, errors.New("no job_id")
	}
	if len(w.JobState) == 0 {
		return Job{}, errors.New("no job_state")
	}
	j := Job{
		ID: w.JobID, User: w.UserName, Account: w.Account, Partition: w.Partition, QOS: w.QOS,
		StateReason: w.StateReason,
		TRESPerNode: w.TRESPerNode, TRESPerJob: w.TRESPerJob, TRESPerTask: w.TRESPerTask, TRESPerSocket: w.TRESPerSocket,
		Nodes:  w.Nodes,
		Submit: unixTime(w.SubmitTime.unixTime()), Start: unixTime(w.StartTime.unixTime()),
		Name: w.Name, UserID: w.UserID, GroupID: w.GroupID, BatchHost: w.BatchHost, WorkDir: w.WorkDir,
		GresDetail: w.GresDetail, StdOut: cmp.Or(w.StdOutExpanded, w.StdOut), Features: w.Features,
	}
	j.State, j.StateFlags = splitState(w.JobState, jobBaseStates)
	var err error
	if j.NodeCount, err = w.NodeCount.uint32(); err != nil {
		return Job{}, fmt.Errorf("node_count: %w", err)
	}
	if j.Priority, err = w.Priority.uint32(); err != nil {
		return Job{}, fmt.Errorf("priority: %w", err)
	}
	if j.TRESReq, err = gpureq.ParseTRES(w.TRESReqStr); err != nil {
		return Job{}, fmt.Errorf("tres_req_str: %w", err)
	}
	if j.TRESAlloc, err = gpureq.ParseTRES(w.TRESAllocStr); err != nil {
		return Job{}, fmt.Errorf("tres_alloc_str: %w", err)
	}
	// Whether Slurm could requeue the job decides whether it may ever be lent: never guess it.
	if w.Requeue == nil {
		return Job{}, errors.New("no requeue")
	}
	if w.BatchFlag == nil {
		return Job{}, errors.New("no batch_flag")
	}
	j.Requeue, j.Batch = *w.Requeue, *w.BatchFlag
	if j.ArrayJobID, err = w.ArrayJobID.uint32(); err != nil {
		return Job{}, fmt.Errorf("array_job_id: %w", err)
	}
	if j.TimeLimit, err = w.TimeLimit.uint32(); err != nil {
		return Job{}, fmt.Errorf("time_limit: %w", err)
	}
	if j.Tasks, err = w.Tasks.uint32(); err != nil {
		return Job{}, fmt.Errorf("tasks: %w", err)
	}
	if j.Restarts, err = w.Restarts.uint32(); err != nil {
		return Job{}, fmt.Errorf("restart_cnt: %w", err)
	}
	if w.ArrayTaskString != "" {
		if j.ArrayTasks, err = ParseTaskIDs(w.ArrayTaskString); err != nil {
			return Job{}, fmt.Errorf("array_task_string: %w", err)
		}
	}
	return j, nil
}

// unixTime maps Slurm's 0 ("not known") to the zero time.
func unixTime(sec int64) time.Time {
	if sec <= 0 {
		return time.Time{}
	}
	return time.Unix(sec, 0).UTC()
}

// maxArrayTasks bounds what ParseTaskIDs expands: Slurm's MaxArraySize is at most 4000001.
const maxArrayTasks = 4_000_001

// ParseTaskIDs reads a job array's task list as Slurm prints it: ids and ranges separated by
// commas, a range optionally with a step ("0-9:3"), the whole optionally followed by the
// throttle ("%2"), optionally in brackets. A list Slurm cut short ("...": SLURM_BITSTR_LEN
// too small) is an error, never fewer tasks than there are.
func ParseTaskIDs(s string) ([]uint32, error) {
	list := strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	if i := strings.IndexByte(list, '%'); i >= 0 {
		list = list[:i]
	}
	var ids []uint32
	for part := range strings.SplitSeq(list, ",") {
		first, last, step := part, part, "1"
		if r, st, ok := strings.Cut(part, ":"); ok {
			part, step = r, st
			first, last = part, part
		}
		if a, b, ok := strings.Cut(part, "-"); ok {
			first, last = a, b
		}
		lo, err1 := strconv.ParseUint(first, 10, 32)
		hi, err2 := strconv.ParseUint(last, 10, 32)
		by, err3 := strconv.ParseUint(step, 10, 32)
		if err1 != nil || err2 != nil || err3 != nil || hi < lo || by == 0 {
			return nil, fmt.Errorf("task list %q: %q is not a task id or range", s, part)
		}
		for id := lo; id <= hi; id += by {
			if len(ids) >= maxArrayTasks {
				return nil, fmt.Errorf("task list %q: more than %d tasks", s, maxArrayTasks)
			}
			if n := len(ids); n > 0 && uint32(id) <= ids[n-1] {
				return nil, fmt.Errorf("task list %q: task %d after task %d", s, id, ids[n-1])
			}
			ids = append(ids, uint32(id))
		}
	}
	return ids, nil
}

// GPUIndices reads the GPU indices of one gres_detail entry: "gpu:a100:2(IDX:0,2-3)" gives
// [0 2 3]; an entry without GPUs ("" or "gpu:0(IDX:N/A)") gives none.
func GPUIndices(detail string) ([]int, error) {
	_, idx, ok := strings.Cut(detail, "(IDX:")
	if !ok {
		return nil, nil
	}
	idx, ok = strings.CutSuffix(idx, ")")
	if !ok {
		return nil, fmt.Errorf("gres_detail %q: no closing parenthesis", detail)
	}
	if idx == "N/A" || idx == "" {
		return nil, nil
	}
	var out []int
	for part := range strings.SplitSeq(idx, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		b := a
		if err == nil && isRange {
			b, err = strconv.Atoi(hi)
		}
		if err != nil || a < 0 || b < a || b-a > 1024 {
			return nil, fmt.Errorf("gres_detail %q: bad index %q", detail, part)
		}
		for i := a; i <= b; i++ {
			out = append(out, i)
		}
	}
	return out, nil
}

// elasticWorkerPrefix starts the name of every worker job elasticd submits.
const elasticWorkerPrefix = "elastic-worker-"

// ElasticWorkerName is the job name of the workers elasticd submits for main job main: what
// elasticd finds its workers by, and quotad tells them by.
func ElasticWorkerName(main uint32) string {
	return elasticWorkerPrefix + strconv.FormatUint(uint64(main), 10)
}

// ElasticWorkerOf reads the main job's id from a worker's name; false when name is no
// worker's. Any user may name a job so: whoever relies on it checks the main job.
func ElasticWorkerOf(name string) (uint32, bool) {
	rest, ok := strings.CutPrefix(name, elasticWorkerPrefix)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(rest, 10, 32)
	if err != nil || n == 0 || strconv.FormatUint(n, 10) != rest {
		return 0, false
	}
	return uint32(n), true
}

// ArrayTaskThrottle is an array's limit on tasks running at once (sbatch --array=...%N), 0 for
// none, from `scontrol -o show job ARRAYJOBID`. The throttle read (ThrottleFields) loses it for an array
// with a pending task split off in the same QOS: squeue folds that task back into the array's
// line and rewrites the line's task list without the "%N". scontrol prints it
// (ArrayTaskThrottle=N) on the array's own record whatever its tasks' records, on 22.05, 24.11
// and 26.05 alike. One run per array, so only for the few arrays concerned.
func (c Client) ArrayTaskThrottle(ctx context.Context, arrayJobID uint32) (int, error) {
	out, err := c.Runner.Run(ctx, "scontrol", "-o", "show", "job", formatID(arrayJobID))
	if err != nil {
		return 0, err
	}
	return ParseArrayTaskThrottle(out, arrayJobID)
}

// ParseArrayTaskThrottle reads the throttle of array arrayJobID from `scontrol -o show job`
// output: one line per record, fields "Key=value" split by spaces. Only the fields before
// JobName are read: they are slurmctld's own (JobId, ArrayJobId, ArrayTaskId,
// ArrayTaskThrottle), while a job's name, comment and paths are its owner's and may hold any
// text, "ArrayTaskThrottle=..." too. A record of another job, or no record, is an error.
func ParseArrayTaskThrottle(out []byte, arrayJobID uint32) (int, error) {
	throttle, records := 0, 0
	for _, line := range strings.Split(string(out), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var arrayJob string
		limit := ""
		for _, f := range strings.Fields(line) {
			k, v, _ := strings.Cut(f, "=")
			if k == "JobName" {
				break
			}
			switch k {
			case "ArrayJobId":
				arrayJob = v
			case "ArrayTaskThrottle":
				limit = v
			}
		}
		if arrayJob != formatID(arrayJobID) {
			return 0, fmt.Errorf("scontrol show job %d: a record of array %q: %q", arrayJobID, arrayJob, line)
		}
		records++
		if limit == "" {
			continue
		}
		n, err := strconv.ParseUint(limit, 10, 31)
		if err != nil {
			return 0, fmt.Errorf("scontrol show job %d: ArrayTaskThrottle %q is not a number", arrayJobID, limit)
		}
		throttle = max(throttle, int(n))
	}
	if records == 0 {
		return 0, fmt.Errorf("scontrol show job %d printed no record", arrayJobID)
	}
	return throttle, nil
}

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
