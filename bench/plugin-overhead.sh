#!/usr/bin/env bash
# slurmctld's cost of routing: sdiag's REQUEST_SUBMIT_BATCH_JOB ave_time (µs) with no
# job_submit plugin, with job_submit/pools, and with bench/job_submit_pools.lua doing the same
# routing, in alternating rounds on the running testbed. Prints every round, the three medians and
# the ratios. Jobs are submitted held and cancelled, so nothing runs.
#
#   bench/plugin-overhead.sh [ROUNDS] [JOBS_PER_ROUND] [PARALLEL]     (defaults 6 1000 8; root)
# VARIANTS="none pools lua" names the compared job_submit plugins (none = no plugin; gonoop = a
# Go plugin that does nothing, bench/noopplugin, built here; any other name must be a
# job_submit_NAME.so in the testbed's PluginDir).
# The jobs repeat three request shapes, as a cluster's submissions repeat a few, so job_submit/pools
# answers nearly all of them from its decision cache (the cache_hits column). UNIQUE=1 gives each
# job its own comment: every request is new, the cache never answers, and the figure is the cost
# of deciding each job in Go.
set -euo pipefail
ROUNDS=${1:-6}
JOBS=${2:-1000}
PARALLEL=${3:-8}
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TESTBED_DIR=${TESTBED_DIR:-/tmp/slurmbridge-testbed}
# shellcheck source=/dev/null
. "$TESTBED_DIR/env"
ETC=$(dirname "$SLURM_CONF")
NAME=bench-overhead-$$

[ "$(id -u)" -eq 0 ] || { echo "run as root (it reconfigures the testbed)" >&2; exit 1; }
grep -q '^JobSubmitPlugins=pools' "$SLURM_CONF" || { echo "testbed runs without the pools plugin: make plugin testbed-up" >&2; exit 1; }
cp "$REPO_ROOT/bench/job_submit_pools.lua" "$ETC/job_submit.lua"

# Cancelled jobs stay in slurmctld's memory for MinJobAge and slow every later submission: the
# bench purges them between runs so every variant meets the same job table.
MIN_JOB_AGE=$(awk -F= '/^MinJobAge=/ {print $2}' "$SLURM_CONF")
sed -i 's/^MinJobAge=.*/MinJobAge=2/' "$SLURM_CONF"

# quotad and elasticd poll squeue --json, which holds slurmctld's job lock for a long time with
# thousands of jobs: they are stopped while measuring, and started again after.
paused=()
for d in quotad elasticd; do
	if TESTBED_DIR=$TESTBED_DIR bash "$REPO_ROOT/testbed/$d.sh" status >/dev/null 2>&1; then
		TESTBED_DIR=$TESTBED_DIR bash "$REPO_ROOT/testbed/$d.sh" stop >/dev/null
		paused+=("$d")
	fi
done

restore() {
	for d in "${paused[@]}"; do TESTBED_DIR=$TESTBED_DIR bash "$REPO_ROOT/testbed/$d.sh" start >/dev/null || true; done
	sed -i "s/^MinJobAge=.*/MinJobAge=${MIN_JOB_AGE:-300}/" "$SLURM_CONF"
	sed -i 's/^#*JobSubmitPlugins=.*/JobSubmitPlugins=pools/' "$SLURM_CONF"
	scontrol reconfigure || true
	scancel --name="$NAME" 2>/dev/null || true
	rm -f "$ETC/job_submit.lua"
	[ -z "${plugin_dir:-}" ] || rm -f "$plugin_dir/job_submit_gonoop.so"
}
trap restore EXIT

use_plugin() {
	case $1 in
	none) sed -i 's/^#*JobSubmitPlugins=.*/#JobSubmitPlugins=none/' "$SLURM_CONF" ;;
	*) sed -i "s/^#*JobSubmitPlugins=.*/JobSubmitPlugins=$1/" "$SLURM_CONF" ;;
	esac
	scontrol reconfigure
	# From 23.11 reconfigure starts a new slurmctld: measure only once it answers.
	for _ in $(seq 1 150); do scontrol ping >/dev/null 2>&1 && break; sleep 0.2; done
	sleep 1
}

# The same jobs in every variant, landing in the same partitions: without a plugin they name the
# partition list the plugin would write, so slurmctld does the same work after routing and the
# difference is the routing itself. The submitting commands run at the lowest CPU priority: on a
# small machine their fork and exec would otherwise take slurmctld's cores in bursts and swamp
# the difference measured.
submit_round() {
	local variant=$1
	seq 1 "$JOBS" | xargs -P "$PARALLEL" -I{} sh -c '
		variant=$1
		case $(({} % 3)) in
		0) part=cpu; set -- --wrap true ;;
		1) part=a100-spot,a100; set -- --gres=gpu:a100:1 --wrap true ;;
		2) part=a100-spot,a100,v100; set -- --gpus=2 --wrap true ;;
		esac
		[ "$variant" = none ] && set -- -p "$part" "$@"
		[ "$UNIQUE" = 1 ] && set -- --comment="bench-{}" "$@"
		exec nice -n 19 runuser -u alice -- sbatch --hold --parsable --quiet --chdir=/tmp --output=/dev/null --job-name='"$NAME"' "$@"' sh "$variant" >/dev/null 2>&1
}

