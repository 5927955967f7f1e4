#!/usr/bin/env bash
# Builds SchedMD's own Debian packages (slurm-smd-*) of the Slurm releases that sites run but no
# Debian suite ships, from the unchanged release tarballs in ../shared/slurm-source/ (README.md
# there), the way a Debian site does: `dpkg-buildpackage -b` over the tarball's own debian/
# directory, in a Debian trixie container, so the host needs nothing but Docker and a Debian
# mirror.
#
#   slurm-source.sh list             the releases of the table below, one a line
#   slurm-source.sh verify RELEASE   check its tarball against the pinned sha256
#   slurm-source.sh build RELEASE    verify, then build its .deb files unless they are cached;
#                                    prints the cache directory that holds them
#   slurm-source.sh path RELEASE     the cache directory of a finished build (exit 1: none)
#   slurm-source.sh stage RELEASE DIR  build, then copy into DIR the packages the testbeds
#                                    install (testbed.sh smd-package-list)
#
# A build goes to $SLURM_SMD_CACHE/VERSION-SHA12-RECIPE/ (SHA12: the tarball's sha256, first
# 12 hex; RECIPE below),
# whole or not at all: the stamp file `.complete` is written last. The build image
# (slurmbridge/slurm-smd-build:trixie, testbed/slurm-source/Dockerfile) holds every release's
# Build-Depends and is kept; its base comes from docker/slurm-testbed/build-base.sh.
#
# Environment: SLURM_SOURCE_DIR (default ../shared/slurm-source beside the checkout),
# SLURM_SMD_CACHE (default /var/cache/slurmbridge/slurm-smd), SLURM_SMD_JOBS (make's jobs,
# default nproc), SLURM_SMD_LOW_PRIORITY (default 1: the build yields the CPUs to anything else,
# docker --cpu-shares=128 and nice -n 19; CI sets 0 for full speed), DEBIAN_MIRROR.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$HERE/.." && pwd)

# One change to SchedMD's debian/rules, the only one: configure gets --enable-multiple-slurmd,
# which Debian's own packages of 22.05, 24.11 and 26.05 are built with, so that the testbed runs
# its seven nodes' slurmd on one host as it does on those (without it slurmd refuses a second
# node of one NodeHostName). A site's slurmd, one per host, runs the same either way. RECIPE
# names this recipe in the cache key: a change here builds anew.
RECIPE=multislurmd1
MULTIPLE_SLURMD_FLAG=--enable-multiple-slurmd

# RELEASE VERSION TARBALL SHA256, from ../shared/slurm-source/README.md.
TABLE=(
	"25.05 25.05.8 slurm-25.05.8.tar.xz 31243560efb36d74505d2706701412209b2a21e9951e60889416c412e89926f6"
	"25.11 25.11.7 slurm-25.11.7.tar.xz f71f1e5f33a72e7864104a6857e86862eac3c4e5e348c92dd0c10dbe03a82dec"
)
SUITE=trixie
BASE_IMAGE=slurmbridge/debian:$SUITE
IMAGE=slurmbridge/slurm-smd-build:$SUITE
SOURCE_DIR=${SLURM_SOURCE_DIR:-$REPO_ROOT/../shared/slurm-source}
CACHE_ROOT=${SLURM_SMD_CACHE:-/var/cache/slurmbridge/slurm-smd}
JOBS=${SLURM_SMD_JOBS:-$(nproc)}
LOW_PRIORITY=${SLURM_SMD_LOW_PRIORITY:-1}

say() { printf 'slurm-source: %s\n' "$*" >&2; }
die() { printf 'slurm-source: error: %s\n' "$*" >&2; exit 1; }
usage() { echo "usage: $0 list | verify RELEASE | build RELEASE | path RELEASE | stage RELEASE DIR" >&2; exit 2; }

list() {
	local e
	for e in "${TABLE[@]}"; do echo "${e%% *}"; done
}

# lookup RELEASE: sets VERSION TARBALL SHA256 KEY.
lookup() {
	local e rel
	for e in "${TABLE[@]}"; do
		read -r rel VERSION TARBALL SHA256 <<<"$e"
		if [ "$rel" = "$1" ]; then
			KEY=$VERSION-${SHA256:0:12}-$RECIPE
			return 0
		fi
	done
	die "no Slurm release '$1' in the table: choose one of $(list | paste -sd' ')"
}

