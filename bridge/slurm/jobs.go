package slurm

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/gpureq"
)

// Job is one job of `squeue --json`, with the fields poolctl and quotad read. Every supported
// release (22.05, 24.11, 26.05) decodes to the same values; see wire.go for what differs.
type Job struct {
	ID      uint32
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
	// in the array's record. QueueJobs fills both for every record; ParseJobs (squeue --json)
	// fills ArrayTasks only for a pending array record (a task with a record of its own is one).
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
	// Unreadable says what of the job's line QueueJobs could not read ("" when all of it was):
	// its TRES (tres-alloc), whose names come from the user's request (licenses, burst
	// buffers), and which a release may spell in a way we do not know. The job is still
	// listed, with TRESReq and TRESAlloc nil, so that a reader can count it at its worst
	// instead of failing the whole queue for one job. ParseJobs never sets it: a field it
	// cannot read fails the read.
	Unreadable string
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
}

// ParseJobs reads the output of `squeue --json` of any supported release. An answer with
// errors, or without a "jobs" array, is an error: never a partial list that makes the queue
// look shorter than it is.
func ParseJobs(data []byte) ([]Job, error) {
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
