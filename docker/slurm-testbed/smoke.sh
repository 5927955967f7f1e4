#!/usr/bin/env bash
# Smoke scenario of the container testbed, run from the host with `docker exec`
# through compose: as non-root users inside the cluster a CPU job and a GPU job complete, with
# job_submit/pools loaded a GPU job without -p lands in a GPU pool, and quotad lends idle a100s
# to bob and reclaims them for alice by requeue; elasticd and its node agents run with the least
# privilege they need, sbatch refuses an invalid --elastic, and elasticd grows the synthetic
# elastic example by a worker job. Exits non-zero at the first failed check, with the job's
# record. Called by `testbed-docker.sh test`.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export COMPOSE_PROJECT_NAME=${COMPOSE_PROJECT_NAME:?run it through testbed-docker.sh test, which names the project of the release}
COMPOSE_FILE=${COMPOSE_FILE:-$HERE/docker-compose.yml}
JOB_TIMEOUT=${JOB_TIMEOUT:-90}
CHECKED=()
t0=$SECONDS

compose() {
	if docker compose version >/dev/null 2>&1; then docker compose -f "$COMPOSE_FILE" "$@"; else docker-compose -f "$COMPOSE_FILE" "$@"; fi
}
# as USER CMD...: run CMD on the controller/login container as USER.
as() { local user=$1; shift; compose exec -T -u "$user" slurmctld "$@"; }

pass() { CHECKED+=("$*"); printf 'smoke: ok    %s\n' "$*"; }
fail() {
	printf 'smoke: FAIL  %s\n' "$*" >&2
	as root bash -c 'sinfo -N; squeue; sacct -a -X -S now-1hour -o JobID,JobName,User,Account,Partition,State,ExitCode,NodeList,AllocTRES%50' >&2 || true
	[ -z "${ELASTIC_PHASE:-}" ] || as root bash -c 'tail -n 30 "$TESTBED_DIR/log/elasticd.log"' >&2 || true
	exit 1
}

# submit USER SBATCH-ARGS...: prints the job id; sbatch's stderr (the plugin's note) to smoke.sbatch.
submit() {
	local user=$1 out
	shift
	out=$(as "$user" sbatch --parsable --chdir=/tmp "$@" 2>"$TMPDIR_SMOKE/sbatch.err") ||
		fail "sbatch as $user $* refused: $(cat "$TMPDIR_SMOKE/sbatch.err")"
	echo "${out%%;*}"
}

field() { cut -d'|' -f"$2" <<<"$1"; }

# record ID: the job's accounting record once it is COMPLETED (fails on any other end state).
# slurmdbd lags slurmctld, so the record is polled until it is complete.
record() {
	local id=$1 deadline=$((SECONDS + JOB_TIMEOUT)) rec state
	while :; do
		rec=$(as root sacct -X -n -P -j "$id" -o State,User,Account,Partition,NodeList,AllocTRES 2>/dev/null | head -n1 || true)
		state=${rec%%|*}
		case $state in
		# slurmdbd may write the end before the start's fields: wait for the whole record.
		COMPLETED) [ -n "$(field "$rec" 4)" ] && [ -n "$(field "$rec" 6)" ] && { echo "$rec"; return 0; } ;;
		FAILED | CANCELLED* | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | BOOT_FAIL | DEADLINE)
			as root scontrol show job "$id" >&2 || true
			fail "job $id ended $state: $rec" ;;
		esac
		[ $SECONDS -lt $deadline ] || { as root scontrol show job "$id" >&2 || true; fail "job $id not COMPLETED after ${JOB_TIMEOUT}s (state '${state:-none}')"; }
		sleep 1
	done
}

TMPDIR_SMOKE=$(mktemp -d)
trap 'rm -rf "$TMPDIR_SMOKE"' EXIT

# The testbed's facts as the running image holds them (slurm-conf/testbed/facts.yaml, printed
# by testbed-render through the entry point): CLUSTER, NODES, POOLS, GPU_POOLS, PROJECTS
# (account:user), FACT_CONTAINER_*, FACT_QUOTA_PREEMPT_EXEMPT_SECONDS and each project's QOS
# (QOS_GUARANTEED, QOS_BORROW by account, named by bridge/pools.QOSName).
facts=$(as root slurmbridge-entrypoint facts) || fail "cannot read the testbed's facts from the slurmctld container"
eval "$facts"
# bob's project's QOS, where quotad keeps his in-quota jobs and lends to him.
GUAR_B=${QOS_GUARANTEED[proj-b]} BORROW_B=${QOS_BORROW[proj-b]}
ACCOUNTS=()
for entry in "${PROJECTS[@]}"; do ACCOUNTS+=("${entry%%:*}"); done

