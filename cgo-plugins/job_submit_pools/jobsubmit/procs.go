package jobsubmit

import (
	"strconv"
	"strings"

	"github.com/slurmbridge/slurmbridge/bridge/slurm"
)

// CallerThreads is how many of slurmctld's threads may call job_submit close together, for a
// Slurm release, its SlurmctldParameters and the CPUs it sees.
//
// Why it matters: a slurmctld thread that has called into Go keeps one of Go's Ps (GOMAXPROCS of
// them, the CPU count by default) until Go's monitor takes it back, after 20 µs to 10 ms. From
// 23.11 slurmctld serves RPCs from a fixed pool of worker threads (conmgr) and runs job_submit
// under a read lock, so with more workers than Ps a submission waits inside the plugin for a P
// while holding slurmctld's locks (measured on 24.11 with 64 workers and 2 Ps: up to 5.8 ms).
// With one P per worker it never waits.
//
// 24.11 starts 64 workers; 25.05 on start twice the CPUs, at most 32; `conmgr_threads=N` in
// SlurmctldParameters overrides both. 22.05 runs job_submit under the job write lock, one thread
// at a time, and needs no more than the default: it returns 0 there (keep Go's default).
func CallerThreads(release slurm.Release, slurmctldParams string, cpus int) int {
	if !release.CallsJobSubmitConcurrently() {
		return 0
	}
	for _, p := range strings.Split(slurmctldParams, ",") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(p), "conmgr_threads="); ok {
			if n, err := strconv.Atoi(v); err == nil && n > 0 {
				return n
			}
		}
	}
	if !release.SizesWorkersByCPUs() {
		return 64
	}
	return min(32, 2*max(cpus, 1))
}
