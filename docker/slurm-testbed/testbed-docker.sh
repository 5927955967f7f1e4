#!/usr/bin/env bash
# The container testbed: build the image offline, bring the cluster up, test it, take it down.
#
#   testbed-docker.sh build   stage the build context (Go toolchain + vendored modules) and build
#                             $IMAGE from $BASE_IMAGE (make docker-base builds that one)
#   testbed-docker.sh up      build, `compose up -d`, wait until all the facts' nodes are idle
#                             (what an interrupted run left, containers and volumes, is removed
#                             first)
#   testbed-docker.sh test    the smoke scenario (smoke.sh) against the running containers
#   testbed-docker.sh down    `compose down -v`: containers, network and volumes are removed
#   testbed-docker.sh logs    every daemon's log from the log volume, then the cluster's state
#   testbed-docker.sh state   containers, nodes with reasons, and jobs
#
# No host port is published: use it with `docker exec` (see README.md here).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$HERE/../.." && pwd)
export PATH=$PATH:/usr/local/go/bin
# The Slurm release of the cluster (testbed/release.sh): the host's unless SLURM_RELEASE says.
SLURM_RELEASE=${SLURM_RELEASE:-$(bash "$REPO_ROOT/testbed/release.sh" host)}
SUITE=$(bash "$REPO_ROOT/testbed/release.sh" suite "$SLURM_RELEASE")
# debian, or smd: SchedMD's packages built from ../shared/slurm-source (testbed/slurm-source.sh).
SLURM_PACKAGING=$(bash "$REPO_ROOT/testbed/release.sh" packaging "$SLURM_RELEASE")
export BASE_IMAGE=${BASE_IMAGE:-slurmbridge/debian:$SUITE}
export IMAGE=${IMAGE:-slurmbridge/slurm-testbed:$SLURM_RELEASE}
# One cluster per release can run at once; their names never meet.
export COMPOSE_PROJECT_NAME=${COMPOSE_PROJECT_NAME:-slurmbridge-testbed-${SLURM_RELEASE//./-}}
DEBIAN_MIRROR=${DEBIAN_MIRROR:-}
IDLE_TIMEOUT=${IDLE_TIMEOUT:-180}
CONTEXT=$HERE/.context
FACTS=$REPO_ROOT/slurm-conf/testbed/facts.yaml

say() { printf 'testbed-docker: %s\n' "$*"; }
die() { printf 'testbed-docker: error: %s\n' "$*" >&2; exit 1; }

# load_facts sets NODES and the testbed's other facts (slurm-conf/testbed/facts.yaml) as
# testbed/testbed.sh reads them: testbed-render from this tree, run with the host's Go.
load_facts() {
	local facts
	facts=$(cd "$REPO_ROOT" && go run -buildvcs=false ./testbed/cmd/testbed-render shell -facts "$FACTS") ||
		die "cannot read the testbed's facts ($FACTS)"
	eval "$facts"
}

# Compose v2 (`docker compose`) where present, else v1 (`docker-compose`); both read the file.
compose() {
	if docker compose version >/dev/null 2>&1; then
		docker compose -f "$HERE/docker-compose.yml" "$@"
	elif command -v docker-compose >/dev/null; then
		docker-compose -f "$HERE/docker-compose.yml" "$@"
	else
		die "neither 'docker compose' nor 'docker-compose' is installed"
	fi
}

install_rsync() {
	[ "$(id -u)" -eq 0 ] || die "no rsync: install it (apt-get install rsync)"
	say "installing rsync (stages the build context)"
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends rsync >/dev/null ||
		{ apt-get update >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends rsync >/dev/null; } ||
		die "could not install rsync"
}

# Offline Go build: the host's toolchain and the module's dependencies (go mod vendor, from the
# host's module cache) go into the context, so nothing is downloaded inside the build.
stage_context() {
	local goroot
	command -v rsync >/dev/null || install_rsync
	command -v go >/dev/null || die "no go on PATH: the image's build stage uses the host's Go toolchain"
	goroot=$(go env GOROOT)
	install -d "$CONTEXT"
	# Only what building needs: no tests, test data or docs of the toolchain (about 100 MB less).
	rsync -a --delete --exclude=/test/ --exclude=/api/ --exclude=/doc/ --exclude=/misc/ \
		--exclude=testdata/ --exclude='*_test.go' "$goroot/" "$CONTEXT/go/"
	rm -rf "$CONTEXT/src.new"
	# The working tree as git sees it (tracked and new, not ignored), so uncommitted work is built.
	# docker/ stays out so that editing the testbed's own files does not rebuild the Go stage.
	(cd "$REPO_ROOT" && git ls-files -z -co --exclude-standard) | grep -zv '^docker/' |
		rsync -a --from0 --files-from=- "$REPO_ROOT/" "$CONTEXT/src.new/"
	(cd "$REPO_ROOT" && GOFLAGS=-mod=mod go mod vendor -o "$CONTEXT/src.new/vendor") ||
		die "go mod vendor failed: on a host without internet, fill the module cache first (go mod download)"
	# Swapped in with --checksum: unchanged files stay as they are and the layer cache holds.
	rsync -a --delete --checksum "$CONTEXT/src.new/" "$CONTEXT/src/"
	rm -rf "$CONTEXT/src.new"
	# What the runtime stage takes besides the build output: the templates, the entry point and
	# the process supervision it shares with the local testbed.
	install -d "$CONTEXT/testbed"
	rsync -a --delete --checksum "$REPO_ROOT/slurm-conf/testbed/" "$CONTEXT/testbed/slurm-conf/"
	rsync -a --checksum "$HERE/entrypoint.sh" "$CONTEXT/testbed/entrypoint.sh"
	rsync -a --checksum "$REPO_ROOT/testbed/supervise.sh" "$CONTEXT/testbed/supervise.sh"
	# SchedMD's packages of a release no Debian suite ships (built once, then cached); none for
	# Debian's, so their layers stay as they were.
	rm -rf "$CONTEXT/debs.new"
	install -d "$CONTEXT/debs.new"
	if [ "$SLURM_PACKAGING" = smd ]; then
		bash "$REPO_ROOT/testbed/slurm-source.sh" stage "$SLURM_RELEASE" "$CONTEXT/debs.new" ||
			die "building Slurm $SLURM_RELEASE's packages from source failed"
	fi
	rsync -a --delete --checksum "$CONTEXT/debs.new/" "$CONTEXT/debs/"
	rm -rf "$CONTEXT/debs.new"
}

# Each build step with the seconds since the start, to see where a slow CI build spends them.
stamp_steps() {
	local t0=$1 line
	while IFS= read -r line; do
		case $line in Step*) printf '[%4ds] %s\n' $((SECONDS - t0)) "$line" ;; *) printf '%s\n' "$line" ;; esac
	done
}

