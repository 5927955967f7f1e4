#!/usr/bin/env bash
# The packages behave like the dev build: installs dist/'s .debs (make deb) with dpkg, restarts
# the local testbed from the installed files (TESTBED_FROM=installed: plugins from Slurm's
# PluginDir, daemons from /usr/bin), proves that is what runs, runs the pools integration tests
# and quotad's borrow/reclaim tests against it, asks the installed `slurmbridge-doctor` and its
# alias `poolctl doctor` for a clean report, then brings the testbed down and purges the
# packages, checking nothing of them is left.
# Called by `make test-installed` (root). Honours TESTBED_DIR and the testbed's port variables.
#
# Like test-deb.sh it refuses to run when slurmbridge is already installed on this machine.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
export PATH=$PATH:/usr/local/go/bin
DIST=${DIST:-$REPO/dist}
PKGS=(slurmbridge-controller slurmbridge-node slurmbridge-client)
export TESTBED_DIR=${TESTBED_DIR:-/tmp/slurmbridge-testbed}
export TESTBED_FROM=installed SLURMBRIDGE_BINDIR=/usr/bin
FAILS=0
T0=$SECONDS
say() { printf 'test-installed: %s\n' "$*"; }
die() { printf 'test-installed: FAIL: %s\n' "$*" >&2; exit 1; }
fail() { printf 'test-installed: FAIL: %s\n' "$*" >&2; FAILS=$((FAILS + 1)); }

[ "$(id -u)" -eq 0 ] || die "run as root (dpkg, the testbed)"
DEBS=()
for p in "${PKGS[@]}"; do
	d=$(ls -t "$DIST/${p}_"*.deb 2>/dev/null | head -n1)
	[ -n "$d" ] || die "no $DIST/${p}_*.deb: run make deb"
	DEBS+=("$d")
	if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -qv 'not-installed'; then
		die "$p is installed on this machine already: not touching it"
	fi
done
# shellcheck source=packaging/slurm-packages.sh
. "$(dirname "${BASH_SOURCE[0]}")/slurm-packages.sh"
PLUGIN_DIR=$(slurm_plugin_dir)
# files PKG: what the package ships, as absolute paths.
files() { dpkg-deb --fsys-tarfile "$1" | tar -t | sed -n 's|^\./|/|p' | grep -v '/$'; }

# Whatever happens, the machine ends with the testbed down and without the packages.
cleanup() {
	bash testbed/testbed.sh down >/dev/null 2>&1 || true
	SLURMBRIDGE_FORCE_REMOVE=1 dpkg -P "${PKGS[@]}" >/dev/null 2>&1 || true
}
trap cleanup EXIT

# The testbed restarts onto the installed files: whatever ran from the tree stops first.
bash testbed/testbed.sh down
dpkg -i "${DEBS[@]}" >/tmp/test-installed-dpkg.log 2>&1 || { cat /tmp/test-installed-dpkg.log >&2; die "dpkg -i failed"; }
say "installed: $(for d in "${DEBS[@]}"; do basename "$d"; done | tr '\n' ' ')"
bash testbed/testbed.sh up
set -a
# shellcheck disable=SC1091
. "$TESTBED_DIR/env"
set +a

# --- what runs is what was installed -------------------------------------------------------
pidof_testbed() { tr -dc '0-9' <"$TESTBED_DIR/run/$1.pid"; }
# One job first: the pools plugin has routed it, so slurmctld has surely mapped it.
job=$(runuser -u alice -- sbatch --parsable -n1 -t 1 --chdir /tmp --wrap true) || die "sbatch as alice failed"
ctld=$(pidof_testbed slurmctld)
grep -q " $PLUGIN_DIR/job_submit_pools.so\$" "/proc/$ctld/maps" ||
	fail "slurmctld ($ctld) has not mapped $PLUGIN_DIR/job_submit_pools.so"
! grep -q "$TESTBED_DIR/plugins/job_submit_pools.so" "/proc/$ctld/maps" ||
	fail "slurmctld ($ctld) maps a testbed copy of the plugin, not the installed one"
say "slurmctld maps $PLUGIN_DIR/job_submit_pools.so (job $job routed to $(squeue -h -j "$job" -o %P 2>/dev/null || echo done))"
for d in quotad:quotad elasticd:elasticd elastic-agent:elasticd; do
	pid=$(pidof_testbed "${d%%:*}") || { fail "${d%%:*} not started"; continue; }
	exe=$(readlink "/proc/$pid/exe")
	[ "$exe" = "/usr/bin/${d#*:}" ] || fail "${d%%:*} runs $exe, not /usr/bin/${d#*:}"
