#!/usr/bin/env bash
# Lend and reclaim latency of guaranteed quotas on the running testbed (quotad running, quotas of
# slurm-conf/testbed/quotas.yaml), over RUNS rounds; prints each round and the medians.
#   lend:    bob (quota 4 a100) submits 8 one-a100 jobs; time until all 8 run (4 of them lent
#            idle GPUs by quotad, in QOS borrow).
#   reclaim: once the borrowers are past PreemptExemptTime, alice (quota 4, none used) submits 4;
#            time until all 4 run (Slurm requeues 4 borrowers).
# Usage: bench/quota-latency.sh [RUNS]      (default 5; root)
set -euo pipefail
RUNS=${1:-5}
TESTBED_DIR=${TESTBED_DIR:-/tmp/slurmbridge-testbed}
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=/dev/null
. "$TESTBED_DIR/env"
[ "$(id -u)" -eq 0 ] || { echo "run as root" >&2; exit 1; }
TESTBED_DIR=$TESTBED_DIR bash "$REPO_ROOT/testbed/quotad.sh" status >/dev/null || { echo "quotad is not running on the testbed (make build testbed-up)" >&2; exit 1; }
EXEMPT=$(awk '/preemptExemptTime:/ {gsub(/s/, "", $2); print $2}' "$REPO_ROOT/slurm-conf/testbed/quotas.yaml")
TAG=bench-quota-$$
trap 'scancel --name="$TAG-bob" 2>/dev/null; scancel --name="$TAG-alice" 2>/dev/null; true' EXIT

submit() { runuser -u "$1" -- sbatch --parsable --quiet --chdir=/tmp --output=/dev/null --job-name="$TAG-$1" -p a100 --gres=gpu:a100:1 --wrap 'sleep 600' >/dev/null; }
running() { squeue -h -n "$1" -t running | wc -l; }
now() { date +%s.%N; }
# wait_running NAME N: seconds until N jobs of NAME run (fails after 120 s).
wait_running() {
	local t0 i
	t0=$(now)
	for i in $(seq 1 1200); do
		[ "$(running "$1")" -ge "$2" ] && { awk -v a="$t0" -v b="$(now)" 'BEGIN {printf "%.2f", b - a}'; return 0; }
		sleep 0.1
	done
	echo "timeout waiting for $2 running $1 jobs" >&2
	return 1
}
median() { sort -n | awk '{v[NR] = $1} END {if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

lends="" reclaims=""
echo "round lend_s reclaim_s"
for round in $(seq 1 "$RUNS"); do
	for _ in 1 2 3 4 5 6 7 8; do submit bob & done
	wait
	lend=$(wait_running "$TAG-bob" 8)
	sleep "$EXEMPT"
	t0=$(now)
	for _ in 1 2 3 4; do submit alice & done
	wait
	reclaim=$(wait_running "$TAG-alice" 4)
	reclaim=$(awk -v a="$t0" -v b="$(now)" -v r="$reclaim" 'BEGIN {printf "%.2f", b - a}')
	echo "$round $lend $reclaim"
	lends+="$lend "
	reclaims+="$reclaim "
	scancel --name="$TAG-bob"
	scancel --name="$TAG-alice"
	# Let the nodes finish cleaning up before the next round.
	for _ in $(seq 1 100); do [ -z "$(squeue -h -n "$TAG-bob,$TAG-alice" -t running,completing,pending)" ] && break; sleep 0.2; done
done
printf 'median over %d rounds: lend %.2f s (submit to all 8 running), reclaim %.2f s (submit to all 4 running, borrowers past PreemptExemptTime)\n' \
	"$RUNS" "$(tr ' ' '\n' <<<"$lends" | grep . | median)" "$(tr ' ' '\n' <<<"$reclaims" | grep . | median)"
