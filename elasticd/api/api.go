// Package api is what elasticd's daemon and its clients (the node agent, `elasticd status`,
// `elasticd pin`) exchange over HTTP: the paths, the request and response bodies, and the
// payload a pin's MUNGE credential must hold. It imports nothing of the daemon, so a client
// needs only this package.
package api

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The daemon's paths.
const (
	// StatusPath answers GET with the followed jobs the caller may read (their own; every job
	// for root and Slurm operators), a []JobStatus; it needs a MUNGE credential.
	StatusPath = "/v1/status"
	// SignalsPath takes an agent's SignalReport by POST and answers a SignalAnswer. The report
	// carries either a session's MAC (Authorization: Session, SessionAuthorization) or, as
	// before sessions, a MUNGE credential of root or the agent's user holding SignalsPayload of
	// the body.
	SignalsPath = "/v1/signals"
	// SignalsSessionPath takes an agent's SessionRequest by POST, with a MUNGE credential of
	// root or the agent's user holding SessionPayload of the body, and answers a SessionAnswer.
	SignalsSessionPath = "/v1/signals/session"
)

// JobStatus is one elastic job as `elasticd status` prints it.
type JobStatus struct {
	JobID         uint32   `json:"job_id"`
	User          string   `json:"user"`
	Account       string   `json:"account"`
	MinWorkers    int      `json:"min_workers"`
	MaxWorkers    int      `json:"max_workers"`
	GPUsPerWorker int      `json:"gpus_per_worker"`
	Pools         []string `json:"pools"`
	// ValuePerMillionSamples is the job's --elastic-value (0: none given).
	ValuePerMillionSamples float64        `json:"value_per_million_samples,omitempty"`
	Size                   map[string]int `json:"size"`
	// Throughput is the job's samples/s, oldest first (the daemon's last few measurements).
	Throughput []Point `json:"throughput"`
	// Workers are the latest measurement's workers, main job first.
	Workers      []WorkerPoint `json:"workers,omitempty"`
	Decision     string        `json:"decision"`
	ReasonCode   string        `json:"reason_code,omitempty"` // the decision's kind (policy.Code): stable, for scripts
	Reason       string        `json:"reason"`
	Flags        []string      `json:"flags,omitempty"`
	DecidedAt    time.Time     `json:"decided_at"`
	Stopping     []uint32      `json:"stopping,omitempty"`
	Replacements []string      `json:"replacements,omitempty"`
	// Leaving are stragglers that leave before their successors join (the job at its max).
	Leaving []string `json:"leaving,omitempty"`
	// MaxBatch and BatchPerDevice are the job's --elastic-max-batch (0: none given); MaxWorkers
	// is then the declared max lowered to what the batch allows.
	MaxBatch       int `json:"max_batch,omitempty"`
	BatchPerDevice int `json:"batch_per_device,omitempty"`
	// Pin is the size its owner or root pinned (0: none), PinnedBy who.
	Pin      int    `json:"pin,omitempty"`
	PinnedBy string `json:"pinned_by,omitempty"`
	// RdzvEndpoint is the rendezvous of the main job's current run, which new workers get.
	RdzvEndpoint string `json:"rdzv_endpoint"`
}

// Point is one measurement of a job.
type Point struct {
	Time          time.Time      `json:"time"`
	Size          map[string]int `json:"size"`
	SamplesPerSec float64        `json:"samples_per_sec"`
}

// WorkerPoint is one worker in the latest measurement: its samples/s and, where the trainer
// reports it, its compute time per step before the gradient exchange (what tells a slow worker
// apart in synchronous training).
type WorkerPoint struct {
	Worker                string  `json:"worker"`
	Type                  string  `json:"type"`
	SamplesPerSec         float64 `json:"samples_per_sec"`
	ComputeSecondsPerStep float64 `json:"compute_s,omitempty"`
}

// SignalReport is what a node agent posts: the NVML samples of the GPUs each job holds on
// its node.
type SignalReport struct {
	Node string       `json:"node"`
	Jobs []JobSignals `json:"jobs"`
}

// SignalAnswer is elasticd's answer to a report: the GPUs to read on the report's nodes at the
// agent's next cycle, those of the followed jobs running there as elasticd's last queue read
// saw them. So an agent asks Slurm nothing: on a cluster of thousands of nodes, an agent
// reading the queue would load slurmctld with nodes × jobs.
type SignalAnswer struct {
	Read []JobGPUs `json:"read"`
}

