#!/usr/bin/env bash
# Transition idle time on a GPU machine, without Slurm: in place against restart, the small and
# the 10 M-parameter model, in alternating rounds (bench/cmd/elastictransition -local, which
# plays elasticd's part: it starts the main job's and a worker job's torchrun.sbatch with the
# elastic contract's environment and stops the worker with TERM).
#
#   bash bench/elastictransition-gpu.sh            # ROUNDS=2 MODELS=small,10m by default
#
# Needs python3 with a CUDA build of torch, and the command built beforehand where Go is
# (the GPU machine may have none): go build -o bin/elastictransition ./bench/cmd/elastictransition
# With two GPUs or more each job gets its own (CUDA_VISIBLE_DEVICES) and the world talks NCCL.
# With one, both jobs' processes share it and talk gloo over CUDA tensors: NCCL refuses two
# ranks on one device. ALLOW_CPU=1 runs the same path on a machine without GPUs (gloo on CPU),
# to check the script itself.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${ELASTICTRANSITION:-bin/elastictransition}
ROUNDS=${ROUNDS:-2}
MODELS=${MODELS:-small,10m}
if [ ! -x "$BIN" ]; then
	if command -v go >/dev/null; then
		go build -o "$BIN" ./bench/cmd/elastictransition
	else
		echo "elastictransition-gpu.sh: $BIN is missing and there is no go to build it with" >&2
		exit 2
	fi
fi
gpus=$(python3 -c 'import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)') || {
	echo "elastictransition-gpu.sh: python3 cannot import torch" >&2
	exit 2
}
args=(-local -rounds "$ROUNDS" -models "$MODELS")
if [ "$gpus" -ge 2 ]; then
	args+=(-backend nccl -visible-devices 0,1)
	echo "elastictransition-gpu.sh: $gpus GPUs: one per job, NCCL"
elif [ "$gpus" -eq 1 ]; then
	args+=(-backend gloo)
	echo "elastictransition-gpu.sh: 1 GPU, shared by both jobs: gloo over CUDA tensors (NCCL needs a GPU per rank)"
elif [ "${ALLOW_CPU:-}" = 1 ]; then
	echo "elastictransition-gpu.sh: no GPU (ALLOW_CPU=1): gloo on CPU"
else
	echo "elastictransition-gpu.sh: torch sees no GPU (ALLOW_CPU=1 runs it on CPU)" >&2
	exit 2
fi
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
	*(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())))'
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>/dev/null || true
exec "$BIN" "${args[@]}"
