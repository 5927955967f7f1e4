#!/usr/bin/env bash
# slurmbridge local testbed: a real Slurm cluster of the host's release (munged, MariaDB, slurmdbd, slurmctld and
# one slurmd per node) on this machine, on loopback only, everything under $TESTBED_DIR.
#
#   testbed.sh packages install the missing Debian packages
#   testbed.sh package-list   print them but the browser's (testbed/container.sh builds its images with them)
#   testbed.sh browser-package-list   print the browser's (a layer of their own in the images)
#   testbed.sh other-package-list   print those but Slurm's own (an image of SchedMD's packages adds them)
#   testbed.sh smd-package-list     print SchedMD's packages of Slurm the testbed runs on (such an image's)
#   testbed.sh up       install missing packages, generate configs, start what is not running,
#                       wait until every node is idle (idempotent); with bin/job_submit_pools.so
#                       built, install it and enable JobSubmitPlugins=pools
#   testbed.sh down     stop exactly the processes the testbed started, by pid file
#   testbed.sh status   say what is up
#   testbed.sh stop NAME  stop one Slurm-side daemon (mariadb, munged, slurmdbd, slurmctld,
#                       slurmd-NODE) and wait until it is gone; up brings it back (fault tests)
#   testbed.sh clean    down, then remove $TESTBED_DIR
#
# TESTBED_FROM=installed runs it from an installed slurmbridge (the Debian packages, make install)
# instead of this tree: the plugins Slurm's PluginDir holds, the daemons of SLURMBRIDGE_BINDIR
# (default /usr/bin). packaging/test-installed.sh uses it to test the packages.
#
# It never writes /etc/slurm. Source $TESTBED_DIR/env to point sinfo, sbatch, sacct and sacctmgr
# at the testbed.
#
# Its users, projects, nodes, GPUs and ports are the testbed's facts, slurm-conf/testbed/facts.yaml;
# testbed-render (testbed/cmd/testbed-render, run with `go run` from this tree) renders its
# configuration and the SQL of its databases from them; this script does the rest (packages,
# users, directories, plugins, processes).
set -euo pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TESTBED_DIR=${TESTBED_DIR:-/tmp/slurmbridge-testbed}
# The testbed's folder must be the caller's (root's) own, closed to others, before anything in
# it is read: under /tmp anyone could have made it first, and root runs what the testbed keeps
# there. up makes it first, so no one can make it between the check and the use.
own_dir() {
	[ -e "$1" ] || [ -L "$1" ] || return 0
	local uid mode kind
	read -r uid mode kind < <(stat -c '%u %a %F' -- "$1" 2>/dev/null || echo '- 0 unreadable')
	if [ "$kind" != directory ] || { [ "$uid" != 0 ] && [ "$uid" != "$(id -u)" ]; } || [ $((0$mode & 022)) -ne 0 ]; then
		echo "testbed: error: $1 must be a directory of root's that no one else may write (it is: $(stat -c '%F, owner %U, mode %a' -- "$1" 2>&1)): remove it, or choose another TESTBED_DIR" >&2
		exit 1
	fi
}
case ${1:-} in
packages | package-list | other-package-list | smd-package-list | browser-package-list) ;;
*)
	if [ "${1:-}" = up ] && [ "$(id -u)" -eq 0 ]; then
		mkdir -p -m 0755 -- "$TESTBED_DIR"
	fi
	own_dir "$TESTBED_DIR"
	;;
esac
# The testbed's facts (users, projects, nodes, GPUs, ports) and the templates they fill in.
# TESTBED_FACTS names another facts file with a pools.yaml beside it: a cluster of a site's
# size (make testbed-up PRESET=alibaba, bench/cmd/scalepreset); up keeps a copy in the
# testbed, which the later commands read.
REPO_FACTS=$REPO_ROOT/slurm-conf/testbed/facts.yaml
FACTS=$REPO_FACTS
POOLS_YAML=$REPO_ROOT/slurm-conf/testbed/pools.yaml
if [ -n "${TESTBED_FACTS:-}" ]; then
	[ -f "$TESTBED_FACTS" ] && [ -f "$(dirname "$TESTBED_FACTS")/pools.yaml" ] ||
		{ echo "testbed: error: TESTBED_FACTS=$TESTBED_FACTS: want a facts file with pools.yaml beside it" >&2; exit 2; }
	FACTS=$(readlink -f "$TESTBED_FACTS")
	POOLS_YAML=$(dirname "$FACTS")/pools.yaml
elif [ -f "$TESTBED_DIR/etc/preset/facts.yaml" ]; then
	# A testbed brought up from a preset stays one (up again too): testbed-clean ends it.
	FACTS=$TESTBED_DIR/etc/preset/facts.yaml
	POOLS_YAML=$TESTBED_DIR/etc/preset/pools.yaml
