#!/usr/bin/env bash
# What slurmbridge costs as the cluster grows. At each SIZE the testbed is brought up: the
# project's own 7-node, 20-GPU testbed for "testbed", else the alibaba preset at SIZE nodes (a
# tenth of the trace's cluster is 152, all of it 1523). Then:
#   - at the sizes in REPLAY_SIZES, the trace replay in its three modes (tracereplay: -preset
#     quick on the testbed, -preset site on a preset), with each mode's daemons' cycles and
#     memory sampled throughout and slurmctld's RPCs by user and type (sdiag);
#   - at every size, quotad's cycle against one bare squeue of the same queue (quotadcost): the
#     queue filled in proportion to the GPUs (PENDING_PER_GPU GPU jobs pending over quota, as
#     arrays of 100; RUNNING_PER_NODE one-CPU allocations running; ROWS_PER_GPU rows of
#     history in slurmdbd), RUNS cycles (read and plan, --dry-run), and the RPCs they cost; then,
#     with -apply, one acting cycle timed. Once for each count in PROJECTS (the quota table
#     widened to that many projects, quotadcost -projects).
# Prints a line per size and project count and a table at the end; every output is kept in OUT.
#   bench/scale-growth.sh [SIZE...]   (default: testbed 152 1523; root; TRACE_DIR as for make)
set -euo pipefail
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO_ROOT"
[ "$(id -u)" -eq 0 ] || { echo "scale-growth: run as root" >&2; exit 1; }
PENDING_PER_GPU=${PENDING_PER_GPU:-10}
RUNNING_PER_NODE=${RUNNING_PER_NODE:-2}
ROWS_PER_GPU=${ROWS_PER_GPU:-100}
RUNS=${RUNS:-5}
PROJECTS=${PROJECTS:-40 200}
REPLAY_SIZES=${REPLAY_SIZES:-testbed 1523}
TRACE_DIR=${TRACE_DIR:-$REPO_ROOT/../shared/traces/alibaba-gpu-v2023}
# The elastic jobs of the replay write under OUT as the testbed's users: /tmp, not a 0700 home.
OUT=${OUT:-/tmp/slurmbridge-scale-growth}
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(testbed 152 1523)
export PATH=$PATH:/usr/local/go/bin
install -d -m 0755 "$OUT"
make --no-print-directory build >/dev/null
go build -o "$OUT/quotadcost" ./bench/cmd/quotadcost
go build -o "$OUT/tracereplay" ./bench/cmd/tracereplay
up=0 # a testbed of ours is up: whatever happens, it comes down
trap '[ "$up" = 0 ] || make --no-print-directory testbed-clean "${args[@]}" TESTBED_DIR="$dir" >/dev/null 2>&1 || true' EXIT
say() { echo "scale-growth: $(date +%H:%M:%S) $*"; }
rows=()
for size in "${sizes[@]}"; do
	if [ "$size" = testbed ]; then
		args=() dir=/tmp/slurmbridge-testbed replay=(-preset quick)
	else
		args=(PRESET=alibaba NODES="$size") dir=/tmp/slurmbridge-alibaba
		replay=(-preset site -trace "$TRACE_DIR/openb_pod_list_default.csv")
	fi
	[ ! -f "$dir/env" ] || { echo "scale-growth: a testbed runs in $dir: bring it down first" >&2; exit 1; }
	up=1
	say "size $size: bringing the testbed up"
	t0=$SECONDS
	# TESTBED_DIR named each time: the env file sourced at the size before exported its own.
	make --no-print-directory testbed-up "${args[@]}" TESTBED_DIR="$dir" TRACE_DIR="$TRACE_DIR" >"$OUT/up-$size.log" 2>&1 ||
		{ tail -n 30 "$OUT/up-$size.log" >&2; exit 1; }
	up_s=$((SECONDS - t0))
	# shellcheck source=/dev/null
	. "$dir/env"
	nodes=$(sinfo -h -N -o '%N' | sort -u | wc -l)
	# %G lists each type as gpu:TYPE:COUNT, maybe with (S:...) after it; "(null)" on CPU nodes.
	gpus=$(sinfo -h -N -o '%N %G' | sort -u | awk '{ n = split($2, gres, ","); for (i = 1; i <= n; i++) if (gres[i] ~ /^gpu:/) { g = gres[i]; sub(/\(.*/, "", g); k = split(g, f, ":"); s += f[k] } } END { print s + 0 }')
	say "size $size: $nodes nodes, $gpus GPUs, up in ${up_s}s"
	if [[ " $REPLAY_SIZES " == *" $size "* ]]; then
		say "size $size: the trace replay"
		(cd "$REPO_ROOT" && TESTBED_DIR=$dir "$OUT/tracereplay" "${replay[@]}" -out "$OUT/replay-$size" run) >"$OUT/replay-$size.log" 2>&1 ||
			{ tail -n 30 "$OUT/replay-$size.log" >&2; echo "scale-growth: the replay at $size failed (above; all of it in $OUT/replay-$size.log)" >&2; }
	fi
	pending=$((gpus * PENDING_PER_GPU)) running=$((nodes * RUNNING_PER_NODE)) dbrows=$((gpus * ROWS_PER_GPU))
	for projects in $PROJECTS; do
		log=$OUT/quotadcost-$size-p$projects.log
		say "size $size, $projects projects: quotad's cycle with $pending pending, $running running, $dbrows rows"
		rc=0
		TESTBED_DIR=$dir "$OUT/quotadcost" -projects "$projects" -rows "$dbrows" -pending "$pending" -running "$running" -array 100 \
			-runs "$RUNS" -apply -quotad bin/quotad >"$log" 2>&1 || rc=$?
		# 2: measured, but no lend was planned, so no acting cycle to time (acting_s=none).
		[ "$rc" = 0 ] || [ "$rc" = 2 ] || { tail -n 30 "$log" >&2; exit 1; }
		tail -n 3 "$log"
		rows+=("$size $nodes $gpus $up_s $(grep '^cycle_s=' "$log" | tail -n1)")
	done
	make --no-print-directory testbed-clean "${args[@]}" TESTBED_DIR="$dir" >/dev/null 2>&1
	up=0
done
echo
printf '%-8s %6s %6s %6s  %s\n' size nodes GPUs up_s 'quotadcost (medians)'
for r in "${rows[@]}"; do
	read -r size nodes gpus took rest <<<"$r"
	printf '%-8s %6s %6s %6s  %s\n' "$size" "$nodes" "$gpus" "$took" "$rest"
done
echo "every output in $OUT"
