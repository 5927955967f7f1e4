#!/usr/bin/env bash
# make demo: slurmbridge working on the testbed, one capability after another.
#   1. pools: alice's CPU job and GPU job, submitted without -p, run in the pools the job_submit
#      plugin chose;
#   2. borrowing: bob runs one job more than his a100 guarantee, on an idle GPU quotad lends him;
#   3. reclaim: alice claims her guarantee, Slurm requeues bob's borrowed job (sacct: PREEMPTED),
#      and it runs again once her jobs end;
#   4. elastic: elasticd grows alice's synthetic elastic job (elasticd/examples) by a worker;
#   5. the cluster page: its address, and the same numbers as text for a terminal.
# Each step checks what it shows with squeue, sacct or slurmbridge's own CLIs and ends with one
# line starting with "✔" that says what it proved; when something did not happen the demo stops
# with "demo: FAILED" and why. Its jobs are cancelled however it ends, so it can run again at once.
#
# Root, with the testbed up with quotad and elasticd (make testbed-up). The checkout may be one
# the test users cannot enter (a 0700 home): they run only what testbed.sh publishes under
# $TESTBED_DIR/share and a copy of quotactl the demo makes. The quotas, users and pools are the
# testbed's (slurm-conf/testbed/).
#
# On a cluster installed from the packages (make site-demo runs it on the site cluster's login
# host), DEMO_SHARE names a directory every user can enter, holding elasticd/examples,
# SLURMBRIDGE_QUOTAD_URL the controller's quotad, and SLURMBRIDGE_BINDIR /usr/bin: the demo
# then uses what a user there has, Slurm's commands, quotactl and elasticd's status.
set -euo pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TESTBED_DIR=${TESTBED_DIR:-/tmp/slurmbridge-testbed}
BIN=${SLURMBRIDGE_BINDIR:-$REPO_ROOT/bin}
if [ -n "${DEMO_SHARE:-}" ]; then
	[ -n "${SLURMBRIDGE_QUOTAD_URL:-}" ] || { echo "demo: FAILED: DEMO_SHARE is set but not SLURMBRIDGE_QUOTAD_URL (quotad's address)" >&2; exit 1; }
	SHARE=$DEMO_SHARE
	SLURMBRIDGE_CLUSTER=${SLURMBRIDGE_CLUSTER:-$(scontrol show config | awk '$1 == "ClusterName" {print $3}')}
	WHERE="the cluster of $(hostname)"
	ON_TESTBED=0
else
	[ -f "$TESTBED_DIR/env" ] || { echo "demo: FAILED: no testbed in $TESTBED_DIR: run make testbed-up (or make demo)" >&2; exit 1; }
	# shellcheck source=/dev/null
	. "$TESTBED_DIR/env"
	SHARE=$TESTBED_DIR/share
	WHERE="testbed $TESTBED_DIR"
	ON_TESTBED=1
fi
# quotactl, as the users run it too, finds quotad here.
export SLURMBRIDGE_QUOTAD_URL
# The a100 pool is where bob borrows and alice reclaims; synthetic.sbatch's elastic pool too.
POOL=a100
TYPE=a100

T0=$SECONDS
STEP="checking the testbed"
WHY=""
FAILED=0
JOBS=()
TMP=$(mktemp -d)
# quotactl where the testbed's users can run it: the checkout may be closed to them.
USERBIN=$TMP/bin