# slurmctld's own CPU time (user + system, all its threads, in clock ticks): what a variant costs
# the controller's cores, beside the RPC's wall time that ave_time is.
ctld_cpu_ticks() {
	local pid
	pid=$(pgrep -o -x slurmctld)
	awk '{print $14 + $15}' "/proc/$pid/stat"
}
ctld_threads() { ls "/proc/$(pgrep -o -x slurmctld)/task" | wc -l; }
# job_submit/pools logs its own time per submission every 1000 calls (crossing into Go
# included) and how many its decision cache answered: the round's last such figures, or - when
# the round wrote none.
CTLD_LOG=$(scontrol show config | awk -F' = ' '/^SlurmctldLogFile/ {print $2}')
log_lines() { wc -l <"$CTLD_LOG"; }
plugin_window() { # FROM-LINE: "US HITS" of the last window line after it
	tail -n +"$(($1 + 1))" "$CTLD_LOG" |
		sed -n 's/.*job_submit\/pools: submissions .* took \([0-9.]*\) us each.*; \([0-9]*\) answered from the decision cache.*/\1 \2/p' |
		tail -n1 | grep . || echo "- -"
}
TICKS=$(getconf CLK_TCK)
STATE_DIR=$(scontrol show config | awk -F' = ' '/^StateSaveLocation/ {print $2}')
state_job_dirs() { find "$STATE_DIR" -mindepth 2 -maxdepth 2 -name 'job.*' 2>/dev/null | wc -l; }
STATE_JOBS=$(state_job_dirs)

ave_time() {
	sdiag | awk '/REQUEST_SUBMIT_BATCH_JOB/ {for (i = 1; i <= NF; i++) if ($i ~ /^ave_time:/) {sub("ave_time:", "", $i); print $i}}'
}

median() { sort -n | awk '{v[NR] = $1} END {if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

read -r -a variants <<<"${VARIANTS:-none pools lua}"
[ "${variants[0]}" = none ] || { echo "VARIANTS must start with none (the baseline)" >&2; exit 1; }
for v in "${variants[@]}"; do
	[ "$v" = gonoop ] || continue
	plugin_dir=$(scontrol show config | awk -F' = ' '/^PluginDir/ {split($2, d, ":"); print d[1]}')
	(cd "$REPO_ROOT" && PATH=$PATH:/usr/local/go/bin CGO_ENABLED=1 go build -buildmode=c-shared \
		-o "$plugin_dir/job_submit_gonoop.so" ./bench/noopplugin)
	rm -f "$plugin_dir/job_submit_gonoop.h"
done
declare -A results ratios cpu
inplugin=""
n=${#variants[@]}
export UNIQUE=${UNIQUE:-0}
echo "round variant ave_time_us ctld_cpu_us_per_job ctld_threads plugin_us_per_job cache_hits_per_1000"
for round in $(seq 1 "$ROUNDS"); do
	# Rotate the order each round so no variant always runs first (after a reconfigure).
	offset=$(((round - 1) % n))
	declare -A this=()
	for k in $(seq 0 $((n - 1))); do
		v=${variants[$(((k + offset) % n))]}
		use_plugin "$v"
		sdiag -r >/dev/null
		c0=$(ctld_cpu_ticks)
		l0=$(log_lines)
		submit_round "$v"
		t=$(ave_time)
		c=$(awk -v a="$c0" -v b="$(ctld_cpu_ticks)" -v hz="$TICKS" -v n="$JOBS" 'BEGIN {printf "%.0f", (b - a) * 1e6 / hz / n}')
		results[$v]+="$t "
		cpu[$v]+="$c "
		this[$v]=$t
		read -r p hits <<<"$(plugin_window "$l0")"
		[ "$p" = - ] || inplugin+="$(awk -v a="$p" -v b="$t" 'BEGIN {print a / b}') "
		echo "$round $v $t $c $(ctld_threads) $p $hits"
		scancel --name="$NAME"
		for _ in $(seq 1 300); do
			[ -z "$(squeue -h -t all --name="$NAME" -o %i | head -n1)" ] && break
			sleep 0.2
		done
		# slurmctld removes a purged job's files from StateSaveLocation in a background thread
		# (from 23.11): the next round must not pay for this round's deletions.
		for _ in $(seq 1 300); do
			[ "$(state_job_dirs)" -le "$STATE_JOBS" ] && break
			sleep 0.2
		done
	done
	# Ratios within a round see the same machine load: their median is the robust figure.
	for v in "${variants[@]:1}"; do
		ratios[$v]+="$(awk -v a="${this[$v]}" -v b="${this[none]}" 'BEGIN {print a / b}') "
	done
done

echo
echo "REQUEST_SUBMIT_BATCH_JOB ave_time, median of $ROUNDS rounds of $JOBS submissions ($PARALLEL parallel):"
for v in "${variants[@]}"; do
	printf '  %-8s %8.0f us  (slurmctld CPU %5.0f us/job)' "$v" "$(tr ' ' '\n' <<<"${results[$v]}" | grep . | median)" \
		"$(tr ' ' '\n' <<<"${cpu[$v]}" | grep . | median)"
	[ "$v" = none ] || printf '   %s/none: median of per-round ratios %.3f' "$v" "$(tr ' ' '\n' <<<"${ratios[$v]}" | grep . | median)"
	echo
done
[ -z "$inplugin" ] || printf '  job_submit/pools own time (its log, every 1000 calls) / its round'"'"'s ave_time: median %.4f\n' \
	"$(tr ' ' '\n' <<<"$inplugin" | grep . | median)"
echo "  (goal: pools/none <= 1.03; Slurm $(sinfo --version | awk '{print $2}'); UNIQUE=$UNIQUE: $([ "$UNIQUE" = 1 ] && echo 'every request new' || echo 'three request shapes repeated'))"
