#!/usr/bin/env bash
# Lend latency with quotad's move (A) against Slurm's own multi-QOS submission (B, Slurm >= 24.11),
# on the running testbed (quotas of slurm-conf/testbed/quotas.yaml, quotad running), in
# alternating rounds (A then B, then B then A, ...). Batch jobs with --requeue only.
#
# Each variant of a round, on partition a100 (2 nodes x 4 a100):
#   1. bob runs his whole quota (4 one-a100 jobs in guar-proj-b), alice 4 one-a100 jobs in
#      guar-proj-a: all 8 GPUs busy.
#   2. bob submits 4 more one-a100 jobs, over quota:
#        A: in his default QOS (guar-proj-b); they pend QOSGrpGRES until quotad moves them to
#           proj-b's borrow QOS (scontrol update qos=borrow-proj-b), which it does only once
#           GPUs are idle.
#        B: with --qos=guar-proj-b,borrow-proj-b (Slurm tries each QOS, highest QOS priority
#           first);
#           quotad stays running (B_QUOTAD=running, the default) or is stopped for B
#           (B_QUOTAD=stopped; restarted for A).
#   3. after a random 1-5 s (a random phase against quotad's cycle), alice's 4 jobs are
#      cancelled: t0 = when scancel returns (the GPUs become idle).
#   4. lend = t0 until all 4 over-quota jobs run (also printed: until the first runs); their QOS
#      must then be borrow-proj-b.
#   5. B only (RECLAIM=1, the default): once the borrowers are past PreemptExemptTime, alice
#      submits 4 jobs; reclaim = until all 4 run. sacct must show every borrower's run ended
#      PREEMPTED or REQUEUED (never CANCELLED/FAILED), each borrower pending again afterwards, and
#      slurmctld.log must not gain "had to be killed".
#
# The guaranteed QOS must outrank borrow-proj-b in QOS priority (Slurm sorts a job's QOS list by
# it; with equal priorities the order is not defined): for the run, guar-proj-a and guar-proj-b
# get Priority=10 when they are not above it, and get their old value back at exit (quotad
# leaves QOS priority alone unless guaranteedPriority/borrowPriority are set).
#
# Usage (root, testbed up with quotad, inside a 24.11 or 26.05 release container):
#   bash bench/multiqos-latency.sh [ROUNDS]          (default 4)
#   B_QUOTAD=stopped RECLAIM=0 bash bench/multiqos-latency.sh 6
# e.g. from the host: testbed/container.sh 24.11 bash -c 'make testbed-up && bash bench/multiqos-latency.sh 4'
# Last line: medians and the ratio B/A of the median lend latencies.
set -euo pipefail
ROUNDS=${1:-4}
B_QUOTAD=${B_QUOTAD:-running}
RECLAIM=${RECLAIM:-1}
TESTBED_DIR=${TESTBED_DIR:-/tmp/slurmbridge-testbed}
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=/dev/null
. "$TESTBED_DIR/env"
[ "$(id -u)" -eq 0 ] || { echo "run as root" >&2; exit 1; }
case $B_QUOTAD in running | stopped) ;; *) echo "B_QUOTAD=$B_QUOTAD: want running or stopped" >&2; exit 2 ;; esac
quotad() { TESTBED_DIR=$TESTBED_DIR bash "$REPO_ROOT/testbed/quotad.sh" "$@"; }
quotad status >/dev/null 2>&1 || { echo "quotad is not running on the testbed (make build testbed-up)" >&2; exit 1; }
ver=$(sinfo -V | awk '{print $2}')
[ "$(printf '%s\n' 24.11 "$ver" | sort -V | head -1)" = 24.11 ] || { echo "Slurm $ver: multi-QOS submission needs 24.11 or later" >&2; exit 1; }
EXEMPT=$(awk '/preemptExemptTime:/ {gsub(/s/, "", $2); print $2}' "$REPO_ROOT/slurm-conf/testbed/quotas.yaml")
CTLD_LOG=$TESTBED_DIR/log/slurmctld.log
TAG=bench-mqos-$$
# The projects' QOS as quotad names them (bridge/pools.QOSName), from the facts the testbed
# keeps (testbed-render shell: QOS_GUARANTEED and QOS_BORROW, by account).
# shellcheck source=/dev/null
. "$TESTBED_DIR/etc/facts.sh"
declare -p QOS_BORROW >/dev/null 2>&1 || { echo "$TESTBED_DIR/etc/facts.sh names no QOS: the testbed is from an older tree (make testbed-up)" >&2; exit 1; }
BORROW=${QOS_BORROW[proj-b]} GUAR_A=${QOS_GUARANTEED[proj-a]} GUAR_B=${QOS_GUARANTEED[proj-b]}
# quotad gives the accounts their QOS on its first cycles after testbed-up: wait for it.
for _ in $(seq 1 60); do
	[ "$(sacctmgr -nP show assoc user=bob account=proj-b format=defaultqos | head -1)" = "$GUAR_B" ] && break
	sleep 1