cmd_build() {
	docker image inspect "$BASE_IMAGE" >/dev/null 2>&1 ||
		die "no base image $BASE_IMAGE: run 'make docker-base' (or BASE_IMAGE=debian:bookworm with internet)"
	local t0=$SECONDS
	stage_context
	say "building $IMAGE from $BASE_IMAGE (context staged in $((SECONDS - t0))s)"
	local log
	log=$(mktemp "${TMPDIR:-/tmp}/testbed-docker-build.XXXXXX")
	# A mirror's hiccup should not fail the build: it is tried once more, and the layers that
	# were finished come from the cache. A failure that repeats is a real one.
	if ! docker_build "$log" $t0; then
		build_failed "$log"
		say "trying the build once more in 20s"
		sleep 20
		docker_build "$log" $t0 || { build_failed "$log"; rm -f "$log"; die "docker build failed twice (its last lines above)"; }
	fi
	rm -f "$log"
	say "built $IMAGE in $((SECONDS - t0))s"
}

# docker_build LOG T0 builds $IMAGE, its output on stdout with the step times and in LOG.
docker_build() {
	# The classic builder: BuildKit needs the buildx plugin on Docker 23+ and is not always there.
	DOCKER_BUILDKIT=${DOCKER_BUILDKIT:-0} docker build -f "$HERE/Dockerfile" -t "$IMAGE" \
		--build-arg BASE_IMAGE="$BASE_IMAGE" --build-arg DEBIAN_MIRROR="$DEBIAN_MIRROR" \
		--build-arg SLURM_PACKAGING="$SLURM_PACKAGING" \
		"$CONTEXT" 2>&1 | tee "$1" | stamp_steps "$2"
}

# build_failed repeats a failed build's last lines as errors, so that a CI run's summary, which
# keeps error lines only, says why (an apt mirror, the disk, the Go build).
build_failed() {
	tail -n 25 "$1" | sed -e 's/\x1b\[[0-9;]*m//g' -e 's/^/testbed-docker: error: | /' >&2
	# A full disk or an exhausted memory fails a build with the step's output saying little.
	{ df -h "$(docker info -f '{{.DockerRootDir}}' 2>/dev/null || echo /)" | tail -n 1; free -m | sed -n 2p; } 2>&1 |
		sed 's/^/testbed-docker: error: | disk, memory: /' >&2
}

