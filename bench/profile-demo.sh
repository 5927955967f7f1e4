#!/usr/bin/env bash
# Shows `poolctl profile learn` on the testbed: a synthetic workload whose run time depends on
# the pool it lands in, then the learned speed table and where `cheapest` sends each class.
#   class lstm: 4 s on v100, 12 s on A100s   (memory-bound: the cheap-per-hour a100-spot loses)
#   class bert: 16 s on v100, 4 s on A100s
# 3 jobs per class and pool, as alice, each pinned to its pool with -p. Needs root, the testbed
# up (TESTBED_DIR) and bin/poolctl (make build). Writes nothing but a copy of pools.yaml in $OUT.
set -euo pipefail
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TESTBED_DIR=${TESTBED_DIR:-/tmp/slurmbridge-testbed}
OUT=${OUT:-$(mktemp -d)}
# shellcheck disable=SC1091
. "$TESTBED_DIR/env"
ids=()
for pool in a100-spot a100 v100; do
	for class in lstm bert; do
		case $class/$pool in
		lstm/v100) secs=4 ;; lstm/*) secs=12 ;; bert/v100) secs=16 ;; bert/*) secs=4 ;;
		esac
		for _ in 1 2 3; do
			ids+=("$(su -s /bin/sh alice -c "cd ~ && sbatch --parsable --output=/dev/null -p $pool --gres=gpu:1 --comment=class=$class --wrap 'sleep $secs'")")
		done
	done
done
echo "submitted ${#ids[@]} jobs: ${ids[*]}"
# Wait until all have left the queue and slurmdbd has their ends.
while [ -n "$(squeue -h -j "$(IFS=,; echo "${ids[*]}")" -o %i 2>/dev/null)" ]; do sleep 2; done
sleep 3
mkdir -p "$OUT"
cp "$REPO_ROOT/slurm-conf/testbed/pools.yaml" "$OUT/pools.yaml"
echo "## before: where cheapest sends each class"
for class in lstm bert; do printf "%s: " "$class"; "$REPO_ROOT/bin/poolctl" --config "$OUT/pools.yaml" explain --gres=gpu:1 --comment=class=$class | grep "^Decision"; done
echo "## poolctl profile learn --since 10m --write"
"$REPO_ROOT/bin/poolctl" --config "$OUT/pools.yaml" profile learn --since 10m --write
echo "## after"
for class in lstm bert; do printf "%s: " "$class"; "$REPO_ROOT/bin/poolctl" --config "$OUT/pools.yaml" explain --gres=gpu:1 --comment=class=$class | grep "^Decision"; done
