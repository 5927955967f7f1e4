package pools

import "testing"

func TestConfigPath(t *testing.T) {
	tests := []struct{ poolsConfig, slurmConf, want string }{
		{"", "/tmp/tb/etc/slurm.conf", "/tmp/tb/etc/pools.yaml"},
		{"/srv/pools.yaml", "/tmp/tb/etc/slurm.conf", "/srv/pools.yaml"},
		{"/srv/pools.yaml", "", "/srv/pools.yaml"},
		{"", "", "/etc/slurm/pools.yaml"},
		{"", "slurm.conf", "pools.yaml"},
	}
	for _, tt := range tests {
		if got := ConfigPath(tt.poolsConfig, tt.slurmConf); got != tt.want {
			t.Errorf("ConfigPath(%q, %q) = %q, want %q", tt.poolsConfig, tt.slurmConf, got, tt.want)
		}
	}
}

func TestConfigPathFromEnv(t *testing.T) {
	t.Setenv(ConfigEnv, "")
	t.Setenv("SLURM_CONF", "/tmp/tb/etc/slurm.conf")
	if got := ConfigPathFromEnv(); got != "/tmp/tb/etc/pools.yaml" {
		t.Fatalf("got %q", got)
	}
}
