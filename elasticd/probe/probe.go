// Package probe reads per-GPU signals from NVML on a node: utilisation,
// clocks and throttle reasons, power, memory, temperature, PCIe and NVLink
// traffic, for the GPUs Slurm allocated to a job.
//
// These signals find stragglers and throttled or input-bound GPUs. They are
// never a measure of training progress: NVML utilisation saturates, so
// scaling decisions use the application's own samples/s (see
// elasticd/policy).
package probe

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/slurmbridge/slurmbridge/elasticd/api"
)

// Library is the part of nvml.Interface the Reader uses; nvml.New() and
// go-nvml's mock.Interface both satisfy it.
type Library interface {
	Init() nvml.Return
	Shutdown() nvml.Return
	DeviceGetCount() (int, nvml.Return)
	DeviceGetHandleByIndex(index int) (nvml.Device, nvml.Return)
}

// ErrUnavailable matches (errors.Is) the error Open returns when NVML cannot
// be initialised on this node.
var ErrUnavailable = errors.New("NVML unavailable")

// UnavailableError says why NVML could not be initialised: no driver
// library on the node (ERROR_LIBRARY_NOT_FOUND), driver not loaded,
// driver/library version mismatch, and so on.
type UnavailableError struct {
	Return nvml.Return
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("NVML unavailable: nvmlInit returned %s; continuing without GPU signals", nvmlName(e.Return))
}

func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// GPUError is one failure reading one GPU: an index that does not exist, a
// handle that cannot be had, or a metric that failed for a reason other than
// NOT_SUPPORTED.
type GPUError struct {
	Index  int
	Metric string // what was being read, e.g. "power usage"
	Return nvml.Return
	Detail string // set instead of Return for errors NVML did not return
}

func (e *GPUError) Error() string {
	if e.Detail != "" {
		return fmt.Sprintf("GPU %d: %s: %s", e.Index, e.Metric, e.Detail)
	}
	return fmt.Sprintf("GPU %d: %s: %s", e.Index, e.Metric, nvmlName(e.Return))
}

// throttleReasonNames decodes NVML's clock throttle reason bits. The order
// is the bit order, so decoded names come out in a stable order.
var throttleReasonNames = []struct {
	bit  uint64
	name string
}{
	{nvml.ClocksThrottleReasonGpuIdle, "gpu_idle"},
	{nvml.ClocksThrottleReasonApplicationsClocksSetting, "applications_clocks_setting"},
	{nvml.ClocksThrottleReasonSwPowerCap, "sw_power_cap"},
	{nvml.ClocksThrottleReasonHwSlowdown, "hw_slowdown"},
	{nvml.ClocksThrottleReasonSyncBoost, "sync_boost"},
	{nvml.ClocksThrottleReasonSwThermalSlowdown, "sw_thermal_slowdown"},
	{nvml.ClocksThrottleReasonHwThermalSlowdown, "hw_thermal_slowdown"},
	{nvml.ClocksThrottleReasonHwPowerBrakeSlowdown, "hw_power_brake_slowdown"},
	{nvml.ClocksThrottleReasonDisplayClockSetting, "display_clock_setting"},
}

// ThrottleReasonNames decodes an NVML throttle reason mask; bits NVML may add
// later come out as "unknown_0x...".
func ThrottleReasonNames(mask uint64) []string {
	var names []string
	for _, r := range throttleReasonNames {
		if mask&r.bit != 0 {
			names = append(names, r.name)
			mask &^= r.bit
		}
	}
	if mask != 0 {
		names = append(names, fmt.Sprintf("unknown_%#x", mask))
	}
	return names
}

// Reader reads the GPUs of one node. It is safe for concurrent use.
type Reader struct {
	lib Library
	now func() time.Time

	mu         sync.Mutex // guards available and lastNVLink
	available  bool
	lastNVLink map[string]nvlinkReading // by GPU UUID, so a renumbered GPU is not mixed up
}

type nvlinkReading struct {
	txKiB, rxKiB uint64
	atMicros     int64 // NVML's own timestamp of the counter
}

// Open initialises NVML. When NVML cannot be initialised it returns a
// usable Reader whose Read returns no samples, together with an
// *UnavailableError (errors.Is(err, ErrUnavailable)): the agent logs that
// once and goes on without GPU signals.
func Open(lib Library) (*Reader, error) {
	r := &Reader{lib: lib, now: time.Now, lastNVLink: map[string]nvlinkReading{}}
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return r, &UnavailableError{Return: ret}
	}
	r.available = true
	return r, nil
}

// Available reports whether NVML was initialised.
func (r *Reader) Available() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.available
}

// Close shuts NVML down.
func (r *Reader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.available {
		return nil
	}
	r.available = false
	if ret := r.lib.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("nvmlShutdown: %s", nvmlName(ret))
	}
	return nil
}

