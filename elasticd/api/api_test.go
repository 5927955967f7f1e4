package api

import "testing"

func TestThermalOrPowerThrottled(t *testing.T) {
	tests := []struct {
		reasons []string
		want    bool
	}{
		{nil, false},
		{[]string{"gpu_idle", "applications_clocks_setting", "sync_boost", "display_clock_setting"}, false},
		{[]string{"sw_power_cap"}, true},
		{[]string{"gpu_idle", "hw_thermal_slowdown"}, true},
	}
	for _, tc := range tests {
		if got := (GPUSample{ThrottleReasons: tc.reasons}).ThermalOrPowerThrottled(); got != tc.want {
			t.Errorf("%v: ThermalOrPowerThrottled = %v, want %v", tc.reasons, got, tc.want)
		}
	}
}
