#!/usr/bin/env bash
# The Slurm releases slurmbridge supports, each with the Debian suite whose packages carry it.
#
#   release.sh host            the release this host's Debian suite carries (22.05 on bookworm)
#   release.sh suite [REL]     the Debian suite of REL (default: the host's release)
#   release.sh check REL       exit 0 when REL is supported, else say which are
#   release.sh list            every release Debian ships that slurmbridge supports, one a line
#   release.sh source-list     the releases built from SchedMD's source (on demand)
#   release.sh packaging REL   debian or smd: whose packages carry REL
#
# One table, so the Makefile, the testbeds and CI never spell the mapping twice.
set -euo pipefail

RELEASES=(22.05:bookworm 24.11:trixie 26.05:sid)
# The releases no Debian suite ships: SchedMD's own packages (slurm-smd-*), built from
# ../shared/slurm-source by testbed/slurm-source.sh and installed on the suite named here. The
# whole suite runs on them on demand (make test SLURM_RELEASE=25.11); CI runs its representative
# part (make test-representative), not `list`'s whole suite.
SOURCE_RELEASES=(25.05:trixie 25.11:trixie)

die() { printf 'release: error: %s\n' "$*" >&2; exit 2; }

list() {
	local e
	for e in "${RELEASES[@]}"; do echo "${e%%:*}"; done
}

suite_of() {
	local e
	for e in "${RELEASES[@]}" "${SOURCE_RELEASES[@]}"; do
		[ "${e%%:*}" = "$1" ] && { echo "${e#*:}"; return 0; }
	done
	die "Slurm $1 is not supported: choose one of $( (list; source_list) | paste -sd' ')"
}

source_list() {
	local e
	for e in "${SOURCE_RELEASES[@]}"; do echo "${e%%:*}"; done
}

# packaging_of REL: debian (the suite's own packages) or smd (SchedMD's, built from source).
packaging_of() {
	suite_of "$1" >/dev/null
	if source_list | grep -qx "$1"; then echo smd; else echo debian; fi
}

# The host's release: that of SchedMD's packages where they are installed (a host of a release
# built from source), else its suite's, from os-release. Debian unstable names itself with "sid"
# in PRETTY_NAME (its VERSION_CODENAME is the next release's name).
host() {
	local codename="" pretty="" e smd
	smd=$(dpkg-query -W -f='${Status} ${Version}\n' slurm-smd 2>/dev/null | awk '$3 == "installed" {print $4}' || true)
	if [ -n "$smd" ]; then
		smd=$(echo "${smd#*:}" | cut -d. -f1-2)
		source_list | grep -qx "$smd" || die "SchedMD's Slurm $smd is installed here, which slurmbridge does not support: choose one of $( (list; source_list) | paste -sd' ')"
		echo "$smd"
		return 0
	fi
	if [ -r /etc/os-release ]; then
		codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
		pretty=$(. /etc/os-release && echo "${PRETTY_NAME:-}")
	fi
	case $pretty in *sid*) codename=sid ;; esac
	for e in "${RELEASES[@]}"; do
		[ "${e#*:}" = "$codename" ] && { echo "${e%%:*}"; return 0; }
	done
	die "this host runs '${codename:-an unknown system}', whose Slurm is not one slurmbridge supports; test in a container instead: make test SLURM_RELEASE=$(list | head -n1)"
}

case ${1:-} in
host) host ;;
suite) suite_of "${2:-$(host)}" ;;
check) suite_of "${2:?release}" >/dev/null ;;
list) list ;;
source-list) source_list ;;
packaging) packaging_of "${2:?release}" ;;
*)
	echo "usage: $0 host | suite [RELEASE] | check RELEASE | list | source-list | packaging RELEASE" >&2
	exit 2
	;;
esac
