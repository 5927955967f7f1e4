//go:build nvml

// This test drives the real libnvidia-ml. Run it on a node with an NVIDIA
// GPU and driver:
//
//	go test -tags nvml -run TestRealNVML -v ./elasticd/probe/
//
// It fails, rather than skips, when NVML cannot be initialised: whoever
// asked for the nvml tag expects a GPU.
package probe

import (
	"encoding/json"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/slurmbridge/slurmbridge/elasticd/api"
)

func TestRealNVML(t *testing.T) {
	lib := nvml.New()
	r, err := Open(lib)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer func() {
		if err := r.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()

	count, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		t.Fatalf("DeviceGetCount: %v", ret)
	}
	if count < 1 {
		t.Fatalf("NVML initialised but reports %d GPUs", count)
	}
	indices := make([]int, count)
	for i := range indices {
		indices[i] = i
	}

	samples, err := r.Read(indices)
	if err != nil {
		t.Errorf("Read: %v", err)
	}
	if len(samples) != count {
		t.Fatalf("read %d GPUs of %d", len(samples), count)
	}
	for _, s := range samples {
		record, _ := json.Marshal(s)
		t.Logf("GPU %d: %s", s.Index, record)
		checkPlausible(t, s)
	}

	// Reading again gives NVLink rates where the GPU has NVLink counters.
	again, err := r.Read(indices)
	if err != nil {
		t.Errorf("second Read: %v", err)
	}
	for _, s := range again {
		if s.NVLinkTxKiBps != nil {
			t.Logf("GPU %d: NVLink %.0f KiB/s out, %.0f KiB/s in", s.Index, *s.NVLinkTxKiBps, *s.NVLinkRxKiBps)
		}
	}

	_, err = r.Read([]int{count})
	if len(gpuErrors(err)) != 1 {
		t.Errorf("Read of index %d (out of range) = %v, want one GPUError", count, err)
	}
}

// checkPlausible holds every metric a datacenter GPU without MIG reports.
func checkPlausible(t *testing.T, s api.GPUSample) {
	t.Helper()
	if !strings.HasPrefix(s.UUID, "GPU-") || s.Name == "" {
		t.Errorf("GPU %d: identity %q %q", s.Index, s.UUID, s.Name)
	}
	within := func(what string, v *uint32, lo, hi uint32) {
		t.Helper()
		if v == nil {
			t.Errorf("GPU %d: %s absent", s.Index, what)
			return
		}
		if *v < lo || *v > hi {
			t.Errorf("GPU %d: %s = %d, want %d..%d", s.Index, what, *v, lo, hi)
		}
	}
	within("GPU utilisation %", s.GPUUtilPct, 0, 100)
	within("memory utilisation %", s.MemoryUtilPct, 0, 100)
	within("max SM clock MHz", s.MaxSMClockMHz, 1, 5000)
	if s.MaxSMClockMHz != nil {
		within("SM clock MHz", s.SMClockMHz, 1, *s.MaxSMClockMHz)
	}
	within("temperature C", s.TemperatureC, 1, 120)
	within("power mW", s.PowerMilliwatts, 1, 2_000_000)
	within("power limit mW", s.PowerLimitMilliwatts, 1, 2_000_000)
	if s.MemoryTotalBytes == nil || *s.MemoryTotalBytes == 0 {
		t.Errorf("GPU %d: memory total absent or 0", s.Index)
	} else if s.MemoryUsedBytes == nil || *s.MemoryUsedBytes > *s.MemoryTotalBytes {
		t.Errorf("GPU %d: memory used %v of %d", s.Index, s.MemoryUsedBytes, *s.MemoryTotalBytes)
	}
	if s.PCIeTxKBps == nil || s.PCIeRxKBps == nil {
		t.Errorf("GPU %d: PCIe throughput absent", s.Index)
	}
	for _, reason := range s.ThrottleReasons {
		if strings.HasPrefix(reason, "unknown_") {
			t.Logf("GPU %d: throttle bit this package does not name: %s", s.Index, reason)
		}
	}
}

// TestRealNVMLSeesABusyGPU reads a GPU that another process keeps busy (a
// training step, a matrix-product loop) and checks that the signals elasticd
// acts on move with the work: utilisation high, SM clock up from idle, power
// drawn, memory in use. Name the busy GPU's index:
//
//	SLURMBRIDGE_NVML_BUSY_GPU=0 go test -tags nvml -run TestRealNVMLSeesABusyGPU -v ./elasticd/probe/
func TestRealNVMLSeesABusyGPU(t *testing.T) {
	busy := os.Getenv("SLURMBRIDGE_NVML_BUSY_GPU")
	if busy == "" {
		t.Skip("SLURMBRIDGE_NVML_BUSY_GPU unset: no GPU is known to be busy")
	}
	index, err := strconv.Atoi(busy)
	if err != nil {
		t.Fatalf("SLURMBRIDGE_NVML_BUSY_GPU=%q: %v", busy, err)
	}
	r, err := Open(nvml.New())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer r.Close()

	// NVML's utilisation is the share of the last sample period (1/6 s to
	// 1 s) with a kernel running: take the best of a few reads a second apart
	// so a gap between the loader's launches does not decide the test.
	var best api.GPUSample
	for i := 0; i < 5; i++ {
		samples, err := r.Read([]int{index})
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
		s := samples[0]
		record, _ := json.Marshal(s)
		t.Logf("busy GPU %d, read %d: %s", index, i, record)
		if best.GPUUtilPct == nil || (s.GPUUtilPct != nil && *s.GPUUtilPct > *best.GPUUtilPct) {
			best = s
		}
		time.Sleep(time.Second)
	}
	checkPlausible(t, best)
	if best.GPUUtilPct == nil || *best.GPUUtilPct < 50 {
		t.Errorf("GPU %d is busy but its utilisation reads %v%%", index, deref(best.GPUUtilPct))
	}
	if best.MemoryUsedBytes == nil || *best.MemoryUsedBytes < 256<<20 {
		t.Errorf("GPU %d is busy but its memory in use reads %v bytes", index, deref(best.MemoryUsedBytes))
	}
	if best.SMClockMHz != nil && best.MaxSMClockMHz != nil && *best.SMClockMHz < *best.MaxSMClockMHz/2 {
		t.Errorf("GPU %d is busy but its SM clock is %d of %d MHz", index, *best.SMClockMHz, *best.MaxSMClockMHz)
	}
	if slices.Contains(best.ThrottleReasons, "gpu_idle") {
		t.Errorf("GPU %d is busy but NVML says its clocks are held back as idle: %v", index, best.ThrottleReasons)
	}
	t.Logf("busy GPU %d: utilisation %d%%, SM clock %d of %d MHz, power %d of %d mW, throttled by power or heat: %v",
		index, deref(best.GPUUtilPct), deref(best.SMClockMHz), deref(best.MaxSMClockMHz),
		deref(best.PowerMilliwatts), deref(best.PowerLimitMilliwatts), best.ThermalOrPowerThrottled())
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
