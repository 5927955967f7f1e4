# Sourced by build-deb.sh, test-deb.sh, test-installed.sh and testbed/testbed.sh: the names of
# the Slurm packages installed here, Debian's or SchedMD's own (slurm-smd-*, built from source
# for the releases no Debian suite ships, testbed/slurm-source.sh), which slurmbridge's
# packages depend on exactly.
#   SLURM_PLUGINS_PKG  holds Slurm's plugins (select_cons_tres.so), whose directory is ours too
#   SLURM_DEV_PKG      the headers the plugins are built against
#   SLURM_CTLD_PKG     slurmctld
#   SLURM_CLIENT_PKG   the commands (scontrol, squeue, sbatch)
#   SLURM_PACKAGING    smd or debian
if dpkg-query -W -f='${Status}' slurm-smd 2>/dev/null | grep -q 'install ok installed'; then
	SLURM_PACKAGING=smd
	SLURM_PLUGINS_PKG=slurm-smd SLURM_DEV_PKG=slurm-smd-dev SLURM_CTLD_PKG=slurm-smd-slurmctld SLURM_CLIENT_PKG=slurm-smd-client
else
	SLURM_PACKAGING=debian
	SLURM_PLUGINS_PKG=slurm-wlm-basic-plugins SLURM_DEV_PKG=libslurm-dev SLURM_CTLD_PKG=slurmctld SLURM_CLIENT_PKG=slurm-client
fi

# slurm_plugin_dir prints the directory of Slurm's plugins, from the package that holds them
# (Debian's slurm-wlm directory, or SchedMD's /usr/lib/x86_64-linux-gnu/slurm); nothing when
# that package is not installed.
slurm_plugin_dir() {
	{ dpkg -L "$SLURM_PLUGINS_PKG" 2>/dev/null || true; } | sed -n 's|/select_cons_tres\.so$||p' | head -n1
}
