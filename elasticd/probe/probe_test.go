package probe

import (
	"encoding/binary"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"

	"github.com/slurmbridge/slurmbridge/elasticd/api"
)

// gpuState is what one mock GPU reports. nvlink nil means the GPU has no
// NVLink (GetFieldValues answers NOT_SUPPORTED); fail makes one metric
// fail with the given Return.
type gpuState struct {
	util        nvml.Utilization
	sm, maxSM   uint32
	throttle    uint64
	power       uint32
	powerLimit  uint32
	memUsed     uint64
	temperature uint32
	pcieTx      uint32
	pcieRx      uint32
	nvlink      *[2]uint64 // TX, RX KiB
	nvlinkAt    int64      // NVML timestamp, microseconds
	// nvlinkFieldRet, when set, is the per-field return (the call itself
	// succeeds), as drivers do for a field they do not know.
	nvlinkFieldRet nvml.Return
	fail           map[string]nvml.Return
}

func healthyA100() gpuState {
	return gpuState{
		util: nvml.Utilization{Gpu: 97, Memory: 41}, sm: 1410, maxSM: 1410,
		power: 310_000, powerLimit: 400_000, memUsed: 30 << 30, temperature: 61,
		pcieTx: 1200, pcieRx: 56_000, nvlink: &[2]uint64{1 << 20, 2 << 20}, nvlinkAt: 1_000_000,
	}
}

// install sets every device method the Reader calls on a dgxa100 mock GPU:
// go-nvml's mocks panic on an unset method, so a Reader that starts calling
// something new fails these tests until they set it too.
func install(d *dgxa100.Device, st *gpuState) {
	ret := func(metric string) nvml.Return {
		if r, ok := st.fail[metric]; ok {
			return r
		}
		return nvml.SUCCESS
	}
	d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return st.util, ret("utilization") }
	d.GetClockInfoFunc = func(c nvml.ClockType) (uint32, nvml.Return) {
		if c != nvml.CLOCK_SM {
			return 0, nvml.ERROR_INVALID_ARGUMENT
		}
		return st.sm, ret("sm")
	}
	d.GetMaxClockInfoFunc = func(c nvml.ClockType) (uint32, nvml.Return) {
		if c != nvml.CLOCK_SM {
			return 0, nvml.ERROR_INVALID_ARGUMENT
		}
		return st.maxSM, ret("maxsm")
	}
	d.GetCurrentClocksThrottleReasonsFunc = func() (uint64, nvml.Return) { return st.throttle, ret("throttle") }
	d.GetPowerUsageFunc = func() (uint32, nvml.Return) { return st.power, ret("power") }
	d.GetEnforcedPowerLimitFunc = func() (uint32, nvml.Return) { return st.powerLimit, ret("powerlimit") }
	d.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
		total := d.MemoryInfo.Total
		return nvml.Memory{Total: total, Used: st.memUsed, Free: total - st.memUsed}, ret("memory")
	}
	d.GetTemperatureFunc = func(sensor nvml.TemperatureSensors) (uint32, nvml.Return) {
		if sensor != nvml.TEMPERATURE_GPU {
			return 0, nvml.ERROR_INVALID_ARGUMENT
		}
		return st.temperature, ret("temperature")
	}
	d.GetPcieThroughputFunc = func(c nvml.PcieUtilCounter) (uint32, nvml.Return) {
		if c == nvml.PCIE_UTIL_TX_BYTES {
			return st.pcieTx, ret("pcie")
		}
		return st.pcieRx, ret("pcie")
	}
	d.GetFieldValuesFunc = func(values []nvml.FieldValue) nvml.Return {
		if st.nvlink == nil {
			return nvml.ERROR_NOT_SUPPORTED
		}
		for i := range values {
			v := &values[i]
			if v.ScopeId != allLinks {
				return nvml.ERROR_INVALID_ARGUMENT
			}
			v.Timestamp = st.nvlinkAt
			v.NvmlReturn = uint32(st.nvlinkFieldRet)
			v.ValueType = uint32(nvml.VALUE_TYPE_UNSIGNED_LONG_LONG)
			switch v.FieldId {
			case nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX:
				binary.NativeEndian.PutUint64(v.Value[:], st.nvlink[0])
			case nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_RX:
				binary.NativeEndian.PutUint64(v.Value[:], st.nvlink[1])
			default:
				v.NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED)
			}
		}
		return nvml.SUCCESS
	}
}

