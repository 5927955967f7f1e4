package daemon

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/auth"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/elasticd/api"
	"github.com/slurmbridge/slurmbridge/elasticd/capacity"
	"github.com/slurmbridge/slurmbridge/elasticd/policy"
)

// A node agent's report steers elasticd: a worker whose GPU it reports throttled is replaced,
// which cancels the worker. So a report is taken only from the agent of the node that runs
// the job, and only as far as it can describe a real GPU of a followed job:
//   - it comes from root or the agent's user (SlurmUser by default): through a session whose
//     set-up carried such a MUNGE credential (sessions.go), with an HMAC under the session's
//     key over the body and a sequence number above the last one taken; or, as before
//     sessions, with its own credential holding the request and a hash of its body
//     (api.SignalsPayload), which munged decodes once. Either way a report read off the wire
//     carries neither another report nor the same one again;
//   - the credential (the session's set-up's, or the report's own) was encoded on the host of
//     every node the report names (unmunge's ENCODE_HOST against the nodes' NodeAddr and
//     NodeHostname), so root on one node cannot speak for another;
//   - a job's samples are kept only where elasticd's last queue read shows it running on one of
//     the report's nodes, and only for jobs it follows (what it answers an agent to read);
//   - GPU indices lie in [0, MaxGPUIndex), a job has at most MaxGPUIndex samples a report, and
//     a sample's time lies within the stale window behind now and the clock skew ahead of it.
// The signals map then holds at most MaxGPUIndex entries per followed job and worker.

// MaxGPUIndex bounds a GPU's index: NVML numbers a node's GPUs from 0, and no node has 64.
const MaxGPUIndex = 64

// SignalClockSkew is how far ahead of elasticd's clock a node's sample may be. A sample within
// it is taken with elasticd's own time, so that it never sorts after a later sample; one
// further ahead comes from a clock too wrong to be ordered against the jobs' throughput
// reports, and is dropped rather than stamped: a replaced time would make a sample of unknown
// age look fresh.
const SignalClockSkew = 30 * time.Second

// defaultSignalStale is the stale window when the policy settings name none.
const defaultSignalStale = 2 * time.Minute

// AgentAuth is how the daemon learns who sent a report.
type AgentAuth struct {
	// Identity decodes the request's MUNGE credential, which must hold payload
	// (auth.Munge.Identity: bounded, like every credential check).
	Identity func(r *http.Request, payload string) (slurm.MungeIdentity, error)
	// UIDs may report besides root: SlurmUser's, or the user the agents run as.
	UIDs []uint32
	// CheckOrigin makes the credential's ENCODE_HOST an address of every node the report
	// names. Off only where munged's idea of its address is not the node's (a host name that
	// resolves to 127.0.1.1 and no --origin): then root on one node may report for another.
	CheckOrigin bool
	// LookupHost resolves a NodeAddr or NodeHostname that is a name; nil: the system resolver.
	LookupHost func(ctx context.Context, host string) ([]string, error)
	// SessionTTL is how long a signals session lasts (0: DefaultSessionTTL), MaxSessions how
	// many are held at most (0: DefaultMaxSessions).
	SessionTTL  time.Duration
	MaxSessions int
}

// PersonAPI is elasticd's API for people's requests (status, pin, unpin) as their credentials
// see it: elasticd's payload, and the 401's words name what is private and which command sends
// a credential.
var PersonAPI = auth.API{
	Payload: api.RequestPayload,
	Private: "an elastic job's status is shown to its owner, root and Slurm operators only, and a pin is its owner's",
	Client:  "elasticd status, pin and unpin send one",
}

// signalOutcome is what became of a report.
type signalOutcome struct {
	kept, dropped int      // samples
	refused       []string // jobs not taken, with why
}

