#!/usr/bin/env bash
# Builds a Debian base image (an equivalent of `debian:SUITE`) from a Debian mirror with
# debootstrap and `docker import`, for hosts that cannot pull from any image registry. The suite
# follows the Slurm release (testbed/release.sh): 22.05 bookworm, 24.11 trixie, 26.05 sid.
#
#   build-base.sh            build $BASE_IMAGE unless it exists
#   FORCE=1 build-base.sh    rebuild it
#
# Environment: SLURM_RELEASE (default: the host's) or SUITE, BASE_IMAGE (default
# slurmbridge/debian:SUITE), DEBIAN_MIRROR (default
# http://deb.debian.org/debian; a local mirror or apt proxy on an air-gapped host),
# DEBIAN_SECURITY_MIRROR, and BASE_CACHE: a directory where the root file system tarball is
# kept so a later build on the same host skips debootstrap (never required).
# Needs root and debootstrap (installed with apt-get when missing).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SUITE=${SUITE:-$(bash "$HERE/../../testbed/release.sh" suite "${SLURM_RELEASE:-}")}
BASE_IMAGE=${BASE_IMAGE:-slurmbridge/debian:$SUITE}
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
DEBIAN_SECURITY_MIRROR=${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
BASE_CACHE=${BASE_CACHE:-/var/cache/slurmbridge}

say() { printf 'docker-base: %s\n' "$*"; }
die() { printf 'docker-base: error: %s\n' "$*" >&2; exit 1; }

command -v docker >/dev/null || die "no docker command"
if [ "${FORCE:-0}" != 1 ] && docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
	say "$BASE_IMAGE exists (FORCE=1 rebuilds it)"
	exit 0
fi
# With internet an official image may be the base (BASE_IMAGE=debian:bookworm): pull, not build.
case $BASE_IMAGE in
slurmbridge/*) ;;
*)
	say "pulling $BASE_IMAGE (only our own slurmbridge/* base is built with debootstrap)"
	exec docker pull "$BASE_IMAGE"
	;;
esac
[ "$(id -u)" -eq 0 ] || die "run as root: debootstrap creates device nodes and chowns files"

tarball=$BASE_CACHE/debian-$SUITE-$(dpkg --print-architecture).tar
if [ "${FORCE:-0}" = 1 ] || [ ! -s "$tarball" ]; then
	if ! command -v debootstrap >/dev/null; then
		say "installing debootstrap"
		apt-get install -y --no-install-recommends debootstrap ||
			{ apt-get update && apt-get install -y --no-install-recommends debootstrap; }
	fi
	root=$(mktemp -d /var/tmp/slurmbridge-rootfs.XXXXXX)
	trap 'rm -rf "$root"' EXIT
	t0=$SECONDS
	say "debootstrap $SUITE from $DEBIAN_MIRROR (minbase, like the official image)"
	debootstrap --variant=minbase --arch="$(dpkg --print-architecture)" "$SUITE" "$root" "$DEBIAN_MIRROR" ||
		{ tail -n 30 "$root/debootstrap/debootstrap.log" >&2 2>/dev/null || true; die "debootstrap failed"; }

	# What the official image adds: the suite with its updates and security suites (unstable has
	# neither), and no caches or docs kept in layers.
	if [ "$SUITE" = sid ]; then
		echo "deb $DEBIAN_MIRROR $SUITE main" >"$root/etc/apt/sources.list"
	else
		cat >"$root/etc/apt/sources.list" <<EOF
deb $DEBIAN_MIRROR $SUITE main
deb $DEBIAN_MIRROR $SUITE-updates main
deb $DEBIAN_SECURITY_MIRROR $SUITE-security main
EOF
	fi
	cat >"$root/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
	cat >"$root/etc/apt/apt.conf.d/docker-no-recommends" <<'EOF'
APT::Install-Recommends "false";
APT::Install-Suggests "false";
EOF
	cat >"$root/etc/dpkg/dpkg.cfg.d/docker-nodoc" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
EOF
	# No daemon may start while packages are installed in a build.
	printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
	chmod 0755 "$root/usr/sbin/policy-rc.d"
	rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/usr/share/doc/*/changelog* \
		"$root"/usr/share/man/* "$root"/usr/share/info/* "$root/debootstrap"
	: >"$root/etc/hostname"
	: >"$root/etc/resolv.conf"

	mkdir -p "$BASE_CACHE"
	tar --numeric-owner --xattrs -C "$root" -cf "$tarball.tmp" .
	mv "$tarball.tmp" "$tarball"
	say "root file system built in $((SECONDS - t0))s: $tarball ($(du -h "$tarball" | cut -f1))"
else
	say "using cached root file system $tarball (FORCE=1 rebuilds it)"
fi

docker import \
	--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
	--change 'ENV LANG=C.UTF-8' \
	--change 'CMD ["bash"]' \
	--message "debootstrap $SUITE from $DEBIAN_MIRROR" \
	"$tarball" "$BASE_IMAGE" >/dev/null
say "imported $BASE_IMAGE"
