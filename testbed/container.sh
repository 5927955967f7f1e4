#!/usr/bin/env bash
# Runs a command in a Debian container of another Slurm release, over a copy of this tree:
# `make test SLURM_RELEASE=24.11` on a bookworm host comes here as
#
#   testbed/container.sh 24.11 make test
#   testbed/container.sh --prepare 24.11     only build the image (CI does it while other work runs)
#
# The image (slurmbridge/release-host:RELEASE, testbed/container/Dockerfile) holds that
# release's Debian packages and nothing of ours. Each run copies the tree as git sees it
# (tracked and new, not ignored) to /srv/slurmbridge in a fresh container, where every test user
# can read it whatever the checkout's own parents allow, and runs the command there as root:
# the local testbed (testbed/testbed.sh) comes up inside on the container's own loopback, so it
# never meets a testbed of the host. The host's Go toolchain and module cache are mounted (no
# network is needed inside but a Debian mirror for the image), the build cache is a volume per
# release. The container is removed when the command ends, is interrupted or times out.
#
# Environment: DEBIAN_MIRROR (image build), CONTAINER_OUT (a host directory mounted at /out),
# SLURM_SOURCE_DIR (SchedMD's tarballs, default ../shared/slurm-source; mounted read-only),
# CONTAINER_CPU_SHARES (the container's CPU weight, Docker's --cpu-shares).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$HERE/.." && pwd)
export PATH=$PATH:/usr/local/go/bin

say() { printf 'container: %s\n' "$*" >&2; }
die() { printf 'container: error: %s\n' "$*" >&2; exit 1; }