// AddSignals stores an agent's report under the rules above; only the latest sample per GPU
// is kept.
func (d *Daemon) AddSignals(r api.SignalReport) signalOutcome {
	now := d.now()
	stale := d.cfg.Settings.StaleAfter
	if stale <= 0 {
		stale = defaultSignalStale
	}
	nodes := reportNodes(r)
	var out signalOutcome
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, js := range r.Jobs {
		if !d.followed[js.JobID] {
			continue // an agent reports what the last answer named; the job may have ended since
		}
		if on, ok := d.placed[js.JobID]; !ok || !slices.Contains(nodes, on) {
			where := "not running on one node"
			if ok {
				where = "running on " + on
			}
			out.refused = append(out.refused, fmt.Sprintf("job %d is %s, not on %s", js.JobID, where, r.Node))
			continue
		}
		byGPU := d.signals[js.JobID]
		for i, s := range js.Samples {
			if i >= MaxGPUIndex || s.Index < 0 || s.Index >= MaxGPUIndex || s.Time.Before(now.Add(-stale)) || s.Time.After(now.Add(SignalClockSkew)) {
				out.dropped++
				continue
			}
			if s.Time.After(now) {
				s.Time = now
			}
			if byGPU == nil {
				byGPU = map[int]policy.GPUSignal{}
				d.signals[js.JobID] = byGPU
			}
			byGPU[s.Index] = toSignal(js.JobID, s)
			out.kept++
		}
	}
	return out
}

// reportNodes are the node names a report speaks for (the agent joins several with commas).
// Each named once, in the order first named.
func reportNodes(r api.SignalReport) []string {
	var nodes []string
	for n := range strings.SplitSeq(r.Node, ",") {
		if n = strings.TrimSpace(n); n != "" && !slices.Contains(nodes, n) {
			nodes = append(nodes, n)
			if len(nodes) > MaxReportNodes {
				break // refused by the handler; no need to read on
			}
		}
	}
	return nodes
}

// MaxReportNodes bounds the nodes one report speaks for: a host runs one slurmd, or a few
// (multiple slurmd), never dozens. A longer list could only cost origin checks (a name lookup
// each) and the session's memory of it.
const MaxReportNodes = 64

// maxReportNodeList bounds a report's node field in bytes, before it is split.
const maxReportNodeList = 4096

// signalCount is how many GPU samples the daemon holds.
func (d *Daemon) signalCount() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, byGPU := range d.signals {
		n += len(byGPU)
	}
	return n
}

// noteFollowedLocked keeps, at the end of a cycle, the jobs it followed (the main jobs and the
// workers of their latest measurement) and, by node, the GPUs of those running on one node
// (gres_detail's indices): what the node agents are told to read. Samples of jobs no longer
// followed are dropped.
func (d *Daemon) noteFollowedLocked(snap *capacity.Snapshot) {
	followed := make(map[uint32]bool, len(d.jobs))
	for id, j := range d.jobs {
		followed[id] = true
		for _, m := range j.history[max(len(j.history)-1, 0):] {
			for _, w := range m.Workers {
				if wid, err := strconv.ParseUint(w.Worker, 10, 32); err == nil {
					followed[uint32(wid)] = true
				}
			}
		}
	}
	reads := map[string][]api.JobGPUs{}
	for id := range followed {
		j, ok := snap.Jobs[id]
		detail := snap.Jobs[id].GresDetail
		if !ok || !j.Running() || j.NodeCount != 1 || len(detail) != 1 {
			continue
		}
		gpus, err := slurm.GPUIndices(detail[0])
		if err != nil || len(gpus) == 0 {
			continue
		}
		reads[j.Nodes] = append(reads[j.Nodes], api.JobGPUs{JobID: id, GPUs: gpus})
	}
	for _, rs := range reads {
		slices.SortFunc(rs, func(a, b api.JobGPUs) int { return cmp.Compare(a.JobID, b.JobID) })
	}
	d.followed, d.gpusToRead = followed, reads
	for id := range d.signals {
		if !followed[id] {
			delete(d.signals, id)
		}
	}
}

