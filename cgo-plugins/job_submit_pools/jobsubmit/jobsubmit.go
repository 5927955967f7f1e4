// Package jobsubmit is the plain-Go half of the job_submit/pools plugin: it owns the pools
// configuration's life in slurmctld (load, reload when the file changes, keep the last good one)
// and turns bridge/pools decisions into what the cgo layer writes into job_desc.
//
// Its rules for running inside slurmctld's RPC threads with locks held:
//   - no I/O on the submit path: a background goroutine watches the config file and swaps the
//     parsed config in; Submit and Modify only load a pointer;
//   - calls may run concurrently (from Slurm 23.11 job_submit runs under a read lock), so
//     everything they touch is immutable or atomic;
//   - never fail closed on our own trouble: with no usable config, or on an internal error,
//     jobs pass unchanged and Slurm judges them itself; only a job that can never run in the
//     pool it names is refused, and one that asks for the borrow QOS although Slurm could
//     not requeue it (reclaiming its GPUs would kill it; see borrow.go).
package jobsubmit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/slurmbridge/slurmbridge/bridge/pools"
)

// Level is a slurmctld log level; the values match glue.h.
type Level int

const (
	LevelError Level = iota
	LevelInfo
	LevelVerbose
	LevelDebug
)

// Rejection says which Slurm error a refused job gets; the cgo layer maps it to an ESLURM_*
// code so sbatch prints a matching reason after our message.
type Rejection int

const (
	NotRejected Rejection = iota
	// RejectGRES: the job's GPU request cannot run in the pool(s) it names.
	RejectGRES
	// RejectPartition: the job (without GPUs) cannot run in the pool(s) it names.
	RejectPartition
	// RejectQOS: the job asks for a borrow QOS that would kill it on reclaim.
	RejectQOS
	// RejectAccount: an update moves a job lent GPUs to another account.
	RejectAccount
)

// Outcome is what the cgo layer applies to one job_desc.
type Outcome struct {
	Reject       Rejection
	Refusal      pools.Refusal // the kind of a Reject ("" when not rejected)
	SetPartition string        // "" leaves job_desc->partition as it is
	UserMessage  string        // shown by sbatch/srun/salloc ("" for none)
	// Logged: deciding wrote a line to slurmctld's log. The cgo layer may answer a repeated
	// request from its cache only when not: a line an admin relies on must be written each time.
	Logged bool
	// AppendOutput sets the job's open mode to append (appendsOutput): a rerun after a requeue
	// adds to its output files instead of truncating them.
	AppendOutput bool
}

// RecheckInterval is how often the watcher stat()s the config file.
const RecheckInterval = 5 * time.Second

// Plugin holds the loaded configuration. Submit and Modify are safe for concurrent use; Init
// and Fini are called by slurmctld alone.
type Plugin struct {
	path     string
	log      func(Level, string)
	interval time.Duration // between two checks of the file by the watcher

	cfg atomic.Pointer[loaded] // nil: no usable config, jobs pass unchanged

	// SlurmConf reads slurmctld's configuration for each decision; set by the cgo layer before
	// Init. Left nil, Slurm's settings count as unknown.
	SlurmConf func() SlurmConf
	// LogEnabled says whether slurmctld keeps lines of a level, so that a line for each job is
	// built only when someone will read it; set by the cgo layer. Left nil, every level is kept.
	LogEnabled func(Level) bool
	// ConfigChanged is called after each swap of the loaded config (a new one, or none), so
	// that the cgo layer drops the decisions it cached under the old one; may be nil.
	ConfigChanged func()
	// lookupUID resolves borrow_qos_admins when a config is loaded (on the watcher, never on
	// the submit path); os/user unless a test sets it.
	lookupUID func(name string) (uint32, error)

	// Owned by whoever checks the file: Init, then the watcher goroutine alone.
	stamp fileStamp // of the file cfg came from, or of the last file that failed

	stop    chan struct{}
	stopped sync.WaitGroup
}

// loaded is one loaded config with what was resolved from it when it was loaded.
type loaded struct {
	cfg    *pools.Config
	admins map[uint32]bool // uids of borrow_qos_admins
}

