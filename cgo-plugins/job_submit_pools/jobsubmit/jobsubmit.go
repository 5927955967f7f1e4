// Package jobsubmit is the plain-Go half of the job_submit/pools plugin: it owns the pools
// configuration's life in slurmctld (load, reload when the file changes, keep the last good one)
// and turns bridge/pools decisions into what the cgo layer writes into job_desc.
//
// Its rules for running inside slurmctld's RPC thread with locks held:
//   - no blocking I/O on the submit path except a stat() of the config file, at most once per
//     RecheckInterval;
//   - never fail closed on our own trouble: with no usable config, or on an internal error,
//     jobs pass unchanged and Slurm judges them itself; only a job that can never run in the
//     pool it names is refused.
package jobsubmit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

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
)

// Outcome is what the cgo layer applies to one job_desc.
type Outcome struct {
	Reject       Rejection
	SetPartition string // "" leaves job_desc->partition as it is
	UserMessage  string // shown by sbatch/srun/salloc ("" for none)
}

// RecheckInterval bounds how often the submit path stat()s the config file.
const RecheckInterval = 5 * time.Second

// ConfigEnv names the environment variable (of slurmctld) that overrides the config path.
const ConfigEnv = "SLURMBRIDGE_POOLS_CONFIG"

// ConfigPathFromEnv is $SLURMBRIDGE_POOLS_CONFIG, else pools.yaml beside slurm.conf
// ($SLURM_CONF or /etc/slurm/slurm.conf).
func ConfigPathFromEnv() string {
	if p := os.Getenv(ConfigEnv); p != "" {
		return p
	}
	conf := os.Getenv("SLURM_CONF")
	if conf == "" {
		conf = "/etc/slurm/slurm.conf"
	}
	return filepath.Join(filepath.Dir(conf), "pools.yaml")
}

// Plugin holds the loaded configuration. Its methods are safe for concurrent use.
type Plugin struct {
	path string
	log  func(Level, string)
	now  func() time.Time

	mu        sync.Mutex
	cfg       *pools.Config // nil: no usable config, jobs pass unchanged
	stamp     fileStamp     // of the file cfg came from, or of the last file that failed
	lastCheck time.Time
}

// New returns a plugin reading its pools from path and logging through log.
func New(path string, log func(Level, string)) *Plugin {
	return &Plugin{path: path, log: log, now: time.Now}
}

// Init loads the configuration. A missing or invalid file is logged, not fatal: slurmctld must
// start, and jobs keep flowing unrouted until the file is fixed.
func (p *Plugin) Init() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lastCheck = p.now()
	p.reload(true)
}

// Fini drops the configuration.
func (p *Plugin) Fini() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cfg = nil
	p.stamp = fileStamp{}
}

// Submit routes a new job.
func (p *Plugin) Submit(req *pools.Request, uid uint32) Outcome {
	cfg := p.config()
	if cfg == nil {
		return Outcome{}
	}
	return p.outcome(cfg.Route(req), "submit", uid)
}

// Modify checks an update of a pending job. 22.05 gives job_modify no err_msg, so a refusal's
// reason goes to slurmctld's log, and the user sees Slurm's error for the code we return.
func (p *Plugin) Modify(req *pools.Request, uid uint32) Outcome {
	cfg := p.config()
	if cfg == nil {
		return Outcome{}
	}
	out := p.outcome(cfg.Route(req), "update", uid)
	out.UserMessage = ""
	return out
}

func (p *Plugin) outcome(d pools.Decision, op string, uid uint32) Outcome {
	switch d.Action {
	case pools.SetPartition:
		p.log(LevelVerbose, fmt.Sprintf("%s by uid %d: partition %s", op, uid, d.Partition))
		return Outcome{SetPartition: d.Partition, UserMessage: d.Message}
	case pools.Reject:
		p.log(LevelInfo, fmt.Sprintf("%s by uid %d refused: %s", op, uid, d.Message))
		kind := RejectPartition
		if d.GPUs.IsGPU() {
			kind = RejectGRES
		}
		return Outcome{Reject: kind, UserMessage: d.Message}
	default:
		if d.Err != nil {
			// Slurm will judge a request we could not read; say so in the log only.
			p.log(LevelVerbose, fmt.Sprintf("%s by uid %d not routed: %v", op, uid, d.Err))
		}
		return Outcome{UserMessage: d.Message}
	}
}

// config returns the current configuration, reloading it first when the file changed and the
// last check is older than RecheckInterval.
func (p *Plugin) config() *pools.Config {
	p.mu.Lock()
	defer p.mu.Unlock()
	if now := p.now(); now.Sub(p.lastCheck) >= RecheckInterval {
		p.lastCheck = now
		p.reload(false)
	}
	return p.cfg
}

// reload reads the file when its stamp changed. A broken new file keeps the last good config.
func (p *Plugin) reload(initial bool) {
	stamp, err := statFile(p.path)
	if err != nil {
		if initial || p.stamp != (fileStamp{}) {
			p.log(LevelError, fmt.Sprintf("pools config %s unreadable (%v); jobs are not routed until it is fixed", p.path, err))
		}
		p.stamp = fileStamp{}
		if errors.Is(err, fs.ErrNotExist) {
			p.cfg = nil
		}
		return
	}
	if !initial && stamp == p.stamp {
		return
	}
	p.stamp = stamp
	cfg, err := pools.Load(p.path)
	if err != nil {
		if p.cfg != nil {
			p.log(LevelError, fmt.Sprintf("pools config %s has errors; keeping the previous one:\n%v", p.path, err))
		} else {
			p.log(LevelError, fmt.Sprintf("pools config %s has errors; jobs are not routed until it is fixed:\n%v", p.path, err))
		}
		return
	}
	p.cfg = cfg
	p.log(LevelInfo, fmt.Sprintf("loaded %d pools from %s (policy %s)", len(cfg.Pools), p.path, cfg.Policy))
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
