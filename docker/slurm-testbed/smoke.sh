#!/usr/bin/env bash
# Smoke scenario of the container testbed (issue 6), run from the host with `docker exec`
# through compose: as non-root users inside the cluster a CPU job and a GPU job complete, and
# with job_submit/pools loaded a GPU job without -p lands in a GPU pool. Exits non-zero at the
# first failed check, with the job's record. Called by `testbed-docker.sh test`.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export COMPOSE_PROJECT_NAME=${COMPOSE_PROJECT_NAME:-slurmbridge-testbed}
COMPOSE_FILE=${COMPOSE_FILE:-$HERE/docker-compose.yml}
JOB_TIMEOUT=${JOB_TIMEOUT:-90}
NODES=7
GPU_POOLS=(a100 a100-spot v100)
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

# 1. The cluster: every node idle, the pools as partitions, the projects in accounting.
idle=$(as root sinfo -h -N -o '%N %t' | sort -u | awk '$2 == "idle"' | wc -l)
[ "$idle" -eq $NODES ] || fail "$idle of $NODES nodes idle"
pass "all $NODES nodes idle (cpu-[1-2], a100-[1-2], v100-[1-2], a100-spot-1)"
parts=$(as root sinfo -h -o %R | sort | tr '\n' ' ')
[ "$parts" = "a100 a100-spot cpu v100 " ] || fail "partitions are '$parts', want a100 a100-spot cpu v100"
pass "pools as partitions: $parts"
assoc=$(as root sacctmgr -n -P show assoc where cluster=testbed format=account,user | grep '^proj-.*|.' | sort | tr '\n' ' ')
[ "$assoc" = "proj-a|alice proj-b|bob proj-c|carol " ] || fail "associations are '$assoc'"
pass "accounts proj-a/b/c with users alice/bob/carol"
[ "$(as alice id -u)" = 2001 ] || fail "alice is not uid 2001 on the login container"

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

# 5. quotad's borrow-and-reclaim round needs a quotad service in docker-compose.yml.
if grep -qx quotad <<<"$(compose config --services)"; then
	fail "a quotad service exists but this smoke test has no borrow-and-reclaim round for it yet"
fi
printf 'smoke: skip  quotad borrow-and-reclaim: no quotad service in the container testbed yet\n'

printf '\nsmoke: %d checks passed in %ds; compose up to all nodes idle: %ss\n' "${#CHECKED[@]}" $((SECONDS - t0)) "${UP_SECONDS:-?}"