// New returns a plugin reading its pools from path and logging through log.
// Every line goes through logLine: a user's --qos or -p may hold a newline, which slurmctld's
// log would write as is, as a line of its own.
func New(path string, log func(Level, string)) *Plugin {
	return &Plugin{path: path, log: func(l Level, msg string) { log(l, LogLine(msg)) }, interval: RecheckInterval, lookupUID: systemUID}
}

// LogLine is msg as one log line: control characters (newlines among them) are written as Go
// escapes, so no text a user gives can end the line and forge another (a config's list of
// problems is one line too, its problems separated by \n).
func LogLine(msg string) string {
	var b strings.Builder
	for _, r := range msg {
		switch {
		case r == '\n':
			b.WriteString("\\n")
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == utf8.RuneError:
			fmt.Fprintf(&b, "\\x%02x", r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func systemUID(name string) (uint32, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return 0, err
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	return uint32(uid), err
}

func (p *Plugin) logs(level Level) bool {
	return p.LogEnabled == nil || p.LogEnabled(level)
}

func (p *Plugin) slurmConf() SlurmConf {
	if p.SlurmConf == nil {
		return SlurmConf{}
	}
	return p.SlurmConf()
}

// Init loads the configuration and starts the watcher that reloads it when the file changes.
// A missing or invalid file is logged, not fatal: slurmctld must start, and jobs keep flowing
// unrouted until the file is fixed.
func (p *Plugin) Init() {
	p.check(true)
	p.stop = make(chan struct{})
	p.stopped.Add(1)
	go p.watch(p.stop)
}

// Fini stops the watcher, waits for it to return, and drops the configuration.
func (p *Plugin) Fini() {
	if p.stop != nil {
		close(p.stop)
		p.stopped.Wait()
		p.stop = nil
	}
	p.setConfig(nil)
	p.stamp = fileStamp{}
}

func (p *Plugin) watch(stop <-chan struct{}) {
	defer p.stopped.Done()
	tick := time.NewTicker(p.interval)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			p.checkGuarded()
		}
	}
}

// checkGuarded is one check of the file from the watcher: a panic there would kill slurmctld.
func (p *Plugin) checkGuarded() {
	defer func() {
		if r := recover(); r != nil {
			p.log(LevelError, fmt.Sprintf("internal error while checking %s: %v", p.path, r))
		}
	}()
	p.check(false)
}

// Submit routes a new job. A heterogeneous job's GPU component, a job that asks for a borrow QOS
// although Slurm could not requeue it, and a user's job that asks for a QOS of the borrow
// pattern are refused even without a usable config (the borrow QOS is then quotad's default).
// A GPU batch job that chose no open mode appends to its output files.
func (p *Plugin) Submit(req *pools.Request, uid uint32) Outcome {
	var cfg *pools.Config
	var admins map[uint32]bool
	if l := p.cfg.Load(); l != nil {
		cfg, admins = l.cfg, l.admins
	}
	// slurmctld's settings matter only to a job that names a QOS: the rest skip two calls out of Go.
	var conf SlurmConf
	if req.QOS != "" {
		conf = p.slurmConf()
	}
	gpus, mayGPUs := gpuRequest(req)
	if msg := hetJobGPURefusal(mayGPUs); req.HetJob && msg != "" {
		return p.refuse(fmt.Sprintf("submit by uid %d", uid), Outcome{Reject: RejectGRES, Refusal: pools.RefusedHetJobGPUs, UserMessage: msg})
	}
	if msg := submitBorrowRefusal(cfg, req, conf); msg != "" {
		return p.refuse(fmt.Sprintf("submit by uid %d", uid), Outcome{Reject: RejectQOS, Refusal: pools.RefusedBorrowNotRequeueable, UserMessage: msg})
	}
	if refusal, msg := submitLendingRefusal(cfg, req, uid, conf, admins); msg != "" {
		return p.refuse(fmt.Sprintf("submit by uid %d", uid), Outcome{Reject: RejectQOS, Refusal: refusal, UserMessage: msg})
	}
	out := Outcome{}
	if cfg != nil {
		out = p.outcome(cfg.Route(req), "submit", uid)
	}
	out.AppendOutput = out.Reject == NotRejected && appendsOutput(req, gpus)
	return out
}

func (p *Plugin) outcome(d pools.Decision, op string, uid uint32) Outcome {
	switch d.Action {
	case pools.SetPartition:
		out := Outcome{SetPartition: d.Partition, UserMessage: d.Message}
		if p.logs(LevelVerbose) {
			p.log(LevelVerbose, fmt.Sprintf("%s by uid %d: partition %s", op, uid, d.Partition))
			out.Logged = true
		}
		return out
	case pools.Reject:
		kind := RejectPartition
		if d.GPUs.IsGPU() {
			kind = RejectGRES
		}
		return p.refuse(fmt.Sprintf("%s by uid %d", op, uid), Outcome{Reject: kind, Refusal: d.Refusal, UserMessage: d.Message})
	default:
		out := Outcome{UserMessage: d.Message}
		if d.Err != nil && p.logs(LevelVerbose) {
			// Slurm will judge a request we could not read; say so in the log only.
			p.log(LevelVerbose, fmt.Sprintf("%s by uid %d not routed: %v", op, uid, d.Err))
			out.Logged = true
		}
		return out
	}
}

// refuse logs a refusal, "WHO refused: MESSAGE code=KIND", and returns it.
func (p *Plugin) refuse(who string, out Outcome) Outcome {
	p.log(LevelInfo, fmt.Sprintf("%s refused: %s code=%s", who, out.UserMessage, out.Refusal))
	out.Logged = true
	return out
}

// setConfig swaps the loaded config (nil: none) and tells the cgo layer, after the swap: a
// decision made under the old one is then never answered from its cache.
func (p *Plugin) setConfig(l *loaded) {
	p.cfg.Store(l)
	if p.ConfigChanged != nil {
		p.ConfigChanged()
	}
}

// check reads the file when its stamp changed and swaps the new config in. A broken new file
// keeps the last good config; a missing one drops it.
func (p *Plugin) check(initial bool) {
	stamp, err := statFile(p.path)
	if err != nil {
		if initial || p.stamp != (fileStamp{}) {
			p.log(LevelError, fmt.Sprintf("pools config %s unreadable (%v); jobs are not routed until it is fixed", p.path, err))
		}
		p.stamp = fileStamp{}
		if errors.Is(err, fs.ErrNotExist) && p.cfg.Load() != nil {
			p.setConfig(nil)
		}
		return
	}
	if !initial && stamp == p.stamp {
		return
	}
	p.stamp = stamp
	cfg, err := pools.Load(p.path)
	if err != nil {
		if p.cfg.Load() != nil {
			p.log(LevelError, fmt.Sprintf("pools config %s has errors; keeping the previous one:\n%v", p.path, err))
		} else {
			p.log(LevelError, fmt.Sprintf("pools config %s has errors; jobs are not routed until it is fixed:\n%v", p.path, err))
		}
		return
	}
	p.setConfig(&loaded{cfg: cfg, admins: p.resolveAdmins(cfg.BorrowQOSAdmins)})
	p.log(LevelInfo, fmt.Sprintf("loaded %d pools from %s (policy %s, borrow QOS %s, elastic QOS %s)", len(cfg.Pools), p.path, cfg.Policy, cfg.BorrowQOSPattern(), cfg.ElasticQOSPattern()))
}

// resolveAdmins finds the uids of borrow_qos_admins; a user unknown here is logged and left out
// (their updates into the borrow QOS are refused until the file is loaded again).
func (p *Plugin) resolveAdmins(names []string) map[uint32]bool {
	admins := make(map[uint32]bool, len(names))
	for _, name := range names {
		uid, err := p.lookupUID(name)
		if err != nil {
			p.log(LevelError, fmt.Sprintf("borrow_qos_admins: user %s: %v; jobs it moves into the borrow QOS are refused", name, err))
			continue
		}
		admins[uid] = true
	}
	return admins
}

// fileStamp identifies a version of a file without reading it.
type fileStamp struct {
	dev, ino uint64
	size     int64
	mtime    int64
}

func statFile(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	st := fileStamp{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.dev, st.ino = uint64(sys.Dev), sys.Ino
	}
	return st, nil
}
