package slurm

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/slurmbridge/slurmbridge/bridge/gpureq"
	"github.com/slurmbridge/slurmbridge/bridge/noderoom"
	"github.com/slurmbridge/slurmbridge/bridge/pools"
)

// Node is one node as `scontrol show nodes` prints it (below), with the fields poolctl,
// quotad, elasticd and doctor read.
type Node struct {
	Name       string
	Partitions []string
	// State is the base state in lower case, as 22.05 prints it: idle, mixed, allocated, down,
	// unknown, error, future.
	State string
	// StateFlags are the flags on top of it, upper case: DRAIN, NOT_RESPONDING, MAINTENANCE...
	StateFlags    []string
	CPUs          int
	AllocCPUs     int
	MemoryMB      uint64 // real_memory
	AllocMemoryMB uint64
	Gres          []gpureq.Gres // configured, e.g. gpu:a100:4
	GresUsed      []gpureq.Gres // allocated now, e.g. gpu:a100:2(IDX:0-1)
	TRES          gpureq.TRES   // configured, e.g. cpu=8,mem=32000M,gres/gpu=4
	TRESUsed      gpureq.TRES   // allocated now; empty when idle
	// Reservation is the active reservation the node is in ("" none; 22.05 does not say, its
	// RESERVED state flag does).
	Reservation string
	// Address and Hostname are the node's NodeAddr and NodeHostname: where slurmctld reaches
	// its slurmd, and the host it runs on (a name or an address, unresolved).
	Address, Hostname string
}

// downStates are base states in which a node runs nothing new.
var downStates = []string{"down", "unknown", "error", "future"}

// downFlags are flags that keep the scheduler off a node whatever its base state.
var downFlags = []string{
	"DRAIN", "FAIL", "NOT_RESPONDING", "MAINTENANCE", "POWERED_DOWN", "POWERING_DOWN", "POWER_DOWN",
	"REBOOT_ISSUED", "INVALID_REG",
}

// Up reports whether Slurm may start jobs on the node: its base state is idle, mixed or
// allocated and no flag such as DRAIN or NOT_RESPONDING holds it back.
func (n *Node) Up() bool {
	if slices.Contains(downStates, strings.ToLower(n.State)) {
		return false
	}
	for _, f := range n.StateFlags {
		if slices.Contains(downFlags, strings.ToUpper(f)) {
			return false
		}
	}
	return true
}

// WhyNoNewJobs says why Slurm starts no new job on the node now; "" when it may:
//   - not up: down, drained or draining, failing, powered down, not responding (Up);
//   - in an active reservation: only the reservation's jobs may use it;
//   - RESERVED: in a reservation that a state flag reports but the node's record does not name;
//   - PLANNED: backfill keeps it for a pending job that starts there once the node's running
//     jobs end, so a job given its idle GPUs would wait behind that one (22.05's backfill flags
//     only nodes with nothing running; from 23.02 on it flags partly used nodes too).
func (n *Node) WhyNoNewJobs() string {
	switch {
	case !n.Up():
		return fmt.Sprintf("state %s", strings.Join(append([]string{n.State}, n.StateFlags...), "+"))
	case n.Reservation != "":
		return "in reservation " + n.Reservation
	case slices.Contains(n.StateFlags, "RESERVED"):
		return "reserved"
	case slices.Contains(n.StateFlags, "PLANNED"):
		return "planned by backfill for a pending job"
	}
	return ""
}

// Free is what the node has unallocated now: GPUs by type ("" for GPUs configured without a
// type), CPUs and memory. It says nothing of whether Slurm starts jobs there (WhyNoNewJobs).
func (n *Node) Free() noderoom.Free {
	f := noderoom.Free{GPUs: map[string]int{}, CPUs: max(n.CPUs-n.AllocCPUs, 0),
		MemoryMB: int64(n.MemoryMB) - int64(min(n.AllocMemoryMB, n.MemoryMB))}
	used := map[string]uint64{}
	for _, g := range n.GresUsed {
		if g.IsGPU() {
			used[g.Type] += g.Count
		}
	}
	for _, g := range n.Gres {
		if !g.IsGPU() || g.Count == 0 {
			continue
		}
		taken := min(g.Count, used[g.Type])
		used[g.Type] -= taken
		if free := int(g.Count - taken); free > 0 {
			f.GPUs[g.Type] += free
		}
	}
	return f
}