verify() {
	lookup "$1"
	local f=$SOURCE_DIR/$TARBALL got
	[ -f "$f" ] || die "Slurm $1: no tarball $f (SLURM_SOURCE_DIR=$SOURCE_DIR)"
	got=$(sha256sum "$f" | cut -d' ' -f1)
	[ "$got" = "$SHA256" ] ||
		die "Slurm $1: $f has sha256 $got, not the pinned $SHA256: refusing it"
	say "Slurm $1: $TARBALL matches the pinned sha256 ${SHA256:0:12}…"
}

complete_dir() {
	lookup "$1"
	local d=$CACHE_ROOT/$KEY
	[ -f "$d/.complete" ] || return 1
	echo "$d"
}

# Every release's debian/control as the build context's controls/RELEASE/debian/control, so the
# image carries the union of their Build-Depends.
prepare_image() {
	# lookup sets these: local here, so the release being built keeps its own.
	local ctx rel t0=$SECONDS VERSION TARBALL SHA256 KEY
	SLURM_RELEASE='' SUITE=$SUITE BASE_IMAGE=$BASE_IMAGE bash "$REPO_ROOT/docker/slurm-testbed/build-base.sh" >&2 ||
		die "building the base image $BASE_IMAGE failed"
	ctx=$(mktemp -d /var/tmp/slurm-smd-context.XXXXXX)
	cp "$HERE/slurm-source/Dockerfile" "$ctx/"
	for rel in $(list); do
		(verify "$rel") || { rm -rf "$ctx"; exit 1; }
		lookup "$rel"
		mkdir -p "$ctx/controls/$rel"
		tar -xJf "$SOURCE_DIR/$TARBALL" -C "$ctx/controls/$rel" --strip-components=1 "slurm-$VERSION/debian/control" ||
			{ rm -rf "$ctx"; die "no debian/control in $TARBALL"; }
	done
	say "image $IMAGE (Build-Depends of Slurm $(list | paste -sd' ') on Debian $SUITE)"
	if ! docker build -q -t "$IMAGE" "${CPU_SHARES[@]}" \
		--build-arg BASE_IMAGE="$BASE_IMAGE" --build-arg DEBIAN_MIRROR="${DEBIAN_MIRROR:-}" \
		"$ctx" >/dev/null; then
		rm -rf "$ctx"
		die "building $IMAGE failed (run: docker build $HERE/slurm-source with the controls, or read the output above)"
	fi
	rm -rf "$ctx"
	say "image ready in $((SECONDS - t0))s"
}