// JobGPUs are the GPU indices (as slurmd assigned them) one job holds on one node.
type JobGPUs struct {
	JobID uint32 `json:"job_id"`
	GPUs  []int  `json:"gpus"`
}

// JobSignals are the samples of one job's GPUs on one node.
type JobSignals struct {
	JobID   uint32      `json:"job_id"`
	Samples []GPUSample `json:"samples"`
}

// GPUSample is one reading of one GPU, as elasticd/probe reads it from NVML and a node agent
// posts it. It is defined here rather than in probe so that the daemon and every client of
// these wire types build without go-nvml. Every metric is a pointer: nil means the GPU does not
// support it (NOT_SUPPORTED, e.g. NVLink on a PCIe card or utilisation on a MIG-enabled GPU)
// or that reading it failed (reported in the error of probe's Read).
type GPUSample struct {
	Index int       `json:"index"`
	UUID  string    `json:"uuid,omitempty"`
	Name  string    `json:"name,omitempty"`
	Time  time.Time `json:"time"`

	GPUUtilPct    *uint32 `json:"gpu_util_pct,omitempty"`
	MemoryUtilPct *uint32 `json:"memory_util_pct,omitempty"`

	SMClockMHz    *uint32 `json:"sm_clock_mhz,omitempty"`
	MaxSMClockMHz *uint32 `json:"max_sm_clock_mhz,omitempty"`
	// ThrottleReasons are the active clock throttle reasons by name (see
	// probe.ThrottleReasonNames); empty when the clocks are not held back.
	ThrottleReasons []string `json:"throttle_reasons,omitempty"`

	PowerMilliwatts      *uint32 `json:"power_mw,omitempty"`
	PowerLimitMilliwatts *uint32 `json:"power_limit_mw,omitempty"`

	MemoryUsedBytes  *uint64 `json:"memory_used_bytes,omitempty"`
	MemoryTotalBytes *uint64 `json:"memory_total_bytes,omitempty"`

	TemperatureC *uint32 `json:"temperature_c,omitempty"`

	// PCIe throughput as NVML samples it: KB/s over the last 20 ms.
	PCIeTxKBps *uint32 `json:"pcie_tx_kbps,omitempty"`
	PCIeRxKBps *uint32 `json:"pcie_rx_kbps,omitempty"`

	// NVLink data counters summed over all links (KiB since driver load),
	// and the rates since this Reader's previous read of the same GPU
	// (absent on the first read).
	NVLinkTxKiB   *uint64  `json:"nvlink_tx_kib,omitempty"`
	NVLinkRxKiB   *uint64  `json:"nvlink_rx_kib,omitempty"`
	NVLinkTxKiBps *float64 `json:"nvlink_tx_kibps,omitempty"`
	NVLinkRxKiBps *float64 `json:"nvlink_rx_kibps,omitempty"`
}

// powerCapReason is NVML's reason for clocks held at the GPU's power limit. A healthy
// datacenter GPU under a dense job runs there (an H200 and an H100 multiplying bf16 matrices
// drew 690-697 of their 700 W at 1440 and 1320-1335 of 1980 MHz), so it alone is no sign of
// a sick GPU, only of one that may be slower than its like GPUs.
const powerCapReason = "sw_power_cap"

// slowdownReasons are the thermal and hardware reasons: the GPU is slowed against the job's
// will. Idle, application clocks, sync boost and display settings are no sign of a sick GPU.
var slowdownReasons = []string{"hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"}

// ThermalOrPowerThrottled reports whether any active throttle reason is a
// thermal or power one.
func (s GPUSample) ThermalOrPowerThrottled() bool {
	return s.powerCapped() || slices.ContainsFunc(s.ThrottleReasons, isSlowdown)
}

// PowerCapOnly reports whether the power limit, and no thermal or hardware reason, holds the
// clocks back.
func (s GPUSample) PowerCapOnly() bool {
	return s.powerCapped() && !slices.ContainsFunc(s.ThrottleReasons, isSlowdown)
}

// powerCapped reports whether the power limit holds the clocks back, among other reasons or not.
func (s GPUSample) powerCapped() bool { return slices.Contains(s.ThrottleReasons, powerCapReason) }

func isSlowdown(reason string) bool { return slices.Contains(slowdownReasons, reason) }