// GPUs is the number of GPUs the node has, all types together.
func (n *Node) GPUs() uint64 { return countGPUs(n.Gres) }

// AllocGPUs is the number of the node's GPUs allocated to jobs now.
func (n *Node) AllocGPUs() uint64 { return countGPUs(n.GresUsed) }

// InPartition reports whether the node belongs to the partition.
func (n *Node) InPartition(partition string) bool { return slices.Contains(n.Partitions, partition) }

func countGPUs(gres []gpureq.Gres) uint64 {
	var n uint64
	for _, g := range gres {
		if g.IsGPU() {
			n += g.Count
		}
	}
	return n
}

// nodeBaseStates are the base states of a node (NODE_STATE_BASE); every other name is a flag.
var nodeBaseStates = []string{"UNKNOWN", "DOWN", "IDLE", "ALLOCATED", "ERROR", "MIXED", "FUTURE"}

type wireNode struct {
	Name        string     `json:"name"`
	Partitions  []string   `json:"partitions"`
	State       stateNames `json:"state"`       // 22.05: the base state; later: base and flags
	StateFlags  []string   `json:"state_flags"` // 22.05 only
	CPUs        number     `json:"cpus"`
	AllocCPUs   number     `json:"alloc_cpus"`
	RealMemory  number     `json:"real_memory"`
	AllocMem    number     `json:"alloc_memory"`
	Gres        string     `json:"gres"`
	GresUsed    string     `json:"gres_used"`
	TRES        string     `json:"tres"`
	TRESUsed    string     `json:"tres_used"`   // null or "" when nothing is allocated
	Reservation string     `json:"reservation"` // 23.02 on
	Address     string     `json:"address"`
	Hostname    string     `json:"hostname"`
}

// ErrSinfoJSONHasNoNodes: from 23.02 `sinfo --json` aggregates nodes per partition and lists
// none; nodes are read with `scontrol show nodes --json` there.
var ErrSinfoJSONHasNoNodes = errors.New(`sinfo JSON of Slurm 23.02 or later has no "nodes" array: read scontrol show nodes --json`)