fi
GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
# How long up waits for every node; a cluster of many nodes is given longer.
TESTBED_IDLE_TIMEOUT=${TESTBED_IDLE_TIMEOUT:-60}
# slurmd started at once on a cluster of many nodes.
SLURMD_START_BATCH=${SLURMD_START_BATCH:-16}
# Extra directories searched for plugins before Slurm's own (the job_submit plugin goes here).
TESTBED_PLUGIN_DIR=${TESTBED_PLUGIN_DIR:-$TESTBED_DIR/plugins}
TESTBED_FROM=${TESTBED_FROM:-tree}
case $TESTBED_FROM in
tree) SLURMBRIDGE_BINDIR=${SLURMBRIDGE_BINDIR:-$REPO_ROOT/bin} ;;
installed) SLURMBRIDGE_BINDIR=${SLURMBRIDGE_BINDIR:-/usr/bin} ;;
*) echo "testbed: error: TESTBED_FROM=$TESTBED_FROM: want tree or installed" >&2; exit 2 ;;
esac
export SLURMBRIDGE_BINDIR

# python3 runs the elastic examples' synthetic trainer; python3-torch (Debian's CPU build) their
# real torchrun job, train.py, whose workers meet in torchrun's c10d rendezvous. slurmrestd is
# a route to slurmctld of its own, which the tests submit through as a user would. xz-utils
# unpacks SchedMD's tarballs, from which the plugin's tests derive job_record_layout.h's entries.
OTHER_PACKAGES=(munge mariadb-server python3 python3-torch xz-utils)
# Slurm itself: Debian's packages, or SchedMD's (slurm-smd-*, built from source by
# testbed/slurm-source.sh for the releases Debian does not ship) where those are installed.
# packaging/slurm-packages.sh says which are installed, and where their plugins are.
. "$REPO_ROOT/packaging/slurm-packages.sh"
SMD_PACKAGES=(slurm-smd slurm-smd-client slurm-smd-slurmctld slurm-smd-slurmd slurm-smd-slurmdbd slurm-smd-slurmrestd slurm-smd-dev)
if [ "$SLURM_PACKAGING" = smd ]; then
	SLURM_PACKAGES=("${SMD_PACKAGES[@]}")
else
	SLURM_PACKAGES=(slurm-wlm slurmdbd slurmrestd libslurm-dev)
fi
PACKAGES=("${SLURM_PACKAGES[@]}" "${OTHER_PACKAGES[@]}")
# Headless Chromium loads quotad's cluster page in its browser test, with a font to draw it in.
# Apart from PACKAGES so that the container images add them in a layer of their own.
BROWSER_PACKAGES=(chromium fonts-dejavu-core)

RUN=$TESTBED_DIR/run
LOG=$TESTBED_DIR/log
ETC=$TESTBED_DIR/etc
DB_SOCKET=$RUN/mysqld/mysqld.sock
MUNGE_SOCKET=$RUN/munge/munge.socket

say() { printf 'testbed: %s\n' "$*"; }
die() { printf 'testbed: error: %s\n' "$*" >&2; exit 1; }
# shellcheck source=testbed/supervise.sh
. "$REPO_ROOT/testbed/supervise.sh"

# testbed_render runs the facts' renderer (testbed/cmd/testbed-render) from this tree.
testbed_render() {
	(cd "$REPO_ROOT" && "$GO" run -buildvcs=false ./testbed/cmd/testbed-render "$@")
}

# load_facts COMMAND sets CLUSTER, NODES, GPU_NODES, PROJECTS (account:user), GPUS_PER_NODE and
# the ports: each TESTBED_*_PORT as given, else the facts' own (a second testbed on this host
# needs ports of its own, the elastic jobs' rendezvous ports, SPANK rdzv_port_base, too).
# up reads the facts file and keeps what it read in $ETC/facts.sh (write_configs); the other
# commands read that copy when there is one, so down stops the nodes up started, even when
# the facts changed since or no Go toolchain is at hand.
load_facts() {
	# A copy kept by an older tree has no daemon ports: the facts file is read instead.
	if [ "$1" != up ] && [ -s "$ETC/facts.sh" ] && trusted "$ETC/facts.sh" && grep -q '^QUOTAD_METRICS_PORT=' "$ETC/facts.sh"; then
		FACTS_SHELL=$(cat "$ETC/facts.sh")
	else
		[ ! -e "$ETC/facts.sh" ] || [ "$1" = up ] || say "not reading $ETC/facts.sh: it or $ETC is not this user's alone, or it is from an older tree; reading $FACTS"
		FACTS_SHELL=$(testbed_render shell -facts "$FACTS") || die "cannot read the testbed's facts ($FACTS)"
	fi
	eval "$FACTS_SHELL"
	TESTBED_DB_PORT=${TESTBED_DB_PORT:-$FACT_LOCAL_DB_PORT}
	TESTBED_CTLD_PORT=${TESTBED_CTLD_PORT:-$FACT_LOCAL_CTLD_PORT}
	TESTBED_DBD_PORT=${TESTBED_DBD_PORT:-$FACT_LOCAL_DBD_PORT}
	TESTBED_SLURMD_PORT_BASE=${TESTBED_SLURMD_PORT_BASE:-$FACT_LOCAL_SLURMD_PORT_BASE}
	TESTBED_RDZV_PORT_BASE=${TESTBED_RDZV_PORT_BASE:-$FACT_LOCAL_RDZV_PORT_BASE}
	# quotad.sh and elasticd.sh read these from the kept facts.sh; elasticd's port moves with
	# slurmctld's unless it is given.
	QUOTAD_METRICS_PORT=${QUOTAD_METRICS_PORT:-$FACT_LOCAL_QUOTAD_PORT}
	ELASTICD_PORT=${ELASTICD_PORT:-$((TESTBED_CTLD_PORT - FACT_LOCAL_CTLD_PORT + FACT_LOCAL_ELASTICD_PORT))}
}

