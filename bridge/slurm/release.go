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
// --json` (23.02 on); before, `sinfo --json` listed each node. Only tests read nodes as JSON.
func (r Release) NodesInScontrol() bool { return r.AtLeast(23, 2) }

// NamesNodeReservations reports whether a node's record names the active reservation it is in
// (23.02 on); 22.05 says only RESERVED.
func (r Release) NamesNodeReservations() bool { return r.AtLeast(23, 2) }

// ModifyRefusalReachesUser: from 23.02 job_modify has an err_msg, so a job_submit plugin's reason
// for refusing an update reaches scontrol's user; 22.05 shows only the errno's text.
func (r Release) ModifyRefusalReachesUser() bool { return r.AtLeast(23, 2) }

// CallsJobSubmitConcurrently reports whether slurmctld may call job_submit from several
// threads at once (23.11 on): its RPCs are served by a pool of worker threads (conmgr) and
// job_submit runs under a read lock. 22.05 and 23.02 call it under a mutex, one at a time.
func (r Release) CallsJobSubmitConcurrently() bool { return r.AtLeast(23, 11) }

// SizesWorkersByCPUs reports whether slurmctld's default number of RPC worker threads (conmgr,
// without conmgr_threads= in SlurmctldParameters) follows the CPUs it sees: twice their
// number, at most 32 (25.05 on); 23.11 to 24.11 start 64.
func (r Release) SizesWorkersByCPUs() bool { return r.AtLeast(25, 5) }

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

// ScontrolNamesJobsBySLUID reports whether scontrol takes a job's SLUID (the cluster-unique id
// `scontrol -d show job` prints) wherever it takes its number (26.05 on: src/scontrol's job id
// parser reads SLUIDs there). 25.11 gives jobs SLUIDs and slurmctld finds jobs by them, but its
// scontrol refuses one ("Invalid job id specified"). A plugin's check of a job named in an
// update must hold for either name.
func (r Release) ScontrolNamesJobsBySLUID() bool { return r.AtLeast(26, 5) }

// Version is a Slurm version to its micro release, e.g. 22.05.8: a plugin is built for one,
// and slurmctld loads it only at the same one.
type Version struct {
	Release
	Micro int
}

func (v Version) String() string { return fmt.Sprintf("%d.%02d.%d", v.Year, v.Month, v.Micro) }

// Number is the version as SLURM_VERSION_NUMBER spells it: year<<16 | month<<8 | micro, the
// plugin_version a plugin carries.
func (v Version) Number() uint32 { return uint32(v.Year)<<16 | uint32(v.Month)<<8 | uint32(v.Micro) }

// VersionOfNumber reads a SLURM_VERSION_NUMBER.
func VersionOfNumber(n uint32) Version {
	return Version{Release: Release{Year: int(n >> 16 & 0xff), Month: int(n >> 8 & 0xff)}, Micro: int(n & 0xff)}
}

// QOSMoveMayChangeTimeLimit reports whether `scontrol update jobid=N qos=X` that names no time
// limit may change a pending job's time limit, so a daemon that moves a job between QOS must
// name its limit there. Two changes in slurmctld's _update_job do it:
//   - 25.05.6 and later 25.05, and 25.11.1 to 25.11.4 (reverted in 25.11.5): the job gets X's
//     MaxWall (UNLIMITED where X has none), whatever its --time;
//   - 25.11.5 and later, 26.05 on: the accounting policy is run again on the job, so a limit
//     that came from a policy (no --time, the old QOS's MaxWall) becomes X's MaxWall, or none.
//     A --time is kept; a limit a privileged update named is kept.
//
// Releases after 26.05 are taken to do the same. Never in 22.05, 24.11, 25.05.0-.5 or 25.11.0.
func (v Version) QOSMoveMayChangeTimeLimit() bool {
	switch v.Release {
	case Release{22, 5}, Release{24, 11}:
		return false
	case Release{25, 5}:
		return v.Micro >= 6
	case Release{25, 11}:
		return v.Micro >= 1
	}
	return v.Release.Year > 25 || (v.Release.Year == 25 && v.Release.Month > 11)
}

// QOSUpdateReachesEveryTask reports whether one `scontrol update jobid=A_[1-3] qos=X` moves
// every task it names. In 22.05 slurmctld's _update_job only reads the request's QOS; later
// releases take it over into the first task's record (detail_ptr->qos_req, the request's
// field set to NULL): 24.11, 25.05, 25.11 and 26.05 alike. The tasks after the first keep their
// QOS while the update reports success (seen on 26.05.5: 4 tasks named, task 0 moved).
// The version is the commands' (sinfo --version), not slurmctld's: safe because a 22.05
// client cannot talk to a slurmctld of 24.11 or later (their oldest protocol is 23.02's).
func (v Version) QOSUpdateReachesEveryTask() bool {
	return v.Release == Release{22, 5}
}

// ParseMicroVersion reads "22.05.8" (a pre-release suffix, "22.05.0-0rc1", does not count):
// what slurmctld reports as SLURM_VERSION and the packages install.
func ParseMicroVersion(v string) (Version, error) {
	parts := strings.SplitN(strings.TrimSpace(v), ".", 3)
	if len(parts) != 3 {
		return Version{}, fmt.Errorf("Slurm version %q: want MAJOR.MINOR.MICRO", v)
	}
	if i := strings.IndexFunc(parts[2], func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		parts[2] = parts[2][:i]
	}
	var n [3]int
	for i, p := range parts {
		x, err := strconv.ParseUint(p, 10, 8) // each part is a byte of SLURM_VERSION_NUMBER
		if err != nil {
			return Version{}, fmt.Errorf("Slurm version %q: %w", v, err)
		}
		n[i] = int(x)
	}
	return Version{Release: Release{Year: n[0], Month: n[1]}, Micro: n[2]}, nil
}

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
