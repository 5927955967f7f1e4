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
	export DEBIAN_FRONTEND=noninteractive
	printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod 0755 /usr/sbin/policy-rc.d
	# A release-host image (testbed/container.sh) has Slurm already; a plain Debian image does not.
	if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null; then
		apt-get -o Acquire::Check-Valid-Until=false update -qq
		apt-get install -y -qq --no-install-recommends slurmctld slurmd slurm-client munge procps >/dev/null
	fi
	mkdir -p /etc/slurm /var/spool/slurmctld /var/lib/fakegpu/n1 /var/lib/fakegpu/n2 /out
	for n in n1 n2; do for i in 0 1 2 3; do : >/var/lib/fakegpu/$n/nvidia$i; done; done
	cat >/etc/slurm/slurm.conf <<-CONF
		ClusterName=capture
		SlurmctldHost=localhost(127.0.0.1)
		SlurmUser=root
		SlurmdUser=root
		AuthType=auth/munge
		StateSaveLocation=/var/spool/slurmctld
		SlurmdSpoolDir=/var/spool/slurmd-%n
		SlurmdPidFile=/run/slurmd-%n.pid
		SlurmctldLogFile=/var/log/slurmctld.log
		SlurmdLogFile=/var/log/slurmd-%n.log
		ProctrackType=proctrack/linuxproc
		TaskPlugin=task/none
		JobAcctGatherType=jobacct_gather/none
		AccountingStorageType=accounting_storage/none
		MpiDefault=none
		MailProg=/bin/true
		SlurmdParameters=config_overrides
		ReturnToService=2
		SchedulerType=sched/backfill
		SelectType=select/cons_tres
		SelectTypeParameters=CR_Core_Memory
		DefMemPerCPU=100
		GresTypes=gpu
		JobSubmitPlugins=lua
		NodeName=n1 NodeAddr=127.0.0.1 NodeHostname=localhost Port=17001 Sockets=1 CoresPerSocket=8 ThreadsPerCore=1 RealMemory=16000 Gres=gpu:a100:4 Feature=a100
		NodeName=n2 NodeAddr=127.0.0.1 NodeHostname=localhost Port=17002 Sockets=1 CoresPerSocket=8 ThreadsPerCore=1 RealMemory=16000 Gres=gpu:v100:4 Feature=v100
		PartitionName=DEFAULT MaxTime=INFINITE State=UP
		PartitionName=cpu Nodes=n[1-2] Default=YES
		PartitionName=a100 Nodes=n1
		PartitionName=v100 Nodes=n2
	CONF
	cat >/etc/slurm/gres.conf <<-CONF
		AutoDetect=off
		NodeName=n1 Name=gpu Type=a100 File=/var/lib/fakegpu/n1/nvidia[0-3]
		NodeName=n2 Name=gpu Type=v100 File=/var/lib/fakegpu/n2/nvidia[0-3]
	CONF
	if [ "$rel" != 22.05 ]; then echo CgroupPlugin=disabled >/etc/slurm/cgroup.conf; fi
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
	[ -s /etc/munge/munge.key ] || mungekey --create
	mkdir -p /run/munge && chown munge: /run/munge
	runuser -u munge -- /usr/sbin/munged
	slurmctld
	slurmd -N n1
	slurmd -N n2
	for _ in $(seq 60); do
		[ "$(sinfo -h -N -o %t 2>/dev/null | sort -u)" = idle ] && break
		sleep 1
	done
	sinfo -N || { tail -n 20 /var/log/slurmctld.log; exit 1; }
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
net=$name
docker network create "$net" >/dev/null
trap 'docker rm -f "$name" >/dev/null 2>&1; docker network rm "$net" >/dev/null 2>&1' EXIT
docker run -d --name "$name" --network "$net" --hostname localhost "$image" sleep infinity >/dev/null
docker cp "$0" "$name:/capture-jobdesc.sh"
docker exec "$name" bash /capture-jobdesc.sh --inside "$rel"
mkdir -p "$out"
docker cp "$name:/out/." "$out/"
ls -l "$out"/job_desc-"$rel"*
