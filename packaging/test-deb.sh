#!/usr/bin/env bash
# Checks the packages of dist/ (make deb): metadata, then an install, remove and purge with
# dpkg into a scratch root (dpkg --root), then the same on this machine for real, checking at
# each step that every file arrives and goes. Called by `make test-deb` (root).
#
#   TEST_DEB_SYSTEM=0   skip the real install (scratch root only)
#
# The real round trip refuses to run when slurmbridge is already installed or when any file of
# the packages already exists: it must leave the machine exactly as it found it.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DIST=${DIST:-$REPO/dist}
PKGS=(slurmbridge-controller slurmbridge-node slurmbridge-client)
FAILS=0
say() { printf 'test-deb: %s\n' "$*"; }
die() { printf 'test-deb: FAIL: %s\n' "$*" >&2; exit 1; }
fail() { printf 'test-deb: FAIL: %s\n' "$*" >&2; FAILS=$((FAILS + 1)); }

[ "$(id -u)" -eq 0 ] || die "run as root (dpkg)"
declare -A DEB
for p in "${PKGS[@]}"; do
	DEB[$p]=$(ls -t "$DIST/${p}_"*.deb 2>/dev/null | head -n1)
	[ -n "${DEB[$p]}" ] || die "no $DIST/${p}_*.deb: run make deb"
done
# shellcheck source=packaging/slurm-packages.sh
. "$(dirname "${BASH_SOURCE[0]}")/slurm-packages.sh"
SLURM_VERSION=$(dpkg-query -W -f='${Version}' "$SLURM_PLUGINS_PKG")
PLUGIN_DIR=$(slurm_plugin_dir)
WORK=$(mktemp -d)
cleanup() { rm -rf "$WORK"; }
trap cleanup EXIT

# files PKG: the regular files and links the package ships, as absolute paths.
files() { dpkg-deb --fsys-tarfile "${DEB[$1]}" | tar -t | sed -n 's|^\./|/|p' | grep -v '/$'; }

# --- metadata ---------------------------------------------------------------------------
check_metadata() {
	local p=$1 depends version
	depends=$(dpkg-deb -f "${DEB[$p]}" Depends)
	version=$(dpkg-deb -f "${DEB[$p]}" Version)
	if [ "$p" = slurmbridge-client ]; then
		# quotactl needs no Slurm library; it takes its file over from an older controller package.
		[[ $depends != *slurm-* ]] || fail "$p Depends '$depends': quotactl needs no Slurm package"
		for f in Replaces Breaks; do
			[ "$(dpkg-deb -f "${DEB[$p]}" $f)" = "slurmbridge-controller (<< $version)" ] ||
				fail "$p $f '$(dpkg-deb -f "${DEB[$p]}" $f)', want slurmbridge-controller (<< $version)"
		done
	else
		[[ $depends == *"$SLURM_PLUGINS_PKG (= $SLURM_VERSION)"* ]] || fail "$p Depends '$depends' lacks $SLURM_PLUGINS_PKG (= $SLURM_VERSION)"
		[[ $depends == *"slurmbridge-client (= $version)"* ]] || fail "$p Depends '$depends' lacks slurmbridge-client (= $version)"
	fi
	[[ $p != slurmbridge-controller || $depends == *"$SLURM_CTLD_PKG (= $SLURM_VERSION)"* ]] || fail "$p Depends '$depends' lacks $SLURM_CTLD_PKG (= $SLURM_VERSION)"
	local want
	case $p in
	slurmbridge-client) want="/usr/bin/quotactl /usr/share/doc/$p/copyright" ;;
	slurmbridge-controller) want="/usr/bin/poolctl /usr/bin/slurmbridge-doctor /usr/bin/quotad $PLUGIN_DIR/job_submit_pools.so /lib/systemd/system/quotad.service /etc/slurmbridge/quotad.env /usr/share/doc/$p/operations.md /usr/share/doc/$p/examples/slurm.conf.slurmbridge /usr/share/doc/$p/examples/pools.yaml /usr/share/doc/$p/examples/quotas.yaml" ;;
	slurmbridge-node) want="/usr/bin/elasticd $PLUGIN_DIR/spank_elastic.so /lib/systemd/system/elasticd.service /lib/systemd/system/elasticd-agent.service /etc/slurmbridge/elasticd.env /etc/slurmbridge/elasticd-agent.env /usr/share/doc/$p/examples/plugstack.conf /usr/share/doc/$p/python/slurmbridge_elastic/__init__.py /usr/share/doc/$p/python/slurmbridge_elastic/torch.py /usr/share/doc/$p/examples/elastic_launch.py /usr/share/doc/$p/python/pyproject.toml" ;;
	esac
	local list f
	list=$(files "$p")
	for f in $want; do
		grep -qx "$f" <<<"$list" || fail "$p lacks $f"
	done
	# Units carry the installed paths, never a placeholder.
	if [ "$p" != slurmbridge-client ] && grep -q '@[A-Z]*@' < <(dpkg-deb --fsys-tarfile "${DEB[$p]}" | tar -xO --wildcards './lib/systemd/system/*'); then
		fail "$p: a unit has an unfilled placeholder"
	fi
	say "$p: $(grep -c . <<<"$list") files, Depends: $depends"
}