// newServer is a mock DGX A100 (8 GPUs) whose GPUs all report healthy
// values, with overrides by index.
func newServer(overrides map[int]gpuState) (*dgxa100.Server, []*gpuState) {
	server := dgxa100.New()
	states := make([]*gpuState, len(server.Devices))
	for i, d := range server.Devices {
		st := healthyA100()
		if o, ok := overrides[i]; ok {
			st = o
		}
		states[i] = &st
		install(d.(*dgxa100.Device), states[i])
	}
	return server, states
}

var fixedTime = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func openMock(t *testing.T, lib Library) *Reader {
	t.Helper()
	r, err := Open(lib)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	r.now = func() time.Time { return fixedTime }
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return r
}

func gpuErrors(err error) []*GPUError {
	var out []*GPUError
	if err == nil {
		return nil
	}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range joined.Unwrap() {
			out = append(out, gpuErrors(e)...)
		}
		return out
	}
	var ge *GPUError
	if errors.As(err, &ge) {
		out = append(out, ge)
	}
	return out
}

func TestRead(t *testing.T) {
	throttled := healthyA100()
	throttled.sm = 915
	throttled.throttle = nvml.ClocksThrottleReasonHwThermalSlowdown | nvml.ClocksThrottleReasonSwPowerCap
	throttled.temperature = 88

	noNVLink := healthyA100()
	noNVLink.nvlink = nil

	unknownNVLinkField := healthyA100()
	unknownNVLinkField.nvlinkFieldRet = nvml.ERROR_NOT_SUPPORTED

	migParent := healthyA100() // utilisation is not supported on a MIG-enabled GPU
	migParent.fail = map[string]nvml.Return{"utilization": nvml.ERROR_NOT_SUPPORTED}

	brokenPower := healthyA100()
	brokenPower.fail = map[string]nvml.Return{"power": nvml.ERROR_UNKNOWN}

	server, _ := newServer(map[int]gpuState{1: throttled, 2: noNVLink, 3: unknownNVLinkField, 4: migParent, 5: brokenPower})

	tests := []struct {
		name      string
		indices   []int
		check     func(t *testing.T, s []api.GPUSample)
		wantErrAt []int // GPU indices expected in *GPUError values
		samples   int
	}{
		{
			name:    "healthy GPU reads every metric",
			indices: []int{0},
			samples: 1,
			check: func(t *testing.T, s []api.GPUSample) {
				g := s[0]
				if g.Index != 0 || g.Name != "Mock NVIDIA A100-SXM4-40GB" || g.UUID == "" || !g.Time.Equal(fixedTime) {
					t.Errorf("identity = %d %q %q %v", g.Index, g.Name, g.UUID, g.Time)
				}
				eq(t, "gpu util", g.GPUUtilPct, 97)
				eq(t, "mem util", g.MemoryUtilPct, 41)
				eq(t, "sm clock", g.SMClockMHz, 1410)
				eq(t, "max sm clock", g.MaxSMClockMHz, 1410)
				eq(t, "power", g.PowerMilliwatts, 310_000)
				eq(t, "power limit", g.PowerLimitMilliwatts, 400_000)
				eq(t, "memory used", g.MemoryUsedBytes, 30<<30)
				eq(t, "memory total", g.MemoryTotalBytes, 42949672960)
				eq(t, "temperature", g.TemperatureC, 61)
				eq(t, "pcie tx", g.PCIeTxKBps, 1200)
				eq(t, "pcie rx", g.PCIeRxKBps, 56_000)
				eq(t, "nvlink tx", g.NVLinkTxKiB, 1<<20)
				eq(t, "nvlink rx", g.NVLinkRxKiB, 2<<20)
				if g.NVLinkTxKiBps != nil {
					t.Errorf("first read has an NVLink rate %v; want none", *g.NVLinkTxKiBps)
				}
				if len(g.ThrottleReasons) != 0 || g.ThermalOrPowerThrottled() {
					t.Errorf("throttle = %v", g.ThrottleReasons)
				}
			},
		},
		{
			name:    "throttled GPU names its reasons",
			indices: []int{1},
			samples: 1,
			check: func(t *testing.T, s []api.GPUSample) {
				g := s[0]
				eq(t, "sm clock", g.SMClockMHz, 915)
				if want := []string{"sw_power_cap", "hw_thermal_slowdown"}; !slices.Equal(g.ThrottleReasons, want) {
					t.Errorf("throttle reasons = %v, want %v", g.ThrottleReasons, want)
				}
				if !g.ThermalOrPowerThrottled() {
					t.Error("ThermalOrPowerThrottled = false")
				}
			},
		},
		{
			name:    "NVLink not supported leaves the fields absent without error",
			indices: []int{2, 3},
			samples: 2,
			check: func(t *testing.T, s []api.GPUSample) {
				for _, g := range s {
					if g.NVLinkTxKiB != nil || g.NVLinkRxKiB != nil {
						t.Errorf("GPU %d: NVLink = %v/%v, want absent", g.Index, g.NVLinkTxKiB, g.NVLinkRxKiB)
					}
					eq(t, "sm clock still read", g.SMClockMHz, 1410)
				}
			},
		},
		{
			name:    "utilisation not supported is absent, the rest is read",
			indices: []int{4},
			samples: 1,
			check: func(t *testing.T, s []api.GPUSample) {
				if s[0].GPUUtilPct != nil || s[0].MemoryUtilPct != nil {
					t.Errorf("utilisation present on a GPU that does not support it")
				}
				eq(t, "temperature", s[0].TemperatureC, 61)
			},
		},
		{
			name:      "a failing metric is reported and the rest is read",
			indices:   []int{5},
			wantErrAt: []int{5},
			samples:   1,
			check: func(t *testing.T, s []api.GPUSample) {
				if s[0].PowerMilliwatts != nil {
					t.Errorf("power = %d, want absent", *s[0].PowerMilliwatts)
				}
				eq(t, "power limit", s[0].PowerLimitMilliwatts, 400_000)
			},
		},
		{
			name:      "indices out of range are errors, the others are read in order",
			indices:   []int{7, 8, -1, 0},
			wantErrAt: []int{8, -1},
			samples:   2,
			check: func(t *testing.T, s []api.GPUSample) {
				if got := []int{s[0].Index, s[1].Index}; !slices.Equal(got, []int{7, 0}) {
					t.Errorf("indices read = %v, want [7 0]", got)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := openMock(t, server)
			samples, err := r.Read(tc.indices)
			var gotErrAt []int
			for _, ge := range gpuErrors(err) {
				gotErrAt = append(gotErrAt, ge.Index)
			}
			if !slices.Equal(gotErrAt, tc.wantErrAt) {
				t.Fatalf("errors at GPUs %v (%v), want %v", gotErrAt, err, tc.wantErrAt)
			}
			if len(samples) != tc.samples {
				t.Fatalf("%d samples, want %d", len(samples), tc.samples)
			}
			tc.check(t, samples)
		})
	}
}

func eq[T comparable](t *testing.T, what string, got *T, want T) {
	t.Helper()
	if got == nil {
		t.Errorf("%s absent, want %v", what, want)
		return
	}
	if *got != want {
		t.Errorf("%s = %v, want %v", what, *got, want)
	}
}

func TestNVLinkRate(t *testing.T) {
	server, states := newServer(nil)
	r := openMock(t, server)
	if _, err := r.Read([]int{0}); err != nil {
		t.Fatal(err)
	}

	// Two seconds later, 4 MiB more sent and 1 MiB more received.
	states[0].nvlinkAt += 2_000_000
	states[0].nvlink[0] += 4 << 10
	states[0].nvlink[1] += 1 << 10
	s, err := r.Read([]int{0})
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "nvlink tx rate", s[0].NVLinkTxKiBps, 2048)
	eq(t, "nvlink rx rate", s[0].NVLinkRxKiBps, 512)

	// A driver reload resets the counters: no rate rather than a huge one.
	states[0].nvlinkAt += 1_000_000
	states[0].nvlink[0] = 10
	s, err = r.Read([]int{0})
	if err != nil {
		t.Fatal(err)
	}
	if s[0].NVLinkTxKiBps != nil {
		t.Errorf("rate after a counter reset = %v, want none", *s[0].NVLinkTxKiBps)
	}
	eq(t, "nvlink tx after reset", s[0].NVLinkTxKiB, 10)
}