say() { printf '%s\n' "$*"; }
# show [-u USER] COMMAND... prints the command as a user would type it, then runs it (as USER).
show() {
	local user=root
	[ "$1" = -u ] && { user=$2; shift 2; }
	local shown=("${1##*/}") arg
	for arg in "${@:2}"; do
		case $arg in *[[:space:]\$\'\"\|]*) shown+=("'$arg'") ;; *) shown+=("$arg") ;; esac
	done
	if [ "$user" = root ]; then
		printf '\n$ %s\n' "${shown[*]}"
		"$@"
	else
		printf '\n%s$ %s\n' "$user" "${shown[*]}"
		as "$user" "$@"
	fi
}
proved() { printf '\n✔ [%s] %s\n' "$STEP" "$*"; }
step() {
	STEP=$1
	printf '\n━━ %s (%ds) ━━ %s\n' "$STEP" $((SECONDS - T0)) "$2"
}
fail() {
	FAILED=1
	printf '\ndemo: FAILED in step "%s": %s\n' "$STEP" "$*" >&2
	if [ ${#JOBS[@]} -gt 0 ]; then
		printf 'the demo'"'"'s jobs now:\n' >&2
		squeue -j "$(IFS=,; echo "${JOBS[*]}")" -o '%.7i %.10P %.12j %.6u %.14q %.9T %r' >&2 || true
	fi
	exit 1
}

# as USER COMMAND... runs a command as a testbed user from a directory every user can enter.
as() {
	local user=$1
	shift
	(cd "$SHARE" && runuser -u "$user" -- "$@")
}

# submit VAR USER SBATCH-ARGS... submits a batch job as USER, sets VAR to its id and records it
# for the clean-up; what the job_submit plugin said goes to $TMP/sbatch.err.
submit() {
	local _var=$1 _user=$2 _id
	shift 2
	_id=$(as "$_user" sbatch --parsable --output=/dev/null "$@" 2>"$TMP/sbatch.err") ||
		fail "sbatch as $_user refused: $(cat "$TMP/sbatch.err")"
	_id=${_id%%;*}
	JOBS+=("$_id")
	printf -v "$_var" '%s' "$_id"
}

# wait_until SECONDS WHAT COMMAND... retries COMMAND until it succeeds; the demo fails when it
# has not after SECONDS, with what COMMAND last put in $WHY.
wait_until() {
	local secs=$1 what=$2 deadline
	shift 2
	deadline=$((SECONDS + secs))
	WHY=""
	until "$@"; do
		[ $SECONDS -lt $deadline ] || fail "$what: not within ${secs}s${WHY:+ ($WHY)}"
		sleep 0.5
	done
}

state() { squeue -h -j "$1" -t all -o %T 2>/dev/null || true; }
qos() { squeue -h -j "$1" -t all -o %q 2>/dev/null || true; }
is_state() { [ "$(state "$1")" = "$2" ]; }
# all_state STATE ID...: every job is in STATE.
all_state() {
	local want=$1 id
	shift
	for id in "$@"; do is_state "$id" "$want" || return 1; done
}
# acct_states ID: the job's states in sacct, one line per run (-D: every requeue's record too).
acct_states() { sacct -n -P -X -D -j "$1" -o State 2>/dev/null | sed 's/ .*//'; }
acct_field() { sacct -n -P -X -j "$1" -o "$2" 2>/dev/null | tail -n 1; }
acct_done() { [ "$(acct_field "$1" State)" = COMPLETED ] && [ -n "$(acct_field "$1" Partition)" ]; }

# quota_of ACCOUNT: the project's guarantee of $TYPE GPUs, from quotad's read-only view.
quota_of() {
	"$BIN/quotactl" list --via quotad -P | awk -F'|' -v a="$1" -v t="$TYPE" '$1 == a && $2 == t {print $3}'
}

# The testbed's users and their projects (bridge/testbed.Users, testbed.sh PROJECTS).
account_of() { sacctmgr -n -P show assoc where cluster="$SLURMBRIDGE_CLUSTER" user="$1" format=account | head -n 1; }

cleanup() {
	local rc=$? ids=() id
	trap - EXIT
	# An error the steps did not foresee (set -e) still ends the demo loudly.
	[ $rc -eq 0 ] || [ "$FAILED" = 1 ] || printf '\ndemo: FAILED in step "%s": exit status %d (see the error above)\n' "$STEP" $rc >&2
	for id in "${JOBS[@]}"; do
		ids+=("$id")
		# elasticd's workers of an elastic job are named after it.
		while read -r w; do [ -n "$w" ] && ids+=("$w"); done < <(squeue -h -n "elastic-worker-$id" -o %i 2>/dev/null || true)
	done
	if [ ${#ids[@]} -gt 0 ]; then
		scancel "${ids[@]}" 2>/dev/null || true
		local deadline=$((SECONDS + 30))
		while [ -n "$(squeue -h -j "$(IFS=,; echo "${ids[*]}")" -o %i 2>/dev/null)" ] && [ $SECONDS -lt $deadline ]; do
			sleep 0.5
		done
		[ -z "$(squeue -h -j "$(IFS=,; echo "${ids[*]}")" -o %i 2>/dev/null)" ] ||
			{ echo "demo: its jobs ${ids[*]} did not end within 30s of scancel" >&2; rc=1; }
	fi
	rm -rf "$TMP"
	[ $rc -eq 0 ] && printf '\nThe demo'"'"'s jobs are cancelled; the testbed is as it was (%ds in all).\n' $((SECONDS - T0))
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---- before the steps: the testbed, its daemons, and a pool the demo has to itself ----------
[ "$(id -u)" -eq 0 ] || fail "run as root (sudo make demo): the demo runs jobs as alice and bob"
for d in quotactl elasticd; do
	[ -x "$BIN/$d" ] || fail "no $BIN/$d: run make build (make demo does)"
done
# On the testbed a daemon that is not running is said so at once, with how to start it.
if [ "$ON_TESTBED" = 1 ]; then
	for d in quotad elasticd; do
		bash "$REPO_ROOT/testbed/$d.sh" status >/dev/null || fail "$d does not run on the testbed: make testbed-up starts it"
	done
fi
[ -d "$SHARE/elasticd/examples" ] || fail "no elasticd/examples in $SHARE, where the users submit the elastic example from"
# Both daemons answer before any job is submitted (make testbed-up starts them on the testbed).
elasticd_answers() { "$BIN/elasticd" status --json >/dev/null 2>"$TMP/elasticd.err" || { WHY=$(cat "$TMP/elasticd.err"); return 1; }; }
wait_until 20 "elasticd answering (elasticd status)" elasticd_answers
# A job of an interrupted demo (all of them are named demo-*, their elastic workers after them)
# would take the GPUs the steps count.
stale=$(squeue -h -o '%i %j' | awk '$2 ~ /^demo-/ {print $1}')
if [ -n "$stale" ]; then
	stale=$(echo $stale $(squeue -h -o '%i %j' | awk -v ids=" $(echo $stale) " '$2 ~ /^elastic-worker-/ && index(ids, " " substr($2, 16) " ") {print $1}'))
	say "cancelling jobs an interrupted demo left: $stale"
	# shellcheck disable=SC2086
	scancel $stale
	stale_gone() { [ -z "$(squeue -h -j "${stale// /,}" -o %i 2>/dev/null)" ]; }
	wait_until 30 "the jobs an interrupted demo left to end" stale_gone
fi
# Jobs just cancelled (a test's, say) take a few seconds to end; others the demo does not touch.
pool_idle() { [ -z "$(squeue -h -p "$POOL" -o %i)" ]; }
if ! pool_idle; then
	say "pool $POOL has jobs; the demo needs it idle: waiting up to 30s for them to end"
	squeue -p "$POOL" -o '%.7i %.6u %.12j %.9T'
	wait_until 30 "pool $POOL idle (cancel its jobs, or wait until they end, then run the demo again)" pool_idle
fi
chmod 0755 "$TMP"
install -d -m 0755 "$USERBIN"
install -m 0755 "$BIN/quotactl" "$USERBIN/quotactl"
ALICE_ACCT=$(account_of alice)
BOB_ACCT=$(account_of bob)
[ -n "$ALICE_ACCT" ] && [ -n "$BOB_ACCT" ] || fail "the testbed's users alice and bob have no Slurm account: run make testbed-up"
view_answers() { "$BIN/quotactl" list --via quotad -P >/dev/null 2>"$TMP/view.err" || { WHY=$(cat "$TMP/view.err"); return 1; }; }
wait_until 20 "quotad's read-only view answering (quotactl list --via quotad)" view_answers
ALICE_QUOTA=$(quota_of "$ALICE_ACCT")
BOB_QUOTA=$(quota_of "$BOB_ACCT")
[ -n "$ALICE_QUOTA" ] && [ -n "$BOB_QUOTA" ] || fail "quotad shows no $TYPE guarantee for $ALICE_ACCT or $BOB_ACCT (slurm-conf/testbed/quotas.yaml)"
POOL_GPUS=$(scontrol show partition "$POOL" -o | tr ' ,' '\n\n' | sed -n 's|^gres/gpu=||p' | head -n 1)
[ -n "$POOL_GPUS" ] || fail "scontrol shows no GPUs in partition $POOL"
# bob takes his guarantee and borrows one GPU more; alice's claim must then need that GPU back.
[ $((BOB_QUOTA + 1 + ALICE_QUOTA)) -gt "$POOL_GPUS" ] && [ $((BOB_QUOTA + 1)) -le "$POOL_GPUS" ] ||
	fail "pool $POOL has $POOL_GPUS GPUs: bob's $BOB_QUOTA + 1 and alice's $ALICE_QUOTA do not make a reclaim necessary"
say "slurmbridge demo on Slurm $(sinfo -V | awk '{print $2}'), $WHERE: alice ($ALICE_ACCT) and bob ($BOB_ACCT) each have $ALICE_QUOTA/$BOB_QUOTA $TYPE GPUs guaranteed; pool $POOL has $POOL_GPUS."

# ---- 1. pools ----------------------------------------------------------------------------------
step "1/5 pools" "alice submits a CPU job and a GPU job without choosing a partition"
submit cpu alice --job-name=demo-cpu --wrap 'hostname; sleep 1'
cpu_msg=$(cat "$TMP/sbatch.err")
submit gpu alice --job-name=demo-gpu --gres=gpu:$TYPE:2 --wrap 'echo "GPUs $CUDA_VISIBLE_DEVICES"; sleep 1'
gpu_msg=$(cat "$TMP/sbatch.err")
say "\$ sbatch --wrap ...                    -> job $cpu${cpu_msg:+; }$cpu_msg"
say "\$ sbatch --gres=gpu:$TYPE:2 --wrap ...   -> job $gpu${gpu_msg:+; }$gpu_msg"
both_done() { acct_done "$cpu" && acct_done "$gpu"; }
wait_until 60 "alice's jobs $cpu and $gpu completed in sacct" both_done
show sacct -X -j "$cpu,$gpu" -o JobID,JobName,User,Account,Partition,State,AllocTRES%60
cpu_pool=$(acct_field "$cpu" Partition)
gpu_pool=$(acct_field "$gpu" Partition)
gpu_tres=$(acct_field "$gpu" AllocTRES)
# The plugin names the pools it sent the GPU job to; Slurm ran it in one of them.
sent=$(printf '%s\n' "$gpu_msg" | sed -n 's/.*job sent to pools\{0,1\} \([^;]*\);.*/\1/p' | head -n 1)
[ -n "$sent" ] || fail "sbatch printed no slurmbridge routing message for the GPU job (is JobSubmitPlugins=pools on?): $gpu_msg"
[[ ",$sent," == *",$gpu_pool,"* ]] || fail "GPU job $gpu ran in $gpu_pool, not in a pool the plugin named ($sent)"
[[ ",$gpu_tres," == *",gres/gpu:$TYPE=2,"* ]] || fail "GPU job $gpu was allocated $gpu_tres, not 2 $TYPE GPUs"
[ "$(sinfo -h -p "$cpu_pool" -o %G | grep -c gpu)" -eq 0 ] || fail "CPU job $cpu ran in $cpu_pool, a pool with GPUs"
proved "CPU job $cpu ran in pool $cpu_pool, GPU job $gpu (2 $TYPE) in pool $gpu_pool of those the plugin chose ($sent); neither named a partition (sacct)"

# ---- 2. borrowing ------------------------------------------------------------------------------
step "2/5 borrowing" "bob submits $((BOB_QUOTA + 1)) one-GPU jobs to pool $POOL: his guarantee is $BOB_QUOTA"
bob=()
for _ in $(seq 1 $((BOB_QUOTA + 1))); do
	submit id bob --job-name=demo-bob -p "$POOL" --gres=gpu:$TYPE:1 --wrap 'sleep 600'
	bob+=("$id")
done
bob_all_running() { all_state RUNNING "${bob[@]}"; }
wait_until 60 "all $((BOB_QUOTA + 1)) of bob's jobs running (quotad lending him an idle GPU)" bob_all_running
show squeue -j "$(IFS=,; echo "${bob[*]}")" -o '%.7i %.6P %.9j %.5u %.9a %.14q %.8T %b'
borrower=""
for id in "${bob[@]}"; do
	case $(qos "$id") in
	borrow-*) [ -z "$borrower" ] || fail "bob has more than one borrowed job ($borrower, $id)"; borrower=$id ;;
	esac
done
[ -n "$borrower" ] || fail "all of bob's jobs run, but none in a borrow QOS"
in_quota=$(squeue -h -j "$(IFS=,; echo "${bob[*]}")" -t running -o %q | grep -vc '^borrow-' || true)
[ "$in_quota" -eq "$BOB_QUOTA" ] || fail "bob runs $in_quota jobs in his guarantee, want $BOB_QUOTA"
# bob asks why: quotad's read-only API answers his own jobs, his MUNGE credential says who he is.
show -u bob "$USERBIN/quotactl" explain "$borrower" | tee "$TMP/explain" || fail "bob's quotactl explain $borrower failed"
grep -Eq "job $borrower (is lent|runs borrowed)" "$TMP/explain" || fail "quotactl explain does not say bob's job $borrower is lent or runs borrowed"
proved "bob runs $BOB_QUOTA jobs in his guarantee and job $borrower on a GPU quotad lent him, in QOS $(qos "$borrower") (squeue), and quotactl tells him so"

# ---- 3. reclaim --------------------------------------------------------------------------------
step "3/5 reclaim" "alice claims her $ALICE_QUOTA guaranteed $TYPE GPUs; pool $POOL has $((POOL_GPUS - BOB_QUOTA - 1)) idle"
alice=()
for _ in $(seq 1 "$ALICE_QUOTA"); do
	submit id alice --job-name=demo-alice -p "$POOL" --gres=gpu:$TYPE:1 --wrap 'sleep 600'
	alice+=("$id")
done
say "Slurm requeues a borrowed job once it has run the borrow QOS's PreemptExemptTime (quotas.yaml); until then alice's last job waits."
alice_all_running() { all_state RUNNING "${alice[@]}"; }
wait_until 60 "alice's $ALICE_QUOTA jobs running (Slurm reclaiming bob's borrowed GPU)" alice_all_running
preempted() { acct_states "$borrower" | grep -qx PREEMPTED; }
wait_until 20 "sacct showing bob's job $borrower PREEMPTED" preempted
show sacct -X -D -j "$borrower" -o JobID,JobName,User,QOS,State,Start,End
for id in "${bob[@]}"; do
	[ "$id" = "$borrower" ] && continue
	acct_states "$id" | grep -qx PREEMPTED && fail "bob's job $id, in his guarantee, was preempted"
	is_state "$id" RUNNING || fail "bob's job $id, in his guarantee, is $(state "$id"), not RUNNING"
done
case $(state "$borrower") in PENDING | REQUEUED | REQUEUE_HOLD | REQUEUE_FED) ;; *) fail "bob's reclaimed job $borrower is $(state "$borrower"), not waiting to run again" ;; esac
say "alice's jobs end:"
show scancel "${alice[@]}"
# A requeued job starts again once Slurm schedules it, which takes from seconds to a minute on a
# loaded machine.
wait_until 90 "bob's requeued job $borrower running again" is_state "$borrower" RUNNING
ran_again() { [ "$(acct_states "$borrower" | tail -n 1)" = RUNNING ]; }
wait_until 20 "sacct showing bob's job $borrower RUNNING again after PREEMPTED" ran_again
show sacct -X -D -j "$borrower" -o JobID,JobName,User,QOS,State,Start,End
proved "alice's claim requeued bob's borrowed job $borrower (sacct: PREEMPTED), his $BOB_QUOTA guaranteed jobs kept running, and $borrower ran again once her jobs ended (sacct: RUNNING)"

# ---- 4. elastic --------------------------------------------------------------------------------
step "4/5 elastic" "alice submits elasticd/examples/synthetic.sbatch (--elastic=1:4): throughput 100 samples/s on 1 worker, 190 on 2"
# From $SHARE, so $SLURM_SUBMIT_DIR/elasticd/examples finds the trainer, for elasticd's workers too.
submit elastic alice --job-name=demo-elastic -p "$POOL" --gres=gpu:$TYPE:1 elasticd/examples/synthetic.sbatch
worker_running() { [ -n "$(squeue -h -n "elastic-worker-$elastic" -t running -o %i)" ]; }
wait_until 90 "elasticd growing alice's elastic job $elastic by a worker (a running job elastic-worker-$elastic)" worker_running
worker=$(squeue -h -n "elastic-worker-$elastic" -t running -o %i | head -n 1)
show squeue -j "$elastic,$worker" -o '%.7i %.6P %.20j %.5u %.9a %.8T %b'
# elasticd counts the worker once it has joined: its status says so a cycle later.
elastic_size() {
	"$BIN/elasticd" status --json | python3 -c '
import json, sys
for j in json.load(sys.stdin):
    if j["job_id"] == int(sys.argv[1]):
        print(sum(j["size"].values()))' "$elastic"
}
grown() { [ "$(elastic_size 2>/dev/null)" -ge 2 ] 2>/dev/null; }
wait_until 20 "elasticd status counting 2 workers for job $elastic" grown
show "$BIN/elasticd" status
[ "$(squeue -h -j "$worker" -o %u)" = alice ] || fail "worker $worker does not run as alice"
proved "elasticd grew alice's elastic job $elastic from 1 to 2 workers: worker job $worker runs beside it (squeue)"
scancel "$elastic" "$worker"
elastic_gone() { [ -z "$(squeue -h -j "$elastic,$worker" -o %i)" ]; }
wait_until 30 "alice's elastic job $elastic and its worker $worker ending after scancel" elastic_gone

# ---- 5. the cluster page ----------------------------------------------------------------------
step "5/5 cluster page" "what quotad serves, to a browser and to a terminal"
PAGE=$SLURMBRIDGE_QUOTAD_URL/
# The page answers, as a browser gets it (python3 is one of the testbed's packages).
page_serves() {
	python3 - "$PAGE" 2>/dev/null <<-'PY'
		import sys, urllib.request
		with urllib.request.urlopen(sys.argv[1], timeout=5) as r:
		    body = r.read().decode()
		sys.exit(0 if r.status == 200 and "<title>slurmbridge cluster" in body else 1)
	PY
}
wait_until 20 "quotad serving the cluster page at $PAGE" page_serves
# quotactl cluster renders the page's JSON (/api/v1/cluster) for a terminal. Its numbers must be
# squeue's: per pool, GPUs of running jobs; per project and type, GPUs in use in the guarantee
# and borrowed. squeue_gpus prints those lines from squeue, view_gpus from the JSON.
squeue_gpus() {
	squeue -h -t running -o '%P|%a|%q|%D|%b' | awk -F'|' '
		match($5, /gpu:[A-Za-z0-9_-]+:[0-9]+/) {
			split(substr($5, RSTART, RLENGTH), g, ":")
			n = $4 * g[3]
			pool[$1] += n
			k = $2 "|" g[2]
			if ($3 ~ /^borrow-/) b[k] += n; else u[k] += n
			seen[k] = 1
		}
		END {
			for (p in pool) print "pool " p ": " pool[p] " GPUs running"
			for (k in seen) { split(k, a, "|"); print a[1] ": " u[k] + 0 " " a[2] " in its guarantee, " b[k] + 0 " borrowed" }
		}' | sort
}
view_gpus() {
	"$BIN/quotactl" cluster --json | python3 -c '
import json, sys
c = json.load(sys.stdin)
if c["status"]["plan"] is None or c["status"]["plan"]["stale"]:
    sys.exit("no current plan")
for p in c["pools"]:
    if p["gpus"]["running"]:
        print("pool %s: %d GPUs running" % (p["partition"], p["gpus"]["running"]))
for p in c["projects"]:
    for g in p["gpus"]:
        if g["in_use"] + g["borrowed"]:
            print("%s: %d %s in its guarantee, %d borrowed" % (p["account"], g["in_use"], g["gpu_type"], g["borrowed"]))' | sort
}
view_agrees() {
	squeue_gpus >"$TMP/squeue" && view_gpus >"$TMP/view" 2>"$TMP/view.err" || { WHY=$(cat "$TMP/view.err"); return 1; }
	WHY="squeue: $(paste -sd';' "$TMP/squeue"); quotactl cluster: $(paste -sd';' "$TMP/view")"
	[ -s "$TMP/squeue" ] && cmp -s "$TMP/squeue" "$TMP/view"
}
# quotad plans every few seconds (its --interval): wait for a plan made after the elastic job ended.
wait_until 20 "the cluster page's numbers (quotactl cluster) matching squeue" view_agrees
say "Open the cluster page in a browser: $PAGE (its JSON: ${PAGE}api/v1/cluster). The same numbers for a terminal, as any user (here bob):"
show -u bob "$USERBIN/quotactl" cluster
proved "quotad serves the cluster page at $PAGE; its numbers, as text above, are squeue's: $(paste -sd';' "$TMP/view" | sed 's/;/; /g')"
