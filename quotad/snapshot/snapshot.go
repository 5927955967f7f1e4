// Package snapshot builds quotad's view of the cluster, a policy.Snapshot, from its two
// sources: slurmdbd's database (QOS, accounts, usage) and slurmctld's live state (squeue's
// fast formatted read, and scontrol show nodes). Any source that cannot be read
// fails the whole snapshot: a plan built on half the facts could lend GPUs that are not idle or
// return jobs that are not borrowers. One job of the queue that cannot be read does not: its
// user controls its GPU request (sbatch, scontrol update), so it is kept as an unreadable job,
// with what could be read of it, and the policy counts it at its worst.
package snapshot

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/gpureq"
	"github.com/slurmbridge/slurmbridge/bridge/pools"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/bridge/slurmdbd"
	"github.com/slurmbridge/slurmbridge/quotad/policy"
)

// Accounting is what the snapshot reads from slurmdbd's database (slurmdb.Reader).
type Accounting interface {
	TRESNames(ctx context.Context) (map[uint32]string, error)
	QOS(ctx context.Context, tres map[uint32]string) ([]policy.QOS, error)
	Associations(ctx context.Context) ([]policy.Account, []policy.UserAssociation, error)
	Usage(ctx context.Context, gpuID uint32, since, now time.Time) (map[string]float64, error)
	Reclaims(ctx context.Context, since time.Time) ([]policy.Reclaim, error)
}

// DefaultUsageWindow is how far back GPU usage counts for tie-breaks among borrowers.
const DefaultUsageWindow = 7 * 24 * time.Hour

// Live reads slurmctld (slurm.Client): nodes, and every queued job through the fast queue
// read (slurm.SchedulingFields: squeue --Format, not --json, which is too slow at tens of
// thousands of jobs), with the array throttles and elastic workers' names it leaves out.
type Live interface {
	SlurmRelease(ctx context.Context) (slurm.Release, error)
	Nodes(ctx context.Context) ([]slurm.Node, error)
	Queue(ctx context.Context, r slurm.QueueRead) ([]slurm.Job, error)
	ArrayTaskThrottle(ctx context.Context, arrayJobID uint32) (int, error)
	DecayedGPUUsage(ctx context.Context) (map[string]float64, error)
}

// Builder takes snapshots.
type Builder struct {
	Live        Live
	Accounting  Accounting
	UsageWindow time.Duration
	Now         func() time.Time // nil: time.Now

	// throttlesRead are the split arrays' throttles read from scontrol (0: none), kept for
	// throttleReadFor: asked every cycle, a queue of such arrays would cost a request each.
	mu            sync.Mutex
	throttlesRead map[uint32]throttleRead
	// structure is the last read of TRES, QOS and associations, kept while slurmdbd's change
	// mark stays where it was (Marked), for at most structureReadFor.
	structure *structureRead
}

// Marked is an Accounting that can vouch for its TRES, QOS and associations with a change mark
// (slurmdb.Reader): a snapshot then reads them again only when the mark has moved. A cycle
// costs one query for them instead of four, and the queue read beside it the CPU they took.
type Marked interface {
	ChangeMark(ctx context.Context) (slurmdbd.ChangeMark, error)
}

// structureReadFor is how long TRES, QOS and associations read under an unmoved change mark
// are used: past it they are read again whatever the mark says, a check on the mark itself.
const structureReadFor = time.Minute

// structureRead is one read of TRES, QOS and associations, the mark read before it, and when.
type structureRead struct {
	mark     slurmdbd.ChangeMark
	at       time.Time
	tres     map[uint32]string
	qos      []policy.QOS
	accounts []policy.Account
	users    []policy.UserAssociation
}

// throttleRead is an array's throttle as scontrol gave it, and when.
type throttleRead struct {
	n  int
	at time.Time
}