ctld() { compose exec -T slurmctld "$@"; }

all_nodes_idle() {
	[ "$(ctld sinfo -h -N -o '%N %t' 2>/dev/null | sort -u | awk '$2 == "idle"' | wc -l)" -eq ${#NODES[@]} ]
}

# The project's containers as docker sees them, one state per line (running, exited, ...),
# read with docker itself so that compose v1 and v2 answer alike.
project_container_states() {
	docker ps -a --filter "label=com.docker.compose.project=$COMPOSE_PROJECT_NAME" --format '{{.State}}'
}

project_volumes() {
	docker volume ls -q --filter "label=com.docker.compose.project=$COMPOSE_PROJECT_NAME"
}

# A cluster that is not wholly running is what an interrupted run left (a killed CI job, a
# reboot): its volumes still hold that run's queue, so its pending jobs would start on the nodes
# as soon as they register and the nodes would never all be idle. Start such a cluster afresh;
# a wholly running one is kept (up again after an edit only recreates what changed).
remove_leftovers() {
	local services states total running volumes
	services=$(compose config --services | wc -l)
	states=$(project_container_states)
	total=$(grep -c . <<<"$states" || true)
	running=$(grep -cx running <<<"$states" || true)
	volumes=$(project_volumes | grep -c . || true)
	[ "$total" -eq "$services" ] && [ "$running" -eq "$services" ] && return 0
	[ "$total" -eq 0 ] && [ "$volumes" -eq 0 ] && return 0
	say "an earlier run left $total containers ($running of $services services running) and $volumes volumes: removing them, the cluster starts afresh"
	cmd_down
}

cmd_up() {
	cmd_build
	load_facts
	local t0=$SECONDS deadline
	remove_leftovers
	say "starting the cluster (project $COMPOSE_PROJECT_NAME)"
	compose up -d --remove-orphans || { compose ps; cmd_logs; die "compose up failed"; }
	deadline=$((SECONDS + IDLE_TIMEOUT))
	until all_nodes_idle; do
		if [ $SECONDS -ge $deadline ]; then
			cmd_logs
			die "nodes not idle ${IDLE_TIMEOUT}s after up (the cluster's state is just above)"
		fi
		sleep 1
	done
	local took=$((SECONDS - t0))
	echo "$took" >"$CONTEXT/up-to-idle-seconds"
	say "up in ${took}s (compose up to all ${#NODES[@]} nodes idle)"
	ctld sinfo -o '%10P %.5a %.6D %8t %N %G'
	say "use it with: docker exec -it -u alice $(compose ps -q slurmctld | cut -c1-12) bash   (or: make testbed-docker-shell)"
}

cmd_down() {
	compose down -v --remove-orphans
}

cmd_logs() {
	local id
	id=$(compose ps -q slurmctld 2>/dev/null || true)
	[ -n "$id" ] || { compose logs --tail=40 || true; return 0; }
	docker exec "$id" bash -c 'for f in $TESTBED_DIR/log/*.log; do echo "=== tail $f"; tail -n 40 "$f"; done' || true
	compose logs --tail=20 || true
	cmd_state
}

# Last, so that the end of a long failure log (all a CI summary may keep) says what was wrong.
cmd_state() {
	echo "=== containers"
	compose ps || true
	echo "=== nodes (sinfo -N -l) and reasons (sinfo -R)"
	ctld sinfo -N -l || true
	ctld sinfo -R || true
	echo "=== jobs (squeue)"
	ctld squeue -o '%.8i %.9P %.10j %.8u %.10a %.8T %.10M %.20R' || true
}

cmd_test() {
	[ -n "$(compose ps -q slurmctld 2>/dev/null)" ] || die "the container testbed is not up: make testbed-docker-up"
	COMPOSE_FILE=$HERE/docker-compose.yml SLURM_RELEASE=$SLURM_RELEASE UP_SECONDS=$(cat "$CONTEXT/up-to-idle-seconds" 2>/dev/null || echo '?') \
		bash "$HERE/smoke.sh"
}

case ${1:-} in
build) cmd_build ;;
context) stage_context ;;
up) cmd_up ;;
down) cmd_down ;;
test) cmd_test ;;
logs) cmd_logs ;;
state) cmd_state ;;
shell) compose exec -u "${2:-alice}" slurmctld bash ;;
*)
	echo "usage: $0 build|up|test|down|logs|state|shell [user]" >&2
	exit 2
	;;
esac
