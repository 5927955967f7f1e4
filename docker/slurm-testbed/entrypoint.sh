#!/usr/bin/env bash
# Entry point of the slurmbridge testbed image: one image, one role per container.
#
#   slurmbridge-entrypoint mariadb | slurmdbd | slurmctld | slurmd | quotad | elasticd
#                                                                     run that role in the foreground
#   slurmbridge-entrypoint health ROLE                                exit 0 when the role is ready
#   slurmbridge-entrypoint add-users                                  (image build) the projects' users, with fixed uids
#   slurmbridge-entrypoint render-static                              (image build) render slurm.conf, gres.conf, plugstack.conf
#   slurmbridge-entrypoint facts                                      the image's testbed facts as bash assignments, for eval
#   slurmbridge-entrypoint CMD...                                     run anything else (e.g. bash)
#
# Configs come from slurm-conf/testbed/*.in, the templates of the local testbed, filled in by
# testbed-render (built into the image) from the testbed's facts (slurm-conf/testbed/facts.yaml)
# for a network of containers: Slurm's default ports, and each daemon addressed by its compose
# service name (= its host name; slurmd nodes are named after the node).
# Layout under $TESTBED_DIR as in the local testbed: etc/ run/ state/ log/ gpus/ plugins/ secrets/.
set -euo pipefail

TESTBED_DIR=${TESTBED_DIR:-/srv/slurmbridge}
TEMPLATES=/usr/local/share/slurmbridge/slurm-conf
ETC=$TESTBED_DIR/etc
RUN=$TESTBED_DIR/run
LOG=$TESTBED_DIR/log
STATE=$TESTBED_DIR/state
MUNGE_KEY=$TESTBED_DIR/secrets/munge/munge.key
DB_PASSWORD_FILE=$TESTBED_DIR/secrets/db/db-password
DB_SOCKET=$RUN/mysqld/mysqld.sock
FACTS=$TEMPLATES/facts.yaml

say() { printf '%s: %s\n' "${ROLE:-entrypoint}" "$*"; }
die() { printf '%s: error: %s\n' "${ROLE:-entrypoint}" "$*" >&2; exit 1; }
# wait_for, start_munge and make_fake_gpus, as the local testbed's scripts use them
# (testbed/supervise.sh).
# shellcheck source=testbed/supervise.sh
. /usr/local/share/slurmbridge/supervise.sh

# CLUSTER, NODES, GPU_NODES, PROJECTS (account:user) and the container testbed's ports and
# hosts (FACT_CONTAINER_*): the facts both testbeds share. `slurmbridge-entrypoint facts` prints
# them, for the scripts on the host that check the running cluster (smoke.sh).
facts=$(testbed-render shell -facts "$FACTS") || die "cannot read the testbed's facts ($FACTS)"
eval "$facts"

# quotad runs as its own unprivileged user (uid fixed in the Dockerfile, so slurmdbd and
# slurmctld resolve it too), a Slurm AdminLevel=Administrator as packaging/systemd/quotad.service
# asks; metrics and its read-only API on the compose network, where elasticd reads the lending
# limits (QUOTAD_HOST), checked by the health check from inside its container.
QUOTAD_USER=slurmbridge
QUOTAD_HOST=quotad
QUOTAD_LISTEN=0.0.0.0:$FACT_CONTAINER_QUOTAD_PORT
QUOTAD_INTERVAL=${QUOTAD_INTERVAL:-2s}
QUOTAD_PASSWORD_FILE=$TESTBED_DIR/secrets/quotad/db-password
# elasticd as testbed/elasticd.sh runs it (fast settings, so a demo job moves in seconds), on the
# compose network for the node agents; its state directory is the SPANK plugin's dir= in
# plugstack.conf, a volume shared by the login node, the nodes and elasticd.
ELASTIC_DIR=$TESTBED_DIR/elastic
ELASTICD_HOST=elasticd
ELASTICD_PORT=$FACT_CONTAINER_ELASTICD_PORT
ELASTICD_INTERVAL=${ELASTICD_INTERVAL:-2s}
# The node agent needs nothing of root (packaging/systemd/elasticd-agent.service): quotad's user.
AGENT_USER=slurmbridge