// throttleReadFor is how long an array's throttle read from scontrol is taken as still true. A
// user may change it (scontrol update ArrayTaskThrottle); until it is read again quotad may lend
// a task past the new throttle, which then waits in the borrow QOS like any lent task.
const throttleReadFor = 5 * time.Minute

// Snapshot is a policy snapshot plus what the adapter learnt on the way.
type Snapshot struct {
	*policy.Snapshot
	TRES map[uint32]string // tres_table ids → names
	// SlurmNodes are every node as sinfo gave them, CPU nodes and down ones included: the
	// cluster page counts each pool's nodes up and down from them.
	SlurmNodes []slurm.Node
	// Took is how long each source took to read, for the logs and benchmarks.
	Took Timings
}

// Timings are the read times of a snapshot's sources.
type Timings struct {
	Accounting, Nodes, Queue time.Duration
}

func (b *Builder) now() time.Time {
	if b.Now != nil {
		return b.Now()
	}
	return time.Now()
}

// ConfigError is a quota table that could not be loaded (TakeLoading): no snapshot without it.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return "reading the quota table: " + e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// ArrayThrottleError is a pending array whose task throttle slurmctld did not give: the
// snapshot fails, as the array's share of its guarantee is unknown.
type ArrayThrottleError struct {
	ArrayJobID uint32
	Err        error
}

func (e *ArrayThrottleError) Error() string {
	return fmt.Sprintf("slurmctld (scontrol show job %d, array throttle): %v", e.ArrayJobID, e.Err)
}
func (e *ArrayThrottleError) Unwrap() error { return e.Err }

// Take reads every source, for the quota table cfg. See TakeLoading.
func (b *Builder) Take(ctx context.Context, cfg *policy.Config) (*Snapshot, error) {
	_, snap, err := b.TakeLoading(ctx, func(context.Context) (*policy.Config, error) { return cfg, nil })
	return snap, err
}