done
echo "# bob's association: $(sacctmgr -nP show assoc user=bob account=proj-b format=qos,defaultqos | head -1)"

# QOS priorities: guaranteed above borrow for the run, restored at exit.
declare -A OLD_PRIO=()
prio_of() { sacctmgr -nP show qos "$1" format=priority; }
restore() {
	local n q
	for n in bob bobx alice; do scancel --name="$TAG-$n" 2>/dev/null || true; done
	for q in "${!OLD_PRIO[@]}"; do sacctmgr -i modify qos where name="$q" set priority="${OLD_PRIO[$q]}" >/dev/null || true; done
	quotad status >/dev/null 2>&1 || quotad start >/dev/null 2>&1 || true
}
trap restore EXIT
bp=$(prio_of "$BORROW")
for q in $GUAR_A $GUAR_B; do
	p=$(prio_of $q)
	if [ "$p" -le "$bp" ]; then
		OLD_PRIO[$q]=$p
		sacctmgr -i modify qos where name="$q" set priority=$((bp + 10)) >/dev/null
	fi
done
echo "# Slurm $ver; QOS priority: borrow $(prio_of "$BORROW"), $GUAR_A $(prio_of "$GUAR_A"), $GUAR_B $(prio_of "$GUAR_B"); B with quotad $B_QUOTAD; PreemptExemptTime ${EXEMPT}s"

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN {printf "%.2f", b - a}'; }
# submit USER NAME [SBATCH ARGS...]: one requeueable one-a100 batch job; prints its id.
submit() {
	local user=$1 name=$2
	shift 2
	runuser -u "$user" -- sbatch --parsable --requeue --chdir=/tmp --output=/dev/null \
		--job-name="$TAG-$name" -p a100 --gres=gpu:a100:1 "$@" --wrap 'sleep 900'
}
count() { squeue -h -n "$TAG-$1" -t "$2" | wc -l; }
# wait_count NAME STATE N [TIMEOUT_S]: until N jobs of NAME are in STATE.
wait_count() {
	local i n=$(($4 * 10))
	for i in $(seq 1 "$n"); do
		[ "$(count "$1" "$2")" -ge "$3" ] && return 0
		sleep 0.1
	done
	echo "timeout: $3 $2 $1 jobs wanted, $(count "$1" "$2") found" >&2
	squeue -n "$TAG-$1" -o '%i %q %T %r' >&2
	return 1
}
cleanup_jobs() {
	local i n
	for n in bob bobx alice; do scancel --name="$TAG-$n" 2>/dev/null || true; done
	for i in $(seq 1 150); do
		[ -z "$(squeue -h -n "$TAG-bob,$TAG-bobx,$TAG-alice" -t pending,running,completing,configuring,suspended,requeued)" ] && return 0
		sleep 0.2
	done
	echo "jobs still there after 30 s" >&2
}
median() { sort -n | awk '{v[NR] = $1} END {if (!NR) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

A_LEND="" A_FIRST="" B_LEND="" B_FIRST="" B_RECLAIM="" FAILS=0
killed0=$(grep -c "had to be killed" "$CTLD_LOG" || true)

# variant A|B ROUND
variant() {
	local v=$1 round=$2 i ids="" first="" lend t0 qos reclaim="-" states bad
	if [ "$v" = B ] && [ "$B_QUOTAD" = stopped ]; then quotad stop >/dev/null; fi
	if [ "$v" = A ]; then quotad status >/dev/null 2>&1 || quotad start >/dev/null; fi
	for i in 1 2 3 4; do submit bob bob >/dev/null; submit alice alice >/dev/null; done
	wait_count bob running 4 60
	wait_count alice running 4 60
	for i in 1 2 3 4; do
		if [ "$v" = A ]; then
			ids+="$(submit bob bobx) "
		else
			ids+="$(submit bob bobx --qos=$GUAR_B,$BORROW) "
		fi
	done
	sleep "$(awk -v s="$RANDOM" 'BEGIN {srand(s); printf "%.1f", 1 + 4 * rand()}')"
	[ "$(count bobx pending)" -eq 4 ] || { echo "round $round $v: over-quota jobs not all pending" >&2; squeue -n "$TAG-bobx" -o '%i %q %T %r' >&2; }
	scancel --name="$TAG-alice"
	t0=$(now)
	for i in $(seq 1 600); do
		n=$(count bobx running)
		[ -z "$first" ] && [ "$n" -ge 1 ] && first=$(since "$t0")
		[ "$n" -ge 4 ] && break
		sleep 0.1
	done
	lend=$(since "$t0")
	[ "$n" -ge 4 ] || { echo "round $round $v: only $n of 4 over-quota jobs ran after 60 s" >&2; FAILS=$((FAILS + 1)); lend=nan; }
	qos=$(squeue -h -n "$TAG-bobx" -t running -o %q | sort | uniq -c | awk '{printf "%s%s x%s", (NR > 1 ? "," : ""), $2, $1}')
	[ "$qos" = "$BORROW x4" ] || { echo "round $round $v: running over-quota jobs in QOS $qos, want $BORROW x4" >&2; FAILS=$((FAILS + 1)); }
	if [ "$v" = B ] && [ "$RECLAIM" = 1 ]; then
		# Past PreemptExemptTime since the last borrower started (+1 s margin).
		sleep "$(awk -v e="$EXEMPT" -v l="$lend" -v f="$first" 'BEGIN {d = e + 1 - (l - f); print (d > 0 ? d : 0)}')"
		t0=$(now)
		for i in 1 2 3 4; do submit alice alice >/dev/null; done
		wait_count alice running 4 60
		reclaim=$(since "$t0")
		wait_count bobx pending 4 30 || FAILS=$((FAILS + 1))
		sleep 1
		# Every run of the borrowers: PREEMPTED or REQUEUED only (the requeued job itself pends).
		states=$(sacct -n -P -X -D -j "$(tr -s ' ' , <<<"${ids% }")" -o jobid,state,qos 2>/dev/null | sed 's/ by [0-9]*//')
		bad=$(awk -F'|' '$2 != "PREEMPTED" && $2 != "REQUEUED" && $2 != "PENDING" && $2 != "RUNNING"' <<<"$states")
		preempted=$(awk -F'|' '$2 == "PREEMPTED" || $2 == "REQUEUED"' <<<"$states" | wc -l)
		if [ -n "$bad" ] || [ "$preempted" -lt 4 ]; then
			echo "round $round B: borrowers not (all) requeued: $(tr '\n' ' ' <<<"$states")" >&2
			FAILS=$((FAILS + 1))
		fi
		echo "# round $round B after reclaim: sacct runs $(awk -F'|' '{print $2"/"$3}' <<<"$states" | sort | uniq -c | awk '{printf "%s x%s ", $2, $1}'); squeue: $(squeue -h -n "$TAG-bobx" -o '%T/%q/%r' | sort | uniq -c | awk '{printf "%s x%s ", $2, $1}')"
		B_RECLAIM+="$reclaim "
	fi
	echo "$round $v $first $lend $reclaim"
	if [ "$v" = A ]; then A_LEND+="$lend " A_FIRST+="$first "; else B_LEND+="$lend " B_FIRST+="$first "; fi
	cleanup_jobs
	if [ "$v" = B ] && [ "$B_QUOTAD" = stopped ]; then quotad start >/dev/null; fi
	return 0
}

echo "round variant first_s lend_s reclaim_s"
for round in $(seq 1 "$ROUNDS"); do
	if [ $((round % 2)) -eq 1 ]; then order="A B"; else order="B A"; fi
	for v in $order; do variant "$v" "$round"; done
done
killed=$(( $(grep -c "had to be killed" "$CTLD_LOG" || true) - killed0 ))
echo "# slurmctld.log 'had to be killed' during the run: $killed; failed checks: $FAILS"
[ "$killed" -eq 0 ] || FAILS=$((FAILS + 1))
med() { tr ' ' '\n' <<<"$1" | grep -v '^$' | grep -v nan | median; }
ma=$(med "$A_LEND") mb=$(med "$B_LEND")
printf 'median over %d rounds: A (quotad moves) lend %.2f s (first %.2f s); B (--qos=%s,%s, quotad %s) lend %.2f s (first %.2f s), reclaim %s s; B/A %.3f\n' \
	"$ROUNDS" "$ma" "$(med "$A_FIRST")" "$GUAR_B" "$BORROW" "$B_QUOTAD" "$mb" "$(med "$B_FIRST")" "$(med "$B_RECLAIM")" "$(awk -v a="$ma" -v b="$mb" 'BEGIN {print b / a}')"
[ "$FAILS" -eq 0 ]
