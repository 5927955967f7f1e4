#!/usr/bin/env python3
"""Starts one worker job's training processes for in-place elastic transitions.

    python3 elastic_launch.py [--nproc N] train.py [train.py's options]

It starts N processes (default ELASTIC_GPUS_PER_WORKER, else 1) of the script with LOCAL_RANK
and LOCAL_WORLD_SIZE set, and waits for them. Unlike torchrun's agent it takes no part in the
rendezvous and never restarts them: the processes meet through slurmbridge_elastic.torch, which
keeps them running when elasticd adds or removes a worker job. It passes TERM, INT, USR1 and
USR2 on to them (elasticd's TERM reaches the batch script, which may be this launcher), stops
the others (TERM) when one fails, and exits with the first failing process's status, or 0.

Standard library only: it runs before any process imports torch.
"""
import argparse
import os
import signal
import subprocess
import sys
import time


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nproc", type=int, default=0, help="processes to start (default ELASTIC_GPUS_PER_WORKER, else 1)")
    ap.add_argument("script")
    ap.add_argument("args", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    n = a.nproc or int(os.environ.get("ELASTIC_GPUS_PER_WORKER", "1") or 1)
    if n < 1:
        ap.error(f"--nproc {n}: at least 1")
    procs, received = [], []

    def forward(signum, frame):
        received.append(signum)
        for p in procs:
            if p.poll() is None:
                try:
                    p.send_signal(signum)
                except ProcessLookupError:
                    pass

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, forward)
    for i in range(n):
        env = dict(os.environ, LOCAL_RANK=str(i), LOCAL_WORLD_SIZE=str(n))
        procs.append(subprocess.Popen([sys.executable, a.script] + a.args, env=env))
        if received:
            procs[-1].send_signal(received[-1])  # a TERM that came while they were starting
    # A process that fails leaves its job's world without it: the others of the job are told
    # to stop (TERM: they leave at their next step), so that no part of a worker job trains on.
    status = 0
    while any(p.poll() is None for p in procs):
        for p in procs:
            rc = p.poll()
            if rc not in (None, 0) and status == 0:
                status = rc if rc > 0 else 128 - rc
                forward(signal.SIGTERM, None)
        time.sleep(0.2)
    for p in procs:
        rc = p.returncode
        if rc != 0 and status == 0:
            status = rc if rc > 0 else 128 - rc
    return status


if __name__ == "__main__":
    sys.exit(main())