// TakeLoading loads the quota table (load) and reads every source, all at once. TakenAt is when
// the first (oldest) read began, so the policy's freshness check covers the whole snapshot. The
// table and the three sources (slurmdbd's database, the nodes, the queue) are read side by
// side: at tens of thousands of jobs the queue alone takes most of a cycle, and the others need
// not wait for it. What needs the table waits for it: the throttle read (the guaranteed QOS,
// whose pending array records are read for their throttle), the decayed usage (a setting) and
// the reclaims (a setting). A table that cannot be loaded fails it with a ConfigError.
func (b *Builder) TakeLoading(ctx context.Context, load func(context.Context) (*policy.Config, error)) (*policy.Config, *Snapshot, error) {
	started := b.now()
	var (
		wg                         sync.WaitGroup
		cfg                        *policy.Config
		cfgErr                     error
		acc                        accounting
		decayed                    map[string]float64
		rel                        slurm.Release
		nodes                      []slurm.Node
		jobs                       []slurm.Job
		throttles                  map[uint32]int
		accErr, nodesErr, queueErr error
		throttleErr                error
		took                       Timings
	)
	loaded := make(chan struct{})
	// table waits for the quota table; nil if it could not be loaded (cfgErr says why) or if
	// there is none (Take with a nil table: no QOS is read for throttles, no setting applies).
	table := func() *policy.Config {
		<-loaded
		return cfg
	}
	wg.Add(5)
	go func() {
		defer wg.Done()
		defer close(loaded)
		cfg, cfgErr = load(ctx)
	}()
	go func() {
		defer wg.Done()
		clock := time.Now()
		acc, accErr = b.readAccounting(ctx, table, started)
		took.Accounting = time.Since(clock)
	}()
	go func() {
		defer wg.Done()
		clock := time.Now()
		if rel, nodesErr = b.Live.SlurmRelease(ctx); nodesErr != nil {
			nodesErr = fmt.Errorf("slurmctld: %w", nodesErr)
			return
		}
		if nodes, nodesErr = b.Live.Nodes(ctx); nodesErr != nil {
			nodesErr = fmt.Errorf("slurmctld (scontrol show nodes): %w", nodesErr)
			return
		}
		if cfg := table(); cfg != nil && cfg.Settings.ByDecayedUsage() {
			if decayed, nodesErr = b.Live.DecayedGPUUsage(ctx); nodesErr != nil {
				nodesErr = fmt.Errorf("slurmctld (sshare): %w", nodesErr)
			}
		}
		took.Nodes = time.Since(clock)
	}()
	go func() {
		defer wg.Done()
		clock := time.Now()
		if jobs, queueErr = b.Live.Queue(ctx, slurm.QueueRead{Fields: slurm.SchedulingFields}); queueErr != nil {
			queueErr = fmt.Errorf("slurmctld (squeue): %w", queueErr)
		}
		took.Queue = time.Since(clock)
	}()
	go func() {
		defer wg.Done()
		cfg := table()
		if cfg == nil {
			return
		}
		var guaranteed []string
		for _, p := range cfg.Projects {
			guaranteed = append(guaranteed, cfg.Settings.GuaranteedQOSName(p.Account))
		}
		records, err := b.Live.Queue(ctx, slurm.QueueRead{Fields: slurm.ThrottleFields, QOS: guaranteed})
		if err != nil {
			throttleErr = fmt.Errorf("slurmctld (squeue, array throttles): %w", err)
			return
		}
		throttles = map[uint32]int{}
		for _, r := range records {
			if r.ArrayThrottle > 0 {
				throttles[r.ArrayJobID] = r.ArrayThrottle
			}
		}
	}()
	wg.Wait()
	if cfgErr != nil {
		return nil, nil, &ConfigError{Err: cfgErr}
	}
	for _, err := range []error{accErr, nodesErr, queueErr, throttleErr} {
		if err != nil {
			return cfg, nil, err
		}
	}
	if err := b.splitArrayThrottles(ctx, cfg, jobs, throttles); err != nil {
		return cfg, nil, err
	}
	snap := &Snapshot{
		Snapshot: &policy.Snapshot{TakenAt: started, QOS: acc.qos, Accounts: acc.accounts, Users: acc.users, Usage: acc.usage, Nodes: Nodes(nodes),
			WholeArrays: !rel.StartsSplitArrayTasks(), Reclaims: acc.reclaims, DecayedUsage: decayed},
		TRES:       acc.tres,
		SlurmNodes: nodes,
		Took:       took,
	}
	names, err := b.workerNames(ctx, cfg, jobs)
	if err != nil {
		return cfg, nil, err
	}
	for i := range jobs {
		j, ok, err := ConvertJob(&jobs[i])
		if err != nil {
			// Kept, not dropped: the policy counts it at its worst.
			snap.Unreadable = append(snap.Unreadable, policy.UnreadableJob{ID: j.ID, Account: j.Account, User: j.User,
				QOS: j.QOS, State: j.State, Problem: err.Error()})
			continue
		}
		if ok {
			if j.ArrayJobID != 0 {
				j.ArrayThrottle = throttles[j.ArrayJobID]
			}
			if main, ok := slurm.ElasticWorkerOf(names[j.ID]); ok {
				j.ElasticMain = main
			}
			snap.Jobs = append(snap.Jobs, j)
		}
	}
	return cfg, snap, nil
}