# 1. The cluster: the release asked for, every node idle, the pools as partitions, the projects
# in accounting.
if [ -n "${SLURM_RELEASE:-}" ]; then
	version=$(as root scontrol --version) || fail "scontrol --version failed on the slurmctld container"
	[[ $version == "slurm ${SLURM_RELEASE}."* || $version == "slurm-wlm ${SLURM_RELEASE}."* ]] ||
		fail "the cluster runs '$version', not Slurm $SLURM_RELEASE"
	pass "Slurm $SLURM_RELEASE: $version"
fi
idle=$(as root sinfo -h -N -o '%N %t' | sort -u | awk '$2 == "idle"' | wc -l)
[ "$idle" -eq ${#NODES[@]} ] || fail "$idle of ${#NODES[@]} nodes idle"
pass "all ${#NODES[@]} nodes idle (${NODES[*]})"
parts=$(as root sinfo -h -o %R | sort | tr '\n' ' ')
want=$(printf '%s\n' "${POOLS[@]}" | sort | tr '\n' ' ')
[ "$parts" = "$want" ] || fail "partitions are '$parts', want ${want% }"
pass "pools as partitions: $parts"
assoc=$(as root sacctmgr -n -P show assoc where cluster="$CLUSTER" account="$(IFS=,; echo "${ACCOUNTS[*]}")" format=account,user | grep '|.' | sort | tr '\n' ' ')
want=$(printf '%s\n' "${PROJECTS[@]}" | tr : '|' | sort | tr '\n' ' ')
[ "$assoc" = "$want" ] || fail "associations are '$assoc', want '${want% }'"
pass "accounts with their users (account:user): ${PROJECTS[*]}"
# The projects' users get uids from firstUID on, in the projects' order.
first=${PROJECTS[0]#*:}
[ "$(as "$first" id -u)" = "$FACT_CONTAINER_FIRST_UID" ] || fail "$first is not uid $FACT_CONTAINER_FIRST_UID on the login container"

# 2. A CPU job as alice, no partition given: runs on a CPU node, accounted to proj-a.
id=$(submit alice --job-name=smoke-cpu --output=/home/alice/smoke-cpu-%j.out --wrap 'hostname; id -un')
rec=$(record "$id")
[ "$(field "$rec" 2)|$(field "$rec" 3)|$(field "$rec" 4)" = "alice|proj-a|cpu" ] ||
	fail "CPU job $id record '$rec', want alice|proj-a|cpu"
out=$(as alice cat "/home/alice/smoke-cpu-$id.out") || fail "no output of CPU job $id in alice's shared home"
[[ $out == cpu-[12]$'\n'alice ]] || fail "CPU job $id printed '$out', want a cpu node's name and alice"
pass "CPU job $id as alice COMPLETED on $(field "$rec" 5) (partition cpu, account proj-a)"

# 3. A GPU job as alice in pool a100: two fake GPUs allocated and exported to the job.
id=$(submit alice --job-name=smoke-gpu -p a100 --gres=gpu:a100:2 --output=/home/alice/smoke-gpu-%j.out \
	--wrap 'echo "$CUDA_VISIBLE_DEVICES"')
rec=$(record "$id")
[[ $(field "$rec" 4) == a100 && $(field "$rec" 5) == a100-[12] ]] || fail "GPU job $id record '$rec', want partition a100 on a100-1 or a100-2"
[[ $(field "$rec" 6) == *gres/gpu:a100=2* ]] || fail "GPU job $id AllocTRES '$(field "$rec" 6)' lacks gres/gpu:a100=2"
out=$(as alice cat "/home/alice/smoke-gpu-$id.out") || fail "no output of GPU job $id"
[[ $out =~ ^[0-9]+,[0-9]+$ ]] || fail "GPU job $id saw CUDA_VISIBLE_DEVICES='$out', want two devices"
pass "GPU job $id as alice COMPLETED on $(field "$rec" 5) with gres/gpu:a100=2, CUDA_VISIBLE_DEVICES=$out"

# 4. Pools plugin: a GPU job as bob without -p is routed into a GPU pool and runs there.
# Read whole, not piped into grep -q: an early close would fail the pipeline (pipefail).
config=$(as root scontrol show config)
if grep -q '^JobSubmitPlugins *= *pools' <<<"$config"; then
	id=$(submit bob --job-name=smoke-route --gres=gpu:a100:1 --wrap 'test "$SLURM_GPUS_ON_NODE" = 1')
	note=$(sed "s/^sbatch: //" "$TMPDIR_SMOKE/sbatch.err" | tr "\n" " ")
	rec=$(record "$id")
	part=$(field "$rec" 4)
	[[ " ${GPU_POOLS[*]} " == *" $part "* ]] || fail "GPU job $id without -p ran in '$part', not in a GPU pool (${GPU_POOLS[*]})"
	[ "$(field "$rec" 3)" = proj-b ] || fail "GPU job $id accounted to '$(field "$rec" 3)', want proj-b"
	pass "job_submit/pools: GPU job $id as bob without -p COMPLETED in pool $part on $(field "$rec" 5)${note:+ (sbatch: ${note% })}"
else
	fail "slurmctld runs without JobSubmitPlugins=pools: the image was built without bin/job_submit_pools.so"
fi

# 5. quotad: one borrow-and-reclaim round on pool a100 (8 GPUs; proj-a and proj-b 4 each in
# slurm-conf/testbed/quotas.yaml). bob fills it, 4 in quota and 4 borrowed; once the borrowers'
# PreemptExemptTime has passed, alice's 4 in-quota jobs reclaim them: exactly those 4 are
# PREEMPTED and requeued (PENDING again, not cancelled), bob's in-quota 4 keep running.
ROUND_IDS=()
cancel_round() { [ ${#ROUND_IDS[@]} -eq 0 ] || as root scancel "${ROUND_IDS[@]}" >/dev/null 2>&1 || true; }
trap 'cancel_round; rm -rf "$TMPDIR_SMOKE"' EXIT

# queue IDS...: "id|user|qos|state" per job.
queue() { as root squeue -h -t all -j "$(IFS=,; echo "$*")" -o '%i|%u|%q|%T'; }
# count_in ROWS IDS PATTERN: how many of IDS have a row matching "id|PATTERN".
count_in() {
	local rows=$1 ids=$2 pattern=$3 id n=0
	for id in $ids; do grep -qE "^$id\|$pattern\$" <<<"$rows" && n=$((n + 1)); done
	echo $n
}
# preempted IDS...: those of IDS with a PREEMPTED row in sacct (-D: every requeue's row).
preempted() {
	as root sacct -X -D -n -P -j "$(IFS=,; echo "$*")" -o JobID,State | awk -F'|' '$2 == "PREEMPTED" && !seen[$1]++ {print $1}'
}
# wait_until SECS WHAT CMD...: polls CMD every second; fails with WHAT after SECS.
wait_until() {
	local secs=$1 what=$2 deadline
	shift 2
	deadline=$((SECONDS + secs))
	until "$@"; do
		[ $SECONDS -lt $deadline ] || { [ -z "${ROUND_IDS[*]}" ] || queue "${ROUND_IDS[@]}" >&2 || true; fail "$what: not within ${secs}s"; }
		sleep 1
	done
}
submit_n() {
	local user=$1 n=$2 i
	for ((i = 0; i < n; i++)); do
		submit "$user" --job-name=smoke-quota -p a100 --gres=gpu:a100:1 --output=/dev/null --wrap 'sleep 600'
	done
}

grep -qx quotad <<<"$(compose config --services)" || fail "no quotad service in $COMPOSE_FILE"
qsync() {
	compose exec -T quotad slurmbridge-entrypoint health quotad >/dev/null 2>&1 &&
		[ "$(as root sacctmgr -n -P show assoc where cluster="$CLUSTER" account=proj-a,proj-b format=defaultqos | grep -cxF -e "${QOS_GUARANTEED[proj-a]}" -e "$GUAR_B")" -ge 4 ]
}
t=$SECONDS
wait_until 90 "quotad serving metrics and proj-a/proj-b associations on their guaranteed QOS (${QOS_GUARANTEED[proj-a]}, $GUAR_B)" qsync
quser=$(compose exec -T quotad ps -o user:20= -C quotad | sort -u | tr -d ' \r\n')
[ "$quser" = slurmbridge ] || fail "quotad runs as '$quser', want the unprivileged user slurmbridge"
pass "quotad up as user $quser, QOS synced (waited $((SECONDS - t))s)"

t=$SECONDS
read -r -a bob <<<"$(submit_n bob 8 | tr '\n' ' ')"
[ ${#bob[@]} -eq 8 ] || fail "submitted ${#bob[@]} of bob's 8 jobs"
ROUND_IDS=("${bob[@]}")
bob_borrowing() {
	rows=$(queue "${bob[@]}")
	[ "$(count_in "$rows" "${bob[*]}" "bob\|$GUAR_B\|RUNNING")" -eq 4 ] &&
		[ "$(count_in "$rows" "${bob[*]}" "bob\|$BORROW_B\|RUNNING")" -eq 4 ]
}
wait_until 30 "bob's 8 a100 jobs running, 4 in QOS $GUAR_B and 4 in QOS $BORROW_B" bob_borrowing
borrowed_at=$SECONDS
borrowers=() in_quota=()
for id in "${bob[@]}"; do
	if grep -q "^$id|bob|$BORROW_B|" <<<"$rows"; then borrowers+=("$id"); else in_quota+=("$id"); fi
done
pass "quotad lending: bob's 8 a100 jobs running $((borrowed_at - t))s after submission, 4 in quota (${in_quota[*]}), 4 borrowed in QOS $BORROW_B (${borrowers[*]})"

# The borrow QOS's PreemptExemptTime (the facts' quotas.preemptExemptTime, in quotas.yaml) from
# the borrowers' start: until then alice could not reclaim, so she submits after it.
EXEMPT=$FACT_QUOTA_PREEMPT_EXEMPT_SECONDS
# slurm_clock SECONDS: a time as sacctmgr prints it, [D-]HH:MM:SS.
slurm_clock() {
	[ "$1" -lt 86400 ] || printf '%d-' $(($1 / 86400))
	printf '%02d:%02d:%02d' $(($1 / 3600 % 24)) $(($1 / 60 % 60)) $(($1 % 60))
}
exempt=$(as root sacctmgr -n -P show qos "$BORROW_B" format=preemptexempttime)
[ "$exempt" = "$(slurm_clock "$EXEMPT")" ] || fail "QOS $BORROW_B has PreemptExemptTime '$exempt', want $(slurm_clock "$EXEMPT") (quotas.yaml)"
[ -z "$(preempted "${borrowers[@]}")" ] || fail "borrowers reclaimed before alice submitted: $(preempted "${borrowers[@]}" | tr '\n' ' ')"
sleep $((borrowed_at + EXEMPT + 1 - SECONDS > 0 ? borrowed_at + EXEMPT + 1 - SECONDS : 0))
t=$SECONDS
read -r -a alice <<<"$(submit_n alice 4 | tr '\n' ' ')"
[ ${#alice[@]} -eq 4 ] || fail "submitted ${#alice[@]} of alice's 4 jobs"
ROUND_IDS+=("${alice[@]}")
alice_running() { [ "$(count_in "$(queue "${alice[@]}")" "${alice[*]}" 'alice\|[^|]*\|RUNNING')" -eq 4 ]; }
wait_until 30 "alice's 4 in-quota a100 jobs running" alice_running
pass "quotad reclaim: alice's 4 a100 jobs (${alice[*]}) running $((SECONDS - t))s after submission (borrowers $((t - borrowed_at))s old, PreemptExemptTime ${EXEMPT}s)"

t=$SECONDS
four_preempted() { [ "$(preempted "${borrowers[@]}" | wc -l)" -eq 4 ]; }
wait_until 30 "sacct -D -X showing bob's 4 borrowed jobs PREEMPTED" four_preempted
requeued() { [ "$(count_in "$(queue "${borrowers[@]}")" "${borrowers[*]}" 'bob\|[^|]*\|PENDING')" -eq 4 ]; }
wait_until 30 "bob's 4 preempted jobs PENDING again (requeued, not cancelled)" requeued
[ -z "$(preempted "${in_quota[@]}")" ] || fail "bob's in-quota jobs preempted: $(preempted "${in_quota[@]}" | tr '\n' ' ')"
rows=$(queue "${in_quota[@]}")
[ "$(count_in "$rows" "${in_quota[*]}" "bob\|$GUAR_B\|RUNNING")" -eq 4 ] || fail "bob's in-quota jobs not all running in $GUAR_B: $rows"
pass "requeue: bob's 4 borrowers PREEMPTED in sacct and PENDING again ($((SECONDS - t))s), his 4 in-quota jobs still RUNNING, never preempted"
cancel_round
ROUND_IDS=()
pass "round's ${#bob[@]} + ${#alice[@]} jobs cancelled"

# 6. elasticd. The daemon: root (it runs sbatch as each job's owner) but bounded to the six
# capabilities of packaging/systemd/elasticd.service's CapabilityBoundingSet, and no new
# privileges; the agents: one per node, as the unprivileged user, saying once that there is no
# NVML here.
ELASTIC_PHASE=1
grep -qx elasticd <<<"$(compose config --services)" || fail "no elasticd service in $COMPOSE_FILE"
t=$SECONDS
elasticd_up() { compose exec -T elasticd slurmbridge-entrypoint health elasticd >/dev/null 2>&1; }
wait_until 60 "elasticd answering elasticd status" elasticd_up
euser=$(compose exec -T elasticd ps -o user:20= -C elasticd | sort -u | tr -d ' \r\n')
[ "$euser" = root ] || fail "elasticd runs as '$euser', want root (sbatch as each job's owner)"
# CHOWN, DAC_OVERRIDE, DAC_READ_SEARCH, FOWNER, SETGID, SETUID = bits 0-3, 6, 7.
caps=$(compose exec -T elasticd bash -c 'grep -E "^(CapBnd|NoNewPrivs):" /proc/$(pgrep -xo elasticd)/status' | tr -s ' \t\r' ' ' | tr '\n' ' ')
[ "$caps" = "CapBnd: 00000000000000cf NoNewPrivs: 1 " ] ||
	fail "elasticd's privileges are '$caps', want CapBnd 00000000000000cf (chown, dac_override, dac_read_search, fowner, setgid, setuid) and NoNewPrivs 1"
pass "elasticd up as root with capability bounding set 0xcf and no_new_privs ($((SECONDS - t))s)"
for node in "${NODES[@]}"; do
	auser=$(compose exec -T "$node" ps -o user:20=,args= -C elasticd | awk '$3 == "agent" {print $1}' | sort -u | tr -d '\r\n')
	[ "$auser" = slurmbridge ] || fail "elasticd agent on $node runs as '${auser:-nobody}', want slurmbridge"
	said=$(as root bash -c "grep -c 'no GPU signals from this node' \"\$TESTBED_DIR/log/elastic-agent-$node.log\"" || true)
	[ "$said" = 1 ] || fail "elasticd agent on $node said 'no GPU signals' $said times, want once"
done
pass "elasticd agent on each of the ${#NODES[@]} nodes as user slurmbridge; each said once it has no NVML"

# An invalid declaration fails sbatch, as a user, before anything is submitted.
before=$(as root squeue -h -u alice | wc -l)
if out=$(as alice sbatch --parsable --elastic=4:2 --wrap true 2>"$TMPDIR_SMOKE/sbatch.err"); then
	fail "sbatch --elastic=4:2 as alice was accepted (job $out)"
fi
msg=$(tr '\n' ' ' <"$TMPDIR_SMOKE/sbatch.err")
[[ $msg == *"invalid --elastic: MAX 2 is below MIN 4"* ]] || fail "sbatch --elastic=4:2 refused with '$msg', want 'invalid --elastic: MAX 2 is below MIN 4'"
[ -z "$out" ] && [ "$(as root squeue -h -u alice | wc -l)" -eq "$before" ] || fail "sbatch --elastic=4:2 queued a job anyway"
pass "sbatch --elastic=4:2 as alice refused: ${msg% }"

# The synthetic elastic example (elasticd/examples/synthetic.sbatch, --elastic=1:4:1 in pool
# a100, samples/s 100, 190, 200, 205 at 1-4 workers), submitted as alice from the directory it
# expects (SLURM_SUBMIT_DIR is sbatch's working directory, not --chdir): elasticd measures size 1, then grows it by a worker job, which runs the same script
# and joins: the hosts file lists both and the trainer's own reports say world size 2.
EXAMPLES=/usr/local/share/slurmbridge
t=$SECONDS
main=$(compose exec -T -u alice -w $EXAMPLES slurmctld sbatch --parsable -p a100 --gres=gpu:a100:1 \
	--output=/home/alice/smoke-elastic-%j.out elasticd/examples/synthetic.sbatch 2>"$TMPDIR_SMOKE/sbatch.err") ||
	fail "sbatch of the synthetic elastic job refused: $(cat "$TMPDIR_SMOKE/sbatch.err")"
main=${main%%;*}
ROUND_IDS=("$main")
jobdir=/srv/slurmbridge/elastic/jobs/$main
declared() { [ "$(as root stat -c %U:%a "$jobdir/declaration.json" "$jobdir/reports" 2>/dev/null | tr '\n' ' ')" = "root:644 alice:700 " ]; }
wait_until 60 "the SPANK plugin recording job $main's declaration (root 0644) and reports directory (alice 0700) in the elastic volume" declared
pass "elastic job $main as alice: declaration recorded by the SPANK plugin in the shared volume ($((SECONDS - t))s)"
worker=
worker_running() {
	local state
	state=$(as root squeue -h -j "$main" -o %T 2>/dev/null || true)
	[[ $state == RUNNING || $state == PENDING ]] ||
		fail "elastic job $main is '${state:-gone}' before any worker joined; its output: $(as alice cat "/home/alice/smoke-elastic-$main.out" 2>&1 | tr '\n' ' ')"
	worker=$(as root squeue -h -u alice -t RUNNING -n "elastic-worker-$main" -o %i | head -n1 | tr -d '\r')
	[ -n "$worker" ]
}
wait_until 120 "elasticd growing job $main: a RUNNING worker job elastic-worker-$main" worker_running
grew_at=$SECONDS
wnode=$(as root squeue -h -j "$worker" -o '%P %N')
ROUND_IDS+=("$worker")
pass "elasticd grew job $main: worker job $worker RUNNING ($wnode) $((grew_at - t))s after submission"
# world_size of the last report of each worker, written by the trainer from the hosts file.
world() { as alice bash -c "tail -n1 $jobdir/reports/$1.jsonl 2>/dev/null" | grep -oE '"world_size": *[0-9]+' | grep -oE '[0-9]+$' || true; }
both_see_two() {
	[ "$(as root cat "$jobdir/hosts" 2>/dev/null | grep -c .)" -ge 2 ] && [ "$(world "$main")" = 2 ] && [ "$(world "$worker")" = 2 ]
}
wait_until 60 "job $main's hosts file listing 2 workers and both trainers reporting world size 2" both_see_two
hosts=$(as root cat "$jobdir/hosts" | tr '\n' ' ')
pass "world size 2: hosts file '${hosts% }', main $main and worker $worker both report world_size 2 ($((SECONDS - grew_at))s after the worker started)"
status=$(compose exec -T elasticd elasticd status --elasticd "http://127.0.0.1:$FACT_CONTAINER_ELASTICD_PORT" \
	--munge-socket /srv/slurmbridge/run/munge/munge.socket | tr -d '\r')
grep -q "^job $main  user alice" <<<"$status" || fail "elasticd status does not list job $main: $status"
printf '%s\n' "$status" | sed 's/^/smoke:       /'

# The main job ends: elasticd cancels its workers and removes its directory.
t=$SECONDS
as root scancel "$main"
cleaned() {
	[ -z "$(as root squeue -h -j "$worker" -t RUNNING,PENDING,COMPLETING -o %i 2>/dev/null)" ] &&
		! as root test -e "$jobdir"
}
wait_until 60 "elasticd cancelling worker $worker and removing $jobdir after job $main ended" cleaned
ROUND_IDS=()
pass "job $main cancelled: elasticd cancelled worker $worker and removed its state directory ($((SECONDS - t))s)"
ELASTIC_PHASE=

printf '\nsmoke: %d checks passed in %ds; compose up to all nodes idle: %ss\n' "${#CHECKED[@]}" $((SECONDS - t0)) "${UP_SECONDS:-?}"
