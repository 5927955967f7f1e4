"""Report throughput to elasticd from a training loop (torchrun or Horovod).

    from elastic_report import report
    report(samples_per_sec)        # once per logging interval, from local rank 0

One JSON line per call is appended to $ELASTIC_REPORT_DIR/<worker>.jsonl, where <worker> is
the Slurm job id of this worker's job (SLURM_JOB_ID in a torchrun agent; under Horovod, whose
ranks are started over ssh without Slurm's environment, pass worker= explicitly). Report the
samples/s of this worker (all its GPUs), not the job's total: elasticd adds them up.
"""
import json
import os
import time


def report(samples_per_sec, worker=None):
    worker = worker or os.environ["SLURM_JOB_ID"]
    line = json.dumps({"time": time.time(), "worker": str(worker), "samples_per_sec": float(samples_per_sec)})
    with open(os.path.join(os.environ["ELASTIC_REPORT_DIR"], f"{worker}.jsonl"), "a") as f:
        f.write(line + "\n")