// splitArrayThrottles completes throttles for the arrays the throttle read may have missed: those
// with a pending task split off into a guaranteed QOS, which squeue folds back into the array's
// line without its "%N" (a task returned from the borrow QOS, or updated on its own). Each is
// read from scontrol; an array whose throttle the read did give is not.
func (b *Builder) splitArrayThrottles(ctx context.Context, cfg *policy.Config, jobs []slurm.Job, throttles map[uint32]int) error {
	if cfg == nil {
		return nil
	}
	guaranteed := map[string]bool{}
	for _, p := range cfg.Projects {
		guaranteed[cfg.Settings.GuaranteedQOSName(p.Account)] = true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	asked := map[uint32]bool{}
	kept := map[uint32]throttleRead{}
	for i := range jobs {
		j := &jobs[i]
		if j.ArrayJobID == 0 || j.ID == j.ArrayJobID || !j.Pending() || !guaranteed[pools.QOSKey(j.QOS)] {
			continue
		}
		if _, known := throttles[j.ArrayJobID]; known || asked[j.ArrayJobID] {
			continue
		}
		asked[j.ArrayJobID] = true
		read, ok := b.throttlesRead[j.ArrayJobID]
		if !ok || now.Sub(read.at) >= throttleReadFor || now.Before(read.at) {
			n, err := b.Live.ArrayTaskThrottle(ctx, j.ArrayJobID)
			if err != nil {
				return &ArrayThrottleError{ArrayJobID: j.ArrayJobID, Err: err}
			}
			read = throttleRead{n: n, at: now}
		}
		kept[j.ArrayJobID] = read // arrays no longer split are forgotten
		if read.n > 0 {
			throttles[j.ArrayJobID] = read.n
		}
	}
	b.throttlesRead = kept
	return nil
}

// workerNames reads the names of the jobs in the elastic QOS that have any (see
// slurm.NameFields): elastic workers are told by name. Only then, and only those QOS: a cluster
// without elastic jobs pays nothing for it.
func (b *Builder) workerNames(ctx context.Context, cfg *policy.Config, jobs []slurm.Job) (map[uint32]string, error) {
	if cfg == nil {
		return nil, nil
	}
	elastic := map[string]bool{}
	for _, p := range cfg.Projects {
		elastic[cfg.Settings.ElasticQOSName(p.Account)] = true
	}
	var qos []string
	for i := range jobs {
		if q := pools.QOSKey(jobs[i].QOS); elastic[q] && !slices.Contains(qos, q) {
			qos = append(qos, q)
		}
	}
	if len(qos) == 0 {
		return nil, nil
	}
	slices.Sort(qos)
	named, err := b.Live.Queue(ctx, slurm.QueueRead{Fields: slurm.NameFields, QOS: qos})
	if err != nil {
		return nil, fmt.Errorf("slurmctld (squeue, elastic workers' names): %w", err)
	}
	names := make(map[uint32]string, len(named))
	for _, j := range named {
		names[j.ID] = j.Name
	}
	return names, nil
}

// accounting is what the snapshot reads from slurmdbd's database.
type accounting struct {
	tres     map[uint32]string
	qos      []policy.QOS
	accounts []policy.Account
	users    []policy.UserAssociation
	usage    map[string]float64
	reclaims []policy.Reclaim
}

// readAccounting reads slurmdbd's database: TRES names, QOS, accounts, users with their own QOS
// list, GPU usage over the usage window up to started, and, when the table sets a reclaim
// backoff, the preemptions of the reclaim window.
func (b *Builder) readAccounting(ctx context.Context, table func() *policy.Config, started time.Time) (acc accounting, err error) {
	fail := func(err error) (accounting, error) { return accounting{}, fmt.Errorf("slurmdbd database: %w", err) }
	st, err := b.readStructure(ctx)
	if err != nil {
		return fail(err)
	}
	// Copies of the lists: a snapshot is the policy's to read, and the next may share the read.
	acc.tres, acc.qos, acc.accounts, acc.users = maps.Clone(st.tres), slices.Clone(st.qos), slices.Clone(st.accounts), slices.Clone(st.users)
	acc.usage = map[string]float64{}
	if gpuID, ok := slurmdbd.TRESID(acc.tres, "gres/gpu"); ok {
		window := b.UsageWindow
		if window <= 0 {
			window = DefaultUsageWindow
		}
		if acc.usage, err = b.Accounting.Usage(ctx, gpuID, started.Add(-window), started); err != nil {
			return fail(err)
		}
	}
	if cfg := table(); cfg != nil && cfg.Settings.ReclaimBackoff > 0 {
		if acc.reclaims, err = b.Accounting.Reclaims(ctx, started.Add(-policy.ReclaimWindow)); err != nil {
			return fail(err)
		}
	}
	return acc, nil
}

// readStructure reads TRES, QOS and associations, or gives those of the last read when the
// database's change mark has not moved since (and they are under structureReadFor old). The
// mark is read first: a change during the read moves it, and the next cycle reads again.
func (b *Builder) readStructure(ctx context.Context) (*structureRead, error) {
	marked, ok := b.Accounting.(Marked)
	var mark slurmdbd.ChangeMark
	if ok {
		var err error
		if mark, err = marked.ChangeMark(ctx); err != nil {
			return nil, err
		}
		b.mu.Lock()
		last := b.structure
		b.mu.Unlock()
		if now := b.now(); last != nil && last.mark == mark && now.Sub(last.at) < structureReadFor && !now.Before(last.at) {
			return last, nil
		}
	}
	st := &structureRead{mark: mark, at: b.now()}
	var err error
	if st.tres, err = b.Accounting.TRESNames(ctx); err != nil {
		return nil, err
	}
	if st.qos, err = b.Accounting.QOS(ctx, st.tres); err != nil {
		return nil, err
	}
	if st.accounts, st.users, err = b.Accounting.Associations(ctx); err != nil {
		return nil, err
	}
	if ok {
		b.mu.Lock()
		b.structure = st
		b.mu.Unlock()
	}
	return st, nil
}

// ConvertJob maps a squeue job to the policy's terms; ok is false for jobs that hold and want
// nothing (finished ones, which squeue --json keeps for MinJobAge). A job whose GPUs cannot be
// read is an error; the job returned with it still has what could be read (id, account, user,
// QOS, state), for the policy's worst case. A job holding GPUs is read by its allocation, which
// slurmctld wrote, whatever the spelling of its request.
func ConvertJob(j *slurm.Job) (policy.Job, bool, error) {
	var state policy.JobState
	// StateName reads the same on every release: 22.05's single name.
	switch name := j.StateName(); {
	case name == "SUSPENDED":
		state = policy.StateSuspended
	case name == "COMPLETING":
		state = policy.StateCompleting
	case name == "CONFIGURING":
		state = policy.StateConfiguring
	case j.Running():
		state = policy.StateRunning
	case j.Pending():
		state = policy.StatePending
	default:
		return policy.Job{}, false, nil
	}
	pj := policy.Job{
		ID: j.ID, Account: j.Account, User: j.User, State: state, Reason: j.StateReason, QOS: j.QOS,
		Partitions: j.Partitions(), Nodes: int(j.NodeCount), Requeue: j.Requeue, Batch: j.Batch,
		Priority: int64(j.Priority), SubmitTime: j.Submit,
		ArrayJobID: j.ArrayJobID, ArrayTasks: j.ArrayTasks,
	}
	if state != policy.StatePending {
		pj.StartTime = j.Start
	}
	if j.Unreadable != "" {
		return pj, true, errors.New(j.Unreadable)
	}
	pj.CPUs, pj.MemoryMB = int(min(j.TRESReq["cpu"], maxCount)), int64(min(j.TRESReq["mem"], maxCount))
	req, err := j.GPURequest()
	if err != nil && state != policy.StatePending && len(j.TRESAlloc) > 0 {
		// What it holds is what counts for a started job, and its allocation says so.
		if pj.AllocatedGPUs, err = gpusOf("tres-alloc", j.TRESAlloc); err != nil {
			return pj, true, err
		}
		pj.GPUsPerJob = maps.Clone(pj.AllocatedGPUs)
		return pj, true, nil
	}
	if err != nil {
		return pj, true, fmt.Errorf("GPU request %s: %w", gpuFields(j), err)
	}
	perTaskOrSocket := false
	for _, c := range req.GPUs {
		if c.N == 0 {
			continue
		}
		if c.N > maxCount {
			return pj, true, fmt.Errorf("GPU request %s: %d GPUs is not a count quotad can hold", gpuFields(j), c.N)
		}
		switch c.Scope {
		case gpureq.PerNode:
			pj.GPUsPerNode = addCount(pj.GPUsPerNode, c.Type, int(c.N))
		case gpureq.PerJob:
			pj.GPUsPerJob = addCount(pj.GPUsPerJob, c.Type, int(c.N))
		default:
			perTaskOrSocket = true
		}
	}
	if perTaskOrSocket {
		// Per-task and per-socket counts depend on the layout; slurmctld's tres_req_str has
		// already multiplied them out for the whole job.
		pj.GPUsPerNode = nil
		if pj.GPUsPerJob, err = gpusOf("tres_req_str", j.TRESReq); err != nil {
			return pj, true, err
		}
	}
	if state != policy.StatePending && len(j.TRESAlloc) > 0 {
		if pj.AllocatedGPUs, err = gpusOf("tres-alloc", j.TRESAlloc); err != nil {
			return pj, true, err
		}
	}
	return pj, true, nil
}

// maxCount bounds every count read from a job: a TRES value is a uint64, and one beyond an int
// would turn negative (fuzzing found "gres/gpu:a100=9223372036854775808" held as -2^63 GPUs).
// No cluster holds a million GPUs; a job that says so is unreadable, counted at its worst.
const maxCount = 1 << 20

func addCount(m map[string]int, t string, n int) map[string]int {
	if m == nil {
		m = map[string]int{}
	}
	m[t] += n
	return m
}

// gpusOf reads GPUs by type from a TRES (field names it in errors); the untyped count is kept
// as "" only for GPUs no typed entry accounts for.
func gpusOf(field string, t gpureq.TRES) (map[string]int, error) {
	out := map[string]int{}
	typed := 0
	for name, v := range t {
		if ty, ok := strings.CutPrefix(name, "gres/gpu:"); ok && v > 0 {
			if v > maxCount {
				return nil, fmt.Errorf("%s %s=%d is not a count quotad can hold", field, name, v)
			}
			out[ty] += int(v)
			typed += int(v)
		}
	}
	if all := t.GPUs(""); all > maxCount {
		return nil, fmt.Errorf("%s gres/gpu=%d is not a count quotad can hold", field, all)
	} else if rest := int(all) - typed; rest > 0 {
		out[""] = rest
	}
	return out, nil
}

// gpuFields quotes the job's tres_per_* strings that are set, for a message naming them.
func gpuFields(j *slurm.Job) string {
	var parts []string
	for _, f := range []struct{ name, v string }{
		{"tres_per_job", j.TRESPerJob}, {"tres_per_node", j.TRESPerNode},
		{"tres_per_socket", j.TRESPerSocket}, {"tres_per_task", j.TRESPerTask},
	} {
		if f.v != "" {
			parts = append(parts, fmt.Sprintf("%s %q", f.name, f.v))
		}
	}
	return strings.Join(parts, ", ")
}

// Nodes turns the nodes with GPUs into the policy's terms, each node once with all its
// partitions: a node in several partitions shares its idle GPUs among them.
func Nodes(nodes []slurm.Node) []policy.Node {
	var out []policy.Node
	for i := range nodes {
		n := &nodes[i]
		if n.GPUs() == 0 {
			continue
		}
		free := n.Free()
		pn := policy.Node{
			Name: n.Name, Partitions: slices.Clone(n.Partitions), GPUs: map[string]int{}, IdleGPUs: free.GPUs,
			FreeCPUs: free.CPUs, FreeMemMB: free.MemoryMB, Unusable: n.WhyNoNewJobs(),
		}
		for _, g := range n.Gres {
			if g.IsGPU() && g.Count > 0 {
				pn.GPUs[g.Type] += int(g.Count)
			}
		}
		out = append(out, pn)
	}
	return out
}
