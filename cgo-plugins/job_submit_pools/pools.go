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
*/
import "C"

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"unsafe"

	"github.com/slurmbridge/slurmbridge/bridge/pools"
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
	cmsg := C.CString(msg)
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
	p := jobsubmit.New(jobsubmit.ConfigPath(goString(poolsConfigEnv), goString(slurmConfEnv)), logToSlurm)
	p.SlurmConf = slurmConf
	p.LogEnabled = logEnabled
	p.Init()
	if old := plugin.Swap(p); old != nil {
		old.Fini()
	}
	return slurmSuccess
}

// sizeGoRuntime gives the Go runtime one P per slurmctld thread that may call in (see
// jobsubmit.CallerThreads), so that no submission waits for a P while slurmctld's locks are held.
func sizeGoRuntime() {
	version := int(C.SLURM_VERSION_NUMBER)
	major, minor := version>>16&0xff, version>>8&0xff
	callers := jobsubmit.CallerThreads(major, minor, goString(C.pools_slurmctld_params()), runtime.NumCPU())
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

//export pools_go_submit
func pools_go_submit(desc *C.job_desc_msg_t, uid C.uint32_t, errMsg **C.char) (rc C.int) {
	defer guard(&rc)
	p := plugin.Load()
	if p == nil {
		return slurmSuccess
	}
	req := requestFrom(desc, pools.Submit)
	out := p.Submit(&req, uint32(uid))
	apply(desc, out, errMsg)
	return errno(out.Reject)
}

// pools_go_modify gets errMsg NULL from 22.05, whose job_modify has no err_msg.
//
// What it cannot check: job_desc on modify holds only the fields being changed, so
// `scontrol update jobid=N partition=cpu` of a pending GPU job arrives without its GPU request.
// That request lives in job_ptr (job_record_t: tres_per_node, tres_per_job, tres_per_socket,
// tres_per_task, gres_list_req), whose layout is declared only in slurmctld's own headers
// (src/slurmctld/slurmctld.h in 22.05, src/common/job_record.h from 23.x), not in
// libslurm-dev, and changes between releases; and no Slurm API may be called from here while
// slurmctld holds the job lock. So this plugin lets such an update through unchecked.
//
//export pools_go_modify
func pools_go_modify(desc *C.job_desc_msg_t, uid C.uint32_t, errMsg **C.char) (rc C.int) {
	defer guard(&rc)
	p := plugin.Load()
	if p == nil {
		return slurmSuccess
	}
	req := requestFrom(desc, pools.Modify)
	out := p.Modify(&req, uint32(uid))
	apply(desc, out, errMsg)
	return errno(out.Reject)
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
	}
	return slurmSuccess
}

func apply(desc *C.job_desc_msg_t, out jobsubmit.Outcome, errMsg **C.char) {
	if out.SetPartition != "" {
		cpart := C.CString(out.SetPartition)
		C.pools_set_partition(desc, cpart)
		C.free(unsafe.Pointer(cpart))
	}
	if out.UserMessage != "" && errMsg != nil {
		cmsg := C.CString(out.UserMessage)
		C.pools_set_err_msg(errMsg, cmsg)
		C.free(unsafe.Pointer(cmsg))
	}
}

// requestFrom copies the fields routing reads; NULL strings become "" and numbers keep
// Slurm's NO_VAL sentinels, which bridge/pools interprets.
func requestFrom(d *C.job_desc_msg_t, op pools.Op) pools.Request {
	return pools.Request{
		Op:             op,
		Partition:      goString(d.partition),
		TRESPerJob:     goString(d.tres_per_job),
		TRESPerNode:    goString(d.tres_per_node),
		TRESPerSocket:  goString(d.tres_per_socket),
		TRESPerTask:    goString(d.tres_per_task),
		MinCPUs:        uint32(d.min_cpus),
		CPUsPerTask:    uint16(d.cpus_per_task),
		PnMinCPUs:      uint16(d.pn_min_cpus),
		PnMinMemory:    uint64(d.pn_min_memory),
		MinNodes:       uint32(d.min_nodes),
		MaxNodes:       uint32(d.max_nodes),
		NumTasks:       uint32(d.num_tasks),
		NTasksPerNode:  uint16(d.ntasks_per_node),
		SocketsPerNode: uint16(d.sockets_per_node),
		Name:           goString(d.name),
		Comment:        goString(d.comment),
		Features:       goString(d.features),
		QOS:            goString(d.qos),
		// slurmctld makes a job a batch job exactly when its job_desc carries a script.
		Batch:   d.script != nil,
		Requeue: uint16(d.requeue),
	}
}

func goString(s *C.char) string {
	if s == nil {
		return ""
	}
	return C.GoString(s)
}

func main() {}