func TestOpenUnavailable(t *testing.T) {
	tests := []struct {
		name string
		lib  Library
		want nvml.Return
	}{
		{"no driver library (mock)", &mock.Interface{InitFunc: func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }}, nvml.ERROR_LIBRARY_NOT_FOUND},
		{"driver not loaded (mock)", &mock.Interface{InitFunc: func() nvml.Return { return nvml.ERROR_DRIVER_NOT_LOADED }}, nvml.ERROR_DRIVER_NOT_LOADED},
		// The real go-nvml path: dlopen of a library that is not there.
		{"no driver library (go-nvml)", nvml.New(nvml.WithLibraryPath("/nonexistent/libnvidia-ml.so.1")), nvml.ERROR_LIBRARY_NOT_FOUND},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Open(tc.lib)
			if !errors.Is(err, ErrUnavailable) {
				t.Fatalf("Open error = %v, want ErrUnavailable", err)
			}
			var ue *UnavailableError
			if !errors.As(err, &ue) || ue.Return != tc.want {
				t.Fatalf("Open error = %#v, want *UnavailableError{%v}", err, tc.want)
			}
			if r == nil || r.Available() {
				t.Fatal("want a usable, unavailable Reader")
			}
			// The agent goes on calling Read: no samples, no repeated error,
			// and no NVML call (the mock would panic).
			for range 2 {
				if s, err := r.Read([]int{0}); s != nil || err != nil {
					t.Fatalf("Read on unavailable NVML = %v, %v; want nothing", s, err)
				}
			}
			if err := r.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
		})
	}
}