# render [FLAG]... FILE...: slurm-conf/testbed's templates of FILEs, filled in from the facts for
# the containers, into $ETC. JOB_SUBMIT_LINE and SLURM_PLUGIN_DIR are set by render_static
# (slurm.conf only). A node line's host name and address are its own NodeName: one container
# per node.
render() {
	testbed-render files -facts "$FACTS" -container -out "$ETC" -dir "$TESTBED_DIR" \
		-job-submit-line "${JOB_SUBMIT_LINE-}" -plugin-dir "$TESTBED_DIR/plugins" \
		-slurm-plugin-dir "${SLURM_PLUGIN_DIR-}" -spank-elastic-so "$TESTBED_DIR/plugins/spank_elastic.so" "$@" ||
		die "cannot render $* from $FACTS"
}

# The projects' users, at image build time, with uids from the facts' firstUID on in the
# projects' order: every container resolves the same users, as a cluster's directory service would.
add_users() {
	local entry uid=$FACT_CONTAINER_FIRST_UID
	for entry in "${PROJECTS[@]}"; do
		useradd --create-home --shell /bin/bash --uid "$uid" "${entry#*:}"
		uid=$((uid + 1))
	done
}

# Rendered at image build time: identical in every container, so slurmctld never sees a
# config hash mismatch from a node.
render_static() {
	SLURM_PLUGIN_DIR=$(dirname "$(dpkg -L slurm-wlm-basic-plugins slurm-smd 2>/dev/null | grep '/select_cons_tres.so$' | head -n1)")
	[ -d "$SLURM_PLUGIN_DIR" ] || die "cannot find Slurm's plugin directory"
	JOB_SUBMIT_LINE="#JobSubmitPlugins=pools (job_submit_pools.so was not built)"
	[ -f "$TESTBED_DIR/plugins/job_submit_pools.so" ] && JOB_SUBMIT_LINE=JobSubmitPlugins=pools
	install -d -m 0755 "$ETC"
	render slurm.conf gres.conf
	install -m 0644 "$TEMPLATES/pools.yaml" "$ETC/pools.yaml"
	# Here quotad runs as its own user, not root: the plugin lets only root, SlurmUser and
	# borrow_qos_admins move jobs into a borrow QOS (docs/operations.md).
	printf 'borrow_qos_admins: [%s]\n' "$QUOTAD_USER" >>"$ETC/pools.yaml"
	# As testbed.sh's install_spank: the elastic declaration when the plugin is built, else none.
	if [ -f "$TESTBED_DIR/plugins/spank_elastic.so" ]; then
		render plugstack.conf
	else
		: >"$ETC/plugstack.conf"
	fi
	# Root's 0755, as the SPANK plugin makes it: a new volume mounted here starts as this.
	install -d -m 0755 "$ELASTIC_DIR"
	# Plain `sinfo` without SLURM_CONF (e.g. in `docker exec ... bash -l`) finds the same files.
	install -d /etc/slurm
	ln -sf "$ETC/slurm.conf" /etc/slurm/slurm.conf
	ln -sf "$ETC/gres.conf" /etc/slurm/gres.conf
}

layout() {
	install -d -m 0755 "$RUN" "$STATE" "$TESTBED_DIR/secrets"
	install -d -m 0755 -o munge -g munge "$RUN/munge"
	install -d -m 0700 -o munge -g munge "$STATE/munge" "$(dirname "$MUNGE_KEY")"
	# Logs of every container share one volume: sticky world-writable, one file per daemon.
	# Never reset its mode (install -d would): another container's munged may be creating its file.
	mkdir -p "$LOG"
	[ "$(stat -c %a "$LOG")" = 1777 ] || chmod 1777 "$LOG"
}

