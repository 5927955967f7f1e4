#!/usr/bin/env bash
# The site cluster: slurmbridge installed as a site installs it, from its Debian packages, on
# hosts with systemd as PID 1, one container per host on a network of its own.
#
#   site/site.sh up RELEASE            images, packages (make deb for RELEASE), hosts, the
#                                      site's Slurm, then slurmbridge by docs/operations.md
#   site/site.sh down RELEASE          every container, the network and the volumes
#   site/site.sh exec RELEASE HOST CMD...   a command on a host (as root; -u USER first for a user)
#   site/site.sh status RELEASE        the hosts and their units, sinfo, squeue
#   site/site.sh demo RELEASE          make demo's steps on the running site, run on the login
#                                      host with what a user there has (testbed/demo.sh)
#   site/site.sh logs RELEASE          every host's failed units and Slurm's and slurmbridge's journals
#   site/site.sh debs RELEASE          only build the packages into site/.dist/RELEASE
#   site/site.sh previous-debs RELEASE the previous release's packages (site/previous-release
#                                      names its commit) into site/.dist-previous/RELEASE
#   site/site.sh images RELEASE        only build the images
#
# Hosts come from slurm-conf/testbed/facts.yaml (site: and pools:): ctl1 and ctl2 (slurmctld
# primary and backup, quotad on both), db (MariaDB, slurmdbd), login (users submit here; elasticd)
# and one host per node. Each host's name on the network is its own. Make targets: site-up,
# site-down, site-status, site-logs, site-test, site-demo (SLURM_RELEASE=...).
#
# Environment: SITE_DEBS (a directory holding the .debs to install instead of building
# them: an upgrade test installs an older build this way), SITE_SUBNET (the network's first
# three octets, 172.31.<major> by default), DEBIAN_MIRROR.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$HERE/.." && pwd)
export PATH=$PATH:/usr/local/go/bin

say() { printf 'site: %s\n' "$*" >&2; }
die() { printf 'site: error: %s\n' "$*" >&2; exit 1; }

[ $# -ge 2 ] || { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
CMD=$1 RELEASE=$2
shift 2
bash "$REPO_ROOT/testbed/release.sh" suite "$RELEASE" >/dev/null || die "unknown Slurm release $RELEASE"
TAG=${RELEASE//./}
PREFIX=sbsite-$TAG
NETWORK=$PREFIX
RELEASE_IMAGE=slurmbridge/release-host:$RELEASE
IMAGE=slurmbridge/site:$RELEASE
DIST=$HERE/.dist/$RELEASE
STAGE=$HERE/.stage/$RELEASE

facts=$(cd "$REPO_ROOT" && go run -buildvcs=false ./testbed/cmd/testbed-render shell) || die "cannot read the facts"
eval "$facts"
CONTROLLERS=("${SITE_CONTROLLERS[@]}")
HOSTS=("$SITE_DB" "${CONTROLLERS[@]}" "$SITE_LOGIN" "${NODES[@]}")

# Each host has a fixed address, listed in every host's /etc/hosts as a site's DNS or hosts
# file would: Docker's own DNS forgets a stopped container's name, and a killed controller
# must still resolve, or every Slurm command on the backup fails on the dead primary's name.
SUBNET=${SITE_SUBNET:-172.31.${RELEASE%%.*}}
[[ $SUBNET =~ ^[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}$ ]] || die "SITE_SUBNET=$SUBNET: three octets, such as 172.31.26"
address() {
	local i
	for i in "${!HOSTS[@]}"; do
		[ "${HOSTS[$i]}" != "$1" ] || { echo "$SUBNET.$((10 + i))"; return; }
	done
	die "no host $1"
}

container() { echo "$PREFIX-$1"; }
# on HOST CMD...: a command on a host as root, its output here.
on() {
	local host=$1
	shift
	docker exec "$(container "$host")" "$@"
}
on_i() {
	local host=$1
	shift
	docker exec -i "$(container "$host")" "$@"
}
role() {
	case $1 in
	"$SITE_DB") echo db ;;
	"${CONTROLLERS[0]}" | "${CONTROLLERS[1]}") echo controller ;;
	"$SITE_LOGIN") echo login ;;
	*) echo node ;;
	esac
}

