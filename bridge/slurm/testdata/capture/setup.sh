# shellcheck shell=bash
# The throwaway Slurm cluster both captures run on, sourced by capture.sh (squeue, sinfo and
# scontrol output) and bridge/testdata/capture-jobdesc.sh (job_desc): Debian's Slurm in a
# container on a network of its own (no published ports), slurmctld and two slurmd, n1 and n2,
# on 127.0.0.1 with four fake GPUs each. Each capture appends its own nodes, partitions and
# options to slurm.conf. It starts nothing when sourced.

# CAPTURE_SETUP is this file, which capture_in_container copies into the container beside the
# script as /setup.sh.
CAPTURE_SETUP=${BASH_SOURCE[0]}

# On the host.

# capture_in_container IMAGE REL SCRIPT: runs `SCRIPT --inside REL` as root in a container of
# IMAGE named $name (the caller's) on a network of the same name, with this file beside it as
# /setup.sh. The container and its network are removed at exit; /out in it holds the capture.
capture_in_container() {
	local image=$1 rel=$2 script=$3
	docker network create "$name" >/dev/null
	trap 'docker rm -f "$name" >/dev/null 2>&1; docker network rm "$name" >/dev/null 2>&1' EXIT
	docker run -d --name "$name" --network "$name" --hostname localhost "$image" sleep infinity >/dev/null
	docker cp "$script" "$name:/$(basename "$script")"
	docker cp "$CAPTURE_SETUP" "$name:/setup.sh"
	docker exec "$name" bash "/$(basename "$script")" --inside "$rel"
}

# In the container, as root.

# install_slurm [--if-missing]: Debian's slurmctld, slurmd, its client and munge, with no
# service started by the packages. --if-missing: not when slurmctld and slurmd are there
# already (a release-host image, testbed/container.sh, has them).
install_slurm() {
	export DEBIAN_FRONTEND=noninteractive
	printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod 0755 /usr/sbin/policy-rc.d
	if [ "${1:-}" = --if-missing ] && command -v slurmctld >/dev/null && command -v slurmd >/dev/null; then
		return 0
	fi
	# sid's Release file may be older than its Valid-Until on a slow mirror.
	apt-get -o Acquire::Check-Valid-Until=false update -qq
	apt-get install -y -qq --no-install-recommends slurmctld slurmd slurm-client munge procps >/dev/null
}

# write_slurm_conf REL GPUTYPE1 GPUTYPE2: the fake GPUs (four GPUTYPE1 on n1, four GPUTYPE2 on
# n2) and their gres.conf, the start of slurm.conf that both captures share (each appends its
# nodes and partitions), and from 24.05 on no cgroups. /out is made for the capture.
write_slurm_conf() {
	local rel=$1 type1=$2 type2=$3 n i
	mkdir -p /etc/slurm /var/spool/slurmctld /var/lib/fakegpu/n1 /var/lib/fakegpu/n2 /out
	# slurmd only stats the device files when no cgroup confines them.
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
	CONF
	cat >/etc/slurm/gres.conf <<-CONF
		AutoDetect=off
		NodeName=n1 Name=gpu Type=$type1 File=/var/lib/fakegpu/n1/nvidia[0-3]
		NodeName=n2 Name=gpu Type=$type2 File=/var/lib/fakegpu/n2/nvidia[0-3]
	CONF
	# From 24.05 slurmd sets up cgroups unless told not to; a container has none to give.
	if [ "$rel" != 22.05 ]; then echo CgroupPlugin=disabled >/etc/slurm/cgroup.conf; fi
}

# start_slurm: munged, slurmctld and slurmd n1 and n2, then waits (a minute at most) until both
# nodes are idle; fails with slurmctld's last words when sinfo gets no answer.
start_slurm() {
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
}
