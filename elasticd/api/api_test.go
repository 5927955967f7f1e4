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

// A session's Authorization header reads back as written; anything else is refused.
func TestSessionAuthorization(t *testing.T) {
	mac := make([]byte, 32)
	mac[0] = 0xab
	h := SessionAuthorization("ABC234", 7, mac)
	if id, seq, got, ok := ParseSessionAuthorization(h); !ok || id != "ABC234" || seq != 7 || got[0] != 0xab {
		t.Fatalf("%q read as %q %d %x %v", h, id, seq, got, ok)
	}
	for _, bad := range []string{
		"", "Session", "MUNGE cred", "Session ABC 7", "Session ABC 0 " + hex32(), "Session ABC -1 " + hex32(),
		"Session ABC 7 abcd", "Session ABC 7 " + hex32() + " extra", "Session " + string(make([]byte, 65)) + " 7 " + hex32(),
		"Session ABC 7 " + "zz" + hex32()[2:],
	} {
		if _, _, _, ok := ParseSessionAuthorization(bad); ok {
			t.Errorf("%q read as a session's", bad)
		}
	}
}

func hex32() string { return SessionAuthorization("x", 1, make([]byte, 32))[len("Session x 1 "):] }

// Both sides derive the same key from the same exchange, and another id or key makes another.
func TestSessionKeyIsBoundToTheExchange(t *testing.T) {
	shared, a, b := []byte("shared secret of 32 bytes, more or less"), make([]byte, 32), make([]byte, 32)
	b[0] = 1
	k, _ := SessionKey(shared, a, b, "ID1")
	for _, other := range [][]byte{
		must(SessionKey(shared, a, b, "ID2")), must(SessionKey(shared, b, a, "ID1")), must(SessionKey([]byte("other"), a, b, "ID1")),
	} {
		if string(other) == string(k) {
			t.Fatal("the same key from another exchange")
		}
	}
	if again, _ := SessionKey(shared, a, b, "ID1"); string(again) != string(k) || len(k) != 32 {
		t.Fatal("the key is not the same for the same exchange")
	}
	if string(ReportMAC(k, "ID1", 1, []byte("{}"))) == string(ReportMAC(k, "ID1", 2, []byte("{}"))) {
		t.Fatal("the MAC does not cover the sequence number")
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
