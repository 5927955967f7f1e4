#!/usr/bin/env bash
# Captures the job_desc fields slurmctld passes to a job_submit plugin, on one Slurm release,
# for the tests that read real requests (bridge/slurm/slurmtest.JobDescs).
#
#   capture-jobdesc.sh IMAGE RELEASE [OUTDIR]   e.g. capture-jobdesc.sh slurmbridge/debian:trixie 24.11
#
# IMAGE is a Debian image whose suite carries RELEASE (testbed/release.sh): a plain one, or
# slurmbridge/release-host:RELEASE with Slurm installed already. A throwaway
# container on its own network installs Slurm from Debian, runs slurmctld with a logging
# job_submit.lua and two slurmd with fake GPUs (a100 and v100), types the same commands on
# every release, and writes OUTDIR/job_desc-VERSION.txt (VERSION as `sinfo --version` says it,
# e.g. 24.11.5): one comment line per command, in order, then one JOBDESC line per job_desc.
# Numbers are printed as Lua 5.1 prints a double (%.14g) on every release, so the sentinels
# of 64-bit fields lose their low bits the same way everywhere (poolstest rebuilds them).
set -euo pipefail
# The cluster's set-up, shared with bridge/slurm/testdata/capture/capture.sh: there on the host,
# /setup.sh beside this script in the container (capture_in_container).
if [ "${1:-}" = --inside ]; then
	# shellcheck source=/dev/null
	. "$(dirname "$0")/setup.sh"
else
	# shellcheck source=bridge/slurm/testdata/capture/setup.sh
	. "$(dirname "$0")/../slurm/testdata/capture/setup.sh"
fi

# The commands, as typed; J is the id of a held job that the job_modify lines update.
COMMANDS=(
	"sbatch --wrap true"
	"sbatch -p a100 --gres=gpu:a100:1"
	"sbatch --gres=gpu:2"
	"sbatch --gpus=3"
	"sbatch --gpus=v100:2"
	"sbatch --gpus-per-node=a100:2 -N 2"
	"sbatch --gpus-per-task=1 -n 4"
	"sbatch --gpus-per-socket=1 --sockets-per-node=1"
	"sbatch --gres=gpu:a100:1,gpu:v100:1"
	"sbatch --mem=8G -c 4 --gres=gpu:1"
	"sbatch --mem-per-cpu=2G -n 2"
	"sbatch --mem-per-gpu=10G --gpus=1"
	"sbatch -p a100,v100 --gpus=1"
	"sbatch --constraint=a100 --gpus=1 --no-requeue"
	"sbatch -J train-resnet --comment 'class=resnet' --gpus=1"
	"srun -p cpu true"
	"scontrol update jobid=J partition=v100 gres=gpu:v100:1"
	"scontrol update jobid=J numnodes=2"
)