func TestUnavailableErrorMessage(t *testing.T) {
	err := &UnavailableError{Return: nvml.ERROR_LIBRARY_NOT_FOUND}
	want := "NVML unavailable: nvmlInit returned ERROR_LIBRARY_NOT_FOUND; continuing without GPU signals"
	if err.Error() != want {
		t.Errorf("message = %q, want %q", err.Error(), want)
	}
}

func TestThrottleReasonNames(t *testing.T) {
	tests := []struct {
		mask uint64
		want []string
	}{
		{0, nil},
		{nvml.ClocksThrottleReasonGpuIdle, []string{"gpu_idle"}},
		{nvml.ClocksThrottleReasonHwSlowdown | nvml.ClocksThrottleReasonHwPowerBrakeSlowdown, []string{"hw_slowdown", "hw_power_brake_slowdown"}},
		{nvml.ClocksThrottleReasonSwThermalSlowdown | 1<<20, []string{"sw_thermal_slowdown", "unknown_0x100000"}},
	}
	for _, tc := range tests {
		if got := ThrottleReasonNames(tc.mask); !slices.Equal(got, tc.want) {
			t.Errorf("ThrottleReasonNames(%#x) = %v, want %v", tc.mask, got, tc.want)
		}
	}
}

func TestParseIndices(t *testing.T) {
	tests := []struct {
		in      string
		want    []int
		wantErr bool
	}{
		{"", nil, false},
		{"0", []int{0}, false},
		{"0,2, 3", []int{0, 2, 3}, false},
		{"GPU-5e1f2a10-7c1d-4d8e-9a1b-3c2d1e0f9a8b", nil, true},
		{"MIG-GPU-5e1f2a10/1/0", nil, true},
		{"0,,1", nil, true},
		{"-1", nil, true},
	}
	for _, tc := range tests {
		got, err := ParseIndices(tc.in)
		if (err != nil) != tc.wantErr || !slices.Equal(got, tc.want) {
			t.Errorf("ParseIndices(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}
