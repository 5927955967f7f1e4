#!/usr/bin/env bash
# What Slurm (>= 24.11) does with a job submitted to several QOS (--qos=guar-proj-b,borrow) on the
# running testbed: prints what scontrol, squeue (-o and --json), sacct and assoc_mgr show at each
# step. Not a pass/fail test: the facts for bench/README.md ("Multi-QOS submission"). ~1.5 min.
#   1. bob runs his quota (4 a100 in guar-proj-b), alice 4: a100 full. bob submits X (--requeue)
#      and Y (--no-requeue), both --qos=guar-proj-b,borrow: how they pend.
#   2. alice's jobs end: X and Y start in borrow? What each tool shows.
#   3. past PreemptExemptTime alice submits 4: X requeued, Y killed? (slurmctld.log)
#   4. one of bob's guaranteed jobs ends: the requeued X starts again, in which QOS (first again)?
#   5. a borrower Z runs; slurmctld is restarted (kill -TERM, start): Z's QOS and guar-proj-b's
#      usage before and after.
#   6. equal QOS priorities (borrow = guar-proj-b), all GPUs idle, bob in quota: jobs with
#      --qos=borrow,guar-proj-b and --qos=guar-proj-b,borrow: which QOS each starts in.
# Usage (root, testbed up): bash bench/multiqos-probe.sh
set -uo pipefail
TESTBED_DIR=${TESTBED_DIR:-/tmp/slurmbridge-testbed}
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=/dev/null
. "$TESTBED_DIR/env"
[ "$(id -u)" -eq 0 ] || { echo "run as root" >&2; exit 1; }
EXEMPT=$(awk '/preemptExemptTime:/ {gsub(/s/, "", $2); print $2}' "$REPO_ROOT/slurm-conf/testbed/quotas.yaml")
CTLD_LOG=$TESTBED_DIR/log/slurmctld.log
TAG=probe-mqos-$$
# The projects' QOS as quotad names them (bridge/pools.QOSName), from the facts the testbed
# keeps (testbed-render shell: QOS_GUARANTEED and QOS_BORROW, by account).
# shellcheck source=/dev/null
. "$TESTBED_DIR/etc/facts.sh"
declare -p QOS_BORROW >/dev/null 2>&1 || { echo "$TESTBED_DIR/etc/facts.sh names no QOS: the testbed is from an older tree (make testbed-up)" >&2; exit 1; }
BORROW=${QOS_BORROW[proj-b]} GUAR_A=${QOS_GUARANTEED[proj-a]} GUAR_B=${QOS_GUARANTEED[proj-b]}
declare -A OLD_PRIO=()
for q in $GUAR_A $GUAR_B $BORROW; do OLD_PRIO[$q]=$(sacctmgr -nP show qos "$q" format=priority); done
setprio() { sacctmgr -i modify qos where name="$1" set priority="$2" >/dev/null; }
restore() {
	scancel --name="$TAG" 2>/dev/null
	for q in "${!OLD_PRIO[@]}"; do setprio "$q" "${OLD_PRIO[$q]}"; done
}
trap restore EXIT
setprio "$BORROW" 0
setprio "$GUAR_A" 10
setprio "$GUAR_B" 10

say() { printf '\n== %s\n' "$*"; }
submit() {
	local user=$1
	shift
	runuser -u "$user" -- sbatch --parsable --chdir=/tmp --output=/dev/null --job-name="$TAG" \
		-p a100 --gres=gpu:a100:1 "$@" --wrap 'sleep 900'
}
running_of() { squeue -h -u "$1" -n "$TAG" -t running | wc -l; }
wait_until() { # wait_until SECONDS COMMAND...
	local i
	for i in $(seq 1 $(($1 * 5))); do "${@:2}" && return 0; sleep 0.2; done
	echo "(timed out: ${*:2})"
	return 1
}
ge() { [ "$("$1" "$2")" -ge "$3" ]; }
show() { # show JOBID...: every view of the jobs
	local j
	for j in "$@"; do
		echo "-- job $j"
		scontrol show job "$j" | grep -oE '(JobState|Reason|QOS|Requeue|Restarts|Priority)=[^ ]*' | tr '\n' ' '
		echo
		echo "squeue -o '%q|%T|%r': $(squeue -h -j "$j" -o '%q|%T|%r')"
		echo "squeue --json: $(squeue --json -j "$j" 2>/dev/null | python3 -c 'import json,sys; d=json.load(sys.stdin); print([{k: j.get(k) for k in ("qos","job_state","state_reason","priority")} for j in d["jobs"]])')"
		echo "sacct -D -X qos/state: $(sacct -n -P -D -X -j "$j" -o jobid,qos,state | tr '\n' ' ')"
	done
}
usage_guar() { scontrol show assoc_mgr flags=qos qos=$GUAR_B | grep -oE 'GrpTRES=[^ ]*' | head -1; }

for _ in $(seq 1 60); do
	[ "$(sacctmgr -nP show assoc user=bob account=proj-b format=defaultqos | head -1)" = "$GUAR_B" ] && break
	sleep 1
