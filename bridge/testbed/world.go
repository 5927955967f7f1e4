package testbed

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/slurm"
)

// World is what an attack test records before the attack so that it can say afterwards that
// nothing else changed: the nodes, some jobs, some files, and the processes of the testbed's
// daemons. Capture it with CaptureWorld, check it with AssertUnchanged.
type World struct {
	At    time.Time
	Nodes map[string]NodeFacts
	// Jobs are the jobs asked for, by id; one slurmctld does not know has Known false.
	Jobs map[string]JobFacts
	// Files map each path asked for to the sha256 of its content, or to FileAbsent.
	Files map[string]string
	// Daemons are the testbed's processes by pid file name (quotad, elasticd, elastic-agent,
	// slurmctld); one that does not run has PID 0.
	Daemons map[string]DaemonFacts
}

// NodeFacts is a node as sinfo shows it: its state in long form (idle, mixed, drained,
// down*...) and the reason an administrator or Slurm gave for draining or downing it.
type NodeFacts struct {
	State, Reason string
}

// JobFacts are the fields of a job an attacker might try to change.
type JobFacts struct {
	Known          bool
	State          string
	Partition, QOS string
	Requeue        bool
	Priority       uint32
	Held           bool
	HoldReason     string
}

// DaemonFacts are a daemon's process as its pid file names it.
type DaemonFacts struct {
	PID      int
	RSSBytes int64
}

// FileAbsent stands for a file that did not exist when the world was captured: an attacker
// must not create it either.
const FileAbsent = "absent"

// WorldDaemons are the pid files under $TESTBED_DIR/run that CaptureWorld reads, each with a
// word its process's command line must hold (a recycled pid is never taken for the daemon).
var WorldDaemons = map[string]string{
	"quotad":        "quotad",
	"elasticd":      "elasticd",
	"elastic-agent": "elasticd",
	"slurmctld":     "slurmctld",
}

// RSSGrowthBound is how much a daemon's resident memory may grow across an attack before
// AssertUnchanged calls it a leak (WithRSSBound changes it).
const RSSGrowthBound = 64 << 20

// CaptureWorld records every node's state and reason, the given jobs' state, partition, QOS,
// requeue flag, priority and hold state, the sha256 of the given files (or that they are absent),
// and the pid and RSS of quotad, elasticd, its agent and slurmctld as the testbed runs them.
// It fails the test when slurmctld, sinfo or squeue do not answer or a file cannot be read.
func (c *Cluster) CaptureWorld(ctx context.Context, t testing.TB, jobs, files []string) World {
	t.Helper()
	w, err := c.captureWorld(ctx, jobs, files)
	if err != nil {
		t.Fatalf("capturing the testbed's state: %v", err)
	}
	return w
}

func (c *Cluster) captureWorld(ctx context.Context, jobs, files []string) (World, error) {
	w := World{At: time.Now(), Nodes: map[string]NodeFacts{}, Jobs: map[string]JobFacts{}, Files: map[string]string{}, Daemons: map[string]DaemonFacts{}}
	// Long states (%T) and the reason (%E); a node in several partitions is listed once each.
	out, err := c.Run(ctx, "sinfo", "-h", "-N", "-o", "%N|%T|%E")
	if err != nil {
		return w, fmt.Errorf("sinfo: %w", err)
	}
	w.Nodes = parseNodeLines(string(out))
	if len(w.Nodes) == 0 {
		return w, fmt.Errorf("sinfo listed no node:\n%s", out)
	}
	if len(jobs) > 0 {
		all, err := c.Slurm().Queue(ctx, slurm.QueueRead{Fields: slurm.AllFields})
		if err != nil {
			return w, fmt.Errorf("squeue: %w", err)
		}
		for _, id := range jobs {
			w.Jobs[id] = JobFacts{}
		}
		for _, j := range all {
			id := strconv.FormatUint(uint64(j.ID), 10)
			if _, asked := w.Jobs[id]; !asked {
				continue
			}
			f := JobFacts{Known: true, State: j.State, Partition: j.Partition, QOS: j.QOS, Requeue: j.Requeue, Priority: j.Priority,
				Held: strings.HasPrefix(j.StateReason, "JobHeld")}
			if f.State == "" && len(j.StateFlags) > 0 {
				f.State = j.StateFlags[0] // 22.05 names only the flag (COMPLETING)
			}
			if f.Held {
				f.HoldReason = j.StateReason
			}
			w.Jobs[id] = f
		}
	}
	for _, path := range files {
		sum, err := fileSum(path)
		if err != nil {
			return w, err
		}
		w.Files[path] = sum
	}
	for name, word := range WorldDaemons {
		w.Daemons[name] = ReadDaemon(filepath.Join(c.Dir, "run", name+".pid"), word)
	}
	if w.Daemons["slurmctld"].PID == 0 {
		return w, fmt.Errorf("no slurmctld runs as %s/run/slurmctld.pid says", c.Dir)
	}
	return w, nil
}

