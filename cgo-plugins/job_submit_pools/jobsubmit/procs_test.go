package jobsubmit

import (
	"testing"

	"github.com/slurmbridge/slurmbridge/bridge/slurm"
)

func TestCallerThreads(t *testing.T) {
	tests := []struct {
		name    string
		release slurm.Release
		params  string
		cpus    int
		want    int
	}{
		{"22.05 calls one at a time", slurm.Release{Year: 22, Month: 5}, "", 2, 0},
		{"22.05 ignores conmgr_threads", slurm.Release{Year: 22, Month: 5}, "conmgr_threads=16", 2, 0},
		{"23.02 calls one at a time", slurm.Release{Year: 23, Month: 2}, "conmgr_threads=16", 2, 0},
		{"23.11 default workers", slurm.Release{Year: 23, Month: 11}, "", 2, 64},
		{"24.11 default workers", slurm.Release{Year: 24, Month: 11}, "", 2, 64},
		{"24.11 conmgr_threads", slurm.Release{Year: 24, Month: 11}, "enable_configless,conmgr_threads=12", 2, 12},
		{"24.11 conmgr_threads with spaces", slurm.Release{Year: 24, Month: 11}, " conmgr_threads=20 ", 8, 20},
		{"24.11 bad conmgr_threads keeps default", slurm.Release{Year: 24, Month: 11}, "conmgr_threads=x", 2, 64},
		{"25.05 auto on 2 CPUs", slurm.Release{Year: 25, Month: 5}, "", 2, 4},
		{"26.05 auto on 2 CPUs", slurm.Release{Year: 26, Month: 5}, "", 2, 4},
		{"26.05 auto capped at 32", slurm.Release{Year: 26, Month: 5}, "", 64, 32},
		{"26.05 conmgr_threads", slurm.Release{Year: 26, Month: 5}, "conmgr_threads=100", 2, 100},
		{"26.05 no CPUs known", slurm.Release{Year: 26, Month: 5}, "", 0, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CallerThreads(tt.release, tt.params, tt.cpus); got != tt.want {
				t.Errorf("CallerThreads(%s, %q, %d) = %d, want %d", tt.release, tt.params, tt.cpus, got, tt.want)
			}
		})
	}
}