// RequestPayload is what the MUNGE credential of a person's request (status, pin, unpin) must
// hold: elasticd's own, so that a credential made for quotad's API is never taken here.
func RequestPayload(method, path string) string {
	return "slurmbridge-elasticd-api " + method + " " + path
}

// SignalsPayload is what the MUNGE credential of a node agent's report must hold: the request
// and a hash of its body, so that a credential read off the wire cannot carry another report
// (munged decodes a credential once, so it cannot carry the same one twice either).
func SignalsPayload(body []byte) string {
	return bodyPayload("slurmbridge-elasticd-signals POST "+SignalsPath, body)
}

// bodyPayload is a credential's payload for a POST of body: what and the body's SHA-256.
func bodyPayload(what string, body []byte) string {
	sum := sha256.Sum256(body)
	return what + " sha256=" + hex.EncodeToString(sum[:])
}

// PinPath is the path of a job's pin: PUT PinPath(id, n) pins, DELETE PinPath(id, 0) unpins.
func PinPath(id uint32, n int) string {
	p := "/v1/jobs/" + strconv.FormatUint(uint64(id), 10) + "/pin"
	if n > 0 {
		p += "/" + strconv.Itoa(n)
	}
	return p
}

// SessionPayload is what the MUNGE credential of a session set-up must hold: the request and a
// hash of its body, which carries the agent's public key, so that a credential read off the
// wire sets up no session with another key.
func SessionPayload(body []byte) string {
	return bodyPayload("slurmbridge-elasticd-signals-session POST "+SignalsSessionPath, body)
}

// SessionRequest is an agent's session set-up: its nodes (for the log; each report is checked
// against the nodes it names) and its ephemeral X25519 public key.
type SessionRequest struct {
	Node      string `json:"node"`
	PublicKey []byte `json:"public_key"`
}

// SessionAnswer is elasticd's: the session's id, elasticd's ephemeral X25519 public key, and
// how long the session lasts from the set-up (relative, so clocks need not agree).
type SessionAnswer struct {
	ID               string `json:"session_id"`
	PublicKey        []byte `json:"public_key"`
	ExpiresInSeconds int64  `json:"expires_in_s"`
}

// SessionScheme is the Authorization scheme of a session's report:
// "Session <id> <seq> <hex HMAC-SHA256>".
const SessionScheme = "Session"

// SessionUnknown is in the body of the 401 elasticd answers a report of a session it does not
// hold (expired, evicted, or elasticd restarted): the agent then sets up a new one.
const SessionUnknown = "no such signals session"

// SessionKey is the key both sides derive from their X25519 shared secret: HKDF-SHA256 bound to
// both public keys and the session id, so a key belongs to one exchange only.
func SessionKey(shared, agentPub, daemonPub []byte, id string) ([]byte, error) {
	info := "slurmbridge-elasticd-signals-session v1 " + hex.EncodeToString(agentPub) + " " + hex.EncodeToString(daemonPub) + " " + id
	return hkdf.Key(sha256.New, shared, nil, info, 32)
}

// ReportMAC is HMAC-SHA256 under the session's key over the session id, the report's sequence
// number and its body.
func ReportMAC(key []byte, id string, seq uint64, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("slurmbridge-elasticd-signals POST " + SignalsPath + "\n" + id + "\n" + strconv.FormatUint(seq, 10) + "\n"))
	m.Write(body)
	return m.Sum(nil)
}

// SessionAuthorization is a session report's Authorization header.
func SessionAuthorization(id string, seq uint64, mac []byte) string {
	return SessionScheme + " " + id + " " + strconv.FormatUint(seq, 10) + " " + hex.EncodeToString(mac)
}

// ParseSessionAuthorization reads an Authorization header of SessionAuthorization's form.
func ParseSessionAuthorization(h string) (id string, seq uint64, mac []byte, ok bool) {
	f := strings.Fields(h)
	if len(f) != 4 || f[0] != SessionScheme || len(f[1]) == 0 || len(f[1]) > 64 || len(f[3]) != 2*sha256.Size {
		return "", 0, nil, false
	}
	seq, err := strconv.ParseUint(f[2], 10, 64)
	if err != nil || seq == 0 {
		return "", 0, nil, false
	}
	if mac, err = hex.DecodeString(f[3]); err != nil {
		return "", 0, nil, false
	}
	return f[1], seq, mac, true
}
