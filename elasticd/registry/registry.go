// Package registry is elasticd's state directory, the meeting point of the SPANK plugin
// (cgo-plugins/spank_elastic), the jobs' workers and elasticd:
//
//	DIR/jobs/JOBID/declaration.json   written by the plugin (root, in slurmstepd) when the
//	                                  main job starts: MIN, MAX, GPUs per worker, pools
//	DIR/jobs/JOBID/reports/W.jsonl    appended by worker W (its Slurm job id), owned by the user:
//	                                  {"time": ..., "worker": "W", "samples_per_sec": ...}
//	DIR/jobs/JOBID/hosts              written by elasticd: one "node:slots" line per running
//	                                  worker, main job first (Horovod's host discovery, and the
//	                                  world size for the synthetic trainer)
//
// Everything in the directory except declaration.json and hosts is written by users, and the
// declaration's values came from the user's sbatch line: all of it is validated here.
package registry

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Dir is the state directory.
type Dir string

// JobDir is the directory of one elastic job.
func (d Dir) JobDir(jobID uint32) string {
	return filepath.Join(string(d), "jobs", strconv.FormatUint(uint64(jobID), 10))
}

// ReportDir is where the job's workers append their throughput.
func (d Dir) ReportDir(jobID uint32) string { return filepath.Join(d.JobDir(jobID), "reports") }

// HostsFile is the job's host list for Horovod's discovery script.
func (d Dir) HostsFile(jobID uint32) string { return filepath.Join(d.JobDir(jobID), "hosts") }

// Declaration is what the user declared at submit, as the plugin recorded it.
type Declaration struct {
	Version       int      `json:"version"`
	JobID         uint32   `json:"job_id"`
	UID           uint32   `json:"uid"`
	GID           uint32   `json:"gid"`
	MinWorkers    int      `json:"min_workers"`
	MaxWorkers    int      `json:"max_workers"`
	GPUsPerWorker int      `json:"gpus_per_worker"`
	RdzvEndpoint  string   `json:"rdzv_endpoint"`
	Pools         []string `json:"pools"`
	// ValuePerMillionSamples is --elastic-value: what a million samples are worth to the user,
	// in the pools' price unit; 0 (or absent, in declarations from before it) when not given.
	ValuePerMillionSamples float64 `json:"value_per_million_samples"`
	// MaxBatch is --elastic-max-batch: the largest global batch (samples per step over every
	// GPU) the job's training tolerates; BatchPerDevice is each GPU's share of it. Both 0 when
	// not given.
	MaxBatch       int   `json:"max_batch,omitempty"`
	BatchPerDevice int   `json:"batch_per_device,omitempty"`
	Recorded       int64 `json:"recorded"`
}

// MaxBatchLimit bounds --elastic-max-batch, as the plugin does.
const MaxBatchLimit = 1 << 30

// EffectiveMax is the most workers elasticd may run: the declared max, lowered where the max
// global batch would be exceeded (workers × GPUs per worker × batch per GPU). why says so,
// e.g. " (max global batch 256 at 32 per GPU)", or is "".
func (d *Declaration) EffectiveMax() (n int, why string) {
	if d.MaxBatch == 0 || d.BatchPerDevice == 0 {
		return d.MaxWorkers, ""
	}
	byBatch := d.MaxBatch / (d.BatchPerDevice * d.GPUsPerWorker)
	if byBatch >= d.MaxWorkers {
		return d.MaxWorkers, ""
	}
	return byBatch, fmt.Sprintf(" (max global batch %d at %d per GPU)", d.MaxBatch, d.BatchPerDevice)
}

// MaxValuePerMillionSamples bounds --elastic-value, as the plugin does.
const MaxValuePerMillionSamples = 1e9

