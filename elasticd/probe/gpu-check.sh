#!/usr/bin/env bash
# The real NVML path, for a machine with an NVIDIA GPU but no Go toolchain (a lent GPU box):
#
#   elasticd/probe/gpu-check.sh build DIR   here: the nvml test binary, elasticd, the torchrun
#                                           example and this script into DIR
#   DIR/gpu-check.sh run [OUT]              there: the probe's tests idle; busy while PyTorch
#                                           multiplies bf16 matrices on GPU 0; then the shipped
#                                           example trained on GPU 0, its reports kept in OUT
#
# Each step prints PASS or FAIL; run exits non-zero when one failed.
set -euo pipefail

build() {
	local dir=$1 repo
	repo=$(cd "$(dirname "$0")/../.." && pwd)
	mkdir -p "$dir/examples" "$dir/python"
	(cd "$repo" && go test -c -tags nvml -o "$dir/probe.test" ./elasticd/probe/ &&
		go build -o "$dir/elasticd" ./elasticd/cmd/elasticd)
	cp -r "$repo/elasticd/examples/." "$dir/examples/"
	cp -r "$repo/elasticd/python/slurmbridge_elastic" "$dir/python/"
	cp "$0" "$dir/gpu-check.sh"
	echo "gpu-check: built into $dir; there: $dir/gpu-check.sh run"
}

step() {
	local name=$1
	shift
	if "$@"; then echo "gpu-check: PASS $name"; else echo "gpu-check: FAIL $name"; failed=1; fi
}

busy_probe() {
	python3 - <<'PY' &
import time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = a.clone()
end = time.time() + 20
while time.time() < end:
    for _ in range(20):
        a @ b
    torch.cuda.synchronize()
PY
	local loader=$!
	sleep 8
	SLURMBRIDGE_NVML_BUSY_GPU=0 ./probe.test -test.run 'TestRealNVMLSeesABusyGPU' -test.v -test.count=1
	local rc=$?
	wait "$loader" || rc=1
	return $rc
}

train() {
	local out=$1 submit
	mkdir -p "$out/reports"
	submit=$(mktemp -d) # the checkpoint (hundreds of MB) stays out of OUT
	# The example runs until killed; 40 s is some 1000 steps on an H200.
	ELASTIC_REPORT_DIR=$out/reports SLURM_JOB_ID=4242 ELASTIC_JOB_ID=4242 SLURM_SUBMIT_DIR=$submit \
		timeout -s INT 40 torchrun --standalone --nproc-per-node=1 examples/train.py \
		--total-samples 400000000 --width 4096 --batch 16384 --report-interval 1 || true
	rm -rf "$submit"
	[ -s "$out/reports/4242.jsonl" ] && wc -l "$out/reports/4242.jsonl" && tail -n 2 "$out/reports/4242.jsonl"
}

run() {
	local out=${1:-$PWD/gpu-check-out}
	cd "$(dirname "$0")"
	failed=0
	nvidia-smi -L
	step "NVML idle" ./probe.test -test.run 'TestRealNVML$' -test.v -test.count=1
	step "NVML busy" busy_probe
	step "torchrun example on CUDA" train "$out"
	return $failed
}

case ${1:-} in
build) build "${2:?build DIR}" ;;
run) run "${2:-}" ;;
*) echo "usage: $0 build DIR | run [OUT]" >&2; exit 2 ;;
esac
