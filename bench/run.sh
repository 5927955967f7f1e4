#!/usr/bin/env bash
# Runs every benchmark of the project and writes one results file, bench/results/<time>.txt:
#   1. go test -bench over every package (routing decision, quota plan, elastic decision, ...),
#      -count 6 so benchstat can give medians and spread;
#   2. slurmctld's submit-path overhead of the pools plugin against no plugin and a lua plugin
#      (bench/plugin-overhead.sh), when the testbed is up and we are root;
#   3. the Alibaba trace replay, quick mode (bench/cmd/tracereplay: static quotas, slurmbridge and,
#      when elasticd is built, slurmbridge with elastic jobs, on the excerpt in bench/testdata),
#      with its CSVs and PNG plots in bench/results/<time>-replay/;
#   4. learned price/performance on a synthetic workload (bench/profile-demo.sh);
#   5. quotad's cycle at scale: 100k job rows, 2k pending jobs (bench/cmd/quotadcost);
#   6. lend and reclaim latency of quotas, 5 rounds (bench/quota-latency.sh);
#   7. the elastic training simulation (bench/cmd/elasticsim: static min, knee and max vs
#      elasticd's policy on the paper's throughput curve and three stated ones; no testbed);
#   8. elastic transition idle time of a real PyTorch job, in place and by restart (bench/cmd/elastictransition).
# 2-6 and 8 need root and a running testbed; gnuplot (Debian gnuplot-nox) draws the plots and is
# installed when missing.
# Usage: bench/run.sh            (make bench)
set -euo pipefail
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO_ROOT"
export PATH=$PATH:/usr/local/go/bin
mkdir -p bench/results
stamp=$(date -u +%Y%m%dT%H%M%SZ)
out=bench/results/$stamp.txt
testbed_ok() { [ "$(id -u)" -eq 0 ] && bash testbed/testbed.sh status >/dev/null 2>&1; }
# testbed_section TITLE COMMAND...: a section of the results that runs COMMAND when the testbed
# is up, and says it was skipped otherwise.
testbed_section() {
	echo
	echo "## $1"
	if testbed_ok; then
		"${@:2}"
	else
		echo "SKIPPED: needs root and a running testbed (sudo make testbed-up)"
	fi
}
profile_demo() {
	go build -o bin/poolctl ./poolctl/cmd/poolctl
	OUT="bench/results/$stamp-profile" bash bench/profile-demo.sh
}
quotad_cost() {
	go build -o bin/quotad ./quotad/cmd/quotad
	go run ./bench/cmd/quotadcost
}
if testbed_ok && ! command -v gnuplot >/dev/null; then
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends gnuplot-nox >/dev/null
fi
{
	echo "# slurmbridge benchmarks, $(date -u '+%F %T UTC')"
	echo "# machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo), $(uname -r)"
	echo "# commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
	echo
	echo "## go test -bench"
	go test -run '^$' -bench . -benchmem -count 6 ./...
	testbed_section "slurmctld submit overhead (bench/plugin-overhead.sh)" bash bench/plugin-overhead.sh
	testbed_section "trace replay, quick mode (go run ./bench/cmd/tracereplay -preset quick run: static, slurmbridge, elastic)" \
		go run ./bench/cmd/tracereplay -preset quick -out "bench/results/$stamp-replay" run
	testbed_section "learned price/performance (bench/profile-demo.sh)" profile_demo
	testbed_section "quotad cycle cost at scale (go run ./bench/cmd/quotadcost)" quotad_cost
	testbed_section "lend and reclaim latency (bench/quota-latency.sh)" bash bench/quota-latency.sh
	echo
	echo "## elastic training simulation (go run ./bench/cmd/elasticsim)"
	go run ./bench/cmd/elasticsim
	testbed_section "elastic transition idle time (go run ./bench/cmd/elastictransition -rounds 2 -models small,10m)" go run ./bench/cmd/elastictransition -rounds 2 -models small,10m
} 2>&1 | tee "$out"
echo "results in $out"