// CheckValuePerMillionSamples accepts 0 (none given) to MaxValuePerMillionSamples: a job's
// --elastic-value as recorded, or elasticd's site-wide default.
func CheckValuePerMillionSamples(v float64) error {
	if !(v >= 0 && v <= MaxValuePerMillionSamples) {
		return fmt.Errorf("value per million samples %v: want 0 to %g", v, float64(MaxValuePerMillionSamples))
	}
	return nil
}

var (
	poolName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,63}$`)
	endpoint = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,255}:[0-9]{1,5}$`)
)

// Validate checks the declaration the way the plugin does, so a file edited or forged by
// anyone but root would still not carry nonsense into a decision.
func (d *Declaration) Validate() error {
	switch {
	case d.Version != 1:
		return fmt.Errorf("declaration version %d, want 1", d.Version)
	case d.MinWorkers < 1 || d.MaxWorkers < d.MinWorkers || d.MaxWorkers > 100000:
		return fmt.Errorf("min %d, max %d: want 1 <= min <= max", d.MinWorkers, d.MaxWorkers)
	case d.GPUsPerWorker < 1 || d.GPUsPerWorker > 64:
		return fmt.Errorf("GPUs per worker %d: want 1 to 64", d.GPUsPerWorker)
	case !endpoint.MatchString(d.RdzvEndpoint):
		return fmt.Errorf("rendezvous endpoint %q is not host:port", d.RdzvEndpoint)
	}
	if err := CheckValuePerMillionSamples(d.ValuePerMillionSamples); err != nil {
		return err
	}
	if (d.MaxBatch == 0) != (d.BatchPerDevice == 0) || d.MaxBatch < 0 || d.MaxBatch > MaxBatchLimit ||
		d.BatchPerDevice < 0 || d.BatchPerDevice > d.MaxBatch {
		return fmt.Errorf("max batch %d, batch per GPU %d: want both 0, or 1 <= per GPU <= max <= %d", d.MaxBatch, d.BatchPerDevice, MaxBatchLimit)
	}
	if n, _ := d.EffectiveMax(); n < d.MinWorkers {
		return fmt.Errorf("max batch %d at %d per GPU allows %d workers of %d GPUs, below min %d", d.MaxBatch, d.BatchPerDevice, n, d.GPUsPerWorker, d.MinWorkers)
	}
	for i, p := range d.Pools {
		if !poolName.MatchString(p) || slices.Contains(d.Pools[:i], p) {
			return fmt.Errorf("pool %q is not a pool name or is listed twice", p)
		}
	}
	return nil
}

// maxDeclaration bounds what is read of a declaration (the plugin writes about 200 bytes).
const maxDeclaration = 4096

// ReadDeclaration reads and validates the declaration of a job. It must be a regular file
// owned by root: only the plugin, in slurmstepd, writes it. A missing file is reported with
// an error that matches os.ErrNotExist.
func (d Dir) ReadDeclaration(jobID uint32) (*Declaration, error) {
	return d.ReadDeclarationOwnedBy(jobID, 0)
}

// ReadDeclarationOwnedBy is ReadDeclaration with another owner (tests that do not run as root).
func (d Dir) ReadDeclarationOwnedBy(jobID, owner uint32) (*Declaration, error) {
	path := filepath.Join(d.JobDir(jobID), "declaration.json")
	data, err := readOwnedBy(path, owner, maxDeclaration)
	if err != nil {
		return nil, err
	}
	decl, err := ParseDeclaration(data, jobID)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return decl, nil
}

// ParseDeclaration reads and validates the text of job jobID's declaration.json.
func ParseDeclaration(data []byte, jobID uint32) (*Declaration, error) {
	var decl Declaration
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&decl); err != nil {
		return nil, err
	}
	if decl.JobID != jobID {
		return nil, fmt.Errorf("declares job %d", decl.JobID)
	}
	if err := decl.Validate(); err != nil {
		return nil, err
	}
	return &decl, nil
}

