#!/usr/bin/env bash
# Shows the testbed working: as alice, a CPU job and a GPU job run and are accounted to proj-a.
set -euo pipefail
TESTBED_DIR=${TESTBED_DIR:-/tmp/slurmbridge-testbed}
# shellcheck source=/dev/null
. "$TESTBED_DIR/env"

show() { printf '\n$ %s\n' "$*"; "$@"; }

show sinfo -o '%10P %.5a %.6D %8t %N %G'
show sacctmgr -n -P show assoc where cluster=testbed format=account,user
cpu=$(runuser -u alice -- sbatch --parsable --chdir=/tmp --output=/dev/null --job-name=demo-cpu --wrap 'hostname; sleep 2')
gpu=$(runuser -u alice -- sbatch --parsable --chdir=/tmp --output=/dev/null --job-name=demo-gpu -p a100 --gres=gpu:a100:2 --wrap 'echo "GPUs $CUDA_VISIBLE_DEVICES"; sleep 2')
printf '\nalice submitted CPU job %s and GPU job %s\n' "$cpu" "$gpu"
show squeue -j "$cpu,$gpu" -o '%.6i %.10P %.10j %.6u %.8a %.10T %b'
for _ in $(seq 1 60); do
	[ -z "$(squeue -h -j "$cpu,$gpu" -t pending,running,completing -o %i)" ] && break
	sleep 0.5
done
# slurmdbd lags slurmctld by a moment.
for _ in $(seq 1 20); do
	[ "$(sacct -X -n -P -j "$cpu,$gpu" -o State | grep -c COMPLETED)" -eq 2 ] && break
	sleep 0.5
done
show sacct -X -j "$cpu,$gpu" -o JobID,JobName,User,Account,Partition,State,AllocTRES%60
