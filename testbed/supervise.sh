# Process supervision shared by testbed.sh, quotad.sh and elasticd.sh (sourced, not run): the
# one way the testbed finds, waits for and stops the processes it started; and the fake GPUs
# both testbeds give their nodes. Each script defines say() before sourcing this.

# A daemon built with `make RACE_DAEMONS=1` stops at its first data race, the report in its log: a race
# that only printed would let the suite pass over it. Binaries built without -race ignore it.
export GORACE=${GORACE:-halt_on_error=1}

# detached COMMAND... execs COMMAND in a session of its own, holding none of its starter's file
# descriptors beyond 0-2 (each caller redirects those): a lock the starter held (a test run
# under flock) would otherwise live on in the daemon, and every later holder would wait for
# ever. Run it in the background; $! is then the daemon's pid.
detached() {
	local fd
	for fd in /proc/$BASHPID/fd/*; do
		fd=${fd##*/}
		[ "$fd" -gt 2 ] 2>/dev/null && eval "exec $fd>&-" 2>/dev/null
	done
	exec setsid "$@"
}

# find_pid PIDFILE PATTERN sets FOUND_PID to the pid recorded in PIDFILE when that process is
# alive and its command line matches the glob PATTERN (a recycled pid is never signalled). It
# forks nothing: a testbed of a site's size asks it for each of 1,523 slurmd on a loaded host.
find_pid() {
	local pidfile=$1 pattern=$2 pid= args
	FOUND_PID=
	[ -s "$pidfile" ] || return 1
	read -r pid <"$pidfile" || [ -n "$pid" ] || return 1
	pid=${pid//[!0-9]/}
	[ -n "$pid" ] && [ -d "/proc/$pid" ] || return 1
	mapfile -d '' -t args 2>/dev/null <"/proc/$pid/cmdline" || return 1
	# shellcheck disable=SC2053 # PATTERN is a glob on purpose
	[[ "${args[*]} " == $pattern ]] || return 1
	FOUND_PID=$pid
}

# pid_in PIDFILE PATTERN prints what find_pid finds.
pid_in() {
	find_pid "$@" && echo "$FOUND_PID"
}

# terminate NAME PID... sends SIGTERM to every PID at once, waits up to 10 s for them to end,
# then sends SIGKILL to those left (a testbed of a site's size stops 1,523 slurmd so).
terminate() {
	local name=$1 pid i alive
	shift
	kill -TERM "$@" 2>/dev/null || true
	for i in $(seq 1 100); do
		alive=0
		for pid in "$@"; do [ -d "/proc/$pid" ] && { alive=1; break; }; done
		[ $alive -eq 1 ] || return 0
		sleep 0.1
	done
	for pid in "$@"; do
		[ -d "/proc/$pid" ] || continue
		say "$name ($pid) ignored SIGTERM for 10s; sending SIGKILL"
		kill -KILL "$pid" 2>/dev/null || true
	done
}

# wait_for DESCRIPTION SECONDS COMMAND... retries COMMAND until it succeeds or time runs out.
wait_for() {
	local what=$1 secs=$2 deadline
	shift 2
	deadline=$((SECONDS + secs))
	until "$@" >/dev/null 2>&1; do
		if [ $SECONDS -ge $deadline ]; then
			say "gave up waiting for $what after ${secs}s"
			return 1
		fi
		sleep 0.2
	done
}

# start_munge KEY SOCKET PIDFILE LOGFILE SEEDFILE THREADS starts munged as user munge and waits
# for its socket, making KEY first when there is none. The key is made under a lock beside it
# and moved into place whole: the container testbed's nodes share one key on a volume and all
# start at once.
start_munge() {
	local key=$1 socket=$2 pidfile=$3 logfile=$4 seedfile=$5 threads=$6
	(
		flock 9
		if [ ! -s "$key" ]; then
			mungekey --create --keyfile="$key.new"
			chown munge:munge "$key.new"
			chmod 0400 "$key.new"
			mv "$key.new" "$key"
			say "created the cluster's munge key"
		fi
	) 9>"$(dirname "$key")/.lock"
	runuser -u munge -- /usr/sbin/munged --socket="$socket" --num-threads="$threads" \
		--key-file="$key" --pid-file="$pidfile" --log-file="$logfile" --seed-file="$seedfile"
	wait_for munged 10 test -S "$socket"
}

# make_fake_gpus DIR NODE COUNT makes NODE's fake GPUs where gres.conf's File= names them
# (DIR/gpus/NODE/nvidia0 .. nvidiaCOUNT-1): a character device (a twin of /dev/null) lets slurmd
# derive CUDA_VISIBLE_DEVICES; where mknod is not allowed a plain file still gives a working
# GRES count. Both testbeds make them so, from the facts' GPU_NODES: the local one with each
# node's own count (GPU_NODE_GPUS, a preset's pools differ), the container one with GPUS_PER_NODE
# (it runs the testbed's facts alone, where every GPU node has that many).
make_fake_gpus() {
	local dir=$1/gpus/$2 count=$3 i
	install -d -m 0755 "$dir"
	for ((i = 0; i < count; i++)); do
		[ -e "$dir/nvidia$i" ] || mknod -m 0666 "$dir/nvidia$i" c 1 3 2>/dev/null || : >"$dir/nvidia$i"
	done
}

# kept_facts TESTBED_DIR sources what testbed.sh up kept of the testbed's facts
# ($TESTBED_DIR/etc/facts.sh): the nodes it started and its daemons' ports (QUOTAD_METRICS_PORT,
# ELASTICD_PORT), so the daemons listen where the testbed's env file says they do.
kept_facts() {
	local f=$1/etc/facts.sh
	[ -s "$f" ] && grep -q '^QUOTAD_METRICS_PORT=' "$f" ||
		die "$f is missing or from an older tree: bring the testbed up again (testbed/testbed.sh up)"
	trusted "$f" || die "$f or its folder is not this user's alone: not reading it"
	# shellcheck disable=SC1090
	. "$f"
}

# trusted PATH: PATH and its folder belong to this user and no one else may write them, so a
# root script may source it though the testbed lives under /tmp, where anyone could have made
# the folder first.
trusted() {
	local p
	for p in "$1" "$(dirname "$1")"; do
		[ -O "$p" ] && [ -z "$(find "$p" -maxdepth 0 -perm /022)" ] || return 1
	done
}
