#!/usr/bin/env bash
# Runs every benchmark of the project and writes one results file, bench/results/<time>.txt:
#   1. go test -bench over every package (routing decision, quota plan, elastic decision, ...),
#      -count 6 so benchstat can give medians and spread;
#   2. slurmctld's submit-path overhead of the pools plugin against no plugin and a lua plugin
#      (bench/plugin-overhead.sh), when the testbed is up and we are root.
# Usage: bench/run.sh            (make bench)
set -euo pipefail
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO_ROOT"
export PATH=$PATH:/usr/local/go/bin
mkdir -p bench/results
out=bench/results/$(date -u +%Y%m%dT%H%M%SZ).txt
{
	echo "# slurmbridge benchmarks, $(date -u '+%F %T UTC')"
	echo "# machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo), $(uname -r)"
	echo "# commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
	echo
	echo "## go test -bench"
	go test -run '^$' -bench . -benchmem -count 6 ./...
	echo
	echo "## slurmctld submit overhead (bench/plugin-overhead.sh)"
	if [ "$(id -u)" -eq 0 ] && bash testbed/testbed.sh status >/dev/null 2>&1; then
		bash bench/plugin-overhead.sh
	else
		echo "SKIPPED: needs root and a running testbed (sudo make testbed-up)"
	fi
} 2>&1 | tee "$out"
echo "results in $out"
