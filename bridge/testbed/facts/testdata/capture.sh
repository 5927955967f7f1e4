#!/usr/bin/env bash
# Captures what the shell renderers wrote before the facts renderer replaced them: the render()
# functions of testbed/testbed.sh and docker/slurm-testbed/entrypoint.sh (and install_spank's sed
# line) and the @NAME@ templates, all as of commit BASE (the last with them), cut out and run on
# fixed inputs, never a daemon. render_test.go compares the renderer with these files. Run from
# the repository root: bash bridge/testbed/facts/testdata/capture.sh
set -euo pipefail
BASE=bef8d81
OUT=bridge/testbed/facts/testdata
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
for f in slurm.conf.in gres.conf.in plugstack.conf.in slurmdbd.conf.in db-setup.sh db-setup.sql.in; do
	git show "$BASE:slurm-conf/testbed/$f" >"$T/$f"
done
hostname() { echo tbhost; }
die() { echo "$*" >&2; exit 1; }

host_mode() { # NAME TESTBED_DIR JOB_SUBMIT_LINE COMM_PARAMS [PORT overrides...]
	local name=$1 dir
	(
		TESTBED_DIR=$2 JOB_SUBMIT_LINE=$3 COMM_PARAMS=$4
		TESTBED_DB_PORT=${5:-13306} TESTBED_CTLD_PORT=${6:-16817} TESTBED_DBD_PORT=${7:-16819}
		TESTBED_SLURMD_PORT_BASE=${8:-17001} TESTBED_RDZV_PORT_BASE=${9:-29400}
		TESTBED_PLUGIN_DIR=$TESTBED_DIR/plugins SLURM_PLUGIN_DIR=/usr/lib/x86_64-linux-gnu/slurm-wlm
		NODES=(cpu-1 cpu-2 a100-1 a100-2 v100-1 v100-2 a100-spot-1)
		eval "$(git show "$BASE:testbed/testbed.sh" | sed -n '/^port_for_node() {/,/^}/p; /^render() {/,/^}/p')"
		# render reads the password from under TESTBED_DIR: a scratch copy stands in for it.
		scratch=$(mktemp -d); trap 'rm -rf "$scratch"' EXIT
		mkdir -p "$scratch/secrets"; printf 0123456789abcdef >"$scratch/secrets/db-password"
		cat() { if [ "$1" = "$TESTBED_DIR/secrets/db-password" ]; then command cat "$scratch/secrets/db-password"; else command cat "$@"; fi; }
		d=$OUT/$name; mkdir -p "$d"
		render $T/slurm.conf.in "$d/slurm.conf"
		render $T/gres.conf.in "$d/gres.conf"
		render $T/slurmdbd.conf.in "$d/slurmdbd.conf"
		dest=$TESTBED_PLUGIN_DIR/spank_elastic.so
		sed -e "s|@SPANK_ELASTIC_SO@|$dest|g" -e "s|@TESTBED_DIR@|$TESTBED_DIR|g" \
			-e "s|@RDZV_PORT_BASE@|$TESTBED_RDZV_PORT_BASE|g" $T/plugstack.conf.in >"$d/plugstack.conf"
	)
}

container_mode() { # NAME JOB_SUBMIT_LINE
	(
		TESTBED_DIR=/srv/slurmbridge CTLD_HOST=slurmctld DBD_HOST=slurmdbd DB_HOST=mariadb
		JOB_SUBMIT_LINE=$2 SLURM_PLUGIN_DIR=/usr/lib/x86_64-linux-gnu/slurm-wlm
		eval "$(git show "$BASE:docker/slurm-testbed/entrypoint.sh" | sed -n '/^render() {/,/^}/p')"
		d=$OUT/$1; mkdir -p "$d"
		render $T/slurm.conf.in "$d/slurm.conf"
		render $T/gres.conf.in "$d/gres.conf"
		render $T/plugstack.conf.in "$d/plugstack.conf"
		render $T/slurmdbd.conf.in "$d/slurmdbd.conf" 0123456789abcdef
	)
}

host_mode host /tmp/slurmbridge-testbed JobSubmitPlugins=pools NoCtldInAddrAny,NoInAddrAny
# A second testbed on other ports, its plugin not built, a host name that is not loopback.
host_mode host-ports /var/tmp/tb2 '#JobSubmitPlugins=pools (bin/job_submit_pools.so was not built)' NoCtldInAddrAny 23306 26817 26819 27001 39400
container_mode container JobSubmitPlugins=pools
container_mode container-unbuilt '#JobSubmitPlugins=pools (job_submit_pools.so was not built)'
# The databases' setup: the local testbed's two client hosts, the containers' any host.
printf '0123456789abcdef\n' >"$T/db-password"
bash "$T/db-setup.sh" "$T/db-password" 127.0.0.1 localhost >"$OUT/host/db-setup.sql"
bash "$T/db-setup.sh" "$T/db-password" '%' >"$OUT/container/db-setup.sql"
