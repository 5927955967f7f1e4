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
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
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
func checkPlausible(t *testing.T, s Sample) {
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
