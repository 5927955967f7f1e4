package slurm

import (
	"cmp"
	"context"
	"errors"
	"fmt"
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