done
echo "Slurm $(sinfo -V); QOS priority now: $(sacctmgr -nP show qos format=name,priority | tr '\n' ' ')"
echo "bob's association: $(sacctmgr -nP show assoc user=bob format=account,qos,defaultqos | tr '\n' ' ')"
killed0=$(grep -c "had to be killed" "$CTLD_LOG")

say "1. a100 full (bob 4 in quota, alice 4); X (--requeue) and Y (--no-requeue) with --qos=$GUAR_B,$BORROW"
for _ in 1 2 3 4; do submit bob --requeue >/dev/null; submit alice --requeue >/dev/null; done
wait_until 60 ge running_of bob 4
wait_until 60 ge running_of alice 4
ALICE=$(squeue -h -u alice -n "$TAG" -o %i | tr '\n' ' ')
X=$(submit bob --requeue --qos=$GUAR_B,$BORROW)
Y=$(submit bob --no-requeue --qos=$GUAR_B,$BORROW)
sleep 3
show "$X" "$Y"
echo "$GUAR_B usage: $(usage_guar)"

say "2. alice's jobs end"
# shellcheck disable=SC2086
scancel $ALICE
wait_until 20 bash -c "[ \"\$(squeue -h -j $X,$Y -t running | wc -l)\" -ge 2 ]"
show "$X" "$Y"
echo "$GUAR_B usage: $(usage_guar)"

say "3. past PreemptExemptTime (${EXEMPT}s) alice submits 4"
sleep $((EXEMPT + 1))
for _ in 1 2 3 4; do submit alice --requeue >/dev/null; done
wait_until 30 ge running_of alice 4
sleep 2
show "$X" "$Y"
echo "slurmctld.log 'had to be killed' since start: $(($(grep -c "had to be killed" "$CTLD_LOG") - killed0))"
grep -E "JobId=($X|$Y)\b" "$CTLD_LOG" | grep -iE "preempt|requeue|kill" | tail -n 6

say "4. one of bob's guaranteed jobs ends: where does the requeued X start?"
B1=$(squeue -h -u bob -n "$TAG" -t running -q "$GUAR_B" -o %i | head -1)
scancel "$B1"
wait_until 30 bash -c "[ \"\$(squeue -h -j $X -t running | wc -l)\" -ge 1 ]"
show "$X"
echo "$GUAR_B usage: $(usage_guar)"

say "5. a borrower Z runs, then slurmctld restarts"
A1=$(squeue -h -u alice -n "$TAG" -t running -o %i | head -1)
Z=$(submit bob --requeue --qos=$GUAR_B,$BORROW)
sleep 1
scancel "$A1"
wait_until 20 bash -c "[ \"\$(squeue -h -j $Z -t running | wc -l)\" -ge 1 ]"
show "$Z"
echo "$GUAR_B usage before restart: $(usage_guar); $BORROW: $(scontrol show assoc_mgr flags=qos qos=$BORROW | grep -oE 'GrpTRES=[^ ]*' | head -1)"
pid=$(tr -dc 0-9 <"$TESTBED_DIR/run/slurmctld.pid")
kill -TERM "$pid"
wait_until 30 bash -c "! kill -0 $pid 2>/dev/null"
/usr/sbin/slurmctld
wait_until 30 scontrol ping >/dev/null
sleep 2
show "$Z"
echo "$GUAR_B usage after restart: $(usage_guar); $BORROW: $(scontrol show assoc_mgr flags=qos qos=$BORROW | grep -oE 'GrpTRES=[^ ]*' | head -1)"
echo "bob's running jobs by QOS: $(squeue -h -u bob -n "$TAG" -t running -o %q | sort | uniq -c | tr '\n' ' ')"

say "6. equal QOS priorities ($BORROW 0, $GUAR_B 0); all idle; bob in quota"
scancel --name="$TAG"
wait_until 30 bash -c "[ -z \"\$(squeue -h -n $TAG)\" ]"
setprio "$GUAR_B" 0
sleep 1
E1=$(submit bob --requeue --qos=$BORROW,$GUAR_B)
E2=$(submit bob --requeue --qos=$GUAR_B,$BORROW)
wait_until 20 bash -c "[ \"\$(squeue -h -j $E1,$E2 -t running | wc -l)\" -ge 2 ]"
echo "E1 (--qos=$BORROW,$GUAR_B): $(squeue -h -j "$E1" -o '%q %T')"
echo "E2 (--qos=$GUAR_B,$BORROW): $(squeue -h -j "$E2" -o '%q %T')"
scancel --name="$TAG"
wait_until 30 bash -c "[ -z \"\$(squeue -h -n $TAG)\" ]"
setprio "$GUAR_B" 10
E3=$(submit bob --requeue --qos=$BORROW,$GUAR_B)
wait_until 20 bash -c "[ \"\$(squeue -h -j $E3 -t running | wc -l)\" -ge 1 ]"
echo "E3 (--qos=$BORROW,$GUAR_B, $GUAR_B priority 10): $(squeue -h -j "$E3" -o '%q %T')"
scancel --name="$TAG"
wait_until 30 bash -c "[ -z \"\$(squeue -h -n $TAG)\" ]"
echo "done"
