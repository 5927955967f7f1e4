package slurm

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
)

// The array throttle (sbatch --array=0-99%N: at most N tasks run at once) is not in the fast
// read: with --array squeue drops the "%N" from each task's id. Without --array a pending array
// record's ArrayTaskId is its task list followed by "%N" (Slurm appends it after formatting the
// list, however short SLURM_BITSTR_LEN cuts the list). A second, cheap read (one line a record,
// two fields) gives it. One trap: without --array squeue folds the array's split-off pending
// tasks of the same name and partition into its record and prints the merged list without the
// "%N". The read is therefore limited to the QOS whose jobs may be lent (the guaranteed ones):
// a task quotad lent waits in a borrow QOS and is left out.

// ArrayThrottleArgs is the squeue command line of the throttle read over the jobs in qos.
func ArrayThrottleArgs(qos []string) []string {
	return []string{"--all", "--noheader", "--states=PENDING", "--qos=" + strings.Join(qos, ","), "--Format=ArrayJobId:0" + queueSep + ",ArrayTaskId:0"}
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

// ArrayThrottles returns the throttle of every array with a pending record in one of qos that
// has one, by array job id. No QOS, no read.
func (c Client) ArrayThrottles(ctx context.Context, qos []string) (map[uint32]int, error) {
	if len(qos) == 0 {
		return map[uint32]int{}, nil
	}
	out, err := withEnv(c.Runner, throttleEnv).Run(ctx, "squeue", ArrayThrottleArgs(qos)...)
	if err != nil {
		return nil, err
	}
	return ParseArrayThrottles(out)
}

// ParseArrayThrottles reads the output of squeue with ArrayThrottleArgs. Any line that does not
// parse fails the read.
func ParseArrayThrottles(out []byte) (map[uint32]int, error) {
	throttles := map[uint32]int{}
	if len(bytes.TrimSpace(out)) == 0 {
		return throttles, nil
	}
	for i, line := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
		id, tasks, ok := strings.Cut(line, queueSep)
		if !ok {
			return nil, &QueueError{Line: i + 1, Text: line, Err: fmt.Errorf("want ArrayJobId and ArrayTaskId")}
		}
		arrayJob, err := parseID(id)
		if err != nil {
			return nil, &QueueError{Line: i + 1, Text: line, Err: fmt.Errorf("ArrayJobId: %w", err)}
		}
		_, limit, throttled := strings.Cut(tasks, "%")
		if !throttled {
			continue
		}
		n, err := strconv.ParseUint(limit, 10, 31)
		if err != nil || n == 0 {
			return nil, &QueueError{Line: i + 1, Text: line, Err: fmt.Errorf("array throttle %q is not a positive number", limit)}
		}
		throttles[arrayJob] = int(n)
	}
	return throttles, nil
}

// ArrayTaskThrottle is an array's limit on tasks running at once (sbatch --array=...%N), 0 for
// none, from `scontrol -o show job ARRAYJOBID`. The throttle read above loses it for an array
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
