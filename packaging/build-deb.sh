#!/usr/bin/env bash
# Builds slurmbridge-controller, slurmbridge-node and slurmbridge-client .debs from bin/ (make
# build) into dist/, with dpkg-deb only. The first two depend on the exact Slurm packages
# installed here, Debian's or SchedMD's slurm-smd-* (packaging/slurm-packages.sh): the job_submit plugin's plugin_version is this Slurm's SLURM_VERSION_NUMBER,
# so slurmctld of any other micro release refuses it. Both depend on slurmbridge-client
# (quotactl) of the same version, so every login, compute and controller host has quotactl.
#
#   packaging/build-deb.sh            (make deb)
#
# SLURMBRIDGE_VERSION overrides the package version (default 0.1.0~git<date>.<commit>).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DIST=${DIST:-$REPO/dist}
say() { printf 'build-deb: %s\n' "$*"; }
die() { printf 'build-deb: error: %s\n' "$*" >&2; exit 1; }

pkg_version() {
	dpkg-query -W -f='${Status} ${Version}\n' "$1" 2>/dev/null | awk '$3 == "installed" {print $4}'
}

# shellcheck source=packaging/slurm-packages.sh
. "$REPO/packaging/slurm-packages.sh"
SLURM_VERSION=$(pkg_version "$SLURM_PLUGINS_PKG")
[ -n "$SLURM_VERSION" ] || die "$SLURM_PLUGINS_PKG is not installed: build on a host with the cluster's Slurm packages"
for p in "$SLURM_DEV_PKG" "$SLURM_CTLD_PKG" "$SLURM_CLIENT_PKG"; do
	v=$(pkg_version "$p")
	[ "$v" = "$SLURM_VERSION" ] || die "$p is ${v:-not installed}, $SLURM_PLUGINS_PKG $SLURM_VERSION: the plugin would be built against other headers than the Slurm it depends on"
done
# The headers the plugin was compiled with must be this upstream release.
upstream=${SLURM_VERSION#*:}
upstream=${upstream%%-*}
number=$(awk '/#define SLURM_VERSION_NUMBER/ {print $3}' /usr/include/slurm/slurm_version.h)
header=$(printf '%d.%02d.%d' $((number >> 16 & 255)) $((number >> 8 & 255)) $((number & 255)))
[ "$header" = "$upstream" ] || die "/usr/include/slurm/slurm_version.h says $header, the packages $upstream"

for f in poolctl slurmbridge-doctor quotad quotactl elasticd job_submit_pools.so spank_elastic.so; do
	[ -f "$REPO/bin/$f" ] || die "bin/$f missing: run make build"
done
# A plugin built before the Slurm headers changed would carry the old version.
[ "$REPO/bin/job_submit_pools.so" -nt /usr/include/slurm/slurm_version.h ] ||
	die "bin/job_submit_pools.so is older than /usr/include/slurm/slurm_version.h: rm bin/job_submit_pools.so; make build"

ARCH=$(dpkg --print-architecture)
PLUGIN_DIR=$(slurm_plugin_dir)
[ -d "$PLUGIN_DIR" ] || die "cannot find Slurm's plugin directory from dpkg -L $SLURM_PLUGINS_PKG"
if [ -z "${SLURMBRIDGE_VERSION:-}" ]; then
	commit=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)
	stamp=$(git -C "$REPO" log -1 --format=%cd --date=format:%Y%m%d%H%M 2>/dev/null || date -u +%Y%m%d%H%M)
	SLURMBRIDGE_VERSION=0.1.0~git$stamp.$commit
fi
# The Slurm release is part of the version, so two builds for two Slurms never look alike.
VERSION=$SLURMBRIDGE_VERSION+slurm$upstream

# Only the client's build sets more control fields (below), never the caller's environment.
unset EXTRA_CONTROL
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$DIST"

