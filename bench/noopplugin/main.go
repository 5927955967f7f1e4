// Command noopplugin is job_submit_gonoop.so, a Go job_submit plugin that only crosses into Go
// and back: bench/plugin-overhead.sh compares it with no plugin and with job_submit/pools to
// tell the cost of Go inside slurmctld from the cost of routing.
package main

/*
#cgo CFLAGS: -O2 -Wall
#cgo LDFLAGS: -Wl,--unresolved-symbols=ignore-in-object-files
#include <stdint.h>
*/
import "C"

import (
	"runtime"
	"strconv"
	"sync/atomic"
)

var calls atomic.Uint64

// maxProcs, set with -ldflags "-X main.maxProcs=N", is the plugin's GOMAXPROCS ("" keeps Go's
// default, the number of CPUs).
var maxProcs string

//export gonoop_init
func gonoop_init() {
	if n, err := strconv.Atoi(maxProcs); err == nil && n > 0 {
		runtime.GOMAXPROCS(n)
	}
}

//export gonoop_submit
func gonoop_submit(hasPartition C.int, uid C.uint32_t) C.int {
	calls.Add(1)
	return 0
}

func main() {}