# plugin_identical PKG NAME: the packaged plugin is bin/NAME byte for byte (tested = shipped).
plugin_identical() {
	local x=$WORK/x-$1
	mkdir -p "$x"
	dpkg-deb -x "${DEB[$1]}" "$x"
	cmp -s "$x$PLUGIN_DIR/$2" "$REPO/bin/$2" || fail "$1: $2 differs from bin/$2"
}

# --- install, remove, purge into ROOT (prefix "" is this machine) ---------------------------
# present ROOT PKG... checks every file of the packages is in ROOT.
present() {
	local root=$1 p f n=0
	shift
	for p in "$@"; do
		while read -r f; do
			[ -e "$root$f" ] || fail "after install: $root$f missing"
			n=$((n + 1))
		done < <(files "$p")
	done
	say "  installed: all $n files present"
}

# gone ROOT KEEP PKG... checks no file of the packages is left in ROOT except conffiles when KEEP=conffiles.
gone() {
	local root=$1 keep=$2 p f n=0
	shift 2
	for p in "$@"; do
		while read -r f; do
			if [ -e "$root$f" ] || [ -L "$root$f" ]; then
				if [ "$keep" = conffiles ] && [[ $f == /etc/* ]]; then continue; fi
				fail "after $keep: $root$f still there"
			fi
			n=$((n + 1))
		done < <(files "$p")
	done
	if [ "$keep" = conffiles ]; then say "  remove: $n files gone, conffiles kept"; else say "  purge: $n files gone"; fi
}

scratch_root() {
	local R=$WORK/root
	mkdir -p "$R/var/lib/dpkg/info" "$R/var/lib/dpkg/updates" "$R/etc/slurm"
	: >"$R/var/lib/dpkg/status"
	# Scripts run here with DPKG_ROOT=$R (no chroot): they must touch nothing outside it.
	local D=(dpkg --root="$R" --log=/dev/null --force-script-chrootless --force-depends --force-not-root)
	say "scratch root $R"
	"${D[@]}" -i "${DEB[@]}" >"$WORK/dpkg.log" 2>&1 || { cat "$WORK/dpkg.log" >&2; die "dpkg --root -i failed"; }
	present "$R" "${PKGS[@]}"
	grep -q "installed, nothing enabled" "$WORK/dpkg.log" || fail "postinst did not say what to do next"

	# A controller still named in slurm.conf must not lose its plugin.
	local line
	for line in "JobSubmitPlugins=pools" "JobSubmitPlugins = lua,pools # routing"; do
		echo "$line" >"$R/etc/slurm/slurm.conf"
		if "${D[@]}" -r slurmbridge-controller >"$WORK/dpkg.log" 2>&1; then
			fail "removal went through while slurm.conf has $line"
		else
			grep -q "still has JobSubmitPlugins=pools" "$WORK/dpkg.log" || fail "refusal does not say why: $(cat "$WORK/dpkg.log")"
			say "  refused removal while slurm.conf has $line"
		fi
	done
	[ -f "$R$PLUGIN_DIR/job_submit_pools.so" ] || fail "refused removal still removed the plugin"
	echo "required spank_elastic.so dir=/var/spool/slurmbridge/elastic" >"$R/etc/slurm/plugstack.conf"
	if "${D[@]}" -r slurmbridge-node >"$WORK/dpkg.log" 2>&1; then
		fail "removal went through while plugstack.conf requires spank_elastic.so"
	else
		say "  refused removal while plugstack.conf requires the SPANK plugin"
	fi
	echo "#JobSubmitPlugins=pools" >"$R/etc/slurm/slurm.conf"
	: >"$R/etc/slurm/plugstack.conf"
	echo secret >"$R/etc/slurmbridge/db-password"

	"${D[@]}" -r "${PKGS[@]}" >"$WORK/dpkg.log" 2>&1 || { cat "$WORK/dpkg.log" >&2; die "dpkg --root -r failed"; }
	gone "$R" conffiles "${PKGS[@]}"
	[ -f "$R/etc/slurmbridge/quotad.env" ] || fail "remove took the conffile quotad.env (only purge may)"
	"${D[@]}" -P "${PKGS[@]}" >"$WORK/dpkg.log" 2>&1 || { cat "$WORK/dpkg.log" >&2; die "dpkg --root -P failed"; }
	gone "$R" purge "${PKGS[@]}"
	local left
	left=$(cd "$R" && find . -mindepth 1 ! -path './var/lib/dpkg*' ! -path './etc/slurm*' ! -path './var' ! -path './var/lib' ! -path './etc' | sort)
	[ -z "$left" ] || fail "after purge, left in the scratch root: $(echo $left)"
}

system_round_trip() {
	local p f
	for p in "${PKGS[@]}"; do
		if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -qv 'not-installed'; then
			die "$p is installed on this machine: not touching it (TEST_DEB_SYSTEM=0 skips this part)"
		fi
		while read -r f; do
			[ ! -e "$f" ] || die "$f exists already: installing would overwrite it (TEST_DEB_SYSTEM=0 skips this part)"
		done < <(files "$p")
	done
	say "this machine"
	# Whatever happens next, the machine ends without the packages.
	trap 'dpkg -P "${PKGS[@]}" >/dev/null 2>&1 || true; cleanup' EXIT
	dpkg -i "${DEB[@]}" >"$WORK/dpkg.log" 2>&1 || { cat "$WORK/dpkg.log" >&2; die "dpkg -i failed (missing Slurm packages of the same version?)"; }
	present "" "${PKGS[@]}"
	getent passwd slurmbridge >/dev/null || fail "no slurmbridge user after install"
	"/usr/bin/poolctl" doctor --help >/dev/null || fail "installed poolctl does not run"
	/usr/bin/slurmbridge-doctor --help >/dev/null || fail "installed slurmbridge-doctor does not run"
	/usr/bin/quotad --help >/dev/null || fail "installed quotad does not run"
	/usr/bin/quotactl --help >/dev/null || fail "installed quotactl does not run"
	/usr/bin/elasticd --help >/dev/null || fail "installed elasticd does not run"
	if command -v systemd-analyze >/dev/null; then
		systemd-analyze verify /lib/systemd/system/quotad.service /lib/systemd/system/elasticd.service \
			/lib/systemd/system/elasticd-agent.service >"$WORK/verify.log" 2>&1 || { cat "$WORK/verify.log" >&2; fail "systemd-analyze verify"; }
	fi
	dpkg -r "${PKGS[@]}" >"$WORK/dpkg.log" 2>&1 || { cat "$WORK/dpkg.log" >&2; die "dpkg -r failed"; }
	gone "" conffiles "${PKGS[@]}"
	dpkg -P "${PKGS[@]}" >"$WORK/dpkg.log" 2>&1 || { cat "$WORK/dpkg.log" >&2; die "dpkg -P failed"; }
	gone "" purge "${PKGS[@]}"
	[ ! -e /etc/slurmbridge ] || fail "/etc/slurmbridge left after purge"
	[ ! -e /var/spool/slurmbridge ] || fail "/var/spool/slurmbridge left after purge"
	trap cleanup EXIT
}

for p in "${PKGS[@]}"; do check_metadata "$p"; done
plugin_identical slurmbridge-controller job_submit_pools.so
plugin_identical slurmbridge-node spank_elastic.so
scratch_root
[ "${TEST_DEB_SYSTEM:-1}" = 0 ] || system_round_trip
[ "$FAILS" -eq 0 ] || die "$FAILS check(s) failed"
say "PASS"
