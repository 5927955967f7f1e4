package slurm

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/gpureq"
)

// Job is one job of `squeue --json` (Slurm 22.05, OpenAPI v0.0.38), with the fields poolctl
// and quotad read.
type Job struct {
	ID      uint32
	User    string
	Account string
	// Partition is the job's partition; for a pending job routed to several pools, the
	// comma-separated list (see Partitions).
	Partition   string
	QOS         string
	State       string // job_state: PENDING, RUNNING, COMPLETING, REQUEUE_HOLD...
	StateReason string // why it is pending: Resources, Priority, JobHeldUser, None...
	Requeue     bool
	// The GPU request as job_desc had it, e.g. "gres:gpu:a100:2"; GPURequest reads them.
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
}

// pendingStates wait for an allocation: PENDING, and the names 22.05 prints instead of it when
// a flag is set (a requeued or held job).
var pendingStates = []string{"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD", "SPECIAL_EXIT"}

// runningStates hold an allocation: RUNNING and the flag names 22.05 prints for a running job
// (CONFIGURING while nodes boot, COMPLETING until the epilog is done).
var runningStates = []string{"RUNNING", "CONFIGURING", "COMPLETING", "RESIZING", "SIGNALING", "STAGE_OUT"}

// Pending reports whether the job waits for an allocation.
func (j *Job) Pending() bool { return slices.Contains(pendingStates, j.State) }

// Running reports whether the job holds an allocation (suspended jobs do not count).
func (j *Job) Running() bool { return slices.Contains(runningStates, j.State) }

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
	JobID         uint32 `json:"job_id"`
	UserName      string `json:"user_name"`
	Account       string `json:"account"`
	Partition     string `json:"partition"`
	QOS           string `json:"qos"`
	JobState      string `json:"job_state"`
	StateReason   string `json:"state_reason"`
	Requeue       bool   `json:"requeue"`
	TRESPerNode   string `json:"tres_per_node"`
	TRESPerJob    string `json:"tres_per_job"`
	TRESPerTask   string `json:"tres_per_task"`
	TRESPerSocket string `json:"tres_per_socket"`
	TRESReqStr    string `json:"tres_req_str"`
	TRESAllocStr  string `json:"tres_alloc_str"`
	NodeCount     uint32 `json:"node_count"`
	Nodes         string `json:"nodes"`
	SubmitTime    int64  `json:"submit_time"`
	StartTime     int64  `json:"start_time"`
	Priority      uint32 `json:"priority"`
}

// ParseJobs reads the output of `squeue --json`. An answer with errors, or without a "jobs"
// array, is an error: never a partial list that makes the queue look shorter than it is.
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
	j := Job{
		ID: w.JobID, User: w.UserName, Account: w.Account, Partition: w.Partition, QOS: w.QOS,
		State: w.JobState, StateReason: w.StateReason, Requeue: w.Requeue,
		TRESPerNode: w.TRESPerNode, TRESPerJob: w.TRESPerJob, TRESPerTask: w.TRESPerTask, TRESPerSocket: w.TRESPerSocket,
		NodeCount: w.NodeCount, Nodes: w.Nodes,
		Submit: unixTime(w.SubmitTime), Start: unixTime(w.StartTime), Priority: w.Priority,
	}
	var err error
	if j.TRESReq, err = gpureq.ParseTRES(w.TRESReqStr); err != nil {
		return Job{}, fmt.Errorf("tres_req_str: %w", err)
	}
	if j.TRESAlloc, err = gpureq.ParseTRES(w.TRESAllocStr); err != nil {
		return Job{}, fmt.Errorf("tres_alloc_str: %w", err)
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
