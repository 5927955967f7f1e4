#!/usr/bin/env bash
# Captures the JSON that squeue, sinfo and `scontrol show nodes` print on one Slurm release,
# for bridge/slurm's fixtures.
#
#   capture.sh IMAGE RELEASE [OUTDIR]   e.g. capture.sh slurmbridge/debian:trixie 24.11
#
# IMAGE is a plain Debian image whose suite carries RELEASE (testbed/release.sh), or
# slurmbridge/release-host:RELEASE with Slurm installed already (testbed/container.sh --prepare;
# the only way to a release built from SchedMD's source, 25.05 or 25.11). A throwaway
# container on its own network (no published ports) installs Slurm from Debian if missing, runs
# slurmctld and two slurmd on 127.0.0.1 with fake GPUs, submits the same jobs on every
# release, and writes into OUTDIR (default: this script's parent directory):
#   squeue-REL-idle.json  sinfo-REL-idle.json  scontrol-nodes-REL-idle.json   before any job
#   squeue-REL-mixed.json sinfo-REL-busy.json  scontrol-nodes-REL-busy.json   with the jobs
#   scontrol-nodes-REL-{idle,busy}.txt   the node read (scontrol --oneliner --details show
#                            nodes, bridge/slurm/nodes.go) right after the JSON of the
#                            moment: `sinfo --json` on 22.05, `scontrol show nodes --json` later
#   scontrol-nodes-REL.args  the node read's command line
#   scontrol-nodes-REL-marked.txt and its JSON (sinfo-22.05-marked.json on 22.05)   at the end:
#                            n1 reserved, in two partitions, with a comment of free text over
#                            two lines; n2 draining with a free-text reason and in no
#                            partition; a GPU job on each
#   version-REL.txt                                                            `sinfo --version`
#   squeue-REL-mixed.txt (+ .args)   quotad's fast read (squeue --Format) of the mixed moment
#   squeue-REL-array*.txt            an array record, a task split off, a batched update
#   scontrol-update-REL.{out,err,rc} what a batched `scontrol update` says when some ids fail
#   squeue-REL-requeue.json   jobs Slurm can and cannot requeue: sbatch --requeue/--no-requeue,
#                             an salloc and an srun allocation, and sbatch without either flag
#                             under JobRequeue=1 and (after a reconfigure) JobRequeue=0
# 22.05 has no `scontrol show nodes --json`; its capture skips those files.
set -euo pipefail
# The cluster's set-up, shared with bridge/testdata/capture-jobdesc.sh; in the container it is
# /setup.sh, beside this script (capture_in_container).
# shellcheck source=bridge/slurm/testdata/capture/setup.sh
. "$(dirname "$0")/setup.sh"

