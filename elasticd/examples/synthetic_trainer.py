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

--samples N gives the job a fixed amount of work, so that growing shortens it: each report line
carries the worker's own running total ("samples"), and every worker sums the latest total of
each file in $ELASTIC_REPORT_DIR (departed workers' work included); once the job's sum reaches
N the worker exits 0 (the main job too, which ends the job). Without it (0) a worker runs for
--duration, as before.

--pause-every S --pause-for P imitates an evaluation pass or a checkpoint write: for P seconds
of every S (on the wall clock, so that every worker pauses at once, as synchronous training
does) the worker reports 0 samples/s.

On SIGTERM (elasticd shrinking the job) it says so and leaves at once, as a real worker
leaves the rendezvous.
"""
import argparse
import json
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from elastic_report import elastic  # noqa: E402


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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--curve", default=os.environ.get("SYNTH_CURVE", "1:100,2:190,3:260,4:280"))
    ap.add_argument("--interval", type=float, default=float(os.environ.get("SYNTH_INTERVAL", "1")))
    ap.add_argument("--duration", type=float, default=float(os.environ.get("SYNTH_DURATION", "3600")))
    ap.add_argument("--slow", type=float, default=1.0, help="factor on this worker's rate (a straggler)")
    ap.add_argument("--pool-speed", default="", help="POOL:FACTOR,... factor on the rate by the job's pool")
    ap.add_argument("--samples", type=float, default=float(os.environ.get("SYNTH_SAMPLES", "0")),
                    help="the job's total work in samples, shared by its workers (0: run for --duration)")
    ap.add_argument("--pause-every", type=float, default=0, help="a pause (evaluation pass) every S seconds (0: none)")
    ap.add_argument("--pause-for", type=float, default=0, help="how long each pause lasts, in seconds")
    args = ap.parse_args()
    points = parse_curve(args.curve)
    speeds = {p: float(f) for p, f in (x.split(":") for x in args.pool_speed.split(",") if x)}
    pool = os.environ.get("SLURM_JOB_PARTITION", "")
    speed = args.slow * speeds.get(pool, 1.0)
    worker = os.environ["SLURM_JOB_ID"]
    report_dir = os.environ["ELASTIC_REPORT_DIR"]

    def on_term(signum, frame):
        print(f"worker {worker}: SIGTERM, leaving the rendezvous", flush=True)
        sys.exit(0)

    signal.signal(signal.SIGTERM, on_term)
    print(f"worker {worker} ({os.environ.get('ELASTIC_ROLE')}) of job {os.environ.get('ELASTIC_JOB_ID')}, "
          f"rendezvous {os.environ.get('ELASTIC_RDZV_ENDPOINT')}, nnodes {os.environ.get('ELASTIC_NNODES')}, "
          f"pool {pool or '?'} at speed {speed}, batch per device {os.environ.get('ELASTIC_BATCH_PER_DEVICE', '-')} "
          f"of max {os.environ.get('ELASTIC_MAX_BATCH', '-')}", flush=True)
    last = time.time()
    end = last + args.duration
    done = 0.0
    while time.time() < end:
        time.sleep(args.interval)
        k = elastic.workers()
        rate = total_rate(points, k) / k * speed
        now = time.time()
        if args.pause_every > 0 and now % args.pause_every < args.pause_for:
            rate = 0.0  # evaluating: no training samples
        done += rate * (now - last)
        last = now
        elastic.report(round(rate, 3), worker=worker, world_size=k, samples=round(done, 1))
        if args.samples > 0:
            job_done = job_samples(report_dir)
            if job_done >= args.samples:
                print(f"worker {worker}: job's work done ({job_done:.0f} of {args.samples:.0f} samples, "
                      f"{done:.0f} here), leaving", flush=True)
                return


def job_samples(report_dir):
    """The job's work so far: the last "samples" of every worker's report file."""
    total = 0.0
    for name in os.listdir(report_dir):
        if not name.endswith(".jsonl"):
            continue
        try:
            with open(os.path.join(report_dir, name), "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - 4096))
                lines = f.read().decode(errors="replace").strip().splitlines()
            total += float(json.loads(lines[-1]).get("samples", 0))
        except (OSError, ValueError, IndexError, AttributeError):
            continue  # a file being written or gone: its work is counted on the next round
    return total


if __name__ == "__main__":
    main()
