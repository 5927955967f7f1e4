package slurm

import (
	"context"
	"strconv"
	"strings"
)

// Job names are not in the fast read: a name may hold any character, and only a last field
// may. Elastic workers are found by name (ElasticWorkerName), so a second read lists the names
// of the jobs in the QOS where workers run (a few lines), the name last. The names only
// explain jobs, nothing is decided on them, so a line that does not parse (a name with a
// newline in it) is skipped, not fatal.

// JobNameArgs is the squeue command line of the name read over the jobs in qos.
func JobNameArgs(qos []string) []string {
	return []string{"--all", "--noheader", "--qos=" + strings.Join(qos, ","), "--Format=JobId:0" + queueSep + ",Name:0"}
}

// JobNames returns the name of every job (by its record's id) in one of qos. No QOS, no read.
func (c Client) JobNames(ctx context.Context, qos []string) (map[uint32]string, error) {
	if len(qos) == 0 {
		return map[uint32]string{}, nil
	}
	out, err := withEnv(c.Runner, QueueEnv).Run(ctx, "squeue", JobNameArgs(qos)...)
	if err != nil {
		return nil, err
	}
	return ParseJobNames(out), nil
}

// ParseJobNames reads the output of squeue with JobNameArgs; lines that do not parse are
// skipped.
func ParseJobNames(out []byte) map[uint32]string {
	names := map[uint32]string{}
	for line := range strings.SplitSeq(string(out), "\n") {
		id, name, ok := strings.Cut(line, queueSep)
		if !ok {
			continue
		}
		if n, err := parseID(strings.TrimSpace(id)); err == nil {
			names[n] = name
		}
	}
	return names
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