build() {
	local rel=$1 dest t0 lock
	verify "$rel"
	lookup "$rel"
	dest=$CACHE_ROOT/$KEY
	if [ -f "$dest/.complete" ]; then
		say "Slurm $VERSION already built"
		echo "$dest"
		return 0
	fi
	[ "$(id -u)" -eq 0 ] || die "run as root: the build runs in Docker and writes $CACHE_ROOT"
	command -v docker >/dev/null && docker info >/dev/null 2>&1 || die "no Docker engine runs here"
	case $JOBS in '' | *[!0-9]* | 0) die "SLURM_SMD_JOBS=$JOBS: not a positive number" ;; esac

	CPU_SHARES=() NICE=''
	case $LOW_PRIORITY in
	1) CPU_SHARES=(--cpu-shares=128) NICE='nice -n 19' ;;
	0) ;;
	*) die "SLURM_SMD_LOW_PRIORITY=$LOW_PRIORITY: 1 or 0" ;;
	esac

	mkdir -p "$CACHE_ROOT"
	# One build of a release at a time; a second waits and then finds it done.
	lock=$CACHE_ROOT/.$KEY.lock
	exec 9>"$lock"
	flock 9
	if [ -f "$dest/.complete" ]; then
		say "Slurm $VERSION was built meanwhile"
		echo "$dest"
		return 0
	fi

	prepare_image

	# The tree builds on the host's disk (not the container's overlay); the packages land in
	# out/, which becomes the cache directory once they are all there.
	# Globals: the EXIT trap runs after build() has returned.
	WORK=$(mktemp -d /var/tmp/slurm-smd-build.XXXXXX)
	NAME=slurmbridge-slurm-smd-${rel//./-}-$$
	trap 'docker rm -f "$NAME" >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	mkdir "$WORK/out"
	t0=$SECONDS
	say "building Slurm $VERSION (dpkg-buildpackage -b, parallel=$JOBS$([ -n "$NICE" ] && echo ', low priority'))"
	# In the background, so that an interrupt runs the trap (which removes the container) at
	# once rather than when the build ends.
	docker run --rm --name "$NAME" "${CPU_SHARES[@]}" \
		-v "$SOURCE_DIR/$TARBALL:/src/$TARBALL:ro" -v "$WORK:/work" \
		-e DEB_BUILD_OPTIONS="nocheck parallel=$JOBS" -e TARBALL="$TARBALL" -e VERSION="$VERSION" \
		-e NICE="$NICE" -e FLAG="$MULTIPLE_SLURMD_FLAG" \
		"$IMAGE" bash -c '
			set -euo pipefail
			mkdir /work/src
			tar -xJf "/src/$TARBALL" -C /work/src
			cd "/work/src/slurm-$VERSION"
			v=$(dpkg-parsechangelog -S Version)
			case $v in "$VERSION"-*) ;; *) echo "debian/changelog says $v, not $VERSION" >&2; exit 1 ;; esac
			grep -q -- "dh_auto_configure -- --sysconfdir=/etc/slurm " debian/rules ||
				{ echo "debian/rules: no dh_auto_configure line to add $FLAG to" >&2; exit 1; }
			sed -i "s|dh_auto_configure -- --sysconfdir=/etc/slurm |dh_auto_configure -- --sysconfdir=/etc/slurm $FLAG |" debian/rules
			grep -q -- "$FLAG" debian/rules || { echo "debian/rules: adding $FLAG failed" >&2; exit 1; }
			$NICE dpkg-buildpackage -b -uc -us
			cd /work/src
			cp -v -- *.deb *.buildinfo *.changes /work/out/
		' >&2 &
	wait $! || die "building Slurm $VERSION failed after $((SECONDS - t0))s (output above)"
	local secs=$((SECONDS - t0))
	ls "$WORK/out/slurm-smd_${VERSION}-"*.deb >/dev/null 2>&1 || die "the build made no slurm-smd_$VERSION-*.deb"

	(cd "$WORK/out" && sha256sum -- *.deb >SHA256SUMS)
	cat >"$WORK/out/.complete" <<EOF
version=$VERSION
tarball=$TARBALL
sha256=$SHA256
suite=$SUITE
image=$(docker image inspect -f '{{.Id}}' "$IMAGE")
deb_build_options=nocheck parallel=$JOBS
build_seconds=$secs
built=$(date -u +%Y-%m-%dT%H:%M:%SZ)
EOF
	rm -rf "$dest"
	mv "$WORK/out" "$dest"
	say "Slurm $VERSION built in ${secs}s: $(ls "$dest"/*.deb | wc -l) packages in $dest"
	echo "$dest"
}

# stage RELEASE DIR: the packages the testbeds install, from the (cached) build, into DIR, each
# one there or a failure naming it.
stage() {
	local debs p f
	debs=$(build "$1")
	install -d "$2"
	for p in $(bash "$HERE/testbed.sh" smd-package-list); do
		f=$(ls "$debs/${p}_"*.deb 2>/dev/null | head -n1)
		[ -n "$f" ] || die "$debs holds no $p package"
		cp "$f" "$2/"
	done
}

CPU_SHARES=() WORK='' NAME=''
case ${1:-} in
list) [ $# -eq 1 ] || usage; list ;;
verify) [ $# -eq 2 ] || usage; verify "$2" ;;
build) [ $# -eq 2 ] || usage; build "$2" ;;
path) [ $# -eq 2 ] || usage; complete_dir "$2" || { say "Slurm $2 is not built (run: $0 build $2)"; exit 1; } ;;
stage) [ $# -eq 3 ] || usage; stage "$2" "$3" ;;
*) usage ;;
esac
