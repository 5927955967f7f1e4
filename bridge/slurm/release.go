package slurm

import (
	"fmt"
	"strconv"
	"strings"
)

// Release is a Slurm release by its year and month, e.g. 24.11.
type Release struct {
	Year, Month int
}

func (r Release) String() string { return fmt.Sprintf("%02d.%02d", r.Year, r.Month) }

// AtLeast reports whether r is year.month or later.
func (r Release) AtLeast(year, month int) bool {
	return r.Year > year || r.Year == year && r.Month >= month
}

// NodesInScontrol reports whether the release prints node details with `scontrol show nodes
// --json` (23.02 on); before, `sinfo --json` listed each node.
func (r Release) NodesInScontrol() bool { return r.AtLeast(23, 2) }

// ModifyRefusalReachesUser: from 23.02 job_modify has an err_msg, so a job_submit plugin's reason
// for refusing an update reaches scontrol's user; 22.05 shows only the errno's text.
func (r Release) ModifyRefusalReachesUser() bool { return r.AtLeast(23, 2) }

// ReconfigureRestarts reports whether `scontrol reconfigure` replaces slurmctld by a new
// process (fork and exec, 23.11 on), which loads every plugin afresh: a job_submit plugin keeps
// nothing in memory across it.
func (r Release) ReconfigureRestarts() bool { return r.AtLeast(23, 11) }

// StartsSplitArrayTasks reports whether a pending array task split off its array's record
// (by an update of that task) can start while the array's record still waits in the same
// partition. 22.05's schedulers skip every other element of an array once one is rejected in
// a pass, and the record, in a QOS that may preempt the task's, comes first: a task lent alone
// never starts there. Seen on the testbed: 24.11 and 26.05 start it at their next pass.
func (r Release) StartsSplitArrayTasks() bool { return r.AtLeast(23, 2) }

// NamesJobsBySLUID reports whether a job may be named by its SLUID (scontrol -d show job prints
// it) instead of its number: 25.11 on.
func (r Release) NamesJobsBySLUID() bool { return r.AtLeast(25, 11) }

// ParseVersion reads the release from what `sinfo --version` prints: "slurm 22.05.8", or with
// Debian's packages "slurm-wlm 24.11.5".
func ParseVersion(out string) (Release, error) {
	fields := strings.Fields(out)
	if len(fields) != 2 || !strings.HasPrefix(fields[0], "slurm") {
		return Release{}, fmt.Errorf("not a Slurm version: %q", strings.TrimSpace(out))
	}
	parts := strings.SplitN(fields[1], ".", 3)
	if len(parts) < 2 {
		return Release{}, fmt.Errorf("not a Slurm version: %q", fields[1])
	}
	year, err1 := strconv.Atoi(parts[0])
	month, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil || year < 1 || month < 1 || month > 12 {
		return Release{}, fmt.Errorf("not a Slurm version: %q", fields[1])
	}
	return Release{Year: year, Month: month}, nil
}