require_root() {
	[ "$(id -u)" -eq 0 ] || die "run as root: the testbed starts Slurm daemons and runs jobs as alice, bob and carol"
}

# pid_of NAME prints the pid recorded in $RUN/NAME.pid when that process is alive and still the
# program we started.
pid_of() {
	local name=$1 pidfile=$RUN/$1.pid
	case $name in
	mariadb) pid_in "$pidfile" '*mariadbd*' || pid_in "$pidfile" '*mysqld*' ;;
	munged) pid_in "$pidfile" '*munged*' ;;
	slurmdbd) pid_in "$pidfile" '*slurmdbd*' ;;
	slurmctld) pid_in "$pidfile" '*slurmctld*' ;;
	slurmd-*) slurmd_running "${name#slurmd-}" && echo "$FOUND_PID" ;;
	*) return 1 ;;
	esac
}

install_packages() {
	local missing=() p
	for p in "${PACKAGES[@]}" "${BROWSER_PACKAGES[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	say "installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	# The packages' own services are not started: the testbed runs its own daemons.
	if ! apt-get install -y --no-install-recommends "${missing[@]}"; then
		apt-get update
		apt-get install -y --no-install-recommends "${missing[@]}"
	fi
}

ensure_users() {
	local entry user
	# Debian's packages create SlurmUser; SchedMD's do not (their units run as slurm all the same).
	id -u slurm >/dev/null 2>&1 || useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin slurm
	for entry in "${PROJECTS[@]}"; do
		user=${entry#*:}
		id -u "$user" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$user"
	done
}

make_layout() {
	local node
	install -d -m 0755 "$TESTBED_DIR" "$ETC" "$RUN" "$LOG" "$TESTBED_DIR/state" "$TESTBED_DIR/gpus" "$TESTBED_PLUGIN_DIR"
	install -d -m 0700 "$TESTBED_DIR/secrets"
	install -d -m 0755 -o slurm -g slurm "$TESTBED_DIR/state/slurmctld" "$RUN/slurm"
	install -d -m 0755 -o munge -g munge "$RUN/munge"
	install -d -m 0700 -o munge -g munge "$TESTBED_DIR/state/munge"
	install -d -m 0755 -o mysql -g mysql "$RUN/mysqld" "$TESTBED_DIR/state/mysql"
	install -d -m 0755 "$TESTBED_DIR/state/slurmd"
	install -d -m 0755 "${NODES[@]/#/$TESTBED_DIR/state/slurmd/}"
	local i
	for i in "${!GPU_NODES[@]}"; do
		make_fake_gpus "$TESTBED_DIR" "${GPU_NODES[$i]}" "${GPU_NODE_GPUS[$i]}"
	done
	# Daemons that drop privileges write their logs as their own user.
	touch "$LOG/slurmctld.log" "$LOG/slurmdbd.log" "$LOG/munged.log" "$LOG/mariadb.log"
	chown slurm:slurm "$LOG/slurmctld.log" "$LOG/slurmdbd.log"
	chown munge:munge "$LOG/munged.log"
	chown mysql:mysql "$LOG/mariadb.log"
	if [ ! -s "$TESTBED_DIR/secrets/db-password" ]; then
		(umask 077 && head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$TESTBED_DIR/secrets/db-password")
	fi
}

# NoInAddrAny makes slurmd bind the address its host name resolves to: only loopback-safe when
# that address is a loopback one (it is on Debian's default /etc/hosts).
comm_params() {
	local addr
	addr=$(getent ahostsv4 "$(hostname)" | awk 'NR == 1 {print $1}')
	case $addr in
	127.*) echo "NoCtldInAddrAny,NoInAddrAny" ;;
	*)
		say "host name resolves to '${addr:-nothing}', not loopback: slurmd will listen on all addresses" >&2
		echo "NoCtldInAddrAny"
		;;
	esac
}

