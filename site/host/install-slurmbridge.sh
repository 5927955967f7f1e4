#!/usr/bin/env bash
# slurmbridge installed on a host of the site cluster exactly as docs/operations.md ("Install")
# tells a site to: one step of the document per call, in the document's order, run by
# site/site.sh on the host the document names. Where this script and the document differ, the
# document is wrong: fix it there and here together. What is the site's own choice (its pools,
# quotas, host names, cycle times) comes from /srv/site, as an admin's edits would.
#
#   install-slurmbridge.sh package controller|node     apt-get install ./slurmbridge-ROLE_*.deb ./slurmbridge-client_*.deb
#   install-slurmbridge.sh slurm-conf                  Controller, step 1: merge the example lines
#   install-slurmbridge.sh pools-yaml                  Controller, step 2
#   install-slurmbridge.sh quotad-db CONTROLLER...     Controller, step 4, on the database host
#   install-slurmbridge.sh db-password                 Controller, step 4: the password (stdin)
#   install-slurmbridge.sh quotad-rights               Controller, step 5
#   install-slurmbridge.sh quotad-start first|standby  Controller, step 6 (the standby: "One active quotad")
#   install-slurmbridge.sh user-env CONTROLLER         quotad's read-only API: users' quotactl finds quotad
#   install-slurmbridge.sh plugstack                   Nodes, step 1
#   install-slurmbridge.sh elasticd CONTROLLER         Nodes, step 2 (CONTROLLER: whose quotad it reads)
#   install-slurmbridge.sh elasticd-agent ELASTICD_HOST  Nodes, step 3
#   install-slurmbridge.sh doctor                      Check: slurmbridge-doctor
#   install-slurmbridge.sh upgrade controller|node DIR  Upgrade slurmbridge (or roll back) to DIR's package
set -euo pipefail
SITE=/srv/site
. "$SITE/facts.sh"
say() { printf '%s: %s\n' "$(hostname)" "$*"; }
die() { printf '%s: error: %s\n' "$(hostname)" "$*" >&2; exit 1; }
CTL_EXAMPLES=/usr/share/doc/slurmbridge-controller/examples
NODE_EXAMPLES=/usr/share/doc/slurmbridge-node/examples

# set_env FILE KEY VALUE: KEY=VALUE in an environment file, replacing the shipped line.
set_env() {
	local file=$1 key=$2 value=$3
	if grep -q "^$key=" "$file"; then
		sed -i "s|^$key=.*|$key=$value|" "$file"
	else
		printf '%s=%s\n' "$key" "$value" >>"$file"
	fi
}

# debs ROLE DIR: the role's package in DIR and slurmbridge-client beside it (quotactl, which
# both depend on; a release from before that package has none, and quotactl in its controller
# package).
debs() {
	ls "$2"/slurmbridge-"$1"_*.deb || die "no slurmbridge-$1 package in $2"
	ls "$2"/slurmbridge-client_*.deb 2>/dev/null || true
}

package() {
	local list debs
	list=$(debs "$1" "$SITE")
	mapfile -t debs <<<"$list"
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${debs[@]}" >/dev/null ||
		die "apt-get install ${debs[*]} failed"
	say "installed $(dpkg-query -W -f '${Package} ${Version}; ' "slurmbridge-$1" slurmbridge-client 2>/dev/null)"
}

# Step 1: every active line of examples/slurm.conf.slurmbridge replaces the site's line of the
# same key, or is added. The example's AccountingStorageTRES names a100 and v100, this site's
# GPU types too; a site with others edits that line.
slurm_conf() {
	local conf=/etc/slurm/slurm.conf example=$CTL_EXAMPLES/slurm.conf.slurmbridge line key
	[ -f "$example" ] || die "$example missing"
	grep -q '^JobSubmitPlugins=pools' "$conf" && { say "slurm.conf already merged"; return; }
	local merged
	merged=$(mktemp)
	cp "$conf" "$merged"
	printf '\n# slurmbridge: merged from %s\n' "$example" >>"$merged"
	while IFS= read -r line; do
		case $line in '' | '#'*) continue ;; esac
		key=${line%%=*}
		sed -i "/^${key}=/Id" "$merged"
		printf '%s\n' "$line" >>"$merged"
	done <"$example"
	install -m 0644 "$merged" "$conf"
	rm -f "$merged"
	say "slurm.conf: merged $(grep -c '^[A-Za-z]' "$example") lines of the example"
}