// ParseNodes reads the nodes of Slurm 22.05's `sinfo --json` or of `scontrol show nodes
// --json` (23.02 on): both have a top-level "nodes" array. An answer with errors, or without
// that array, is an error: never a partial or empty list that looks like an empty cluster.
// No daemon reads nodes so (Client.Nodes reads text); it stays as the oracle that the text
// read's tests hold it to, and for the JSON captures that tests of doctor, quotad and pools
// replay.
func ParseNodes(data []byte) ([]Node, error) {
	var resp struct {
		envelope
		Nodes *[]wireNode `json:"nodes"`
		// From 23.02, sinfo --json aggregates nodes per partition here and has no "nodes".
		Sinfo json.RawMessage `json:"sinfo"`
	}
	if err := decode(data, "nodes", &resp, &resp.envelope); err != nil {
		return nil, err
	}
	if resp.Nodes == nil {
		if resp.Sinfo != nil {
			return nil, ErrSinfoJSONHasNoNodes
		}
		return nil, errors.New(`nodes JSON has no "nodes" array`)
	}
	nodes := make([]Node, 0, len(*resp.Nodes))
	for _, w := range *resp.Nodes {
		n, err := w.node()
		if err != nil {
			return nil, fmt.Errorf("nodes JSON: node %s: %w", w.Name, err)
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}

func (w *wireNode) node() (Node, error) {
	if w.Name == "" {
		return Node{}, errors.New("no name")
	}
	base, flags := splitState(w.State, nodeBaseStates)
	if base == "" {
		return Node{}, fmt.Errorf("state %q has no base state", w.State)
	}
	for _, f := range w.StateFlags {
		flags = append(flags, strings.ToUpper(f))
	}
	n := Node{Name: w.Name, Partitions: w.Partitions, State: strings.ToLower(base), StateFlags: flags, Reservation: w.Reservation,
		Address: w.Address, Hostname: w.Hostname}
	var err error
	if n.CPUs, err = w.CPUs.int(); err != nil {
		return Node{}, fmt.Errorf("cpus: %w", err)
	}
	if n.AllocCPUs, err = w.AllocCPUs.int(); err != nil {
		return Node{}, fmt.Errorf("alloc_cpus: %w", err)
	}
	if n.MemoryMB, err = w.RealMemory.uint64(); err != nil {
		return Node{}, fmt.Errorf("real_memory: %w", err)
	}
	if n.AllocMemoryMB, err = w.AllocMem.uint64(); err != nil {
		return Node{}, fmt.Errorf("alloc_memory: %w", err)
	}
	if n.Gres, err = gpureq.ParseNodeGres(w.Gres); err != nil {
		return Node{}, fmt.Errorf("gres: %w", err)
	}
	if n.GresUsed, err = gpureq.ParseNodeGres(w.GresUsed); err != nil {
		return Node{}, fmt.Errorf("gres_used: %w", err)
	}
	if n.TRES, err = gpureq.ParseTRES(w.TRES); err != nil {
		return Node{}, fmt.Errorf("tres: %w", err)
	}
	if n.TRESUsed, err = gpureq.ParseTRES(w.TRESUsed); err != nil {
		return Node{}, fmt.Errorf("tres_used: %w", err)
	}
	return n, nil
}

// Cluster gives the cluster's shape for pools.CheckCluster: each partition with its nodes,
// down ones included (a drained node still has the shape the config describes).
func Cluster(nodes []Node) pools.Cluster {
	cl := pools.Cluster{Partitions: map[string][]pools.ClusterNode{}}
	for _, n := range nodes {
		cn := pools.ClusterNode{Name: n.Name, Gres: n.Gres, CPUs: n.CPUs, MemoryMB: n.MemoryMB}
		for _, p := range n.Partitions {
			cl.Partitions[p] = append(cl.Partitions[p], cn)
		}
	}
	return cl
}

// Nodes are read, on every release, from `scontrol --oneliner --details show nodes`: a line of
// Key=value fields per node (slurm_sprint_node_table, src/api/node_info.c). It is the
// cheapest complete source: the JSON reads (`sinfo --json` on 22.05, `scontrol show nodes
// --json` later) took 5 to 20 times as long at 1,503 nodes; `sinfo -N --Format` prints only
// the fields asked for, but skips nodes in no partition, lacks the TRES, and slows with nodes
// times partitions (4 times scontrol's time at 1,500 nodes). --details adds GresUsed.
//
// scontrol's fields are fixed but for free text: OS (the node's uname) and the features
// before the fields read here; Reason, Comment and Extra after them, at the end, where only
// ReservationName is read. Comment and Extra are printed raw, newlines included. So:
//   - a line that does not start with "NodeName=" continues the record before it (a newline
//     followed by a whole forged record would read as a node; only Slurm's administrators set
//     a comment or extra, and a node's own slurmd --extra; users set none of this text);
//   - up to AllocTRES, a key starts a field only where it follows the previous field in
//     scontrol's order, and a word that is not a field may only continue free text: a value
//     read here is one word, and anything else fails the read;
//   - after AllocTRES only ReservationName is read: its last occurrence, since scontrol prints
//     it after the free text, and only on a node flagged RESERVED (slurmctld sets both
//     together), on releases that print it (23.02 on).
//
// SLURM_TIME_FORMAT is set to %s, since a format with blanks would split the times into
// stray words; TZ to UTC, which spares a stat of /etc/localtime for each of the four or five
// times printed per node (see QueueEnv).

// NodesArgs is scontrol's command line of the node read.
var NodesArgs = []string{"--oneliner", "--details", "show", "nodes"}

// NodesEnv edits the environment of the node read: SCONTROL_* variables (SCONTROL_FUTURE,
// SCONTROL_ALL...) would change what is listed.
func NodesEnv(env []string) []string {
	out := make([]string, 0, len(env)+2)
	for _, kv := range env {
		if strings.HasPrefix(kv, "SCONTROL_") || strings.HasPrefix(kv, "SLURM_TIME_FORMAT=") || strings.HasPrefix(kv, "TZ=") {
			continue
		}
		out = append(out, kv)
	}
	return append(out, "SLURM_TIME_FORMAT=%s", "TZ=UTC")
}

// nodeKeys are the keys scontrol prints up to the free text at a record's end, in its order;
// each release prints a subsequence (22.05 the power fields CapWatts to ExtSensorsTemp, 26.05
// SuspendTime).
var nodeKeys = [...]string{
	"NodeName", "Arch", "CpuBind", "CoresPerSocket",
	"CPUAlloc", "CPUEfctv", "CPUTot", "CPULoad",
	"AvailableFeatures", "ActiveFeatures", "Gres", "GresDrain", "GresUsed",
	"NodeAddr", "NodeHostName", "BcastAddr", "Port", "Version", "OS",
	"RealMemory", "AllocMem", "FreeMem", "Sockets", "Boards",
	"CoreSpecCount", "CPUSpecList", "MemSpecLimit", "RestrictedCoresPerGPU",
	"State", "ThreadsPerCore", "TmpDisk", "Weight", "Owner", "MCS_label", "NextState", "Partitions",
	"BootTime", "SlurmdStartTime", "LastBusyTime", "ResumeAfterTime", "SuspendTime",
	"CfgTRES", "AllocTRES",
	"CapWatts", "CurrentWatts", "AveWatts", "ExtSensorsJoules", "ExtSensorsWatts", "ExtSensorsTemp",
}

// nodeKeyAt is each key's place in nodeKeys.
var nodeKeyAt = func() map[string]int {
	m := make(map[string]int, len(nodeKeys))
	for i, k := range nodeKeys {
		m[k] = i
	}
	return m
}()

// nodeAt is the place in nodeKeys of a key that is there.
func nodeAt(key string) int {
	i, ok := nodeKeyAt[key]
	if !ok {
		panic("no node key " + key)
	}
	return i
}

// nodeFreeText are the fields before the end whose values may hold blanks.
var nodeFreeText = []string{"AvailableFeatures", "ActiveFeatures", "OS"}

// nodeTailKeys start the end of a record, after AllocTRES and the power fields.
var nodeTailKeys = []string{"Reason", "Comment", "Extra", "InstanceId", "InstanceType", "ReservationName",
	"TLSCertTokenSet", "TLSCertLastRenewal", "Topology", "Parameters"}

// nodeRequired must be in every record; the other fields read may be missing (GresUsed on a
// node whose slurmd never registered, Partitions on a node in none).
var nodeRequired = []string{"NodeName", "CPUAlloc", "CPUTot", "Gres", "RealMemory", "AllocMem", "State", "CfgTRES", "AllocTRES"}

var (
	nodeFree = func() (free [len(nodeKeys)]bool) {
		for _, k := range nodeFreeText {
			free[nodeAt(k)] = true
		}
		return free
	}()
	atName, atCPUAlloc, atCPUTot, atGres, atGresUsed = nodeAt("NodeName"), nodeAt("CPUAlloc"), nodeAt("CPUTot"), nodeAt("Gres"), nodeAt("GresUsed")
	atAddr, atHost, atRealMemory, atAllocMem         = nodeAt("NodeAddr"), nodeAt("NodeHostName"), nodeAt("RealMemory"), nodeAt("AllocMem")
	atState, atPartitions, atCfgTRES, atAllocTRES    = nodeAt("State"), nodeAt("Partitions"), nodeAt("CfgTRES"), nodeAt("AllocTRES")
)

// ParseNodesText reads the output of `scontrol` with NodesArgs on release rel. Any record that
// does not parse fails the whole read: never a partial node list.
func ParseNodesText(out []byte, rel Release) ([]Node, error) {
	text := string(out)
	if text == "No nodes in the system\n" {
		return []Node{}, nil
	}
	if strings.TrimSpace(text) == "" {
		return nil, errors.New("scontrol show nodes printed nothing")
	}
	const start = "NodeName="
	nodes := make([]Node, 0, strings.Count(text, "\n"+start)+1)
	seen := make(map[string]bool, cap(nodes))
	// rec is the record being read: text[recStart:pos], its continuation lines included.
	recStart, recLine := -1, 0
	flush := func(end int) error {
		if recStart < 0 {
			return nil
		}
		n, err := parseNodeRecord(text[recStart:end], rel)
		if err != nil {
			return &NodesError{Line: recLine, Err: err}
		}
		if seen[n.Name] {
			return &NodesError{Line: recLine, Err: fmt.Errorf("node %s listed twice", n.Name)}
		}
		seen[n.Name] = true
		nodes = append(nodes, n)
		return nil
	}
	lineNo := 0
	for pos := 0; pos < len(text); {
		lineNo++
		end := strings.IndexByte(text[pos:], '\n')
		next := pos + end + 1
		if end < 0 {
			end, next = len(text)-pos, len(text)
		}
		line := text[pos : pos+end]
		switch {
		case strings.HasPrefix(line, start):
			if err := flush(max(pos-1, 0)); err != nil {
				return nil, err
			}
			recStart, recLine = pos, lineNo
		case recStart < 0:
			return nil, &NodesError{Line: lineNo, Err: fmt.Errorf("%q is no node record", clip(line))}
		}
		// Any other line is a newline in free text (Comment, Extra): the record goes on.
		pos = next
	}
	if err := flush(len(text)); err != nil {
		return nil, err
	}
	return nodes, nil
}

// parseNodeRecord reads one node's fields (see above).
func parseNodeRecord(rec string, rel Release) (Node, error) {
	var (
		values   [len(nodeKeys)]string
		have     [len(nodeKeys)]bool
		at       = -1 // place in nodeKeys of the last field read
		cur      = -1 // place of the field words go on, -1 for a field of a later release
		resvName string
		resvSeen bool
	)
	for p := 0; p < len(rec); {
		start := p
		for p < len(rec) && rec[p] != ' ' && rec[p] != '\n' {
			p++
		}
		w := rec[start:p]
		p++
		if w == "" {
			continue
		}
		key, value, isField := strings.Cut(w, "=")
		if isField {
			// A key starts a field only after the last one, in nodeKeys' order.
			next := slices.Index(nodeKeys[at+1:], key)
			if next >= 0 {
				at += 1 + next
				cur = at
				values[at], have[at] = value, true
				continue
			}
			_, known := nodeKeyAt[key]
			if !known && at >= atAllocTRES && slices.Contains(nodeTailKeys, key) {
				resvName, resvSeen = lastWordValue(rec[start:], "ReservationName=")
				break
			}
			if cur >= 0 && nodeFree[cur] {
				continue
			}
			if !known && !slices.Contains(nodeTailKeys, key) && isKeyName(key) {
				cur = -1 // a field of a later release: skipped, and it may not go on
				continue
			}
		} else if cur >= 0 && nodeFree[cur] {
			continue
		}
		if cur < 0 {
			return Node{}, fmt.Errorf("%q where a field was expected", clip(w))
		}
		return Node{}, fmt.Errorf("%q after %s=%s", clip(w), nodeKeys[cur], clip(values[cur]))
	}
	for _, k := range nodeRequired {
		if !have[nodeKeyAt[k]] {
			return Node{}, fmt.Errorf("node %q: no %s", values[atName], k)
		}
	}
	n := Node{Name: values[atName], Address: values[atAddr], Hostname: values[atHost]}
	if n.Name == "" {
		return Node{}, errors.New("no node name")
	}
	fail := func(field string, err error) (Node, error) {
		return Node{}, fmt.Errorf("node %s: %s: %w", n.Name, field, err)
	}
	names := strings.Split(values[atState], "+")
	base, flags := splitState(names, nodeBaseStates)
	if base == "" || slices.Contains(names, "") {
		return fail("State", fmt.Errorf("%q is not a base state and flags", values[atState]))
	}
	n.State, n.StateFlags = strings.ToLower(base), flags
	if p := values[atPartitions]; p != "" {
		n.Partitions = strings.Split(p, ",")
		if slices.Contains(n.Partitions, "") {
			return fail("Partitions", fmt.Errorf("%q names an empty partition", p))
		}
	}
	var err error
	if n.CPUs, err = nodeCount(values[atCPUTot]); err != nil {
		return fail("CPUTot", err)
	}
	if n.AllocCPUs, err = nodeCount(values[atCPUAlloc]); err != nil {
		return fail("CPUAlloc", err)
	}
	if n.MemoryMB, err = strconv.ParseUint(values[atRealMemory], 10, 64); err != nil {
		return fail("RealMemory", err)
	}
	if n.AllocMemoryMB, err = strconv.ParseUint(values[atAllocMem], 10, 64); err != nil {
		return fail("AllocMem", err)
	}
	if n.Gres, err = gpureq.ParseNodeGres(values[atGres]); err != nil {
		return fail("Gres", err)
	}
	if n.GresUsed, err = gpureq.ParseNodeGres(values[atGresUsed]); err != nil {
		return fail("GresUsed", err)
	}
	if n.TRES, err = gpureq.ParseTRES(values[atCfgTRES]); err != nil {
		return fail("CfgTRES", err)
	}
	if n.TRESUsed, err = gpureq.ParseTRES(values[atAllocTRES]); err != nil {
		return fail("AllocTRES", err)
	}
	if resvSeen && rel.NamesNodeReservations() && slices.Contains(n.StateFlags, "RESERVED") {
		n.Reservation = resvName
	}
	return n, nil
}

// lastWordValue is the rest of the last word of s that starts with prefix.
func lastWordValue(s, prefix string) (string, bool) {
	for end := len(s); ; {
		i := strings.LastIndex(s[:end], prefix)
		if i < 0 {
			return "", false
		}
		if i == 0 || s[i-1] == ' ' || s[i-1] == '\n' {
			v := s[i+len(prefix):]
			if j := strings.IndexAny(v, " \n"); j >= 0 {
				v = v[:j]
			}
			return v, true
		}
		end = i
	}
}

func nodeCount(s string) (int, error) {
	n, err := strconv.ParseUint(s, 10, 31)
	return int(n), err
}

// isKeyName reports whether s looks like a key of scontrol's: a letter, then letters, digits
// and underscores.
func isKeyName(s string) bool {
	if s == "" || !('A' <= s[0] && s[0] <= 'Z' || 'a' <= s[0] && s[0] <= 'z') {
		return false
	}
	for _, c := range []byte(s) {
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// clip shortens text quoted in an error.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// NodesError names the line of scontrol's output whose node could not be read.
type NodesError struct {
	Line int // 1-based, the record's first line
	Err  error
}

func (e *NodesError) Error() string {
	return fmt.Sprintf("scontrol show nodes, line %d: %v", e.Line, e.Err)
}

func (e *NodesError) Unwrap() error { return e.Err }