# install_pools_yaml puts the pools the plugin reads in place in one rename: slurmctld may
# read it at any moment.
install_pools_yaml() {
	install -m 0644 "$POOLS_YAML" "$ETC/.pools.yaml.new"
	mv -f "$ETC/.pools.yaml.new" "$ETC/pools.yaml"
}

# install_plugin copies a built job_submit plugin and the testbed's pools.yaml in place, by
# rename (slurmctld may have the old .so mapped), and says whether the plugin changed.
install_plugin() {
	local built=$REPO_ROOT/bin/job_submit_pools.so dest=$TESTBED_PLUGIN_DIR/job_submit_pools.so
	if [ "$TESTBED_FROM" = installed ]; then
		installed_plugin job_submit_pools.so || {
			JOB_SUBMIT_LINE="#JobSubmitPlugins=pools ($SLURM_PLUGIN_DIR/job_submit_pools.so is not installed)"
			say "TESTBED_FROM=installed: no $SLURM_PLUGIN_DIR/job_submit_pools.so: jobs are not routed into pools"
			return 0
		}
		JOB_SUBMIT_LINE=JobSubmitPlugins=pools
		install_pools_yaml
		return 0
	fi
	JOB_SUBMIT_LINE="#JobSubmitPlugins=pools (bin/job_submit_pools.so was not built)"
	[ -f "$built" ] || { say "no $built (run make plugin): jobs are not routed into pools"; return 0; }
	JOB_SUBMIT_LINE=JobSubmitPlugins=pools
	install_pools_yaml
	if ! cmp -s "$built" "$dest"; then
		install -m 0755 "$built" "$dest.new"
		mv -f "$dest.new" "$dest"
		PLUGIN_CHANGED=1
	fi
}

# installed_plugin NAME: with TESTBED_FROM=installed, Slurm's PluginDir must hold NAME and the
# testbed's own plugin directory, searched first, must not: a copy from this tree would shadow it.
# A removed copy restarts slurmctld, like a changed plugin.
installed_plugin() {
	if [ -e "$TESTBED_PLUGIN_DIR/$1" ]; then
		rm -f "$TESTBED_PLUGIN_DIR/$1"
		PLUGIN_CHANGED=1
	fi
	[ -f "$SLURM_PLUGIN_DIR/$1" ]
}

# install_spank puts the elastic SPANK plugin in place, by rename, and sets SPANK_SO to it for
# plugstack.conf, or writes plugstack.conf empty (no SPANK plugins) when the plugin is not built.
install_spank() {
	local built=$REPO_ROOT/bin/spank_elastic.so dest=$TESTBED_PLUGIN_DIR/spank_elastic.so
	install -d -m 0755 "$TESTBED_DIR/elastic"
	if [ "$TESTBED_FROM" = installed ]; then
		built=$SLURM_PLUGIN_DIR/spank_elastic.so dest=$SLURM_PLUGIN_DIR/spank_elastic.so
		installed_plugin spank_elastic.so || built=/nonexistent
	fi
	SPANK_SO=
	if [ ! -f "$built" ]; then
		: >"$ETC/plugstack.conf"
		return 0
	fi
	if [ "$built" != "$dest" ] && ! cmp -s "$built" "$dest"; then
		install -m 0755 "$built" "$dest.new"
		mv -f "$dest.new" "$dest"
	fi
	SPANK_SO=$dest
}