// parseNodeLines reads `sinfo -h -N -o %N|%T|%E` lines; a node listed once per partition
// appears once.
func parseNodeLines(out string) map[string]NodeFacts {
	nodes := map[string]NodeFacts{}
	for _, line := range strings.Split(out, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), "|")
		if !ok || name == "" {
			continue
		}
		state, reason, _ := strings.Cut(rest, "|")
		if reason == "none" {
			reason = ""
		}
		nodes[name] = NodeFacts{State: state, Reason: reason}
	}
	return nodes
}

func fileSum(path string) (string, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return FileAbsent, nil
	}
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", path, err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}

// ReadDaemon reads the pid in pidfile and that process's RSS; PID 0 when the file names no
// live process whose command line holds word.
func ReadDaemon(pidfile, word string) DaemonFacts {
	data, err := os.ReadFile(pidfile)
	if err != nil {
		return DaemonFacts{}
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return DaemonFacts{}
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !bytes.Contains(cmdline, []byte(word)) {
		return DaemonFacts{}
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return DaemonFacts{}
	}
	return DaemonFacts{PID: pid, RSSBytes: parseVmRSS(string(status))}
}

// parseVmRSS reads the "VmRSS:  1234 kB" line of /proc/PID/status, in bytes (0: none, a zombie).
func parseVmRSS(status string) int64 {
	sc := bufio.NewScanner(strings.NewReader(status))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			fields := strings.Fields(rest)
			if len(fields) == 2 && fields[1] == "kB" {
				kb, err := strconv.ParseInt(fields[0], 10, 64)
				if err == nil {
					return kb << 10
				}
			}
		}
	}
	return 0
}

// UnwellNodes lists the nodes that took no new job when the world was captured (drained,
// down, failing, not responding), each as "NAME STATE (REASON)": a world captured so proves
// little about what an attack did to them.
func (w World) UnwellNodes() []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(w.Nodes)) {
		if n := w.Nodes[name]; nodeUnwell(n.State) {
			out = append(out, fmt.Sprintf("%s %s (%s)", name, n.State, n.Reason))
		}
	}
	return out
}

// Running says whether the daemon ran when the world was captured.
func (w World) Running(name string) bool { return w.Daemons[name].PID != 0 }

// WorldOption loosens what AssertUnchanged calls a change.
type WorldOption func(*worldCheck)

type worldCheck struct {
	runOn             bool
	rssBound          int64
	priorityTolerance uint32
}

// AllowRunOn accepts a job that simply ran on, PENDING to RUNNING to COMPLETING or COMPLETED,
// and a pending job routed to several pools that started in one of them.
func AllowRunOn() WorldOption { return func(c *worldCheck) { c.runOn = true } }

// WithRSSBound sets how many bytes a daemon's RSS may grow (default RSSGrowthBound).
func WithRSSBound(n int64) WorldOption { return func(c *worldCheck) { c.rssBound = n } }

// WithPriorityTolerance sets how far a job's priority may move on its own (default
// DefaultPriorityTolerance). A held job's priority 0 is judged by its hold state.
func WithPriorityTolerance(n uint32) WorldOption {
	return func(c *worldCheck) { c.priorityTolerance = n }
}

// DefaultPriorityTolerance: the testbed's multifactor priority moves by itself as a job ages
// (PriorityWeightAge=1000 over 7 days) and as its project's usage decays; an attacker's
// change (a nice, another QOS at weight 10000, priority=) moves it further.
const DefaultPriorityTolerance = 500

// AssertUnchanged captures the world again and fails the test for every node newly drained,
// down or failed (or given a new reason), every job whose recorded fields changed, every
// changed, created or removed file, and every daemon that no longer runs, runs as another
// process, or whose RSS grew by more than the bound.
func (w World) AssertUnchanged(ctx context.Context, t testing.TB, c *Cluster, opts ...WorldOption) {
	t.Helper()
	jobs := slices.Sorted(maps.Keys(w.Jobs))
	files := slices.Sorted(maps.Keys(w.Files))
	now, err := c.captureWorld(ctx, jobs, files)
	if err != nil {
		// slurmctld gone is itself the finding; what was read before the error is still compared.
		t.Errorf("after the attack: %v", err)
		if len(now.Nodes) == 0 {
			return
		}
	}
	for _, p := range w.Changes(now, opts...) {
		t.Error(p)
	}
}