PREPARE_ONLY=0
if [ "${1:-}" = --prepare ]; then
	PREPARE_ONLY=1
	shift
	[ $# -eq 1 ] || { echo "usage: $0 --prepare RELEASE" >&2; exit 2; }
else
	[ $# -ge 2 ] || { echo "usage: $0 RELEASE COMMAND... | --prepare RELEASE" >&2; exit 2; }
fi
RELEASE=$1
shift
SUITE=$(bash "$HERE/release.sh" suite "$RELEASE")
BASE_IMAGE=slurmbridge/debian:$SUITE
IMAGE=slurmbridge/release-host:$RELEASE
NAME=slurmbridge-release-${RELEASE//./-}-$$

[ "$(id -u)" -eq 0 ] || die "run as root: the testbed inside starts Slurm daemons"
command -v docker >/dev/null && docker info >/dev/null 2>&1 ||
	die "Slurm $RELEASE is not this host's release ($(bash "$HERE/release.sh" host 2>/dev/null || echo none)), and no Docker engine runs here to test it in a $SUITE container"
command -v go >/dev/null || die "no go on PATH: the container builds with the host's Go toolchain"

# The base comes from a Debian mirror (debootstrap), never from a registry.
SLURM_RELEASE=$RELEASE BASE_IMAGE=$BASE_IMAGE bash "$REPO_ROOT/docker/slurm-testbed/build-base.sh" >&2

t0=$SECONDS
context=$HERE/container
packages=$(bash "$HERE/testbed.sh" package-list)
if [ "$(bash "$HERE/release.sh" packaging "$RELEASE")" = smd ]; then
	# SchedMD's packages, built from the pinned source (cached), installed from local files.
	context=$(mktemp -d)
	trap 'rm -rf "$context"' EXIT
	bash "$HERE/slurm-source.sh" stage "$RELEASE" "$context/debs" || die "building Slurm $RELEASE's packages from source failed"
	cp "$HERE/container/Dockerfile.smd" "$context/Dockerfile"
	packages=$(bash "$HERE/testbed.sh" other-package-list)
	say "image $IMAGE (Slurm $RELEASE from SchedMD's source, packages of $(bash "$HERE/slurm-source.sh" path "$RELEASE"), on Debian $SUITE)"
else
	say "image $IMAGE (Slurm $RELEASE from Debian $SUITE)"
fi
docker build -q -t "$IMAGE" \
	--build-arg BASE_IMAGE="$BASE_IMAGE" \
	--build-arg DEBIAN_MIRROR="${DEBIAN_MIRROR:-}" \
	--build-arg PACKAGES="$packages" \
	--build-arg BROWSER_PACKAGES="$(bash "$HERE/testbed.sh" browser-package-list)" \
	"$context" >/dev/null || die "building $IMAGE failed"
[ "$context" = "$HERE/container" ] || { rm -rf "$context"; trap - EXIT; }
say "image ready in $((SECONDS - t0))s: $(docker run --rm "$IMAGE" slurmctld -V)"

[ "$PREPARE_ONLY" = 1 ] && exit 0

# Every module the build needs, fetched here where the module proxy is reachable.
(cd "$REPO_ROOT" && go mod download) || die "go mod download failed"
GOROOT_DIR=$(go env GOROOT)
MODCACHE=$(go env GOMODCACHE)

# The tree as git sees it; a tree without git (an unpacked tarball) goes whole but its builds.
tree() {
	cd "$REPO_ROOT"
	if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
		git ls-files -z -co --exclude-standard | tar --null -T - -cf -
	else
		tar --exclude=./bin --exclude=./dist --exclude=./.git -cf - .
	fi
}

out_mount=()
if [ -n "${CONTAINER_OUT:-}" ]; then
	install -d "$CONTAINER_OUT"
	out_mount=(-v "$(cd "$CONTAINER_OUT" && pwd):/out")
fi
# SchedMD's source tarballs (../shared/slurm-source), read-only where the tree's ../shared would
# be: the layout test regenerates job_record_layout.h's 25.x entries from them on every release.
source_mount=()
SOURCE_DIR=${SLURM_SOURCE_DIR:-$REPO_ROOT/../shared/slurm-source}
if [ -d "$SOURCE_DIR" ]; then
	source_mount=(-v "$(cd "$SOURCE_DIR" && pwd):/srv/shared/slurm-source:ro")
fi
# The lock the suites running side by side take around their CPU-heavy tests
# (bridge/testbed.HeavyLockEnv): its directory is shared, so one flock spans them all.
heavy_lock=()
if [ -n "${SLURMBRIDGE_HEAVY_LOCK:-}" ]; then
	[ -d "$(dirname "$SLURMBRIDGE_HEAVY_LOCK")" ] || die "SLURMBRIDGE_HEAVY_LOCK=$SLURMBRIDGE_HEAVY_LOCK: no folder $(dirname "$SLURMBRIDGE_HEAVY_LOCK")"
	lock_dir=$(cd "$(dirname "$SLURMBRIDGE_HEAVY_LOCK")" && pwd)
	heavy_lock=(-v "$lock_dir:/run/slurmbridge-heavy-lock" -e "SLURMBRIDGE_HEAVY_LOCK=/run/slurmbridge-heavy-lock/$(basename "$SLURMBRIDGE_HEAVY_LOCK")")
fi

# CONTAINER_CPU_SHARES: the container's weight against the others (Docker's default 1024), so
# CI's builds beside the suites yield the CPUs to them.
cpu_shares=()
if [ -n "${CONTAINER_CPU_SHARES:-}" ]; then
	[[ $CONTAINER_CPU_SHARES =~ ^[0-9]+$ ]] || die "CONTAINER_CPU_SHARES=$CONTAINER_CPU_SHARES: a number (Docker's default is 1024)"
	cpu_shares=(--cpu-shares="$CONTAINER_CPU_SHARES")
fi

cleanup() { docker rm -f "$NAME" >/dev/null 2>&1 || true; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

say "running '$*' in $NAME"
# --init reaps what the testbed's daemons leave; no port is published. The host name resolves
# to loopback, as on a Debian host, so the testbed's daemons listen on loopback alone.
# CAP_SYS_ADMIN: from 24.11 slurmd clones a job that asks for the user's login environment
# (sbatch --export=ALL,VAR=...) into new mount and PID namespaces, as root on a real node may;
# without it slurmd dies ("clone: Operation not permitted") and the node goes down.
host=slurm-${RELEASE//./-}
tree | docker run --rm -i --init --name "$NAME" --hostname "$host" --add-host "$host:127.0.0.1" \
	--cap-add SYS_ADMIN "${cpu_shares[@]}" \
	--tmpfs /tmp:exec,mode=1777 \
	-v "$GOROOT_DIR:/usr/local/go:ro" \
	-v "$MODCACHE:/root/go/pkg/mod" \
	-v "slurmbridge-gocache-$RELEASE:/root/.cache/go-build" \
	"${out_mount[@]}" "${source_mount[@]}" "${heavy_lock[@]}" \
	-e CI="${CI:-}" -e SLURM_RELEASE="$RELEASE" -e SLURMBRIDGE_TEST_PATIENCE="${SLURMBRIDGE_TEST_PATIENCE:-}" \
	"$IMAGE" bash -c 'set -e; install -d -m 0755 /srv/slurmbridge; tar -xf - -C /srv/slurmbridge; cd /srv/slurmbridge; exec "$@"' \
	container "$@"