// readOwnedBy reads up to limit bytes of a regular file owned by uid, without following a
// symbolic link.
func readOwnedBy(path string, uid uint32, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !st.Mode().IsRegular() || !ok || sys.Uid != uid {
		return nil, fmt.Errorf("%s: not a regular file owned by uid %d", path, uid)
	}
	return io.ReadAll(io.LimitReader(f, limit))
}

// Jobs lists the job ids that have a directory.
func (d Dir) Jobs() ([]uint32, error) {
	entries, err := os.ReadDir(filepath.Join(string(d), "jobs"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ids []uint32
	for _, e := range entries {
		if id, err := strconv.ParseUint(e.Name(), 10, 32); err == nil && e.IsDir() && id > 0 {
			ids = append(ids, uint32(id))
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// Remove deletes a finished job's directory.
func (d Dir) Remove(jobID uint32) error { return os.RemoveAll(d.JobDir(jobID)) }

// Report is one line a worker appended.
type Report struct {
	Time          time.Time
	Worker        string
	SamplesPerSec float64
	// ComputeSecondsPerStep ("compute_s"): mean seconds per step the worker computed before
	// the gradient exchange, its slowest local process; 0 when the line has none.
	ComputeSecondsPerStep float64
}

// wireReport accepts time as RFC 3339 text or as Unix seconds (what time.time() gives).
type wireReport struct {
	Time          json.RawMessage `json:"time"`
	Worker        string          `json:"worker"`
	SamplesPerSec *float64        `json:"samples_per_sec"`
	ComputeS      *float64        `json:"compute_s"`
}

// tailBytes is how much of the end of a report file is read each cycle: the latest line is
// all a decision needs, and the user controls the file's size.
const tailBytes = 16 << 10

// maxLine bounds one report line.
const maxLine = 1024

// MaxSamplesPerSec bounds a reported rate: a user's report must not carry a huge rate (1e308,
// whose sums overflow to +Inf) into the policy's comparisons with other jobs. No training job
// comes near a billion samples a second.
const MaxSamplesPerSec = 1e9

// maxComputeSeconds bounds a step's reported compute time: a day.
const maxComputeSeconds = 86400

// LatestReport returns the last well-formed line of worker's report file (DIR/jobs/JOB/
// reports/WORKER.jsonl) whose worker field matches the file name. It reads only the file's
// tail. ok is false when there is no such line yet.
func (d Dir) LatestReport(jobID uint32, worker string, uid uint32) (rep Report, ok bool, err error) {
	if _, err := strconv.ParseUint(worker, 10, 32); err != nil {
		return Report{}, false, fmt.Errorf("worker id %q is not a job id", worker)
	}
	path := filepath.Join(d.ReportDir(jobID), worker+".jsonl")
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, os.ErrNotExist) {
		return Report{}, false, nil
	}
	if err != nil {
		return Report{}, false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Report{}, false, err
	}
	if sys, isUnix := st.Sys().(*syscall.Stat_t); !st.Mode().IsRegular() || !isUnix || sys.Uid != uid {
		return Report{}, false, fmt.Errorf("%s: not a regular file owned by the job's user", path)
	}
	start := max(st.Size()-tailBytes, 0)
	buf := make([]byte, st.Size()-start)
	n, err := f.ReadAt(buf, start)
	if err != nil && !errors.Is(err, io.EOF) {
		return Report{}, false, err
	}
	rep, ok = lastReport(buf[:n], worker)
	return rep, ok, nil
}

// lastReport parses lines from the end until one is a valid report of worker. A line being
// written (no newline yet) is skipped.
func lastReport(buf []byte, worker string) (Report, bool) {
	complete := buf[:bytes.LastIndexByte(buf, '\n')+1]
	var lines [][]byte
	sc := bufio.NewScanner(bytes.NewReader(complete))
	sc.Buffer(make([]byte, 0, maxLine), tailBytes)
	for sc.Scan() {
		lines = append(lines, sc.Bytes())
	}
	for i := len(lines) - 1; i >= 0; i-- {
		if rep, err := ParseReport(lines[i]); err == nil && rep.Worker == worker {
			return rep, true
		}
	}
	return Report{}, false
}

// ParseReport reads one report line.
func ParseReport(line []byte) (Report, error) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || len(line) > maxLine {
		return Report{}, errors.New("empty or too long")
	}
	var w wireReport
	if err := json.Unmarshal(line, &w); err != nil {
		return Report{}, err
	}
	if w.SamplesPerSec == nil || !(*w.SamplesPerSec >= 0 && *w.SamplesPerSec <= MaxSamplesPerSec) {
		return Report{}, fmt.Errorf("samples_per_sec missing or not a number from 0 to %g", float64(MaxSamplesPerSec))
	}
	t, err := parseTime(w.Time)
	if err != nil {
		return Report{}, err
	}
	rep := Report{Time: t, Worker: w.Worker, SamplesPerSec: *w.SamplesPerSec}
	if c := w.ComputeS; c != nil {
		if !(*c >= 0 && *c <= maxComputeSeconds) {
			return Report{}, fmt.Errorf("compute_s not a number from 0 to %g", float64(maxComputeSeconds))
		}
		rep.ComputeSecondsPerStep = *c
	}
	return rep, nil
}

func parseTime(raw json.RawMessage) (time.Time, error) {
	var text string
	if json.Unmarshal(raw, &text) == nil {
		return time.Parse(time.RFC3339Nano, text)
	}
	var secs float64
	if err := json.Unmarshal(raw, &secs); err != nil || secs <= 0 || secs > 1e11 {
		return time.Time{}, fmt.Errorf("time %s is neither RFC 3339 nor Unix seconds", raw)
	}
	whole, frac := math.Modf(secs)
	return time.Unix(int64(whole), int64(frac*1e9)).UTC(), nil
}

// Host is one line of the hosts file.
type Host struct {
	Node  string
	Slots int
}

// WriteHosts replaces the job's hosts file atomically (elasticd runs as root; the directory
// is root's, so nobody can swap a link in).
func (d Dir) WriteHosts(jobID uint32, hosts []Host) error {
	var b strings.Builder
	for _, h := range hosts {
		fmt.Fprintf(&b, "%s:%d\n", h.Node, h.Slots)
	}
	path := d.HostsFile(jobID)
	if old, err := os.ReadFile(path); err == nil && string(old) == b.String() {
		return nil
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// StateFile is where elasticd keeps what it knows of a job between restarts (sizes measured,
// workers it submitted, stops and replacements under way, a pinned size): DIR/jobs/JOBID/
// elasticd.json, written by elasticd alone.
func (d Dir) StateFile(jobID uint32) string { return filepath.Join(d.JobDir(jobID), "elasticd.json") }

// maxState bounds a state file (the history is bounded by elasticd's --history-limit).
const maxState = 64 << 20

// ReadState reads a job's state file, which must be a regular file owned by owner (elasticd's
// own uid). A missing file is reported with an error that matches os.ErrNotExist.
func (d Dir) ReadState(jobID, owner uint32) ([]byte, error) {
	return readOwnedBy(d.StateFile(jobID), owner, maxState)
}

// WriteState replaces a job's state file atomically: a new file in the same directory,
// synced, then renamed over the old one, so a crash leaves the old state or the new, never
// half of one. The job's directory is root's, so nobody else can swap a link in.
func (d Dir) WriteState(jobID uint32, data []byte) error {
	f, err := os.CreateTemp(d.JobDir(jobID), ".elasticd.json.*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, d.StateFile(jobID))
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// SetStateAside renames an unusable state file to elasticd.json.corrupt (replacing an older
// one), so that it is kept for a person to read and never read again.
func (d Dir) SetStateAside(jobID uint32) (string, error) {
	to := d.StateFile(jobID) + ".corrupt"
	return to, os.Rename(d.StateFile(jobID), to)
}
