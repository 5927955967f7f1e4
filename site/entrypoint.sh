#!/bin/bash
# PID 1 of a site cluster host (site/site.sh): systemd, on a cgroup2 hierarchy of its own.
#
# Docker here may run on cgroup v1, which systemd 258 and later no longer boot on (256 and 257
# only with legacy switches). Every kernel with v1 hierarchies can still mount cgroup2 beside
# them, without controllers (those stay bound to v1, where Docker's limits still apply). This
# gives systemd a private cgroup2 subtree under the container's own cgroup2 directory (which
# runc made and removes with the container), in a cgroup namespace rooted there, so that no
# two hosts' systemd see each other's units. On a cgroup v2 Docker the same steps hold: the
# namespace is rooted at the container's own directory. Needs CAP_SYS_ADMIN (mount, unshare).
set -eu
tmp=$(mktemp -d /tmp/.cgroup2.XXXXXX)
mount -t cgroup2 none "$tmp"
self=$(sed -n 's/^0:://p' /proc/self/cgroup)
cg=$tmp${self%/}/init
mkdir -p "$cg"
echo $$ >"$cg/cgroup.procs"
umount "$tmp"
rmdir "$tmp"
# No --fork: exec keeps PID 1, which systemd must be. Mounts propagate shared, as systemd
# leaves them on a real host: systemd 257 mounts a unit's credentials (LoadCredential=) in a
# child namespace and moves them to /run/credentials, where PID 1 sees them only through
# shared propagation (with Docker's private mounts quotad found no password there).
exec unshare --cgroup --mount --propagation shared /bin/sh -c '
	umount -R /sys/fs/cgroup 2>/dev/null || umount -l /sys/fs/cgroup 2>/dev/null || true
	mount -t cgroup2 -o rw,nosuid,nodev,noexec cgroup2 /sys/fs/cgroup
	exec /sbin/init "$@"' /sbin/init "$@"