// Changes lists, one line each, what differs in now from w beyond what opts allow.
func (w World) Changes(now World, opts ...WorldOption) []string {
	check := worldCheck{rssBound: RSSGrowthBound, priorityTolerance: DefaultPriorityTolerance}
	for _, o := range opts {
		o(&check)
	}
	var out []string
	for _, name := range slices.Sorted(maps.Keys(w.Nodes)) {
		before := w.Nodes[name]
		after, ok := now.Nodes[name]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("node %s is gone from sinfo (was %s)", name, before.State))
		case nodeUnwell(after.State) && !nodeUnwell(before.State):
			out = append(out, fmt.Sprintf("node %s went from %s to %s (reason %q)", name, before.State, after.State, after.Reason))
		case after.Reason != "" && after.Reason != before.Reason:
			out = append(out, fmt.Sprintf("node %s got the reason %q (state %s, was %s %q)", name, after.Reason, after.State, before.State, before.Reason))
		}
	}
	for _, id := range slices.Sorted(maps.Keys(w.Jobs)) {
		out = append(out, jobChanges(id, w.Jobs[id], now.Jobs[id], check)...)
	}
	for _, path := range slices.Sorted(maps.Keys(w.Files)) {
		before, after := w.Files[path], now.Files[path]
		switch {
		case before == after:
		case before == FileAbsent:
			out = append(out, fmt.Sprintf("file %s was created", path))
		case after == FileAbsent:
			out = append(out, fmt.Sprintf("file %s was removed", path))
		default:
			out = append(out, fmt.Sprintf("file %s changed (sha256 %.12s -> %.12s)", path, before, after))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(w.Daemons)) {
		before, after := w.Daemons[name], now.Daemons[name]
		switch {
		case before.PID == 0:
		case after.PID == 0:
			out = append(out, fmt.Sprintf("%s (pid %d) no longer runs", name, before.PID))
		case after.PID != before.PID:
			out = append(out, fmt.Sprintf("%s restarted: pid %d, was %d", name, after.PID, before.PID))
		case after.RSSBytes-before.RSSBytes > check.rssBound:
			out = append(out, fmt.Sprintf("%s's RSS grew by %d MiB (%d -> %d MiB), more than %d MiB", name,
				(after.RSSBytes-before.RSSBytes)>>20, before.RSSBytes>>20, after.RSSBytes>>20, check.rssBound>>20))
		}
	}
	return out
}

// nodeUnwell: a long sinfo state in which the node takes no new job (drained, draining, down,
// fail, failing, or not responding: a "*" suffix).
func nodeUnwell(state string) bool {
	base := strings.TrimRight(state, "*~#!%$@^-")
	return strings.HasSuffix(state, "*") || slices.Contains([]string{"drained", "draining", "drain", "down", "fail", "failing", "unknown", "not_responding"}, base)
}

// runOnStates are the states a job reaches by simply running, in order.
var runOnStates = []string{"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "COMPLETED"}

func jobChanges(id string, before, after JobFacts, check worldCheck) []string {
	if !before.Known {
		if after.Known {
			return []string{fmt.Sprintf("job %s, unknown before, is now known (%s)", id, after.State)}
		}
		return nil
	}
	if !after.Known {
		// A finished job leaves slurmctld after MinJobAge: that is running on, not a change.
		if check.runOn && slices.Contains([]string{"RUNNING", "COMPLETING", "COMPLETED"}, before.State) {
			return nil
		}
		return []string{fmt.Sprintf("job %s (%s) is no longer known to slurmctld", id, before.State)}
	}
	var out []string
	ranOn := false
	if after.State != before.State {
		i, j := slices.Index(runOnStates, before.State), slices.Index(runOnStates, after.State)
		ranOn = check.runOn && i >= 0 && j > i
		if !ranOn {
			out = append(out, fmt.Sprintf("job %s went from %s to %s", id, before.State, after.State))
		}
	}
	if after.Partition != before.Partition {
		// A job routed to several pools starts in one of them.
		started := ranOn && slices.Contains(strings.Split(before.Partition, ","), after.Partition)
		if !started {
			out = append(out, fmt.Sprintf("job %s moved from partition %s to %s", id, before.Partition, after.Partition))
		}
	}
	if after.QOS != before.QOS {
		out = append(out, fmt.Sprintf("job %s's QOS went from %s to %s", id, before.QOS, after.QOS))
	}
	if after.Requeue != before.Requeue {
		out = append(out, fmt.Sprintf("job %s's requeue flag went from %t to %t", id, before.Requeue, after.Requeue))
	}
	if after.Held != before.Held {
		out = append(out, fmt.Sprintf("job %s's hold went from %t to %t (%s)", id, before.Held, after.Held, after.HoldReason))
	}
	// A pending job's priority; a running one's no longer matters to the scheduler.
	if !before.Held && !after.Held && !ranOn && absDiff(before.Priority, after.Priority) > check.priorityTolerance {
		out = append(out, fmt.Sprintf("job %s's priority went from %d to %d", id, before.Priority, after.Priority))
	}
	return out
}

func absDiff(a, b uint32) uint32 {
	if a > b {
		return a - b
	}
	return b - a
}
