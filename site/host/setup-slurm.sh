#!/usr/bin/env bash
# The site's own Slurm, as it ran before slurmbridge: run on each host of the site cluster by
# site/site.sh from /srv/site (the rendered slurm.conf, gres.conf, slurmdbd.conf, the munge
# key and the facts). Nothing of slurmbridge is here; install-slurmbridge.sh adds it.
#
#   setup-slurm.sh common | db | controller | node | wait-nodes
set -euo pipefail
SITE=/srv/site
. "$SITE/facts.sh"
say() { printf '%s: %s\n' "$(hostname)" "$*"; }
die() { printf '%s: error: %s\n' "$(hostname)" "$*" >&2; exit 1; }

# wait_for SECONDS WHAT CMD...: until CMD succeeds.
wait_for() {
	local limit=$1 what=$2 deadline=$((SECONDS + $1))
	shift 2
	until "$@" >/dev/null 2>&1; do
		[ $SECONDS -lt $deadline ] || die "$what: not within ${limit}s"
		sleep 1
	done
}

common() {
	# The cluster's users with the same uids on every host, as its directory service gives
	# them; slurmbridge's service user too: slurmdbd authorises quotad's QOS changes by the
	# AdminLevel of the user its uid resolves to on the database host, which has no
	# slurmbridge package (docs/operations.md, Controller, step 5).
	local entry uid=$FACT_CONTAINER_FIRST_UID
	for entry in "${PROJECTS[@]}"; do
		getent passwd "${entry#*:}" >/dev/null || useradd --create-home --shell /bin/bash --uid "$uid" "${entry#*:}"
		uid=$((uid + 1))
	done
	# SlurmUser: Debian's packages make it (uid 64030, Debian's own for slurm); SchedMD's do
	# not, so a site on them makes it itself, with that uid on every host.
	getent passwd slurm >/dev/null || useradd --system --uid 64030 --user-group --home-dir /nonexistent \
		--no-create-home --shell /usr/sbin/nologin --comment "Slurm" slurm
	getent group slurmbridge >/dev/null || groupadd --system --gid 990 slurmbridge
	getent passwd slurmbridge >/dev/null || useradd --system --uid 990 --gid slurmbridge --home-dir /nonexistent \
		--no-create-home --shell /usr/sbin/nologin --comment "slurmbridge services" slurmbridge
	install -m 0400 -o munge -g munge "$SITE/munge.key" /etc/munge/munge.key
	systemctl enable --now munge.service
	install -d -m 0755 /etc/slurm
	install -m 0644 "$SITE/slurm.conf" "$SITE/gres.conf" /etc/slurm/
	# systemd has a cgroup2 tree of its own here while the kernel's v1 hierarchies stay
	# visible in /proc/self/cgroup, which slurmd from 23.02 calls "hybrid" and refuses even with
	# cgroup-free plugins; it may be told to load no cgroup plugin. 22.05 has no "disabled" but
	# refuses hybrid only when it autodetects: named, cgroup/v1 loads and is never used
	# (proctrack/linuxproc, task/none).
	local version plugin=disabled
	version=$(slurmd -V | awk '{print $2}')
	[ "$(printf '%s\n' 23.02 "$version" | sort -V | head -n1)" = 23.02 ] || plugin=cgroup/v1
	printf '# The site cluster: no cgroup plugin in use (site/host/setup-slurm.sh says why).\nCgroupPlugin=%s\n' "$plugin" >/etc/slurm/cgroup.conf
	install -d -m 0755 -o slurm -g slurm /var/log/slurm
	wait_for 20 "munged" munge -n
}

db() {
	# MariaDB's data directory is a filesystem of its own (site.sh): empty at first boot.
	if [ ! -d /var/lib/mysql/mysql ]; then
		chown mysql:mysql /var/lib/mysql
		mariadb-install-db --user=mysql --datadir=/var/lib/mysql >/dev/null || die "mariadb-install-db failed"
	fi
	systemctl enable --now mariadb.service
	wait_for 60 "MariaDB" mysqladmin ping
	local pw
	pw=$(sed -n 's/^StoragePass=//p' "$SITE/slurmdbd.conf")
	mysql <<SQL
CREATE DATABASE IF NOT EXISTS slurm_acct_db;
CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$pw';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
SQL
	install -m 0600 -o slurm -g slurm "$SITE/slurmdbd.conf" /etc/slurm/slurmdbd.conf
	systemctl enable --now slurmdbd.service
	wait_for 60 "slurmdbd" sacctmgr -n show cluster
	bash "$SITE/ensure-accounts.sh" "$CLUSTER" "${PROJECTS[@]}"
	say "slurmdbd up with the cluster's accounts"
}

controller() {
	install -d -m 0700 -o slurm -g slurm /var/spool/slurmctld
	systemctl enable --now slurmctld.service
	wait_for 60 "slurmctld" scontrol ping
	say "slurmctld up: $(scontrol ping | tr '\n' ' ')"
}

node() {
	local me i
	me=$(hostname)
	install -d -m 0755 "/srv/site/gpus/$me"
	for ((i = 0; i < GPUS_PER_NODE; i++)); do : >"/srv/site/gpus/$me/nvidia$i"; done
	install -d -m 0755 /var/spool/slurmd
	systemctl enable --now slurmd.service
}

# Every node idle (or mixed/allocated once jobs run), none down or drained.
nodes_up() {
	local bad
	bad=$(sinfo -h -N -o '%N %T' | awk '$2 !~ /^(idle|mixed|allocated|completing)$/' | sort -u)
	[ -z "$bad" ] && [ "$(sinfo -h -N -o %N | sort -u | wc -l)" -eq "${#NODES[@]}" ]
}

wait_nodes() {
	local deadline=$((SECONDS + 120))
	until nodes_up; do
		[ $SECONDS -lt $deadline ] || die "nodes not up within 120s: $(sinfo -h -N -o '%N %T' | sort -u | tr '\n' ' ')"
		sleep 2
	done
	say "all ${#NODES[@]} nodes up"
}

case ${1:-} in
common) common ;;
db) db ;;
controller) controller ;;
node) node ;;
wait-nodes) wait_nodes ;;
*) die "usage: $0 common|db|controller|node|wait-nodes" ;;
esac