// gpusToReadOn is what the agent of nodes is told to read next.
func (d *Daemon) gpusToReadOn(nodes []string) api.SignalAnswer {
	d.mu.Lock()
	defer d.mu.Unlock()
	answer := api.SignalAnswer{Read: []api.JobGPUs{}}
	for _, n := range nodes {
		answer.Read = append(answer.Read, d.gpusToRead[n]...)
	}
	return answer
}

// notePlacement keeps, from a cycle's queue and node reads, where each one-node job runs and
// every node's addresses: what a report is checked against until the next cycle.
func (d *Daemon) notePlacement(jobs []slurm.Job, nodes []slurm.Node) {
	placed := map[uint32]string{}
	for i := range jobs {
		if j := &jobs[i]; j.Running() && j.NodeCount == 1 {
			placed[j.ID] = j.Nodes
		}
	}
	addrs := make(map[string][]string, len(nodes))
	for _, n := range nodes {
		for _, a := range []string{n.Address, n.Hostname} {
			if a != "" && !slices.Contains(addrs[n.Name], a) {
				addrs[n.Name] = append(addrs[n.Name], a)
			}
		}
	}
	d.mu.Lock()
	if !maps.EqualFunc(d.nodeAddrs, addrs, slices.Equal) {
		d.addrGen++ // a session's report checked against the old addresses is checked again
	}
	d.placed, d.nodeAddrs = placed, addrs
	d.mu.Unlock()
}

// addrGeneration counts the changes of the nodes' addresses.
func (d *Daemon) addrGeneration() uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.addrGen
}

// checkOrigin says whether host, the address whose munged encoded a report's credential, is an
// address of every node the report names.
func (d *Daemon) checkOrigin(ctx context.Context, a *AgentAuth, nodes []string, host string) error {
	ip := net.ParseIP(host)
	if ip == nil {
		return fmt.Errorf("the credential names no encoding host address (unmunge said %q)", host)
	}
	lookup := a.LookupHost
	if lookup == nil {
		lookup = net.DefaultResolver.LookupHost
	}
	d.mu.Lock()
	known := make(map[string][]string, len(nodes))
	for _, n := range nodes {
		if addrs, ok := d.nodeAddrs[n]; ok {
			known[n] = addrs
		}
	}
	d.mu.Unlock()
	for _, n := range nodes {
		addrs, ok := known[n]
		if !ok {
			return fmt.Errorf("node %s is not among slurmctld's nodes as elasticd last read them", n)
		}
		if !hasAddress(ctx, lookup, addrs, ip) {
			return fmt.Errorf("the credential was encoded on %s, which is not node %s's (NodeAddr/NodeHostname %s)", host, n, strings.Join(addrs, ", "))
		}
	}
	return nil
}

// hasAddress says whether one of names (addresses, or host names resolved here) is ip.
func hasAddress(ctx context.Context, lookup func(context.Context, string) ([]string, error), names []string, ip net.IP) bool {
	for _, name := range names {
		if a := net.ParseIP(name); a != nil {
			if a.Equal(ip) {
				return true
			}
			continue
		}
		lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		resolved, err := lookup(lctx, name)
		cancel()
		if err != nil {
			continue
		}
		for _, r := range resolved {
			if a := net.ParseIP(r); a != nil && a.Equal(ip) {
				return true
			}
		}
	}
	return false
}

// SlurmUserID reads the uid of scontrol show config's SlurmUser, "slurm(64030)"; a name alone
// is looked up.
func SlurmUserID(v string) (uint32, error) {
	name, rest, ok := strings.Cut(strings.TrimSpace(v), "(")
	if ok {
		if n, err := strconv.ParseUint(strings.TrimSuffix(rest, ")"), 10, 32); err == nil && strings.HasSuffix(rest, ")") {
			return uint32(n), nil
		}
	}
	if name == "" {
		return 0, fmt.Errorf("scontrol show config names no SlurmUser (%q): give --agent-user", v)
	}
	u, err := user.Lookup(name)
	if err != nil {
		return 0, fmt.Errorf("SlurmUser %s: %w", name, err)
	}
	n, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("SlurmUser %s: uid %q: %w", name, u.Uid, err)
	}
	return uint32(n), nil
}