if [ "${1:-}" = --inside ]; then
	# Runs in the container, as root.
	rel=$2
	install_slurm --if-missing
	write_slurm_conf "$rel" a100 v100
	cat >>/etc/slurm/slurm.conf <<-CONF
		JobSubmitPlugins=lua
		NodeName=n1 NodeAddr=127.0.0.1 NodeHostname=localhost Port=17001 Sockets=1 CoresPerSocket=8 ThreadsPerCore=1 RealMemory=16000 Gres=gpu:a100:4 Feature=a100
		NodeName=n2 NodeAddr=127.0.0.1 NodeHostname=localhost Port=17002 Sockets=1 CoresPerSocket=8 ThreadsPerCore=1 RealMemory=16000 Gres=gpu:v100:4 Feature=v100
		PartitionName=DEFAULT MaxTime=INFINITE State=UP
		PartitionName=cpu Nodes=n[1-2] Default=YES
		PartitionName=a100 Nodes=n1
		PartitionName=v100 Nodes=n2
	CONF
	# Each job_desc as one line: the fields the plugin reads, "nil" where Slurm passes none.
	cat >/etc/slurm/job_submit.lua <<-'LUA'
		local fields = {"partition", "tres_per_job", "tres_per_node", "tres_per_socket", "tres_per_task",
			"min_cpus", "cpus_per_task", "pn_min_cpus", "pn_min_memory", "min_mem_per_cpu", "min_mem_per_node",
			"min_nodes", "max_nodes", "num_tasks", "ntasks_per_node", "name", "comment", "features", "gres",
			"qos", "account", "shared", "requeue"}
		local function record(op, desc)
			local parts = {}
			for _, f in ipairs(fields) do
				local v = desc[f]
				if type(v) == "number" then v = string.format("%.14g", v) else v = tostring(v) end
				parts[#parts + 1] = f .. "=" .. v
			end
			local out = io.open("/out/jobdesc.log", "a")
			out:write("JOBDESC " .. op .. " " .. table.concat(parts, " | ") .. "\n")
			out:close()
		end
		function slurm_job_submit(job_desc, part_list, submit_uid)
			record("submit", job_desc)
			return slurm.SUCCESS
		end
		function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
			record("modify", job_desc)
			return slurm.SUCCESS
		end
	LUA
	start_slurm
	useradd -m alice
	# The job the updates change: held, so it stays pending; its own job_desc is not kept.
	job=$(runuser -u alice -- sbatch --parsable -H -p cpu --chdir=/tmp -o /dev/null --wrap true)
	: >/out/jobdesc.log
	reached=() missed=()
	for c in "${COMMANDS[@]}"; do
		before=$(grep -c '^JOBDESC ' /out/jobdesc.log || true)
		case $c in
		sbatch*) runuser -u alice -- bash -c "cd /tmp && $c -o /dev/null -H $([[ $c == *--wrap* ]] || echo --wrap true)" || true ;;
		srun*) runuser -u alice -- bash -c "cd /tmp && timeout 20 $c" || true ;;
		scontrol*) ${c//jobid=J/jobid=$job} || true ;;
		esac
		for _ in $(seq 10); do [ "$(grep -c '^JOBDESC ' /out/jobdesc.log || true)" -gt "$before" ] && break; sleep 0.5; done
		case $(($(grep -c '^JOBDESC ' /out/jobdesc.log || true) - before)) in
		1) reached+=("$c") ;;
		0) missed+=("$c"); echo "capture: $c: no job_desc reached the plugin" >&2 ;;
		*) echo "capture: $c: more than one job_desc" >&2; exit 1 ;;
		esac
	done
	version=$(sinfo --version | awk '{print $2}')
	{
		echo "# job_desc_msg_t fields as slurmctld $version passes them to job_submit/job_modify, captured with"
		echo "# bridge/testdata/capture-jobdesc.sh (a logging job_submit.lua). One line per command below, in order."
		echo "# nil = NULL; NO_VAL=4294967294, NO_VAL16=65534, pn_min_memory 1.844674407371e+19 = NO_VAL64,"
		echo "# 9.2233720368548e+18 = MEM_PER_CPU flag set (numbers as %.14g). sbatch lines ran with -H --wrap true."
		for c in "${missed[@]}"; do echo "# (refused before job_submit on this release: $c)"; done
		for c in "${reached[@]}"; do
			case $c in scontrol*) echo "# $c   (job_modify)" ;; *) echo "# $c" ;; esac
		done
		cat /out/jobdesc.log
	} >"/out/job_desc-$version.txt"
	rm /out/jobdesc.log
	exit 0
fi

image=${1:?usage: capture-jobdesc.sh IMAGE RELEASE [OUTDIR]}
rel=${2:?usage: capture-jobdesc.sh IMAGE RELEASE [OUTDIR]}
out=${3:-$(cd "$(dirname "$0")" && pwd)}
name=slurmbridge-capture-jobdesc-$rel-$$
capture_in_container "$image" "$rel" "$0"
mkdir -p "$out"
docker cp "$name:/out/." "$out/"
ls -l "$out"/job_desc-"$rel"*