# The munge key is made once, by whichever container gets the lock first, on the shared volume.
start_munged() {
	start_munge "$MUNGE_KEY" "$RUN/munge/munge.socket" "$RUN/munge/munged.pid" \
		"$LOG/munged-$(hostname -s).log" "$STATE/munge/munge.seed" 4 || die "munged did not start"
}

# supervise PID [COMPANION...]: stay in the foreground while the daemon runs, pass docker's
# SIGTERM on to it and its companions; the companions (the node agent) end with it.
supervise() {
	local pid=$1 all=("$@")
	trap 'kill -TERM "${all[@]}" 2>/dev/null || true' TERM INT
	set +e
	wait "$pid"
	local rc=$?
	# A trapped signal interrupts the first wait; the second one waits for the real exit.
	kill -0 "$pid" 2>/dev/null && { wait "$pid"; rc=$?; }
	[ $# -eq 1 ] || kill -TERM "${all[@]:1}" 2>/dev/null
	exit $rc
}

ctld_up() { scontrol ping | grep -q 'is UP'; }

db_root() { mariadb --no-defaults --socket="$DB_SOCKET" -uroot "$@"; }

role_mariadb() {
	local data=$STATE/mysql/data
	install -d -m 0755 -o mysql -g mysql "$RUN/mysqld" "$STATE/mysql"
	install -d -m 0700 "$(dirname "$DB_PASSWORD_FILE")"
	[ -s "$DB_PASSWORD_FILE" ] ||
		(umask 077 && head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$DB_PASSWORD_FILE")
	if [ ! -d "$data/mysql" ]; then
		say "initialising MariaDB in $data"
		mariadb-install-db --no-defaults --user=mysql --datadir="$data" \
			--auth-root-authentication-method=socket --skip-test-db >"$LOG/mariadb-install.log" 2>&1 ||
			{ cat "$LOG/mariadb-install.log" >&2; die "mariadb-install-db failed"; }
	fi
	rm -f "$RUN/mariadb.ready"
	touch "$LOG/mariadb.log" && chown mysql:mysql "$LOG/mariadb.log"
	# Listens on the compose network only: no port is published on the host.
	/usr/sbin/mariadbd --no-defaults --user=mysql --datadir="$data" \
		--socket="$DB_SOCKET" --port="$FACT_CONTAINER_DB_PORT" --bind-address=0.0.0.0 \
		--pid-file="$RUN/mysqld/mariadb.pid" --log-error="$LOG/mariadb.log" \
		--innodb-buffer-pool-size=128M --innodb-log-file-size=64M \
		--innodb-lock-wait-timeout=900 --max-allowed-packet=16M &
	local pid=$!
	wait_for MariaDB 60 db_root -e 'SELECT 1' || { tail -n 20 "$LOG/mariadb.log" >&2; die "MariaDB did not start"; }
	# Any host: the daemons reach it over the compose network, by their containers' addresses.
	local sql
	sql=$(testbed-render db-setup -facts "$FACTS" -db-password-file "$DB_PASSWORD_FILE" '%') || die "cannot render the database setup"
	printf '%s\n' "$sql" | db_root || die "setting up the databases failed"
	touch "$RUN/mariadb.ready"
	say "MariaDB ready"
	supervise $pid
}

# As the local testbed's, and quotad's user an Administrator too: quotad changes QOS and
# accounts (sacctmgr) and pending jobs' QOS (scontrol).
ensure_accounts() {
	bash "$TEMPLATES/ensure-accounts.sh" --admin "$QUOTAD_USER" "$CLUSTER" "${PROJECTS[@]}"
}

role_slurmdbd() {
	start_munged
	wait_for "the database password" 60 test -s "$DB_PASSWORD_FILE" || die "no $DB_PASSWORD_FILE from the mariadb container"
	render -db-password-file "$DB_PASSWORD_FILE" slurmdbd.conf
	chown slurm:slurm "$ETC/slurmdbd.conf"
	touch "$LOG/slurmdbd.log" && chown slurm:slurm "$LOG/slurmdbd.log"
	rm -f "$RUN/slurmdbd.ready"
	/usr/sbin/slurmdbd -D &
	local pid=$!
	wait_for slurmdbd 60 sacctmgr -n show cluster || { tail -n 20 "$LOG/slurmdbd.log" >&2; die "slurmdbd did not answer"; }
	# Before slurmctld starts (compose waits for this container's health): the cluster must
	# exist in the database when slurmctld registers.
	ensure_accounts
	touch "$RUN/slurmdbd.ready"
	say "slurmdbd ready: cluster $CLUSTER, accounts and users ${PROJECTS[*]}"
	supervise $pid
}

role_slurmctld() {
	local node
	start_munged
	# Compose starts the node containers right after this one; slurmctld resolves every
	# NodeAddr when it starts and retries an unknown name for 10 s each, so wait for their DNS
	# names first (a missing node is still started without, and comes up once it resolves).
	for node in "${NODES[@]}"; do
		wait_for "$node in DNS" 60 getent hosts "$node" || say "starting without $node"
	done
	install -d -m 0755 -o slurm -g slurm "$STATE/slurmctld" "$RUN/slurm"
	touch "$LOG/slurmctld.log" && chown slurm:slurm "$LOG/slurmctld.log"
	/usr/sbin/slurmctld -D &
	supervise $!
}

role_slurmd() {
	local node=${SLURMD_NODENAME:-$(hostname -s)}
	start_munged
	install -d -m 0755 "$STATE/slurmd/$node"
	# Its fake GPUs, where gres.conf's File= names them, if the facts give it any.
	[[ " ${GPU_NODES[*]} " != *" $node "* ]] || make_fake_gpus "$TESTBED_DIR" "$node" "$GPUS_PER_NODE"
	# Registers at once instead of retrying while slurmctld still starts.
	wait_for slurmctld 120 ctld_up || say "slurmctld does not answer yet; slurmd retries on its own"
	/usr/sbin/slurmd -D -N "$node" &
	local slurmd=$!
	# The node agent beside slurmd, as testbed/elasticd.sh runs it (one per node here). No NVML
	# in these containers: it says so once and elasticd decides from throughput alone.
	touch "$LOG/elastic-agent-$node.log" && chown "$AGENT_USER:$AGENT_USER" "$LOG/elastic-agent-$node.log"
	runuser -u "$AGENT_USER" -- elasticd agent --node "$node" \
		--elasticd "http://$ELASTICD_HOST:$ELASTICD_PORT" --interval "$ELASTICD_INTERVAL" \
		--munge-socket "$RUN/munge/munge.socket" </dev/null >>"$LOG/elastic-agent-$node.log" 2>&1 &
	supervise $slurmd $!
}

quotad_up() { (exec 3<>"/dev/tcp/127.0.0.1/${QUOTAD_LISTEN##*:}") 2>/dev/null; }

# quotad as in testbed/quotad.sh: import slurm-conf/testbed/quotas.yaml, then the daemon in the
# foreground, both as $QUOTAD_USER. Its password file must be its own, mode 0600: a private copy
# of the shared secret (the volume's file belongs to root).
role_quotad() {
	start_munged
	wait_for "the database password" 60 test -s "$DB_PASSWORD_FILE" || die "no $DB_PASSWORD_FILE from the mariadb container"
	install -d -m 0700 -o "$QUOTAD_USER" -g "$QUOTAD_USER" "$(dirname "$QUOTAD_PASSWORD_FILE")"
	install -m 0600 -o "$QUOTAD_USER" -g "$QUOTAD_USER" "$DB_PASSWORD_FILE" "$QUOTAD_PASSWORD_FILE"
	export SLURMBRIDGE_CLUSTER=$CLUSTER SLURMBRIDGE_DB_ADDR=$FACT_CONTAINER_DB_HOST:$FACT_CONTAINER_DB_PORT SLURMBRIDGE_DB_NAME=slurm_acct_db \
		SLURMBRIDGE_DB_USER=slurm SLURMBRIDGE_DB_PASSWORD_FILE=$QUOTAD_PASSWORD_FILE SLURM_CONF
	wait_for slurmctld 120 ctld_up || die "slurmctld does not answer"
	touch "$LOG/quotad.log" && chown "$QUOTAD_USER:$QUOTAD_USER" "$LOG/quotad.log"
	runuser -u "$QUOTAD_USER" -- quotactl import "$TEMPLATES/quotas.yaml" >>"$LOG/quotad.log" 2>&1 ||
		{ tail -n 20 "$LOG/quotad.log" >&2; die "quotactl import failed"; }
	say "imported $TEMPLATES/quotas.yaml; starting quotad (interval $QUOTAD_INTERVAL, metrics on $QUOTAD_LISTEN)"
	runuser -u "$QUOTAD_USER" -- quotad --interval "$QUOTAD_INTERVAL" --listen "$QUOTAD_LISTEN" \
		</dev/null >>"$LOG/quotad.log" 2>&1 &
	supervise $!
}

# status needs a MUNGE credential: root's, from this container's munged.
elasticd_up() { elasticd status --elasticd "http://127.0.0.1:$ELASTICD_PORT" --munge-socket "$RUN/munge/munge.socket" --json >/dev/null; }

# elasticd as testbed/elasticd.sh starts it. Root, as packaging/systemd/elasticd.service says
# why (sbatch as each job's owner, their batch scripts, root-owned declarations); compose
# drops every capability but the few that needs.
role_elasticd() {
	start_munged
	wait_for slurmctld 120 ctld_up || die "slurmctld does not answer"
	[ -d "$ELASTIC_DIR" ] || die "no $ELASTIC_DIR: the elastic volume is not mounted"
	say "starting elasticd (state $ELASTIC_DIR, interval $ELASTICD_INTERVAL, listening on :$ELASTICD_PORT)"
	elasticd run --state-dir "$ELASTIC_DIR" --pools "$ETC/pools.yaml" \
		--listen "0.0.0.0:$ELASTICD_PORT" --interval "$ELASTICD_INTERVAL" --grace 10s --min-samples 3 \
		--settle 5s --stale-after 30s --cooldown 2m --munge-socket "$RUN/munge/munge.socket" --agent-user "$AGENT_USER" \
		--quotad "$QUOTAD_HOST:$FACT_CONTAINER_QUOTAD_PORT" </dev/null >>"$LOG/elasticd.log" 2>&1 &
	supervise $!
}

health() {
	local node state
	case $1 in
	mariadb) test -f "$RUN/mariadb.ready" && db_root -e 'SELECT 1' slurm_acct_db ;;
	slurmdbd) test -f "$RUN/slurmdbd.ready" && sacctmgr -n show cluster ;;
	slurmctld) ctld_up ;;
	quotad) quotad_up ;;
	elasticd) elasticd_up ;;
	slurmd)
		node=${SLURMD_NODENAME:-$(hostname -s)}
		state=$(sinfo -h -n "$node" -o %t)
		case $state in idle | alloc | mix | comp) ;; *) echo "node $node is ${state:-unknown}"; return 1 ;; esac
		;;
	*) die "health: unknown role $1" ;;
	esac
}

ROLE=${1:-}
case $ROLE in
add-users) add_users ;;
render-static) render_static ;;
health) health "${2:-}" ;;
facts) printf '%s\n' "$facts" ;;
mariadb) layout && role_mariadb ;;
slurmdbd) layout && role_slurmdbd ;;
slurmctld) layout && role_slurmctld ;;
slurmd) layout && role_slurmd ;;
quotad) layout && role_quotad ;;
elasticd) layout && role_elasticd ;;
"") exec bash ;;
*) exec "$@" ;;
esac
