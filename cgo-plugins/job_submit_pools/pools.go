// Command job_submit_pools is the job_submit/pools Slurm plugin, built with
// -buildmode=c-shared into job_submit_pools.so. This file only converts job_desc_msg_t fields
// to Go and back; the decisions are made by the jobsubmit package (and bridge/pools), which
// are plain Go and tested without slurmctld.
package main

/*
#cgo CFLAGS: -O2 -Wall
// slurm_xstrdup, slurm_xfree and the log functions come from the libslurmfull that slurmctld has loaded;
// letting them stay unresolved here also lets `go build ./...` link-check this package.
#cgo LDFLAGS: -Wl,--unresolved-symbols=ignore-in-object-files
#include <stdlib.h>
#include <slurm/slurm_errno.h>
#include "glue.h"
#include "job_record.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"unsafe"

	"github.com/slurmbridge/slurmbridge/bridge/pools"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/cgo-plugins/job_submit_pools/jobsubmit"
)

const (
	slurmSuccess = 0
)

// plugin is set by init and cleared by fini; slurmctld calls job_submit and job_modify only
// between the two, concurrently from 23.11, so they read it atomically.
var plugin atomic.Pointer[jobsubmit.Plugin]

func logEnabled(level jobsubmit.Level) bool {
	return C.pools_log_enabled(C.int(level)) != 0
}

func logToSlurm(level jobsubmit.Level, msg string) {
	// A panic's message may quote a user's text too: one line, as every line of the plugin's.
	cmsg := C.CString(jobsubmit.LogLine(msg))
	defer C.free(unsafe.Pointer(cmsg))
	C.pools_log(C.int(level), cmsg)
}

// guard turns a Go panic into a logged error and an unchanged job: a panic escaping into
// slurmctld would kill it.
func guard(rc *C.int) {
	if r := recover(); r != nil {
		logToSlurm(jobsubmit.LevelError, fmt.Sprintf("internal error, job left unchanged: %v", r))
		*rc = slurmSuccess
	}
}

// gcMemoryLimit is the Go heap size at which the plugin's garbage collector runs. Garbage
// collection cycles inside slurmctld cost its submit RPCs about 10% (bench/plugin-overhead.sh:
// 1.13x with Go's default GOGC, 1.02x without), while routing allocates ~1 KB per job: collecting
// only near a fixed limit runs a cycle every few tens of thousands of jobs and bounds the memory
// the plugin can ever take.
const gcMemoryLimit = 32 << 20

// pools_go_init gets $SLURMBRIDGE_POOLS_CONFIG and $SLURM_CONF as C's getenv sees them (NULL
// when unset): slurmctld sets SLURM_CONF after start, where os.Getenv cannot see it.
//
//export pools_go_init
func pools_go_init(poolsConfigEnv, slurmConfEnv *C.char) (rc C.int) {
	defer guard(&rc)
	debug.SetGCPercent(-1)
	debug.SetMemoryLimit(gcMemoryLimit)
	sizeGoRuntime()
	p := jobsubmit.New(pools.ConfigPath(goString(poolsConfigEnv), goString(slurmConfEnv)), logToSlurm)
	p.SlurmConf = slurmConf
	p.LogEnabled = logEnabled
	p.ConfigChanged = func() { C.pools_cache_invalidate() }
	p.Init()
	if old := plugin.Swap(p); old != nil {
		old.Fini()
	}
	return slurmSuccess
}

// sizeGoRuntime gives the Go runtime one P per slurmctld thread that may call in (see
// jobsubmit.CallerThreads), so that no submission waits for a P while slurmctld's locks are held.
func sizeGoRuntime() {
	release := slurm.VersionOfNumber(uint32(C.SLURM_VERSION_NUMBER)).Release
	callers := jobsubmit.CallerThreads(release, goString(C.pools_slurmctld_params()), runtime.NumCPU())
	if callers > runtime.GOMAXPROCS(0) {
		runtime.GOMAXPROCS(callers)
		logToSlurm(jobsubmit.LevelInfo, fmt.Sprintf("Go runtime: GOMAXPROCS %d, one for each slurmctld thread that may submit at once", callers))
	}
}

//export pools_go_fini
func pools_go_fini() {
	defer func() { _ = recover() }()
	if p := plugin.Swap(nil); p != nil {
		p.Fini()
	}
}

// pools_go_submit decides a new job; plugin.c writes the answer into job_desc and may keep it in
// its decision cache when out->cacheable says the same request would get the same answer.
//
//export pools_go_submit
func pools_go_submit(req *C.struct_pools_request, out *C.struct_pools_outcome) {
	defer guardOutcome(out)
	p := plugin.Load()
	if p == nil {
		// No plugin yet (or any more): nothing to remember either.
		return
	}
	r := requestFrom(req, pools.Submit)
	setOutcome(out, p.Submit(&r, uid(req)))
}

// pools_go_modify decides an update of a job, pending or running. job_desc (req, account)
// holds only the fields being changed; job is what plugin.c read of the job itself
// (job_record.c), or NULL when its record could not be read: the update is then judged on its
// changed fields alone. plugin.c drops the message on 22.05, whose job_modify has no err_msg.
//
//export pools_go_modify
func pools_go_modify(req *C.struct_pools_request, account *C.char, job *C.struct_pools_job, out *C.struct_pools_outcome) {
	defer guardOutcome(out)
	p := plugin.Load()
	if p == nil {
		return
	}
	upd := jobsubmit.Update{Request: requestFrom(req, pools.Modify), Account: goString(account)}
	// A string job_desc carries, even empty, is a change; NULL leaves the job's.
	for _, f := range []struct {
		i   C.int
		set jobsubmit.Fields
	}{
		{C.POOLS_PARTITION, jobsubmit.FieldPartition},
		{C.POOLS_TRES_PER_JOB, jobsubmit.FieldTRESPerJob},
		{C.POOLS_TRES_PER_NODE, jobsubmit.FieldTRESPerNode},
		{C.POOLS_TRES_PER_SOCKET, jobsubmit.FieldTRESPerSocket},
		{C.POOLS_TRES_PER_TASK, jobsubmit.FieldTRESPerTask},
		{C.POOLS_COMMENT, jobsubmit.FieldComment},
		{C.POOLS_QOS, jobsubmit.FieldQOS},
	} {
		if req.s[f.i] != nil {
			upd.Set |= f.set
		}
	}
	var j *jobsubmit.Job
	if job != nil {
		j = &jobsubmit.Job{ID: uint32(job.job_id), Request: requestFrom(&job.req, pools.Submit), Account: goString(job.account)}
	}
	setOutcome(out, p.Modify(&upd, j, uid(req)))
}

// guardOutcome turns a Go panic into a logged error and an unchanged job, never remembered: a
// panic escaping into slurmctld would kill it.
func guardOutcome(out *C.struct_pools_outcome) {
	if r := recover(); r != nil {
		logToSlurm(jobsubmit.LevelError, fmt.Sprintf("internal error, job left unchanged: %v", r))
		freeOutcome(out)
		*out = C.struct_pools_outcome{}
	}
}

// setOutcome hands the decision to plugin.c, which frees the strings.
func setOutcome(out *C.struct_pools_outcome, o jobsubmit.Outcome) {
	res := C.struct_pools_outcome{rc: errno(o.Reject)}
	if o.SetPartition != "" {
		res.partition = C.CString(o.SetPartition)
	}
	if o.UserMessage != "" {
		res.message = C.CString(o.UserMessage)
	}
	if !o.Logged {
		res.cacheable = 1
	}
	if o.AppendOutput {
		res.append_output = 1
	}
	*out = res
}

func freeOutcome(out *C.struct_pools_outcome) {
	C.free(unsafe.Pointer(out.partition))
	C.free(unsafe.Pointer(out.message))
}

// slurmConf reads slurmctld's slurm_conf in memory, for each decision: JobRequeue may change
// with a reconfigure.
func slurmConf() jobsubmit.SlurmConf {
	requeue, slurmUser := C.pools_job_requeue(), C.pools_slurm_user_id()
	if requeue < 0 || slurmUser < 0 {
		return jobsubmit.SlurmConf{}
	}
	return jobsubmit.SlurmConf{Known: true, JobRequeue: requeue == 1, SlurmUserID: uint32(slurmUser)}
}

// errno is the Slurm error the submitting command prints after our message.
func errno(r jobsubmit.Rejection) C.int {
	switch r {
	case jobsubmit.RejectGRES:
		return C.ESLURM_INVALID_GRES
	case jobsubmit.RejectPartition:
		return C.ESLURM_INVALID_PARTITION_NAME
	case jobsubmit.RejectQOS:
		return C.ESLURM_INVALID_QOS
	case jobsubmit.RejectAccount:
		return C.ESLURM_INVALID_ACCOUNT
	}
	return slurmSuccess
}

// requestFrom converts what plugin.c copied from job_desc; NULL strings become "" and numbers
// keep Slurm's NO_VAL sentinels, which bridge/pools interprets. It reads nothing else of the
// job: the decision cache tells requests apart by exactly these fields.
func requestFrom(req *C.struct_pools_request, op pools.Op) pools.Request {
	str := func(i C.int) string { return goString(req.s[i]) }
	num := func(i C.int) uint64 { return uint64(req.n[i]) }
	return pools.Request{
		Op:             op,
		Partition:      str(C.POOLS_PARTITION),
		TRESPerJob:     str(C.POOLS_TRES_PER_JOB),
		TRESPerNode:    str(C.POOLS_TRES_PER_NODE),
		TRESPerSocket:  str(C.POOLS_TRES_PER_SOCKET),
		TRESPerTask:    str(C.POOLS_TRES_PER_TASK),
		MinCPUs:        uint32(num(C.POOLS_MIN_CPUS)),
		CPUsPerTask:    uint16(num(C.POOLS_CPUS_PER_TASK)),
		PnMinCPUs:      uint16(num(C.POOLS_PN_MIN_CPUS)),
		PnMinMemory:    num(C.POOLS_PN_MIN_MEMORY),
		MinNodes:       uint32(num(C.POOLS_MIN_NODES)),
		MaxNodes:       uint32(num(C.POOLS_MAX_NODES)),
		NumTasks:       uint32(num(C.POOLS_NUM_TASKS)),
		NTasksPerNode:  uint16(num(C.POOLS_NTASKS_PER_NODE)),
		SocketsPerNode: uint16(num(C.POOLS_SOCKETS_PER_NODE)),
		Comment:        str(C.POOLS_COMMENT),
		Features:       str(C.POOLS_FEATURES),
		QOS:            str(C.POOLS_QOS),
		Account:        str(C.POOLS_ACCOUNT),
		HetJob:         num(C.POOLS_HET_JOB) != 0,
		OpenMode:       uint8(num(C.POOLS_OPEN_MODE)),
		Batch:          num(C.POOLS_BATCH) != 0,
		Requeue:        uint16(num(C.POOLS_REQUEUE)),
	}
}

func uid(req *C.struct_pools_request) uint32 { return uint32(req.n[C.POOLS_UID]) }

func goString(s *C.char) string {
	if s == nil {
		return ""
	}
	return C.GoString(s)
}

func main() {}