// Read returns one api.GPUSample per readable GPU among indices (NVML indices, as
// in SLURM_JOB_GPUS), in the order given. Failures are joined into the error
// as *GPUError values and do not stop the other GPUs from being read: an
// index out of range yields no api.GPUSample, a failed metric leaves that field
// nil. An unavailable Reader returns nothing.
func (r *Reader) Read(indices []int) ([]api.GPUSample, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.available {
		return nil, nil
	}
	count, ret := r.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("nvmlDeviceGetCount: %s", nvmlName(ret))
	}
	var samples []api.GPUSample
	var errs []error
	for _, index := range indices {
		if index < 0 || index >= count {
			errs = append(errs, &GPUError{Index: index, Metric: "index",
				Detail: fmt.Sprintf("out of range: this node has %d GPUs", count)})
			continue
		}
		device, ret := r.lib.DeviceGetHandleByIndex(index)
		if ret != nvml.SUCCESS {
			errs = append(errs, &GPUError{Index: index, Metric: "handle", Return: ret})
			continue
		}
		sample, gpuErrs := r.readDevice(index, device)
		samples = append(samples, sample)
		errs = append(errs, gpuErrs...)
	}
	return samples, errors.Join(errs...)
}

// readDevice reads every metric of one GPU, collecting failures rather than
// stopping, so one broken counter does not hide the others.
func (r *Reader) readDevice(index int, device nvml.Device) (api.GPUSample, []error) {
	s := api.GPUSample{Index: index, Time: r.now()}
	var errs []error
	// keep records a metric: NOT_SUPPORTED leaves it absent, other failures
	// are reported.
	keep := func(metric string, ret nvml.Return) bool {
		switch ret {
		case nvml.SUCCESS:
			return true
		case nvml.ERROR_NOT_SUPPORTED:
			return false
		default:
			errs = append(errs, &GPUError{Index: index, Metric: metric, Return: ret})
			return false
		}
	}

	if uuid, ret := device.GetUUID(); keep("uuid", ret) {
		s.UUID = uuid
	}
	if name, ret := device.GetName(); keep("name", ret) {
		s.Name = name
	}
	if util, ret := device.GetUtilizationRates(); keep("utilization", ret) {
		s.GPUUtilPct, s.MemoryUtilPct = &util.Gpu, &util.Memory
	}
	into(keep, "SM clock", &s.SMClockMHz)(device.GetClockInfo(nvml.CLOCK_SM))
	into(keep, "max SM clock", &s.MaxSMClockMHz)(device.GetMaxClockInfo(nvml.CLOCK_SM))
	if mask, ret := device.GetCurrentClocksThrottleReasons(); keep("throttle reasons", ret) {
		s.ThrottleReasons = ThrottleReasonNames(mask)
	}
	into(keep, "power usage", &s.PowerMilliwatts)(device.GetPowerUsage())
	// The enforced limit is the one in effect, whichever of the user, the
	// administrator or the board set it.
	into(keep, "power limit", &s.PowerLimitMilliwatts)(device.GetEnforcedPowerLimit())
	if mem, ret := device.GetMemoryInfo(); keep("memory", ret) {
		s.MemoryUsedBytes, s.MemoryTotalBytes = &mem.Used, &mem.Total
	}
	into(keep, "temperature", &s.TemperatureC)(device.GetTemperature(nvml.TEMPERATURE_GPU))
	into(keep, "PCIe TX", &s.PCIeTxKBps)(device.GetPcieThroughput(nvml.PCIE_UTIL_TX_BYTES))
	into(keep, "PCIe RX", &s.PCIeRxKBps)(device.GetPcieThroughput(nvml.PCIE_UTIL_RX_BYTES))
	errs = append(errs, r.readNVLink(&s, device)...)
	return s, errs
}

// into stores a metric NVML returned in *dst where keep takes it.
func into[T any](keep func(metric string, ret nvml.Return) bool, metric string, dst **T) func(T, nvml.Return) {
	return func(v T, ret nvml.Return) {
		if keep(metric, ret) {
			*dst = &v
		}
	}
}

// allLinks as a field scope asks NVML for the sum over every NVLink.
const allLinks = math.MaxUint32