need_root_and_docker() {
	[ "$(id -u)" -eq 0 ] || die "run as root: the hosts are privileged containers"
	command -v docker >/dev/null && docker info >/dev/null 2>&1 || die "no Docker engine runs here"
}

build_images() {
	bash "$REPO_ROOT/testbed/container.sh" --prepare "$RELEASE"
	local t0=$SECONDS
	DOCKER_BUILDKIT=0 docker build -q -t "$IMAGE" --build-arg RELEASE_IMAGE="$RELEASE_IMAGE" "$HERE" >/dev/null ||
		die "building $IMAGE failed"
	say "image $IMAGE ready in $((SECONDS - t0))s"
}

# The packages of this tree for RELEASE: make deb in a container of that release (a site's
# build host), unless SITE_DEBS names a directory of ready ones.
build_debs() {
	if [ -n "${SITE_DEBS:-}" ]; then
		DIST=$(cd "$SITE_DEBS" && pwd)
		say "packages from $DIST: $(cd "$DIST" && ls slurmbridge-*.deb | tr '\n' ' ')"
		return
	fi
	rm -rf "$DIST"
	install -d "$DIST"
	local t0=$SECONDS version
	# The tree goes into the build container without .git: its version is named here.
	version=0.1.0~git$(git -C "$REPO_ROOT" log -1 --format=%cd --date=format:%Y%m%d%H%M).$(git -C "$REPO_ROOT" rev-parse --short HEAD)
	git -C "$REPO_ROOT" diff --quiet HEAD 2>/dev/null || version+=.dirty
	CONTAINER_OUT=$DIST bash "$REPO_ROOT/testbed/container.sh" "$RELEASE" \
		env SLURMBRIDGE_VERSION="$version" bash -c 'make -s deb >/dev/null && cp dist/slurmbridge-*.deb /out/' ||
		die "make deb for Slurm $RELEASE failed"
	say "packages for Slurm $RELEASE in $((SECONDS - t0))s: $(cd "$DIST" && ls | tr '\n' ' ')"
}

# The previous release's packages, built by that commit's own site.sh in a worktree of it: what
# the upgrade test installs first.
previous_debs() {
	local commit tree out=$HERE/.dist-previous/$RELEASE
	commit=$(awk '!/^#/ && NF {print $1; exit}' "$HERE/previous-release")
	git -C "$REPO_ROOT" cat-file -e "$commit^{commit}" 2>/dev/null ||
		die "the previous release $commit is not in this clone's history (a shallow clone? git fetch --unshallow)"
	tree=$HERE/.previous/$commit
	if [ ! -e "$tree/.git" ]; then
		rm -rf "$tree"
		git -C "$REPO_ROOT" worktree prune
		git -C "$REPO_ROOT" worktree add --detach "$tree" "$commit" >/dev/null || die "cannot check out $commit"
	fi
	bash "$tree/site/site.sh" debs "$RELEASE" || die "building the previous release's packages failed"
	rm -rf "$out"
	install -d "$out"
	cp "$tree/site/.dist/$RELEASE"/slurmbridge-*.deb "$out/"
	say "previous release ($commit) for Slurm $RELEASE: $(cd "$out" && ls | tr '\n' ' ')"
}