done
say "quotad, elasticd and its agent run from /usr/bin"
grep -q "^required $PLUGIN_DIR/spank_elastic.so " "$TESTBED_DIR/etc/plugstack.conf" ||
	fail "plugstack.conf does not name the installed SPANK plugin: $(grep -v '^#' "$TESTBED_DIR/etc/plugstack.conf")"
# The installed SPANK plugin, loaded by sbatch, refuses a bad declaration with its message.
if out=$(runuser -u alice -- env SLURM_CONF="$SLURM_CONF" sbatch --chdir /tmp --elastic=4:2 -p a100 --gres=gpu:a100:1 --wrap true 2>&1); then
	fail "sbatch --elastic=4:2 was accepted: $out"
else
	grep -q 'elastic' <<<"$out" || fail "sbatch --elastic=4:2 refused without the plugin's message: $out"
	say "installed SPANK plugin refuses --elastic=4:2: $(head -n1 <<<"$out")"
fi

# --- the same behaviour as the dev build: the integration tests ------------------------------
# The submission burst (hundreds of jobs, minutes) is left to make test; the plugin it loads is
# byte for byte bin/'s (test-deb.sh checks).
go test -count=1 -p 1 -tags integration -timeout 15m ./cgo-plugins/job_submit_pools/... \
	-skip 'TestSubmissionBurstLosesNothing' || fail "pools integration tests on the installed plugin"
SLURMBRIDGE_TEST_BINDIR=/usr/bin go test -count=1 -tags integration -timeout 10m ./quotad/ \
	-run 'TestBorrowReclaimReturn|TestNoRequeueNeverLent|TestQuotactlSetLendLimitAndHistory' ||
	fail "quotad integration tests with /usr/bin/quotad and /usr/bin/quotactl"

# --- the installed doctor reports clean, and so does its alias poolctl doctor ----------------
doctor_flags=(--quotad-url "$SLURMBRIDGE_QUOTAD_URL/metrics" --elasticd-url "$SLURMBRIDGE_ELASTICD_URL/metrics"
	--db-password-file "$SLURMBRIDGE_DB_PASSWORD_FILE" --quotad-user root)
doctor_out=$(/usr/bin/slurmbridge-doctor --config "$TESTBED_DIR/etc/pools.yaml" "${doctor_flags[@]}" 2>&1) ||
	fail "slurmbridge-doctor exited $?"
printf '%s\n' "$doctor_out" | sed 's/^/  /'
[[ $doctor_out == *"doctor: no problems"* ]] || fail "doctor is not clean"
[[ $doctor_out == *"plugin      $PLUGIN_DIR/job_submit_pools.so built for Slurm"* ]] ||
	fail "doctor did not check the installed plugin $PLUGIN_DIR/job_submit_pools.so"
alias_out=$(/usr/bin/poolctl --config "$TESTBED_DIR/etc/pools.yaml" doctor "${doctor_flags[@]}" 2>&1) ||
	fail "poolctl doctor exited $?"
[[ $alias_out == *"doctor: no problems"* ]] || fail "poolctl doctor is not clean:
$alias_out"

# --- down, purge, nothing left --------------------------------------------------------------
bash testbed/testbed.sh down
# The testbed's slurm.conf (SLURM_CONF) still says JobSubmitPlugins=pools: the controller package
# refuses to go, as it would on a cluster whose slurmctld needs the plugin to start.
if dpkg -r slurmbridge-controller >/tmp/test-installed-dpkg.log 2>&1; then
	fail "slurmbridge-controller was removed while $SLURM_CONF has JobSubmitPlugins=pools"
else
	say "removal refused while $SLURM_CONF has JobSubmitPlugins=pools"
fi
# That slurmctld is down and its config is a throwaway: the documented override.
SLURMBRIDGE_FORCE_REMOVE=1 dpkg -P "${PKGS[@]}" >/tmp/test-installed-dpkg.log 2>&1 ||
	{ cat /tmp/test-installed-dpkg.log >&2; die "dpkg -P failed"; }
left=0
for d in "${DEBS[@]}"; do
	while read -r f; do
		if [ -e "$f" ] || [ -L "$f" ]; then fail "after purge: $f still there"; left=$((left + 1)); fi
	done < <(files "$d")
done
[ ! -e /etc/slurmbridge ] || fail "/etc/slurmbridge left after purge"
[ "$left" -eq 0 ] && say "purged: no file of the packages left"
trap - EXIT
[ "$FAILS" -eq 0 ] || die "$FAILS check(s) failed"
say "PASS in $((SECONDS - T0))s"
