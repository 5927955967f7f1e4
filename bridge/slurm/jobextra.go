package slurm

import (
	"cmp"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// JobExtra is the part of a `squeue --json` job that Job leaves out and elasticd needs: who owns
// the job numerically, where its batch script runs, and which GPU indices it holds on each node.
// Read it from the same output as ParseJobs, so both describe one moment.
type JobExtra struct {
	ID        uint32
	UserID    uint32
	GroupID   uint32
	Name      string
	BatchHost string // node running the batch script; "" while pending
	WorkDir   string // current_working_directory
	// GresDetail is one entry per allocated node, in the order of the job's node list, e.g.
	// "gpu:a100:1(IDX:0)" or "gpu:a100:2(IDX:0-1)".
	GresDetail []string
	TimeLimit  uint32 // minutes; 0 when unlimited or unknown
	// StdOut is the batch script's standard output: expanded (/tmp/slurm-12.out) on 24.11 and,
	// through stdout_expanded, from 25.05; 22.05 prints the pattern as submitted
	// (/tmp/slurm-%j.out). Its directory is the same either way.
	StdOut string
	// Tasks (0 when unknown) and Features (--constraint, "" none) are parts of the request as
	// submitted, for jobs that ask for the same again (an elastic job's workers); the CPUs and
	// memory are in Job's TRESReq.
	Tasks    uint32
	Features string
	// Restarts is how often Slurm requeued the job (restart_cnt).
	Restarts uint32
}

type wireJobExtra struct {
	JobID      uint32   `json:"job_id"`
	UserID     uint32   `json:"user_id"`
	GroupID    uint32   `json:"group_id"`
	Name       string   `json:"name"`
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

// ParseJobExtras reads the extra fields of every job of `squeue --json` of any supported
// release, by job id. Like ParseJobs, an answer with errors or without a "jobs" array is an
// error.
func ParseJobExtras(data []byte) (map[uint32]JobExtra, error) {
	var resp struct {
		envelope
		Jobs *[]wireJobExtra `json:"jobs"`
	}
	if err := decode(data, "squeue", &resp, &resp.envelope); err != nil {
		return nil, err
	}
	if resp.Jobs == nil {
		return nil, errors.New(`squeue JSON has no "jobs" array`)
	}
	out := make(map[uint32]JobExtra, len(*resp.Jobs))
	for _, w := range *resp.Jobs {
		if w.JobID == 0 {
			return nil, errors.New("squeue JSON: a job has no job_id")
		}
		limit, err := w.TimeLimit.uint32()
		if err != nil {
			return nil, fmt.Errorf("squeue JSON: job %d: time_limit: %w", w.JobID, err)
		}
		tasks, err := w.Tasks.uint32()
		if err != nil {
			return nil, fmt.Errorf("squeue JSON: job %d: tasks: %w", w.JobID, err)
		}
		restarts, err := w.Restarts.uint32()
		if err != nil {
			return nil, fmt.Errorf("squeue JSON: job %d: restart_cnt: %w", w.JobID, err)
		}
		out[w.JobID] = JobExtra{ID: w.JobID, UserID: w.UserID, GroupID: w.GroupID, Name: w.Name,
			BatchHost: w.BatchHost, WorkDir: w.WorkDir, GresDetail: w.GresDetail, TimeLimit: limit,
			StdOut: cmp.Or(w.StdOutExpanded, w.StdOut), Tasks: tasks, Features: w.Features, Restarts: restarts}
	}
	return out, nil
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