// readNVLink reads the NVLink data counters through field values (the
// per-link utilisation counters are deprecated and absent on Ampere and
// later) and turns two successive readings into a rate.
func (r *Reader) readNVLink(s *api.GPUSample, device nvml.Device) []error {
	fields := []nvml.FieldValue{
		{FieldId: nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX, ScopeId: allLinks},
		{FieldId: nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_RX, ScopeId: allLinks},
	}
	ret := device.GetFieldValues(fields)
	if ret == nvml.ERROR_NOT_SUPPORTED {
		return nil
	}
	if ret != nvml.SUCCESS {
		return []error{&GPUError{Index: s.Index, Metric: "NVLink counters", Return: ret}}
	}
	var errs []error
	var values [2]uint64
	for i, f := range fields {
		switch fr := nvml.Return(f.NvmlReturn); fr {
		case nvml.SUCCESS:
			v, err := fieldUint64(f)
			if err != nil {
				return append(errs, &GPUError{Index: s.Index, Metric: "NVLink counters", Detail: err.Error()})
			}
			values[i] = v
		case nvml.ERROR_NOT_SUPPORTED:
			return errs
		default:
			return append(errs, &GPUError{Index: s.Index, Metric: "NVLink counters", Return: fr})
		}
	}
	s.NVLinkTxKiB, s.NVLinkRxKiB = &values[0], &values[1]

	now := nvlinkReading{txKiB: values[0], rxKiB: values[1], atMicros: fields[0].Timestamp}
	if s.UUID == "" {
		return errs // no stable key for the previous reading
	}
	prev, seen := r.lastNVLink[s.UUID]
	r.lastNVLink[s.UUID] = now
	// A counter that went backwards was reset (driver reload); no rate then.
	if seen && now.atMicros > prev.atMicros && now.txKiB >= prev.txKiB && now.rxKiB >= prev.rxKiB {
		seconds := float64(now.atMicros-prev.atMicros) / 1e6
		tx := float64(now.txKiB-prev.txKiB) / seconds
		rx := float64(now.rxKiB-prev.rxKiB) / seconds
		s.NVLinkTxKiBps, s.NVLinkRxKiBps = &tx, &rx
	}
	return errs
}

// fieldUint64 decodes a field value; NVML writes it as a C union in host
// byte order.
func fieldUint64(f nvml.FieldValue) (uint64, error) {
	switch nvml.ValueType(f.ValueType) {
	case nvml.VALUE_TYPE_UNSIGNED_LONG_LONG, nvml.VALUE_TYPE_UNSIGNED_LONG:
		return binary.NativeEndian.Uint64(f.Value[:]), nil
	case nvml.VALUE_TYPE_UNSIGNED_INT:
		return uint64(binary.NativeEndian.Uint32(f.Value[:4])), nil
	default:
		return 0, fmt.Errorf("field %d has value type %d, want an unsigned integer", f.FieldId, f.ValueType)
	}
}

// nvmlName spells a Return by its constant name. go-nvml's Return.Error
// calls nvmlErrorString once the library is loaded, which gives prose; the
// constant name is what people grep for.
func nvmlName(ret nvml.Return) string {
	if name, ok := returnNames[ret]; ok {
		return name
	}
	return "NVML return " + strconv.Itoa(int(ret))
}

var returnNames = map[nvml.Return]string{
	nvml.SUCCESS:                       "SUCCESS",
	nvml.ERROR_UNINITIALIZED:           "ERROR_UNINITIALIZED",
	nvml.ERROR_INVALID_ARGUMENT:        "ERROR_INVALID_ARGUMENT",
	nvml.ERROR_NOT_SUPPORTED:           "ERROR_NOT_SUPPORTED",
	nvml.ERROR_NO_PERMISSION:           "ERROR_NO_PERMISSION",
	nvml.ERROR_NOT_FOUND:               "ERROR_NOT_FOUND",
	nvml.ERROR_DRIVER_NOT_LOADED:       "ERROR_DRIVER_NOT_LOADED",
	nvml.ERROR_TIMEOUT:                 "ERROR_TIMEOUT",
	nvml.ERROR_IRQ_ISSUE:               "ERROR_IRQ_ISSUE",
	nvml.ERROR_LIBRARY_NOT_FOUND:       "ERROR_LIBRARY_NOT_FOUND",
	nvml.ERROR_FUNCTION_NOT_FOUND:      "ERROR_FUNCTION_NOT_FOUND",
	nvml.ERROR_GPU_IS_LOST:             "ERROR_GPU_IS_LOST",
	nvml.ERROR_LIB_RM_VERSION_MISMATCH: "ERROR_LIB_RM_VERSION_MISMATCH",
	nvml.ERROR_UNKNOWN:                 "ERROR_UNKNOWN",
}

// ParseIndices parses a Slurm GPU index list such as SLURM_JOB_GPUS="0,2,3".
// It rejects UUIDs and MIG identifiers (CUDA_VISIBLE_DEVICES may hold
// those), which are not NVML indices.
func ParseIndices(list string) ([]int, error) {
	list = strings.TrimSpace(list)
	if list == "" {
		return nil, nil
	}
	var indices []int
	for _, field := range strings.Split(list, ",") {
		field = strings.TrimSpace(field)
		n, err := strconv.Atoi(field)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("GPU list %q: %q is not a GPU index", list, field)
		}
		indices = append(indices, n)
	}
	return indices, nil
}
