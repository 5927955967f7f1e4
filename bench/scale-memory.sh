#!/usr/bin/env bash
# What the emulated cluster of a site's size costs this machine in memory, and from that the
# largest cluster it holds. Brings up the alibaba preset (make testbed-up PRESET=alibaba) at
# NODES nodes, Slurm alone (no quotad or elasticd), measures each slurmd and slurmctld (PSS,
# from /proc/PID/smaps_rollup: shared pages split between the processes that map them, so the
# sum is what they take together) and MemAvailable; then starts JOBS batch jobs (sleep, one
# CPU each, in the CPU pool) and measures what each running job adds: its slurmstepd and the
# job's own processes. Prints a table and the largest node count and running-job count that
# fit in what was available before, keeping RESERVE_MB for the rest (daemons, tests, replay).
#   bench/scale-memory.sh [NODES] [JOBS]     (defaults 200 and 200; root; TRACE_DIR as for make)
set -euo pipefail
NODES=${1:-200}
JOBS=${2:-200}
RESERVE_MB=${RESERVE_MB:-4096}
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
[ "$(id -u)" -eq 0 ] || { echo "scale-memory: run as root" >&2; exit 1; }
export TESTBED_DIR=${TESTBED_DIR:-/tmp/slurmbridge-alibaba}
TAG=bench-scale-memory-$$

mem_available_mb() { awk '$1 == "MemAvailable:" {print int($2 / 1024)}' /proc/meminfo; }
# pss_kb PID... sums the processes' PSS in kB (processes gone meanwhile count 0).
pss_kb() {
	local pid sum=0 v
	for pid in "$@"; do
		v=$(awk '$1 == "Pss:" {print $2}' "/proc/$pid/smaps_rollup" 2>/dev/null || true)
		sum=$((sum + ${v:-0}))
	done
	echo "$sum"
}
# job_pids: every slurmstepd and its descendants (the batch shell and what it runs).
job_pids() {
	ps -e -o pid=,ppid=,comm= | awk '
		{ parent[$1] = $2; name[$1] = $3 }
		END {
			for (p in name) {
				for (q = p; q in parent && q > 1; q = parent[q])
					if (name[q] == "slurmstepd") { print p; break }
			}
		}'
}

if [ -f "$TESTBED_DIR/env" ]; then
	echo "scale-memory: a testbed runs in $TESTBED_DIR: bring it down first (make testbed-down PRESET=alibaba)" >&2
	exit 1
fi
avail0=$(mem_available_mb)
t0=$SECONDS
# Whatever happens from here, the preset testbed comes down (a half-started one too).
trap 'scancel --name="$TAG" 2>/dev/null || true; make -C "$REPO_ROOT" --no-print-directory testbed-clean PRESET=alibaba >/dev/null 2>&1 || true' EXIT
TESTBED_DAEMONS="" make -C "$REPO_ROOT" --no-print-directory testbed-up PRESET=alibaba NODES="$NODES" >"/tmp/$TAG.up.log" 2>&1 ||
	{ tail -n 40 "/tmp/$TAG.up.log" >&2; exit 1; }
up_s=$((SECONDS - t0))
# shellcheck source=/dev/null
. "$TESTBED_DIR/env"
sleep 10 # the nodes' first registrations and pings settle
mapfile -t slurmd < <(pgrep -x slurmd)
[ "${#slurmd[@]}" -eq "$NODES" ] || { echo "scale-memory: $NODES nodes but ${#slurmd[@]} slurmd" >&2; exit 1; }
slurmd_kb=$(pss_kb "${slurmd[@]}")
ctld_kb=$(pss_kb "$(pgrep -x slurmctld)")
avail1=$(mem_available_mb)

row() { awk -v w="$1" -v kb="$2" -v n="$3" 'BEGIN {if (n) printf "%-40s %10.1f %12.2f\n", w, kb / 1024, kb / 1024 / n; else printf "%-40s %10.1f\n", w, kb / 1024}'; }
printf 'slurm %s, %d nodes of the alibaba preset up in %d s; MemAvailable %d MB before\n' \
	"$(sinfo -V | awk '{print $2}')" "$NODES" "$up_s" "$avail0"
printf '%-40s %10s %12s\n' "what" "PSS MB" "per unit MB"
row "slurmd x $NODES" "$slurmd_kb" "$NODES"
row "slurmctld ($NODES nodes, no jobs)" "$ctld_kb" 0
per_node_mb=$(awk -v a="$avail0" -v b="$avail1" -v n="$NODES" 'BEGIN {printf "%.2f", (a - b) / n}')
printf '%-40s %10s %12s\n' "MemAvailable drop: testbed up" "$((avail0 - avail1))" "$per_node_mb"

user=$(awk '/^ *- account:/ {print $3; exit}' "$TESTBED_DIR/etc/preset/facts.yaml")
# One array of JOBS tasks: each task a job of its own, with its own slurmstepd.
runuser -u "$user" -- sbatch --parsable --quiet --chdir=/tmp --output=/dev/null --job-name="$TAG" \
	--array="1-$JOBS" -p cpu -n 1 --mem=100 --wrap 'sleep 3600' >/dev/null
for _ in $(seq 1 300); do
	[ "$(squeue -h -n "$TAG" -t running | wc -l)" -ge "$JOBS" ] && break
	sleep 1
done
running=$(squeue -h -n "$TAG" -t running | wc -l)
[ "$running" -ge "$JOBS" ] || { echo "scale-memory: $running of $JOBS jobs running after 300 s" >&2; exit 1; }
sleep 5
mapfile -t jobp < <(job_pids)
jobs_kb=$(pss_kb "${jobp[@]}")
ctld_jobs_kb=$(pss_kb "$(pgrep -x slurmctld)")
avail2=$(mem_available_mb)

per_job_mb=$(awk -v a="$avail1" -v b="$avail2" -v n="$JOBS" 'BEGIN {printf "%.2f", (a - b) / n}')
row "running jobs x $JOBS (${#jobp[@]} processes)" "$jobs_kb" "$JOBS"
row "slurmctld's growth with the jobs" "$((ctld_jobs_kb - ctld_kb))" "$JOBS"
printf '%-40s %10s %12s\n' "MemAvailable drop: jobs running" "$((avail1 - avail2))" "$per_job_mb"
# The largest cluster at this size's cost per node (the MemAvailable drop, which includes
# slurmctld's share), from what was available less the reserve, with no job running: an upper
# bound, as every slurmd holds the whole node table and costs more in a larger cluster (run two
# sizes and fit, as bench/README.md does); and the running jobs that fit beside 1,523 nodes.
awk -v a="$avail0" -v r="$RESERVE_MB" -v n="$per_node_mb" -v j="$per_job_mb" 'BEGIN {
	printf "largest cluster here, at most: %d nodes idle (%d MB available less %d MB reserve, %.2f MB per node at this size)\n", (a - r) / n, a, r, n
	left = a - r - 1523 * n
	if (left > 0) printf "beside 1523 nodes: %d MB left, room for %d running jobs (%.2f MB each)\n", left, left / j, j
	else printf "1523 nodes need %d MB more than is available\n", -left
}'
