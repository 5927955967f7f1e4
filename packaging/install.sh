#!/usr/bin/env bash
# Installs slurmbridge's binaries, systemd units, configs and docs under $DESTDIR: the one
# layout shared by `make install` (which installs the plugins itself, by rename) and
# build-deb.sh (one component per package).
#
#   install.sh [controller] [node] [client]    default: all three
#
# BINDIR, SYSCONFDIR, DOCDIR, UNITDIR and DESTDIR come from the environment (the Makefile's
# defaults: /usr/local/bin, /etc, /usr/local/share/doc/slurmbridge, /usr/local/lib/systemd/system).
# A config already in $SYSCONFDIR/slurmbridge is the site's and is kept, unless
# OVERWRITE_CONFIG=1 (packages: dpkg's conffile handling decides instead).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BINDIR=${BINDIR:-/usr/local/bin}
SYSCONFDIR=${SYSCONFDIR:-/etc}
DOCDIR=${DOCDIR:-/usr/local/share/doc/slurmbridge}
UNITDIR=${UNITDIR:-/usr/local/lib/systemd/system}
DESTDIR=${DESTDIR:-}
STATE_DIR=/var/spool/slurmbridge/elastic
PROD=$REPO/slurm-conf/production

die() { printf 'install.sh: error: %s\n' "$*" >&2; exit 1; }

bin() {
	[ -x "$REPO/bin/$1" ] || die "bin/$1 missing: run make build"
	install -D -m 0755 "$REPO/bin/$1" "$DESTDIR$BINDIR/$1"
}

# unit NAME fills in the paths of this install; a placeholder left over is an error.
unit() {
	local out=$DESTDIR$UNITDIR/$1
	install -d -m 0755 "$DESTDIR$UNITDIR"
	sed -e "s|@BINDIR@|$BINDIR|g" -e "s|@SYSCONFDIR@|$SYSCONFDIR|g" -e "s|@DOCDIR@|$DOCDIR|g" \
		"$REPO/packaging/systemd/$1" >"$out.tmp"
	if grep -n '@[A-Z]*@' "$out.tmp" >&2; then
		rm -f "$out.tmp"
		die "unfilled placeholder in packaging/systemd/$1"
	fi
	chmod 0644 "$out.tmp"
	mv -f "$out.tmp" "$out"
}

config() {
	local dest=$DESTDIR$SYSCONFDIR/slurmbridge/$1
	if [ -e "$dest" ] && [ "${OVERWRITE_CONFIG:-0}" != 1 ]; then
		echo "install.sh: kept $dest (the site's; the new example is in $DOCDIR/examples/$1)"
		return 0
	fi
	install -D -m 0644 "$PROD/$1" "$dest"
}

# doc FILE... go to $DOCDIR/examples (a directory argument is copied whole).
examples() {
	install -d -m 0755 "$DESTDIR$DOCDIR/examples"
	local f
	for f in "$@"; do
		install -m 0644 "$f" "$DESTDIR$DOCDIR/examples/"
	done
}

controller() {
	bin poolctl
	bin slurmbridge-doctor
	bin quotad
	unit quotad.service
	config quotad.env
	install -D -m 0644 "$REPO/docs/operations.md" "$DESTDIR$DOCDIR/operations.md"
	examples "$PROD/slurm.conf.slurmbridge" "$PROD/pools.yaml" "$PROD/quotas.yaml" "$PROD/quotad.env"
}

node() {
	bin elasticd
	unit elasticd.service
	unit elasticd-agent.service
	config elasticd.env
	config elasticd-agent.env
	install -D -m 0644 "$REPO/docs/operations.md" "$DESTDIR$DOCDIR/operations.md"
	install -D -m 0644 "$REPO/elasticd/README.md" "$DESTDIR$DOCDIR/elasticd.md"
	examples "$PROD/plugstack.conf" "$PROD/elasticd.env" "$PROD/elasticd-agent.env" "$REPO"/elasticd/examples/*
	# The slurmbridge_elastic helper, beside the examples that import it; users install it with
	# `pip install $DOCDIR/python` (no network needed).
	local f
	for f in pyproject.toml build_backend/slurmbridge_build.py slurmbridge_elastic/__init__.py slurmbridge_elastic/membership.py slurmbridge_elastic/torch.py; do
		install -D -m 0644 "$REPO/elasticd/python/$f" "$DESTDIR$DOCDIR/python/$f"
	done
	# The SPANK plugin's default dir=, written by slurmstepd (root) and read by elasticd.
	install -d -m 0755 "$DESTDIR$STATE_DIR"
}

# quotactl: users run it where they submit (explain, list, cluster), admins where quotad runs.
client() {
	bin quotactl
}

[ $# -gt 0 ] || set -- controller node client
for c in "$@"; do
	case $c in
	controller | node | client) "$c" ;;
	*) die "unknown component $c (controller, node or client)" ;;
	esac
done
