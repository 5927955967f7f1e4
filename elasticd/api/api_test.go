package api

import "testing"

func TestThermalOrPowerThrottled(t *testing.T) {
	tests := []struct {
		reasons      []string
		want         bool
		powerCapOnly bool
	}{
		{nil, false, false},
		{[]string{"gpu_idle", "applications_clocks_setting", "sync_boost", "display_clock_setting"}, false, false},
		{[]string{"sw_power_cap"}, true, true},
		{[]string{"gpu_idle", "hw_thermal_slowdown"}, true, false},
		{[]string{"sw_power_cap", "hw_thermal_slowdown"}, true, false},
		{[]string{"hw_power_brake_slowdown"}, true, false},
	}
	for _, tc := range tests {
		g := GPUSample{ThrottleReasons: tc.reasons}
		if got := g.ThermalOrPowerThrottled(); got != tc.want {
			t.Errorf("%v: ThermalOrPowerThrottled = %v, want %v", tc.reasons, got, tc.want)
		}
		if got := g.PowerCapOnly(); got != tc.powerCapOnly {
			t.Errorf("%v: PowerCapOnly = %v, want %v", tc.reasons, got, tc.powerCapOnly)
		}
	}
}
