#!/usr/bin/env python3
"""A synthetic elastic "trainer" for elasticd: no GPU, no torch.

Every worker (the main job and each worker job elasticd adds) runs this. The job's total
throughput follows --curve, a function of the world size that you choose; each worker reports
its share, curve(k) / k, once per --interval to $ELASTIC_REPORT_DIR/$SLURM_JOB_ID.jsonl, the
report format elasticd reads. The world size k is the number of workers in $ELASTIC_HOSTS_FILE,
which elasticd rewrites as workers come and go (the file Horovod's host discovery reads).

    synthetic_trainer.py --curve 1:100,2:190,3:200 --slow 0.5   # this worker at half speed
    synthetic_trainer.py --pool-speed a100:1,v100:0.6            # v100 workers at 0.6 x a100

--pool-speed scales a worker's share by the pool its job runs in ($SLURM_JOB_PARTITION), as
GPUs of different types would (a pool not listed: 1).

On SIGTERM (elasticd shrinking the job) it says so and leaves at once, as a real worker
leaves the rendezvous.
"""
import argparse
import json
import os
import signal
import sys
import time


def parse_curve(text):
    points = sorted((int(k), float(r)) for k, r in (p.split(":") for p in text.split(",")))
    if not points or points[0][0] < 1 or any(r <= 0 for _, r in points):
        raise ValueError("curve: want K:SAMPLES_PER_SEC,... with K >= 1 and positive rates")
    return points


def total_rate(points, k):
    """Total samples/s at world size k: linear between the given points, flat beyond."""
    if k <= points[0][0]:
        return points[0][1] * k / points[0][0]
    for (k0, r0), (k1, r1) in zip(points, points[1:]):
        if k <= k1:
            return r0 + (r1 - r0) * (k - k0) / (k1 - k0)
    return points[-1][1]


def world_size(hosts_file):
    try:
        with open(hosts_file) as f:
            return max(1, sum(1 for line in f if line.strip()))
    except OSError:
        return 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--curve", default=os.environ.get("SYNTH_CURVE", "1:100,2:190,3:260,4:280"))
    ap.add_argument("--interval", type=float, default=float(os.environ.get("SYNTH_INTERVAL", "1")))
    ap.add_argument("--duration", type=float, default=float(os.environ.get("SYNTH_DURATION", "3600")))
    ap.add_argument("--slow", type=float, default=1.0, help="factor on this worker's rate (a straggler)")
    ap.add_argument("--pool-speed", default="", help="POOL:FACTOR,... factor on the rate by the job's pool")
    args = ap.parse_args()
    points = parse_curve(args.curve)
    speeds = {p: float(f) for p, f in (x.split(":") for x in args.pool_speed.split(",") if x)}
    pool = os.environ.get("SLURM_JOB_PARTITION", "")
    speed = args.slow * speeds.get(pool, 1.0)
    worker = os.environ["SLURM_JOB_ID"]
    report = os.path.join(os.environ["ELASTIC_REPORT_DIR"], worker + ".jsonl")
    hosts = os.environ.get("ELASTIC_HOSTS_FILE", "")

    def on_term(signum, frame):
        print(f"worker {worker}: SIGTERM, leaving the rendezvous", flush=True)
        sys.exit(0)

    signal.signal(signal.SIGTERM, on_term)
    print(f"worker {worker} ({os.environ.get('ELASTIC_ROLE')}) of job {os.environ.get('ELASTIC_JOB_ID')}, "
          f"rendezvous {os.environ.get('ELASTIC_RDZV_ENDPOINT')}, nnodes {os.environ.get('ELASTIC_NNODES')}, "
          f"pool {pool or '?'} at speed {speed}", flush=True)
    end = time.time() + args.duration
    while time.time() < end:
        time.sleep(args.interval)
        k = world_size(hosts)
        rate = total_rate(points, k) / k * speed
        line = json.dumps({"time": time.time(), "worker": worker, "samples_per_sec": round(rate, 3), "world_size": k})
        with open(report, "a") as f:
            f.write(line + "\n")


if __name__ == "__main__":
    main()