# build NAME DESCRIPTION DEPENDS COMPONENT PLUGIN... (EXTRA_CONTROL: more control fields)
build() {
	local name=$1 summary=$2 depends=$3 component=$4
	shift 4
	local root=$WORK/$name doc=/usr/share/doc/$name plugin
	mkdir -p "$root/DEBIAN"
	BINDIR=/usr/bin SYSCONFDIR=/etc DOCDIR=$doc UNITDIR=/lib/systemd/system DESTDIR=$root OVERWRITE_CONFIG=1 \
		bash "$REPO/packaging/install.sh" "$component"
	for plugin in "$@"; do
		install -D -m 0644 "$REPO/bin/$plugin" "$root$PLUGIN_DIR/$plugin"
	done
	# Stripped commands (debug info stays in bin/); the plugins stay byte-identical to bin/,
	# so a packaged plugin behaves exactly as the tested dev build.
	find "$root/usr/bin" -type f -exec strip --strip-unneeded {} +
	install -d -m 0755 "$root$doc"
	cat >"$root$doc/copyright" <<COPY
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: slurmbridge
Files: *
Copyright: the slurmbridge authors
License: see the slurmbridge source repository
COPY
	[ ! -d "$root/etc" ] || (cd "$root" && find etc -type f -printf '/%p\n' | sort) >"$root/DEBIAN/conffiles"
	[ -s "$root/DEBIAN/conffiles" ] || rm -f "$root/DEBIAN/conffiles"
	local script
	for script in postinst prerm postrm; do
		[ -f "$REPO/packaging/debian/$component/$script" ] || continue
		sed -e "s|@PLUGIN_DIR@|$PLUGIN_DIR|g" "$REPO/packaging/debian/$component/$script" >"$root/DEBIAN/$script"
		chmod 0755 "$root/DEBIAN/$script"
	done
	local size
	size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
	cat >"$root/DEBIAN/control" <<CONTROL
Package: $name
Version: $VERSION
Architecture: $ARCH
Maintainer: slurmbridge <slurmbridge@localhost>
Installed-Size: $size
Depends: $depends${EXTRA_CONTROL:+
$EXTRA_CONTROL}
Section: admin
Priority: optional
Homepage: https://github.com/slurmbridge/slurmbridge
Description: $summary
$(sed 's/^/ /' "$REPO/packaging/debian/$component/description")
CONTROL
	dpkg-deb --root-owner-group -Zxz --build "$root" "$DIST/${name}_${VERSION}_$ARCH.deb" >/dev/null
	say "$DIST/${name}_${VERSION}_$ARCH.deb"
}

rm -f "$DIST"/slurmbridge-controller_*.deb "$DIST"/slurmbridge-node_*.deb "$DIST"/slurmbridge-client_*.deb
build slurmbridge-controller "slurmbridge for the Slurm controller: pools plugin, quotad, poolctl, slurmbridge-doctor" \
	"$SLURM_CTLD_PKG (= $SLURM_VERSION), $SLURM_PLUGINS_PKG (= $SLURM_VERSION), $SLURM_CLIENT_PKG (= $SLURM_VERSION), slurmbridge-client (= $VERSION), passwd" \
	controller job_submit_pools.so
build slurmbridge-node "slurmbridge for Slurm nodes: elasticd, its node agent and the elastic SPANK plugin" \
	"$SLURM_PLUGINS_PKG (= $SLURM_VERSION), $SLURM_CLIENT_PKG (= $SLURM_VERSION), slurmbridge-client (= $VERSION), passwd" \
	node spank_elastic.so
# quotactl was in slurmbridge-controller before this package existed: it takes the file over
# on an upgrade, and an older controller package cannot be installed beside it.
EXTRA_CONTROL="Replaces: slurmbridge-controller (<< $VERSION)
Breaks: slurmbridge-controller (<< $VERSION)" \
	build slurmbridge-client "slurmbridge's quotactl: quotas, explanations and the cluster page for users and admins" \
	"munge" client
