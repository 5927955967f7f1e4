#!/usr/bin/env bash
# elasticd and its node agent on the local testbed.
#   testbed/elasticd.sh start    start elasticd and one agent for the testbed's nodes (one host)
#   testbed/elasticd.sh stop     stop exactly what start started, by pid file
#   testbed/elasticd.sh status   which of them run
# Needs bin/elasticd (make build) and the testbed up; pid files in $TESTBED_DIR/run, logs in
# $TESTBED_DIR/log, elasticd's state directory (the SPANK plugin's dir=) in $TESTBED_DIR/elastic.
# Fast settings so a demo job moves in seconds: ELASTICD_INTERVAL overrides. elasticd listens
# on the port testbed.sh up chose (the facts' elasticd port, moved with slurmctld's, or
# ELASTICD_PORT given to it), and reads the lending limits from the testbed's quotad on its port.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
TESTBED_DIR=${TESTBED_DIR:-/tmp/slurmbridge-testbed}
RUN=$TESTBED_DIR/run
LOG=$TESTBED_DIR/log
BIN=${ELASTICD_BIN:-${SLURMBRIDGE_BINDIR:-$REPO/bin}/elasticd}
INTERVAL=${ELASTICD_INTERVAL:-2s}

say() { printf 'elasticd: %s\n' "$*"; }
die() { printf 'elasticd: error: %s\n' "$*" >&2; exit 1; }
# shellcheck source=testbed/supervise.sh
. "$REPO/testbed/supervise.sh"

# pid_of NAME: the pid in $RUN/NAME.pid when it is alive and still elasticd.
pid_of() { pid_in "$RUN/$1.pid" '*elasticd*'; }

start_one() {
	local name=$1
	shift
	if pid=$(pid_of "$name"); then
		say "$name already running ($pid)"
		return
	fi
	SLURM_CONF=$TESTBED_DIR/etc/slurm.conf detached "$BIN" "$@" >>"$LOG/$name.log" 2>&1 </dev/null &
	echo $! >"$RUN/$name.pid"
	say "started $name ($!), log $LOG/$name.log"
}

cmd_start() {
	[ -x "$BIN" ] || die "$BIN missing: run make build"
	[ -s "$TESTBED_DIR/etc/slurm.conf" ] || die "no testbed in $TESTBED_DIR: bring it up first"
	# The nodes the testbed started and elasticd's port, as testbed.sh up chose them.
	local NODES ELASTICD_PORT QUOTAD_METRICS_PORT
	kept_facts "$TESTBED_DIR"
	mkdir -p "$RUN" "$LOG" "$TESTBED_DIR/elastic"
	chmod 0755 "$TESTBED_DIR/elastic"
	# The agent proves itself with the testbed's munged (once per session); elasticd takes root and
	# the user the agent runs as here (SlurmUser in production, or --agent-user).
	local munge_socket=$TESTBED_DIR/run/munge/munge.socket
	start_one elasticd run --state-dir "$TESTBED_DIR/elastic" --pools "$TESTBED_DIR/etc/pools.yaml" \
		--listen "127.0.0.1:$ELASTICD_PORT" --interval "$INTERVAL" --grace 10s --min-samples 3 --settle 5s \
		--stale-after 30s --cooldown 2m --munge-socket "$munge_socket" --agent-user "$(id -u)" \
		--quotad "127.0.0.1:$QUOTAD_METRICS_PORT"
	local node_flags=()
	for n in "${NODES[@]}"; do node_flags+=(--node "$n"); done
	start_one elastic-agent agent "${node_flags[@]}" --elasticd "http://127.0.0.1:$ELASTICD_PORT" --interval "$INTERVAL" \
		--munge-socket "$munge_socket"
}

stop_one() {
	local name=$1 pid
	pid=$(pid_of "$name") || { rm -f "$RUN/$name.pid"; return 0; }
	terminate "$name" "$pid"
	rm -f "$RUN/$name.pid"
	say "stopped $name ($pid)"
}

cmd_stop() {
	stop_one elastic-agent
	stop_one elasticd
}

# Exit status 3 when either is not running, like testbed.sh status.
cmd_status() {
	local name pid rc=0
	for name in elasticd elastic-agent; do
		if pid=$(pid_of "$name"); then say "$name running ($pid)"; else say "$name not running"; rc=3; fi
	done
	return $rc
}

case ${1:-} in
start) cmd_start ;;
stop) cmd_stop ;;
status) cmd_status ;;
*) die "usage: $0 start|stop|status" ;;
esac
