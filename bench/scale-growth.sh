#!/usr/bin/env bash
# How quotad's cost grows with the cluster: at each size the testbed is brought up (the
# project's own 7-node, 20-GPU testbed for "testbed", else the alibaba preset at that many
# nodes: a tenth of the trace's cluster is 152, all of it 1523), its queue filled in proportion
# to its GPUs (PENDING_PER_GPU GPU jobs pending over quota, as arrays of 100; RUNNING_PER_NODE
# one-CPU allocations running; ROWS_PER_GPU rows of history in slurmdbd), then
# bench/cmd/quotadcost times RUNS quotad cycles (read and plan, --dry-run) each beside one bare
# squeue of the same queue, with slurmctld's RPCs over the measurement (sdiag).
# Prints one line per size and a table at the end; each size's whole output is kept in OUT.
#   bench/scale-growth.sh [SIZE...]      (default: testbed 152; root; TRACE_DIR as for make)
set -euo pipefail
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO_ROOT"
[ "$(id -u)" -eq 0 ] || { echo "scale-growth: run as root" >&2; exit 1; }
PENDING_PER_GPU=${PENDING_PER_GPU:-10}
RUNNING_PER_NODE=${RUNNING_PER_NODE:-2}
ROWS_PER_GPU=${ROWS_PER_GPU:-100}
RUNS=${RUNS:-5}
OUT=${OUT:-/tmp/slurmbridge-scale-growth}
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(testbed 152)
export PATH=$PATH:/usr/local/go/bin
mkdir -p "$OUT"
go build -o "$OUT/quotadcost" ./bench/cmd/quotadcost
make --no-print-directory build >/dev/null
current=
trap '[ -z "$current" ] || make --no-print-directory testbed-clean $current >/dev/null 2>&1 || true' EXIT
rows=()
for size in "${sizes[@]}"; do
	if [ "$size" = testbed ]; then
		args=() dir=/tmp/slurmbridge-testbed
	else
		args=(PRESET=alibaba NODES="$size") dir=/tmp/slurmbridge-alibaba
	fi
	[ ! -f "$dir/env" ] || { echo "scale-growth: a testbed runs in $dir: bring it down first" >&2; exit 1; }
	current="${args[*]}"
	t0=$SECONDS
	make --no-print-directory testbed-up "${args[@]}" >"$OUT/up-$size.log" 2>&1 || { tail -n 30 "$OUT/up-$size.log" >&2; exit 1; }
	up_s=$((SECONDS - t0))
	# shellcheck source=/dev/null
	. "$dir/env"
	nodes=$(sinfo -h -N -o '%N' | sort -u | wc -l)
	gpus=$(sinfo -h -N -o '%N %G' | sort -u | awk '{ n = $2; sub(/\(.*/, "", n); k = split(n, a, ":"); s += a[k] } END { print s + 0 }')
	pending=$((gpus * PENDING_PER_GPU)) running=$((nodes * RUNNING_PER_NODE)) dbrows=$((gpus * ROWS_PER_GPU))
	TESTBED_DIR=$dir "$OUT/quotadcost" -rows "$dbrows" -pending "$pending" -running "$running" -array 100 -runs "$RUNS" \
		-quotad bin/quotad | tee "$OUT/quotadcost-$size.log"
	last=$(tail -n1 "$OUT/quotadcost-$size.log")
	rows+=("$size $nodes $gpus $up_s $last")
	make --no-print-directory testbed-clean "${args[@]}" >/dev/null 2>&1
	current=
done
echo
printf '%-8s %6s %6s %6s  %s\n' size nodes GPUs up_s 'quotadcost (medians)'
for r in "${rows[@]}"; do
	read -r size nodes gpus up rest <<<"$r"
	printf '%-8s %6s %6s %6s  %s\n' "$size" "$nodes" "$gpus" "$up" "$rest"
done
echo "each size's output in $OUT"