if [ "${1:-}" = --inside ]; then
	# Runs in the container, as root.
	install_slurm --if-missing
	write_slurm_conf "$2" a100 a100
	cat >>/etc/slurm/slurm.conf <<-CONF
		MinJobAge=300
		NodeName=DEFAULT Sockets=1 CoresPerSocket=8 ThreadsPerCore=1 RealMemory=4000 Gres=gpu:a100:4
		NodeName=n1 NodeAddr=127.0.0.1 NodeHostname=localhost Port=17001
		NodeName=n2 NodeAddr=127.0.0.1 NodeHostname=localhost Port=17002
		PartitionName=DEFAULT MaxTime=INFINITE State=UP
		PartitionName=cpu Nodes=n[1-2] Default=YES
		PartitionName=a100 Nodes=n[1-2]
	CONF
	start_slurm

	useradd -m alice
	# The same files on every release; errors are kept, they are part of the capture.
	capture() { # NAME COMMAND...
		local name=$1
		shift
		"$@" >"/out/$name" || echo "capture: $* exited $?" >&2
	}
	rel=$2
	sinfo --version >"/out/version-$rel.txt"
	# The node read (bridge/slurm/nodes.go): nodes_args and the environment must match
	# slurm.NodesArgs and slurm.NodesEnv (a unit test compares the .args file).
	nodes_args=(--oneliner --details show nodes)
	printf '%s\n' "${nodes_args[@]}" >"/out/scontrol-nodes-$rel.args"
	nodes_text() { env -u SCONTROL_ALL -u SCONTROL_FUTURE SLURM_TIME_FORMAT=%s TZ=UTC scontrol "${nodes_args[@]}"; }
	# nodes_moment NAME: the JSON node read of this release, then at once the text one.
	nodes_moment() {
		if [ "$rel" = 22.05 ]; then
			capture "sinfo-$rel-$1.json" sinfo --json
		else
			capture "scontrol-nodes-$rel-$1.json" scontrol show nodes --json
		fi
		capture "scontrol-nodes-$rel-$1.txt" nodes_text
	}
	capture "squeue-$rel-idle.json" squeue --json
	[ "$rel" = 22.05 ] || capture "sinfo-$rel-idle.json" sinfo --json
	nodes_moment idle

	submit() { runuser -u alice -- sbatch --chdir=/tmp -o /tmp/slurm-%j.out "$@" --wrap 'sleep 600'; }
	submit -J held -H -p cpu                        # pending, held by its user
	submit -J gres-a100 -p a100 --gres=gpu:a100:1   # running, one typed GPU per node
	submit -J gpus2 -p a100 --gpus=2                # running, GPUs per job
	submit -J cpu4 -p cpu -c 4 -t 30                # running, CPUs per task, a time limit
	submit -J two-parts -p cpu,a100 --begin=now+1hour   # pending in two partitions
	submit -J array -p cpu --array=0-3%2 -c 2       # two running, the rest pending
	submit -J too-big -p a100 -N 2 --gres=gpu:a100:4    # pending for Resources
	sleep 8
	squeue
	capture "squeue-$rel-mixed.json" squeue --json
	# quotad's fast read (bridge/slurm/jobs.go): the same moment as text. queue_args must
	# match slurm.QueueArgs (a unit test compares them with the .args file).
	sep=$'\x1f'
	fields=(JobId ArrayJobId ArrayTaskId UserName Account QOS Partition State BatchFlag Requeue
		PriorityLong SubmitTime StartTime NumNodes NodeList tres-per-node tres-per-job tres-per-task
		tres-per-socket tres-alloc Reason)
	fmt=""
	for f in "${fields[@]}"; do fmt+="${fmt:+$sep,}$f:0"; done
	queue_args=(--all --array --noheader "--Format=$fmt")
	printf '%s\n' "${queue_args[@]}" >"/out/squeue-$rel-mixed.args"
	queue() { env -u SQUEUE_FORMAT SLURM_TIME_FORMAT=%s SLURM_BITSTR_LEN=0 squeue "$@"; }
	capture "squeue-$rel-mixed.txt" queue "${queue_args[@]}"
	[ "$rel" = 22.05 ] || capture "sinfo-$rel-busy.json" sinfo --json
	nodes_moment busy

	# An array record with an irregular task set, then one task split off by an update: squeue
	# without --array folds the split task back into the record; with it each task is a line.
	big=$(submit --parsable -J big-array -H -p cpu --array=1-40:3,50,60-62 | cut -d';' -f1)
	scontrol update jobid="${big}_4" timelimit=20
	sleep 1
	capture "squeue-$rel-array.txt" queue "${queue_args[@]}"
	capture "squeue-$rel-array-folded.txt" queue --all --noheader "--Format=$fmt"
	# A batched update naming a pending task, a running job and a job that does not exist:
	# what scontrol says for each, and its exit status.
	scontrol update jobid="${big}_7,2,999999" partition=cpu >"/out/scontrol-update-$rel.out" 2>"/out/scontrol-update-$rel.err" &&
		echo 0 >"/out/scontrol-update-$rel.rc" || echo $? >"/out/scontrol-update-$rel.rc"
	capture "squeue-$rel-array-updated.txt" queue "${queue_args[@]}"
	# batch_flag and the effective requeue flag, which decide whether preemption may requeue a
	# job or must kill it. Held, so that nothing competes for the nodes.
	scancel -u alice
	sleep 2
	submit -J requeue-on -H -p cpu --requeue
	submit -J requeue-off -H -p cpu --no-requeue
	submit -J requeue-default-on -H -p cpu           # JobRequeue=1 (the default)
	runuser -u alice -- salloc --no-shell -J salloc -p cpu -t 10
	runuser -u alice -- bash -c 'cd /tmp && setsid srun -J srun -p cpu -t 10 sleep 600 </dev/null >/dev/null 2>&1 &'
	echo JobRequeue=0 >>/etc/slurm/slurm.conf
	scontrol reconfigure
	for _ in $(seq 30); do scontrol ping >/dev/null 2>&1 && break; sleep 1; done
	sleep 2
	submit -J requeue-default-off -H -p cpu          # JobRequeue=0: not requeueable
	submit -J requeue-on-jr0 -H -p cpu --requeue
	sleep 3
	squeue -o '%i %j %T %r'
	capture "squeue-$rel-requeue.json" squeue --json

	# Nodes marked every way the node read must see through: a reservation, a drain, free
	# text that looks like fields (and a newline in a comment), a node in two partitions and
	# one in none, each with a GPU allocated.
	scancel -u alice
	sleep 2
	submit -J gpu-n1 -p a100 -w n1 --gres=gpu:a100:1
	submit -J gpu-n2 -p a100 -w n2 --gres=gpu:a100:2
	sleep 3
	scontrol create reservation reservationname=maint-n1 nodes=n1 starttime=now duration=60 users=root flags=ignore_jobs ||
		echo "capture: no reservation on $rel" >&2
	scontrol update nodename=n1 comment=$'checked: State=IDLE ReservationName=forged\nNodeAddr=10.0.0.9 second line' ||
		echo "capture: no node comment on $rel" >&2
	scontrol update nodename=n2 state=drain reason="disk check: Partitions=gpu ReservationName=forged AllocTRES=cpu=1"
	scontrol update nodename=n2 extra="rack=7 row=2" || echo "capture: no node extra on $rel" >&2
	scontrol update partitionname=cpu nodes=n1
	scontrol update partitionname=a100 nodes=n1
	# slurmctld flags a reservation's nodes in its background loop, not when creating it.
	for _ in $(seq 60); do scontrol show node n1 | grep -q RESERVED && break; sleep 1; done
	scontrol show nodes
	nodes_moment marked
	exit 0
fi

image=${1:?usage: capture.sh IMAGE RELEASE [OUTDIR]}
rel=${2:?usage: capture.sh IMAGE RELEASE [OUTDIR]}
out=${3:-$(cd "$(dirname "$0")/.." && pwd)}
name=slurmbridge-capture-$rel-$$
capture_in_container "$image" "$rel" "$0"
mkdir -p "$out"
tmp=$(mktemp -d)
docker cp "$name:/out/." "$tmp/"
for f in "$tmp"/*; do
	case $f in
	*.json) python3 -m json.tool --indent 2 "$f" >"$out/$(basename "$f")" ;; # stable, diffable
	*) cp "$f" "$out/" ;;
	esac
done
rm -rf "$tmp"
ls -l "$out"/*"$rel"*
