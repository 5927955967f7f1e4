package jobsubmit

import "testing"

func TestCallerThreads(t *testing.T) {
	tests := []struct {
		name         string
		major, minor int
		params       string
		cpus         int
		want         int
	}{
		{"22.05 calls one at a time", 22, 5, "", 2, 0},
		{"22.05 ignores conmgr_threads", 22, 5, "conmgr_threads=16", 2, 0},
		{"24.11 default workers", 24, 11, "", 2, 64},
		{"24.11 conmgr_threads", 24, 11, "enable_configless,conmgr_threads=12", 2, 12},
		{"24.11 conmgr_threads with spaces", 24, 11, " conmgr_threads=20 ", 8, 20},
		{"24.11 bad conmgr_threads keeps default", 24, 11, "conmgr_threads=x", 2, 64},
		{"26.05 auto on 2 CPUs", 26, 5, "", 2, 4},
		{"26.05 auto capped at 32", 26, 5, "", 64, 32},
		{"26.05 conmgr_threads", 26, 5, "conmgr_threads=100", 2, 100},
		{"26.05 no CPUs known", 26, 5, "", 0, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CallerThreads(tt.major, tt.minor, tt.params, tt.cpus); got != tt.want {
				t.Errorf("CallerThreads(%d, %d, %q, %d) = %d, want %d", tt.major, tt.minor, tt.params, tt.cpus, got, tt.want)
			}
		})
	}
}