# Step 2: pools.yaml beside slurm.conf, the site's pools (edited from examples/pools.yaml), with
# quotad's account among the borrow QOS admins.
pools_yaml() {
	install -m 0644 "$SITE/pools.yaml" /etc/slurm/pools.yaml
	grep -q '^borrow_qos_admins:' /etc/slurm/pools.yaml || printf 'borrow_qos_admins: [slurmbridge]\n' >>/etc/slurm/pools.yaml
}

# Step 4, on the database host, as MariaDB root: quotad's database and one MariaDB user per
# host quotad runs on, by the address MariaDB sees it connect from.
quotad_db() {
	local pw client host
	[ $# -ge 1 ] || die "quotad-db: name the hosts quotad runs on"
	pw=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
	# MariaDB listens on loopback alone in Debian's configuration; quotad connects from the
	# controllers.
	if ! grep -qs '^bind-address *= *0.0.0.0' /etc/mysql/mariadb.conf.d/60-slurmbridge.cnf; then
		printf '[mariadbd]\nbind-address = 0.0.0.0\n' >/etc/mysql/mariadb.conf.d/60-slurmbridge.cnf
		systemctl restart mariadb
		local i
		for i in $(seq 60); do mysqladmin ping >/dev/null 2>&1 && break; sleep 1; done
	fi
	{
		echo "CREATE DATABASE IF NOT EXISTS slurmbridge;"
		for host in "$@"; do
			client=$(getent ahostsv4 "$host" | awk 'NR==1 {print $1}')
			[ -n "$client" ] || die "cannot resolve $host"
			echo "CREATE USER IF NOT EXISTS 'slurmbridge'@'$client' IDENTIFIED BY '$pw';"
			echo "ALTER USER 'slurmbridge'@'$client' IDENTIFIED BY '$pw';"
			echo "GRANT SELECT ON slurm_acct_db.* TO 'slurmbridge'@'$client';"
			echo "GRANT ALL ON slurmbridge.* TO 'slurmbridge'@'$client';"
		done
	} | mysql
	# Handed to the controllers by site.sh, as an admin would copy it.
	install -m 0600 /dev/stdin /root/slurmbridge-db-password <<<"$pw"
	say "quotad's database and users for $*"
}

db_password() {
	install -d -m 0755 /etc/slurmbridge
	install -m 600 -o root -g root /dev/stdin /etc/slurmbridge/db-password
}

# Step 5.
quotad_rights() {
	sacctmgr -n -P show user slurmbridge format=adminlevel | grep -qx Administrator ||
		sacctmgr -i add user slurmbridge account=root adminlevel=Administrator >/dev/null
	sacctmgr -i modify user slurmbridge set maxsubmitjobs=0 >/dev/null || true
	say "slurmbridge: $(sacctmgr -n -P show user slurmbridge format=adminlevel)"
}

# Step 6. The site's choices: its cluster name, the database host, a 5 s cycle (the fault
# suite counts in cycles), and quotad's API where users on the login host reach it ("quotad's
# read-only API": the site's network is the cluster's own).
quotad_start() {
	local env=/etc/slurmbridge/quotad.env
	set_env "$env" SLURMBRIDGE_CLUSTER "$CLUSTER"
	set_env "$env" SLURMBRIDGE_DB_ADDR "$SITE_DB:$FACT_CONTAINER_DB_PORT"
	set_env "$env" QUOTAD_INTERVAL 5s
	set_env "$env" QUOTAD_LISTEN 0.0.0.0:9817
	set -a
	. "$env"
	set +a
	if [ "$1" = first ]; then
		quotactl import "$SITE/quotas.yaml"
		quotad --once --dry-run --db-password-file /etc/slurmbridge/db-password >/dev/null
	fi
	systemctl enable --now quotad
	local i
	for i in $(seq 30); do systemctl is-active --quiet quotad && break; sleep 1; done
	systemctl is-active --quiet quotad || die "quotad is not active: $(journalctl -u quotad -n 5 --no-pager -o cat)"
	# Its first cycle creates the QOS and may take several seconds (22.05's sacctmgr is slow):
	# doctor counts a quotad that has not finished one as a problem.
	local metrics=""
	for i in $(seq 60); do
		metrics=$(curl -fsS --max-time 2 http://127.0.0.1:9817/metrics 2>/dev/null || true)
		grep -Eq '^quotad_last_successful_cycle_timestamp_seconds [1-9]' <<<"$metrics" && break
		sleep 1
	done
	grep -Eq '^quotad_last_successful_cycle_timestamp_seconds [1-9]' <<<"$metrics" ||
		die "quotad has not finished a cycle in 60s: $(journalctl -u quotad -n 5 --no-pager -o cat)"
	say "quotad active ($1)"
}

# "quotad's read-only API": users' environment names quotad (quotactl explain, list, cluster).
user_env() {
	printf 'export SLURMBRIDGE_QUOTAD_URL=http://%s:9817\n' "$1" >/etc/profile.d/slurmbridge.sh
	chmod 0644 /etc/profile.d/slurmbridge.sh
}

# Nodes, step 1: only now that every submit and compute host has the package.
plugstack() {
	install -d -m 0755 /etc/slurm/plugstack.conf.d
	sed -E "s/ pools=[^ ]*/ pools=$(IFS=,; echo "${GPU_POOLS[*]}")/" "$NODE_EXAMPLES/plugstack.conf" \
		>/etc/slurm/plugstack.conf.d/elastic.conf
	chmod 0644 /etc/slurm/plugstack.conf.d/elastic.conf
	# Debian's packages ship a plugstack.conf that includes plugstack.conf.d; SchedMD's ship
	# none, and the step makes it with that line alone. One the site wrote stays its own.
	if [ ! -e /etc/slurm/plugstack.conf ]; then
		echo 'include /etc/slurm/plugstack.conf.d/*' >/etc/slurm/plugstack.conf
		chmod 0644 /etc/slurm/plugstack.conf
	fi
	grep -qs '^include /etc/slurm/plugstack.conf.d/' /etc/slurm/plugstack.conf ||
		die "/etc/slurm/plugstack.conf does not include /etc/slurm/plugstack.conf.d/"
}

# Nodes, step 2: elasticd on the host users submit from; its state directory is shared with
# the nodes (one volume).
elasticd() {
	local env=/etc/slurmbridge/elasticd.env
	set_env "$env" ELASTICD_STATE_DIR /var/spool/slurmbridge/elastic
	set_env "$env" ELASTICD_POOLS /etc/slurm/pools.yaml
	set_env "$env" ELASTICD_QUOTAD "http://$1:9817"
	install -m 0644 "$SITE/pools.yaml" /etc/slurm/pools.yaml
	systemctl enable --now elasticd
	sleep 1
	systemctl is-active --quiet elasticd || die "elasticd is not active: $(journalctl -u elasticd -n 5 --no-pager -o cat)"
	say "elasticd active"
}

# Nodes, step 3.
elasticd_agent() {
	local env=/etc/slurmbridge/elasticd-agent.env
	sed -i -E "s|--elasticd http://[^ ]*|--elasticd http://$1:$FACT_CONTAINER_ELASTICD_PORT|" "$env"
	systemctl enable --now elasticd-agent
	sleep 1
	systemctl is-active --quiet elasticd-agent || die "elasticd-agent is not active: $(journalctl -u elasticd-agent -n 5 --no-pager -o cat)"
	say "elasticd-agent active"
}

# "Upgrade slurmbridge": the host's package from DIR, newer or older (a roll back is the same
# step); a controller's slurmctld restarts to load the new plugin.
upgrade() {
	local role=$1 dir=$2 list debs
	list=$(debs "$role" "$dir")
	mapfile -t debs <<<"$list"
	# Back to a release from before slurmbridge-client, apt removes it: its Breaks refuses the
	# older controller package, which holds quotactl itself.
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends --allow-downgrades "${debs[@]}" >/dev/null ||
		die "apt-get install ${debs[*]} failed"
	if [ "$role" = controller ]; then
		systemctl restart slurmctld
		# Active is not enough: a slurmctld that refuses the plugin exits after starting.
		local i
		for i in $(seq 30); do
			scontrol ping 2>/dev/null | grep -q "at $(hostname) is UP" && break
			sleep 1
		done
		scontrol ping 2>/dev/null | grep -q "at $(hostname) is UP" ||
			die "slurmctld did not come back: $(journalctl -u slurmctld -n 5 --no-pager -o cat)"
	fi
	say "slurmbridge-$role $(dpkg-query -W -f '${Version}' "slurmbridge-$role")"
}

doctor() {
	set -a
	. /etc/slurmbridge/quotad.env
	set +a
	slurmbridge-doctor --elasticd-url "http://$SITE_LOGIN:$FACT_CONTAINER_ELASTICD_PORT/metrics"
}

step=${1:-}
shift || true
case $step in
package) package "$@" ;;
slurm-conf) slurm_conf ;;
pools-yaml) pools_yaml ;;
quotad-db) quotad_db "$@" ;;
db-password) db_password ;;
quotad-rights) quotad_rights ;;
quotad-start) quotad_start "$@" ;;
user-env) user_env "$@" ;;
plugstack) plugstack ;;
elasticd) elasticd "$@" ;;
elasticd-agent) elasticd_agent "$@" ;;
doctor) doctor ;;
upgrade) upgrade "$@" ;;
*) die "unknown step '$step' (see the header)" ;;
esac