write_configs() {
	COMM_PARAMS=$(comm_params)
	SLURM_PLUGIN_DIR=$(slurm_plugin_dir)
	[ -d "$SLURM_PLUGIN_DIR" ] || die "cannot find Slurm's plugin directory"
	install_plugin
	install_spank
	local before files=(slurm.conf gres.conf slurmdbd.conf quotas.yaml)
	# The container testbed renders the same templates (docker/slurm-testbed/entrypoint.sh).
	[ -n "$SPANK_SO" ] && files+=(plugstack.conf)
	before=$({ cat "$ETC/slurm.conf" "$ETC/gres.conf" 2>/dev/null || true; } | md5sum)
	testbed_render files -facts "$FACTS" -templates "$REPO_ROOT/slurm-conf/testbed" -out "$ETC" -dir "$TESTBED_DIR" -host "$(hostname -s)" \
		-comm-params "$COMM_PARAMS" -job-submit-line "$JOB_SUBMIT_LINE" \
		-plugin-dir "$TESTBED_PLUGIN_DIR" -slurm-plugin-dir "$SLURM_PLUGIN_DIR" -spank-elastic-so "$SPANK_SO" \
		-db-port "$TESTBED_DB_PORT" -ctld-port "$TESTBED_CTLD_PORT" -dbd-port "$TESTBED_DBD_PORT" \
		-slurmd-port-base "$TESTBED_SLURMD_PORT_BASE" -rdzv-port-base "$TESTBED_RDZV_PORT_BASE" \
		-db-password-file "$TESTBED_DIR/secrets/db-password" "${files[@]}" ||
		die "cannot render the testbed's configuration from $FACTS"
	[ "$before" = "$(cat "$ETC/slurm.conf" "$ETC/gres.conf" | md5sum)" ] || CONFIG_CHANGED=1
	# A preset's facts and pools stay with the testbed, for its later commands and daemons.
	if [ "$FACTS" != "$REPO_FACTS" ]; then
		install -d -m 0755 "$ETC/preset"
		[ "$FACTS" = "$ETC/preset/facts.yaml" ] || install -m 0644 "$FACTS" "$POOLS_YAML" "$ETC/preset/"
	else
		rm -rf "$ETC/preset"
	fi
	printf '%s\nQUOTAD_METRICS_PORT=%d ELASTICD_PORT=%d\n' "$FACTS_SHELL" "$QUOTAD_METRICS_PORT" "$ELASTICD_PORT" >"$ETC/facts.sh.new"
	chmod 0644 "$ETC/facts.sh.new"
	mv -f "$ETC/facts.sh.new" "$ETC/facts.sh"
	chown slurm:slurm "$ETC/slurmdbd.conf"
	chmod 0600 "$ETC/slurmdbd.conf"
	# quotad and tests read the accounting database with their own read-only account.
	cat >"$TESTBED_DIR/env" <<EOF
# Source this file to use the slurmbridge testbed: sinfo, sbatch, sacct, sacctmgr talk to it.
export TESTBED_DIR=$TESTBED_DIR
export SLURM_CONF=$ETC/slurm.conf
export SLURMBRIDGE_CLUSTER=$CLUSTER
export SLURMBRIDGE_DB_ADDR=127.0.0.1:$TESTBED_DB_PORT
export SLURMBRIDGE_DB_NAME=slurm_acct_db
export SLURMBRIDGE_DB_USER=slurm
export SLURMBRIDGE_DB_PASSWORD_FILE=$TESTBED_DIR/secrets/db-password
# What every user needs for quotactl list/explain through quotad's API: no secret.
export SLURMBRIDGE_QUOTAD_URL=http://127.0.0.1:$QUOTAD_METRICS_PORT
export SLURMBRIDGE_MUNGE_SOCKET=$MUNGE_SOCKET
# elasticd status reads the testbed's elasticd here.
export SLURMBRIDGE_ELASTICD_URL=http://127.0.0.1:$ELASTICD_PORT
export SLURMBRIDGE_EXAMPLES=$TESTBED_DIR/share/elasticd/examples
export SLURMBRIDGE_PLUGIN_DIR=$([ "$TESTBED_FROM" = installed ] && echo "$SLURM_PLUGIN_DIR" || echo "$TESTBED_PLUGIN_DIR")
EOF
	chmod 0644 "$TESTBED_DIR/env"
}

start_munged() {
	pid_of munged >/dev/null && return 0
	say "starting munged"
	start_munge "$TESTBED_DIR/state/munge/munge.key" "$MUNGE_SOCKET" "$RUN/munge/munged.pid" \
		"$LOG/munged.log" "$TESTBED_DIR/state/munge/munge.seed" 10 || die "munged did not start"
	ln -sf "$RUN/munge/munged.pid" "$RUN/munged.pid"
}

db_root() {
	mariadb --no-defaults --socket="$DB_SOCKET" -uroot "$@"
}

start_mariadb() {
	local data=$TESTBED_DIR/state/mysql/data
	if ! pid_of mariadb >/dev/null; then
		if [ ! -d "$data/mysql" ]; then
			say "initialising MariaDB in $data"
			mariadb-install-db --no-defaults --user=mysql --datadir="$data" \
				--auth-root-authentication-method=socket --skip-test-db >"$LOG/mariadb-install.log" 2>&1 ||
				{ cat "$LOG/mariadb-install.log" >&2; die "mariadb-install-db failed"; }
		fi
		say "starting MariaDB on 127.0.0.1:$TESTBED_DB_PORT"
		# Its own data directory, socket and port: never the machine's MariaDB.
		/usr/sbin/mariadbd --no-defaults --user=mysql --datadir="$data" \
			--socket="$DB_SOCKET" --port="$TESTBED_DB_PORT" --bind-address=127.0.0.1 \
			--pid-file="$RUN/mysqld/mariadb.pid" --log-error="$LOG/mariadb.log" \
			--innodb-buffer-pool-size=256M --innodb-log-file-size=64M \
			--innodb-lock-wait-timeout=900 --max-allowed-packet=16M </dev/null >/dev/null 2>&1 &
		disown
		# mariadbd writes its pid file as the mysql user, so in a directory of its own.
		ln -sf "$RUN/mysqld/mariadb.pid" "$RUN/mariadb.pid"
		wait_for "MariaDB" 30 db_root -e 'SELECT 1' || { tail -n 20 "$LOG/mariadb.log" >&2; die "MariaDB did not start"; }
	fi
	local sql
	sql=$(testbed_render db-setup -facts "$FACTS" -templates "$REPO_ROOT/slurm-conf/testbed" -db-password-file "$TESTBED_DIR/secrets/db-password" 127.0.0.1 localhost) ||
		die "cannot render the database setup"
	printf '%s\n' "$sql" | db_root || die "setting up the databases failed"
}


