package pools

import (
	"os"
	"path/filepath"
)

// ConfigEnv names the environment variable (of slurmctld) that overrides the config path.
const ConfigEnv = "SLURMBRIDGE_POOLS_CONFIG"

// ConfigPath is the pools config's path given the values of $SLURMBRIDGE_POOLS_CONFIG and
// $SLURM_CONF ("" when unset): the first if set, else pools.yaml beside slurm.conf
// ($SLURM_CONF or /etc/slurm/slurm.conf). The plugin reads both with C getenv, because
// slurmctld setenv()s SLURM_CONF after start and Go's os.Getenv sees only the environment the
// process started with.
func ConfigPath(poolsConfig, slurmConf string) string {
	if poolsConfig != "" {
		return poolsConfig
	}
	if slurmConf == "" {
		slurmConf = "/etc/slurm/slurm.conf"
	}
	return filepath.Join(filepath.Dir(slurmConf), "pools.yaml")
}

// ConfigPathFromEnv is ConfigPath over this process's environment, for commands (not for the
// plugin inside slurmctld).
func ConfigPathFromEnv() string {
	return ConfigPath(os.Getenv(ConfigEnv), os.Getenv("SLURM_CONF"))
}