# What each host gets from here besides the packages: the site's own Slurm configuration
# (rendered from the facts), its munge key, its users, and the scripts a site's admin runs.
stage() {
	rm -rf "$STAGE"
	install -d -m 0700 "$STAGE"
	local render=(go run -buildvcs=false ./testbed/cmd/testbed-render files -site -dir /srv/site -out "$STAGE")
	head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$STAGE/db-password"
	(cd "$REPO_ROOT" &&
		"${render[@]}" -templates slurm-conf/site slurm.conf &&
		"${render[@]}" -templates slurm-conf/site -db-password-file "$STAGE/db-password" slurmdbd.conf &&
		"${render[@]}" gres.conf) || die "cannot render the site's Slurm configuration"
	dd if=/dev/urandom of="$STAGE/munge.key" bs=1024 count=1 status=none
	go run -buildvcs=false "$REPO_ROOT/testbed/cmd/testbed-render" shell >"$STAGE/facts.sh"
	cp "$REPO_ROOT/slurm-conf/testbed/pools.yaml" "$REPO_ROOT/slurm-conf/testbed/quotas.yaml" "$STAGE/"
	cp "$HERE"/host/*.sh "$REPO_ROOT/slurm-conf/testbed/ensure-accounts.sh" "$STAGE/"
}

start_hosts() {
	docker network inspect "$NETWORK" >/dev/null 2>&1 ||
		docker network create --subnet "$SUBNET.0/24" "$NETWORK" >/dev/null ||
		die "cannot create network $NETWORK on $SUBNET.0/24 (taken? set SITE_SUBNET)"
	local host args hosts=()
	for host in "${HOSTS[@]}"; do hosts+=(--add-host "$host:$(address "$host")"); done
	for host in "${HOSTS[@]}"; do
		args=(-d --name "$(container "$host")" --hostname "$host" --network "$NETWORK" --ip "$(address "$host")" "${hosts[@]}"
			# systemd as PID 1 (site/entrypoint.sh): its own mounts and cgroup2 subtree;
			# slurmd (24.11 on) clones namespaces; the fault suite cuts links with iptables.
			--cap-add SYS_ADMIN --cap-add NET_ADMIN --security-opt seccomp=unconfined --security-opt apparmor=unconfined
			--cgroupns private --tmpfs /run:exec --tmpfs /run/lock --tmpfs /tmp:exec,mode=1777
			-e container=docker
			-v "$PREFIX-home:/home")
		# Filesystems of their own, small, where the fault suite fills a disk: the journal
		# (quotad's log) on the controllers, MariaDB's data (quotad's state) on the database
		# host. tmpfs: this Docker has no loop devices; the database host is never killed.
		case $(role "$host") in
		controller) args+=(-v "$PREFIX-ctld-state:/var/spool/slurmctld"
			--mount type=tmpfs,destination=/var/log/journal,tmpfs-size=64m,tmpfs-mode=2755) ;;
		db) args+=(--mount type=tmpfs,destination=/var/lib/mysql,tmpfs-size=512m,tmpfs-mode=0755) ;;
		login | node) args+=(-v "$PREFIX-elastic:/var/spool/slurmbridge/elastic") ;;
		esac
		docker run "${args[@]}" "$IMAGE" >/dev/null || die "cannot start host $host"
	done
	local deadline=$((SECONDS + 120)) state
	for host in "${HOSTS[@]}"; do
		while :; do
			state=$(on "$host" systemctl is-system-running 2>/dev/null || true)
			case $state in running | degraded) break ;; esac
			[ $SECONDS -lt $deadline ] || die "host $host: systemd did not come up (is-system-running: ${state:-no answer})"
			sleep 1
		done
		[ "$state" = running ] || say "host $host: systemd is $state: $(on "$host" systemctl --failed --no-legend --plain | awk '{print $1}' | tr '\n' ' ')"
	done
	say "${#HOSTS[@]} hosts up with systemd $(on "$SITE_DB" systemctl --version | awk 'NR==1 {print $2}') as PID 1"
}

# copy HOST: the staged files and the packages to /srv/site on HOST.
copy_in() {
	local host=$1
	on "$host" install -d -m 0700 /srv/site
	tar -C "$STAGE" -cf - . | on_i "$host" tar -xf - -C /srv/site
	tar -C "$DIST" -cf - . | on_i "$host" tar -xf - -C /srv/site
}

# on_all ROLE CMD...: CMD on every host of ROLE (all: every host), in parallel, failing if any does.
on_all() {
	local want=$1 host pids=() failed=0
	shift
	for host in "${HOSTS[@]}"; do
		[ "$want" = all ] || [ "$(role "$host")" = "$want" ] || continue
		on "$host" "$@" 2>&1 | sed -u "s/^/[$host] /" &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p" || failed=1; done
	return $failed
}

up() {
	need_root_and_docker
	local t0=$SECONDS
	if docker ps -a --format '{{.Names}}' | grep -q "^$PREFIX-"; then
		say "removing the site cluster of Slurm $RELEASE that was here"
		down
	fi
	build_images
	build_debs
	stage
	start_hosts
	local host
	for host in "${HOSTS[@]}"; do copy_in "$host"; done
	# The site's Slurm as it was before slurmbridge: munge everywhere, then the database, the
	# controllers and the nodes.
	on_all all bash /srv/site/setup-slurm.sh common || die "the hosts' common setup failed"
	on "$SITE_DB" bash /srv/site/setup-slurm.sh db || die "the database host's setup failed"
	on_all controller bash /srv/site/setup-slurm.sh controller || die "the controllers' setup failed"
	on_all node bash /srv/site/setup-slurm.sh node || die "the nodes' setup failed"
	on "$SITE_LOGIN" bash /srv/site/setup-slurm.sh wait-nodes || die "the nodes did not come up"
	say "Slurm $RELEASE runs on ${#HOSTS[@]} hosts in $((SECONDS - t0))s"
	install_slurmbridge
	say "site cluster of Slurm $RELEASE up in $((SECONDS - t0))s"
}

# slurmbridge as docs/operations.md installs it (site/host/install-slurmbridge.sh, one step of
# the document per call).
install_slurmbridge() {
	local step="bash /srv/site/install-slurmbridge.sh"
	local ctl1=${CONTROLLERS[0]} host
	on_all controller $step package controller || die "installing slurmbridge-controller failed"
	on_all login $step package node || die "installing slurmbridge-node on $SITE_LOGIN failed"
	on_all node $step package node || die "installing slurmbridge-node on the nodes failed"
	# Controller, steps 1 and 2 on the first controller; slurm.conf is then the same on every
	# host, as the site's configuration management would copy it.
	on "$ctl1" $step slurm-conf || die "merging slurm.conf failed"
	on "$ctl1" cat /etc/slurm/slurm.conf >"$STAGE/slurm.conf.merged"
	for host in "${HOSTS[@]}"; do
		[ "$host" = "$ctl1" ] || on_i "$host" install -m 0644 /dev/stdin /etc/slurm/slurm.conf <"$STAGE/slurm.conf.merged"
	done
	on_all controller $step pools-yaml || die "pools.yaml failed"
	# Step 3: slurmctld (both) and every slurmd take the new configuration.
	on_all controller systemctl restart slurmctld || die "restarting slurmctld failed"
	on_all node systemctl restart slurmd || die "restarting slurmd failed"
	on "$SITE_LOGIN" bash /srv/site/setup-slurm.sh wait-nodes || die "the nodes did not come back"
	# Steps 4 to 6: quotad's database (on the database host), its rights, its environment.
	on "$SITE_DB" $step quotad-db "${CONTROLLERS[@]}" || die "quotad's database failed"
	local pw
	pw=$(on "$SITE_DB" cat /root/slurmbridge-db-password)
	for host in "${CONTROLLERS[@]}"; do
		printf '%s\n' "$pw" | on_i "$host" $step db-password || die "$host: the password file failed"
	done
	on "$ctl1" $step quotad-rights || die "quotad's Slurm rights failed"
	on "$ctl1" $step quotad-start first || die "starting quotad on $ctl1 failed"
	on "${CONTROLLERS[1]}" $step quotad-start standby || die "starting quotad on ${CONTROLLERS[1]} failed"
	# Nodes and elastic jobs: the plugstack line where sbatch/srun/salloc/slurmd run, then
	# elasticd on the login host and the agents on the GPU nodes.
	on_all login $step plugstack || die "plugstack.conf failed"
	on_all node $step plugstack || die "plugstack.conf failed"
	on_all node systemctl restart slurmd || die "restarting slurmd failed"
	on "$SITE_LOGIN" $step elasticd "$ctl1" || die "elasticd failed"
	on_all node $step elasticd-agent "$SITE_LOGIN" || die "the node agents failed"
	on_all login $step user-env "$ctl1" || die "the users' environment failed"
	on "$SITE_LOGIN" bash /srv/site/setup-slurm.sh wait-nodes || die "the nodes did not come back"
	# slurmbridge-doctor on every host that has it.
	on_all controller $step doctor || die "slurmbridge-doctor found problems on a controller"
}

down() {
	local names
	names=$(docker ps -a --format '{{.Names}}' | grep "^$PREFIX-" || true)
	# systemd shuts its units down on SIGRTMIN+3 (the image's stop signal).
	[ -z "$names" ] || docker rm -f -v $names >/dev/null
	docker network rm "$NETWORK" >/dev/null 2>&1 || true
	local vols
	vols=$(docker volume ls -q | grep "^$PREFIX-" || true)
	[ -z "$vols" ] || docker volume rm $vols >/dev/null
	say "site cluster of Slurm $RELEASE removed"
}

status() {
	local host
	for host in "${HOSTS[@]}"; do
		printf '%-12s %-10s %s\n' "$host" "$(role "$host")" \
			"$(on "$host" systemctl is-system-running 2>/dev/null || echo down): $(on "$host" sh -c 'systemctl list-units --no-legend --plain --state=active "slurm*" munge.service mariadb.service quotad.service "elasticd*" 2>/dev/null | awk "{print \$1}" | tr "\n" " "' 2>/dev/null)"
	done
	on "$SITE_LOGIN" sinfo -N -o '%N %P %T %G' || true
	on "$SITE_LOGIN" squeue -o '%i %u %a %P %q %T %R' || true
}

# The demo from the login host: the users submit from a directory on the shared /home holding
# the installed examples, quotactl finds quotad through the users' environment (user-env).
demo() {
	need_root_and_docker
	on "$SITE_LOGIN" systemctl is-active --quiet elasticd || die "no site cluster of Slurm $RELEASE runs: make site-up SLURM_RELEASE=$RELEASE"
	on_i "$SITE_LOGIN" install -m 0755 /dev/stdin /srv/site/demo.sh <"$REPO_ROOT/testbed/demo.sh"
	on "$SITE_LOGIN" sh -c 'install -d -m 0755 /home/demo/elasticd && ln -sfn /usr/share/doc/slurmbridge-node/examples /home/demo/elasticd/examples'
	local url
	url=$(on "$SITE_LOGIN" sh -c '. /etc/profile.d/slurmbridge.sh && echo "$SLURMBRIDGE_QUOTAD_URL"') || die "the login host has no /etc/profile.d/slurmbridge.sh"
	docker exec -e DEMO_SHARE=/home/demo -e SLURMBRIDGE_BINDIR=/usr/bin -e SLURMBRIDGE_QUOTAD_URL="$url" \
		"$(container "$SITE_LOGIN")" bash /srv/site/demo.sh
}

logs() {
	local host
	for host in "${HOSTS[@]}"; do
		echo "=== $host: failed units"
		on "$host" systemctl --failed --no-legend --plain 2>/dev/null || true
		echo "=== $host: journal (slurm*, munge, mariadb, quotad, elasticd*)"
		on "$host" journalctl --no-pager -n 60 -u 'slurm*' -u munge -u mariadb -u quotad -u 'elasticd*' 2>/dev/null || true
		on "$host" sh -c 'tail -n 30 /var/log/slurm/*.log 2>/dev/null' || true
	done
}

case $CMD in
up) up ;;
down) need_root_and_docker; down ;;
images) need_root_and_docker; build_images ;;
debs) need_root_and_docker; build_debs ;;
previous-debs) need_root_and_docker; previous_debs ;;
status) status ;;
demo) demo ;;
logs) logs ;;
exec)
	[ $# -ge 2 ] || die "usage: site.sh exec RELEASE HOST [-u USER] CMD..."
	host=$1
	shift
	user=()
	if [ "$1" = -u ]; then user=(-u "$2"); shift 2; fi
	exec docker exec -i "${user[@]}" "$(container "$host")" "$@"
	;;
*) die "unknown command $CMD: up, down, exec, status, demo, logs, debs, previous-debs, images" ;;
esac