slurm_env() {
	export SLURM_CONF=$ETC/slurm.conf
}

start_slurmdbd() {
	pid_of slurmdbd >/dev/null && return 0
	say "starting slurmdbd on 127.0.0.1:$TESTBED_DBD_PORT"
	# slurmdbd reads slurmdbd.conf from the directory of $SLURM_CONF.
	/usr/sbin/slurmdbd
	wait_for "slurmdbd" 30 sacctmgr -n show cluster || { tail -n 20 "$LOG/slurmdbd.log" >&2; die "slurmdbd did not answer"; }
}

# The cluster, the projects' accounts and users, root an Administrator (the container testbed
# runs the same script).
ensure_accounts() {
	bash "$REPO_ROOT/slurm-conf/testbed/ensure-accounts.sh" "$CLUSTER" "${PROJECTS[@]}"
}

start_slurmctld() {
	if pid_of slurmctld >/dev/null; then
		# A new plugin .so is only loaded by a new slurmctld, and some settings (MaxJobCount,
		# ports) are not reread by scontrol reconfigure: restart it. Jobs and state survive.
		if [ "${PLUGIN_CHANGED:-0}" = 1 ] || [ "${CONFIG_CHANGED:-0}" = 1 ]; then
			say "job_submit plugin or configuration changed: restarting slurmctld"
			stop_pid slurmctld
			start_slurmctld
		fi
		return 0
	fi
	say "starting slurmctld on 127.0.0.1:$TESTBED_CTLD_PORT"
	/usr/sbin/slurmctld
	wait_for "slurmctld" 30 scontrol ping || { tail -n 20 "$LOG/slurmctld.log" >&2; die "slurmctld did not answer"; }
}

# slurmd_running NODE: its slurmd runs; FOUND_PID is its pid (no fork, see find_pid).
slurmd_running() {
	find_pid "$RUN/slurmd-$1.pid" "*slurmd*-N $1 *"
}

