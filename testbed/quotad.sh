#!/usr/bin/env bash
# Runs bin/quotad against the local testbed ($TESTBED_DIR, default /tmp/slurmbridge-testbed).
#
#   quotad.sh start    import the quota table testbed.sh up rendered ($TESTBED_DIR/etc/quotas.yaml,
#                      slurm-conf/testbed/quotas.yaml's twin on the testbed; QUOTAD_QUOTAS names
#                      another, e.g. the replay's with settings of its own), start quotad in the background
#                      (pid file $TESTBED_DIR/run/quotad.pid, log $TESTBED_DIR/log/quotad.log,
#                      metrics on 127.0.0.1, the port testbed.sh up chose: the facts' quotad
#                      port, or QUOTAD_METRICS_PORT given to it); harmless when it runs
#   quotad.sh stop     stop the quotad of the pid file (never by name)
#   quotad.sh status   say whether it runs
#   quotad.sh sync     while it is stopped: apply once what it would apply now (quotactl sync),
#                      e.g. QOS changes a quotad stopped mid-cycle left undone
#
# Needs `make build` (bin/quotad, bin/quotactl) and a database quotad may write: see the
# CREATE DATABASE slurmbridge and GRANT ALL ON slurmbridge.* to the testbed's DB user.
set -euo pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TESTBED_DIR=${TESTBED_DIR:-/tmp/slurmbridge-testbed}
QUOTAD_INTERVAL=${QUOTAD_INTERVAL:-5s}
PIDFILE=$TESTBED_DIR/run/quotad.pid
LOGFILE=$TESTBED_DIR/log/quotad.log
# SLURMBRIDGE_BINDIR: where quotad and quotactl are (an installed copy: /usr/bin).
BIN=${SLURMBRIDGE_BINDIR:-$REPO_ROOT/bin}

say() { printf 'quotad.sh: %s\n' "$*"; }
die() { printf 'quotad.sh: error: %s\n' "$*" >&2; exit 1; }
# shellcheck source=testbed/supervise.sh
. "$REPO_ROOT/testbed/supervise.sh"

# running prints the pid of the pid file when that process is alive and is a quotad.
running() { pid_in "$PIDFILE" '*quotad*'; }

load_env() {
	[ -f "$TESTBED_DIR/env" ] || die "no $TESTBED_DIR/env: bring the testbed up first (testbed/testbed.sh up)"
	trusted "$TESTBED_DIR/env" || die "$TESTBED_DIR/env or its folder is not this user's alone: not reading it"
	set -a
	# shellcheck disable=SC1091
	. "$TESTBED_DIR/env"
	set +a
}

cmd_start() {
	local pid
	if pid=$(running); then
		say "already running (pid $pid)"
		return 0
	fi
	[ -x "$BIN/quotad" ] && [ -x "$BIN/quotactl" ] || die "$BIN/quotad or $BIN/quotactl missing: run make build"
	load_env
	local QUOTAD_METRICS_PORT quotas
	kept_facts "$TESTBED_DIR"
	# The quota table testbed.sh up rendered from its facts (a preset's projects among them).
	quotas=${QUOTAD_QUOTAS:-$TESTBED_DIR/etc/quotas.yaml}
	[ -f "$quotas" ] || [ -n "${QUOTAD_QUOTAS:-}" ] || quotas=$REPO_ROOT/slurm-conf/testbed/quotas.yaml
	"$BIN/quotactl" import "$quotas" >/dev/null
	mkdir -p "$(dirname "$LOGFILE")" "$(dirname "$PIDFILE")"
	detached "$BIN/quotad" --interval "$QUOTAD_INTERVAL" --listen "127.0.0.1:$QUOTAD_METRICS_PORT" \
		</dev/null >>"$LOGFILE" 2>&1 &
	echo $! >"$PIDFILE"
	disown
	# It either serves metrics (it is up) or exits with its reason in the log.
	local i
	local started
	started=$(cat "$PIDFILE")
	for i in $(seq 1 50); do
		# Only a vanished process counts as exited: while it execs, its cmdline can read empty.
		if [ ! -d "/proc/$started" ]; then
			tail -n 5 "$LOGFILE" >&2
			die "quotad exited; log in $LOGFILE"
		fi
		if (exec 3<>"/dev/tcp/127.0.0.1/$QUOTAD_METRICS_PORT") 2>/dev/null; then
			say "started (pid $started), metrics on http://127.0.0.1:$QUOTAD_METRICS_PORT/metrics, log $LOGFILE"
			return 0
		fi
		sleep 0.1
	done
	die "quotad did not serve metrics within 5s; log in $LOGFILE"
}

cmd_stop() {
	local pid
	pid=$(running) || { rm -f "$PIDFILE"; say "not running"; return 0; }
	terminate quotad "$pid"
	rm -f "$PIDFILE"
	say "stopped (pid $pid)"
}

cmd_status() {
	local pid
	if pid=$(running); then
		say "running (pid $pid), log $LOGFILE"
	else
		say "not running"
		return 3
	fi
}

cmd_sync() {
	local pid
	if pid=$(running); then
		die "quotad runs (pid $pid): it applies its plan itself; stop it first"
	fi
	[ -x "$BIN/quotactl" ] || die "$BIN/quotactl missing: run make build"
	load_env
	"$BIN/quotactl" sync
}

case ${1:-} in
start) cmd_start ;;
stop) cmd_stop ;;
status) cmd_status ;;
sync) cmd_sync ;;
*)
	echo "usage: $0 start|stop|status|sync" >&2
	exit 2
	;;
esac