# start_slurmds starts the slurmd of every node not running, SLURMD_START_BATCH at a time.
start_slurmds() {
	local node pending=() failed=()
	for node in "${NODES[@]}"; do
		slurmd_running "$node" || pending+=("$node")
	done
	[ ${#pending[@]} -gt 0 ] || return 0
	[ ${#pending[@]} -le "$SLURMD_START_BATCH" ] || say "starting ${#pending[@]} slurmd, $SLURMD_START_BATCH at a time"
	printf '%s\n' "${pending[@]}" | xargs -r -P "$SLURMD_START_BATCH" -I{} /usr/sbin/slurmd -N {} || true
	# A daemonized slurmd writes its pid file after its parent has returned.
	local deadline=$((SECONDS + 30 + ${#pending[@]} / 20))
	while :; do
		failed=()
		for node in "${pending[@]}"; do
			slurmd_running "$node" || failed+=("$node")
		done
		[ ${#failed[@]} -eq 0 ] && return 0
		[ $SECONDS -lt $deadline ] || break
		pending=("${failed[@]}")
		sleep 0.5
	done
	tail -n 20 "$LOG/slurmd-${failed[0]}.log" >&2 || true
	die "slurmd did not start on ${#failed[@]} node(s): ${failed[*]:0:10}"
}

# stop_slurmds signals every slurmd at once, then waits: one by one is minutes on many nodes.
stop_slurmds() {
	local node pids=()
	for node in "${NODES[@]}"; do
		slurmd_running "$node" && pids+=("$FOUND_PID")
	done
	if [ ${#pids[@]} -gt 0 ]; then
		terminate slurmd "${pids[@]}"
		say "stopped ${#pids[@]} slurmd"
	fi
	local pidfiles=("${NODES[@]/#/$RUN/slurmd-}")
	rm -f "${pidfiles[@]/%/.pid}"
}

# all_nodes_up: every node answers and can take jobs (idle, or busy with jobs when the testbed
# is brought back up under load); a "*" suffix means not responding.
all_nodes_up() {
	local states
	states=$(sinfo -h -N -o '%N %t' | sort -u)
	[ "$(printf '%s\n' "$states" | awk '$2 ~ /^(idle|mix|alloc|comp)$/' | wc -l)" -eq ${#NODES[@]} ]
}

# slurmbridge's own daemons run on the testbed when they are built (make build); each has a
# start/stop script that works by pid file. TESTBED_DAEMONS="" runs Slurm alone.
read -r -a SLURMBRIDGE_DAEMONS <<<"${TESTBED_DAEMONS-quotad elasticd}"

start_slurmbridge_daemons() {
	local d
	for d in "${SLURMBRIDGE_DAEMONS[@]}"; do
		if [ -x "$SLURMBRIDGE_BINDIR/$d" ]; then
			TESTBED_DIR=$TESTBED_DIR bash "$REPO_ROOT/testbed/$d.sh" start
		else
			say "no $SLURMBRIDGE_BINDIR/$d (run make build): not started"
		fi
	done
}

stop_slurmbridge_daemons() {
	local d
	for d in "${SLURMBRIDGE_DAEMONS[@]}"; do
		[ -f "$REPO_ROOT/testbed/$d.sh" ] && TESTBED_DIR=$TESTBED_DIR bash "$REPO_ROOT/testbed/$d.sh" stop
	done
	return 0
}

# The test users run the elastic examples from $TESTBED_DIR/share, a copy they can always
# read: the checkout itself may sit in a directory they cannot enter (a 0700 home, /root).
# Jobs are submitted from share/, so $SLURM_SUBMIT_DIR/elasticd/examples finds them there.
publish_examples() {
	local share=$TESTBED_DIR/share entry user dir
	install -d -m 0755 "$share" "$share/elasticd"
	# The examples import the slurmbridge_elastic helper from elasticd/python beside them (the
	# testbed's python3 has no pip to install it with).
	for dir in examples python; do
		rm -rf "$share/elasticd/$dir.new"
		cp -R "$REPO_ROOT/elasticd/$dir" "$share/elasticd/$dir.new"
		find "$share/elasticd/$dir.new" -name __pycache__ -prune -exec rm -rf {} +
		chmod -R u=rwX,go=rX "$share/elasticd/$dir.new"
		rm -rf "$share/elasticd/$dir"
		mv "$share/elasticd/$dir.new" "$share/elasticd/$dir"
	done
	for entry in "${PROJECTS[@]}"; do
		user=${entry#*:}
		runuser -u "$user" -- test -r "$share/elasticd/examples/train.py" ||
			die "$user cannot read $share/elasticd/examples: every directory above $TESTBED_DIR must be open to other users (TESTBED_DIR=/tmp/... is)"
	done
}

cmd_up() {
	require_root
	local t0=$SECONDS
	install_packages
	ensure_users
	make_layout
	publish_examples
	write_configs
	slurm_env
	start_munged
	start_mariadb
	start_slurmdbd
	ensure_accounts
	start_slurmctld
	start_slurmds
	# Running slurmds reread a changed slurm.conf/gres.conf/plugstack.conf on reconfigure.
	[ "${CONFIG_CHANGED:-0}" = 1 ] && scontrol reconfigure
	# A node left down by a previous run (e.g. killed slurmd) is brought back.
	scontrol update nodename="$(IFS=,; echo "${NODES[*]}")" state=resume >/dev/null 2>&1 || true
	# Registering is slurmctld's work, node after node: 60 s, plus 1 s for every 20 nodes.
	local idle_timeout=$((TESTBED_IDLE_TIMEOUT + ${#NODES[@]} / 20))
	if ! wait_for "all nodes up" "$idle_timeout" all_nodes_up; then
		sinfo -N | awk '$4 !~ /^(idle|mix|alloc|comp)$/' | head -n 40 >&2 || true
		die "nodes not up after ${idle_timeout}s; logs in $LOG"
	fi
	start_slurmbridge_daemons
	say "up in $((SECONDS - t0))s: all ${#NODES[@]} nodes up. Use it with: . $TESTBED_DIR/env"
	if [ ${#NODES[@]} -le 50 ]; then
		sinfo -o '%10P %.5a %.6D %8t %N %G'
	else
		sinfo -o '%12P %.5a %.6D %8t %G'
	fi
}

stop_pid() {
	local name=$1 pid
	pid=$(pid_of "$name") || { rm -f "$RUN/$name.pid"; return 0; }
	terminate "$name" "$pid"
	say "stopped $name ($pid)"
	rm -f "$(readlink -f "$RUN/$name.pid")" "$RUN/$name.pid"
}

# Running jobs' slurmstepd processes outlive slurmd, so a full stop cancels what still runs in
# this throwaway cluster (pending jobs stay in its saved state) and waits for the steps to end.
end_running_jobs() {
	pid_of slurmctld >/dev/null && [ -f "$ETC/slurm.conf" ] || return 0
	local running
	running=$(squeue -h -t running,completing,configuring -o %i 2>/dev/null | wc -l) || return 0
	[ "$running" -gt 0 ] || return 0
	say "cancelling $running running testbed job(s) so no slurmstepd is left behind"
	scancel --state=running >/dev/null 2>&1 || true
	scancel --state=configuring >/dev/null 2>&1 || true
	wait_for "running jobs to end" 20 test -z "$(squeue -h -t running,completing,configuring -o %i 2>/dev/null)" || true
}

cmd_down() {
	require_root
	local node
	slurm_env
	stop_slurmbridge_daemons
	end_running_jobs
	# Nodes first, then the controller, accounting, database and authentication.
	stop_slurmds
	stop_pid slurmctld
	stop_pid slurmdbd
	stop_pid mariadb
	stop_pid munged
}

# cmd_stop NAME: unlike down it never sends SIGKILL, as a slurmctld killed while it saves its
# state would lose the queue a fault test means to keep; it gives up after two minutes instead.
cmd_stop() {
	require_root
	local name=$1 pid i
	case $name in
	mariadb | munged | slurmdbd | slurmctld) ;;
	slurmd-*) [[ " ${NODES[*]} " == *" ${name#slurmd-} "* ]] || die "stop: the testbed has no node ${name#slurmd-}" ;;
	*) die "stop: $name is none of the testbed's daemons (mariadb, munged, slurmdbd, slurmctld, slurmd-NODE)" ;;
	esac
	pid=$(pid_of "$name") || { say "$name is not running"; return 0; }
	kill -TERM "$pid"
	for i in $(seq 1 1200); do
		if [ ! -d "/proc/$pid" ]; then
			say "stopped $name ($pid)"
			return 0
		fi
		sleep 0.1
	done
	die "$name ($pid) still runs 120s after SIGTERM"
}

cmd_status() {
	local name pid rc=0 node down=()
	for name in munged mariadb slurmdbd slurmctld; do
		if pid=$(pid_of "$name"); then
			printf '%-20s up    pid %s\n' "$name" "$pid"
		else
			printf '%-20s down\n' "$name"
			rc=3
		fi
	done
	# A line per node, except on a cluster of a site's size: there a count and the nodes down.
	for node in "${NODES[@]}"; do
		if slurmd_running "$node"; then
			[ ${#NODES[@]} -gt 16 ] || printf '%-20s up    pid %s\n' "slurmd-$node" "$FOUND_PID"
		else
			[ ${#NODES[@]} -gt 16 ] || printf '%-20s down\n' "slurmd-$node"
			down+=("$node")
		fi
	done
	if [ ${#NODES[@]} -gt 16 ]; then
		printf '%-20s %d of %d up%s\n' slurmd $((${#NODES[@]} - ${#down[@]})) ${#NODES[@]} "${down:+; down: ${down[*]}}"
	fi
	[ ${#down[@]} -eq 0 ] || rc=3
	for name in "${SLURMBRIDGE_DAEMONS[@]}"; do
		[ -x "$SLURMBRIDGE_BINDIR/$name" ] && { TESTBED_DIR=$TESTBED_DIR bash "$REPO_ROOT/testbed/$name.sh" status || rc=3; }
	done
	if [ -f "$ETC/slurm.conf" ] && pid_of slurmctld >/dev/null; then
		SLURM_CONF=$ETC/slurm.conf sinfo -o '%10P %.5a %.6D %8t %N %G' || true
	fi
	return $rc
}

# Installing packages needs no facts (and no Go yet).
case ${1:-} in
packages | package-list | other-package-list | smd-package-list | browser-package-list) ;;
*) load_facts "${1:-}" ;;
esac

case ${1:-} in
packages)
	require_root
	install_packages
	;;
package-list) echo "${PACKAGES[@]}" ;;
other-package-list) echo "${OTHER_PACKAGES[@]}" ;;
smd-package-list) echo "${SMD_PACKAGES[@]}" ;;
browser-package-list) echo "${BROWSER_PACKAGES[@]}" ;;
up) cmd_up ;;
down) cmd_down ;;
status) cmd_status ;;
stop)
	[ $# -eq 2 ] || { echo "usage: $0 stop NAME" >&2; exit 2; }
	cmd_stop "$2"
	;;
clean)
	cmd_down
	case $TESTBED_DIR in /tmp/* | /var/tmp/*) rm -rf "$TESTBED_DIR" ;; *) die "refusing to remove $TESTBED_DIR (not under /tmp or /var/tmp)" ;; esac
	;;
*)
	echo "usage: $0 up|down|status|stop NAME|clean" >&2
	exit 2
	;;
esac
