#!/usr/bin/env python3
"""Elastic data-parallel training under torchrun, for elasticd (see torchrun.sbatch).

A small but real PyTorch DistributedDataParallel job: an MLP regressing a fixed random linear
map, on the GPUs torchrun gives each process (NCCL) or on CPU (gloo) where there are none, as on
the testbed. It keeps torchrun's elastic contract: every membership change restarts the
processes with a new WORLD_SIZE, and they resume from the last checkpoint (rank 0 writes it
atomically every --checkpoint-every steps), so the job's progress survives grow and shrink.

It uses the slurmbridge_elastic helper (elasticd/python, imported through elastic_report.py):
the per-device batch elasticd gives the job (ELASTIC_BATCH_PER_DEVICE, else --batch), an
on-resize hook, and a Reporter through which local rank 0 of each Slurm job reports that job's
samples/s (all its processes) and its compute time per step before the gradient exchange (the
forward pass; backward is where DDP's allreduce waits for the slowest worker), which is how
elasticd tells a slow worker apart when all report the same samples/s. The job ends once --total-samples have been trained, summed over all
workers and restarts: a bigger world finishes sooner.

With --trace-dir, each process incarnation also records when its world formed and when it
completed its first and latest step, so the idle time of a transition (last step of the old
world -> first step of the new) can be measured (bench/cmd/elastictransition). The latest step
is rewritten in place, one small pwrite per step, since a process torchrun stops gets no
chance to say goodbye.
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from elastic_report import elastic  # noqa: E402
from torch_stores import classic_servers_where_needed  # noqa: E402

classic_servers_where_needed()


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    # Long enough to watch elasticd measure, grow and settle on the testbed's CPUs: 2 million
    # could end before the first grow on a busy machine. On GPUs, ask for more.
    ap.add_argument("--total-samples", type=int, default=20_000_000, help="stop after this many samples (all workers)")
    ap.add_argument("--batch", type=int, default=256,
                    help="samples per process per step, unless elasticd gives ELASTIC_BATCH_PER_DEVICE")
    ap.add_argument("--width", type=int, default=256, help="hidden width of the MLP")
    ap.add_argument("--report-interval", type=float, default=1.0, help="seconds between throughput reports")
    ap.add_argument("--checkpoint", default="", help="checkpoint file (default: elastic-JOBID.ckpt in the submit dir)")
    ap.add_argument("--checkpoint-every", type=int, default=50, help="steps between checkpoints")
    ap.add_argument("--threads", type=int, default=1, help="CPU threads per process (CPU runs)")
    ap.add_argument("--trace-dir", default="", help="write transition traces here (benchmarks)")
    return ap.parse_args()


class Tracer:
    """Records this process incarnation's world and step times in TRACE_DIR/<job>.<pid>.json."""

    def __init__(self, directory, rank, world):
        self.fd = None
        if not directory:
            return
        job = os.environ.get("SLURM_JOB_ID", "nojob")
        restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
        path = os.path.join(directory, f"{job}.{os.getpid()}.json")
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self.head = {"job": job, "restart": int(restart), "rank": rank, "world_size": world,
                     "started": float(os.environ.get("ELASTIC_TRAIN_T0", "0")) or None, "formed": time.time()}
        self.first = None

    def resumed(self, samples):
        """Records the samples the checkpoint held when this incarnation started."""
        if self.fd is None:
            return  # not tracing: the example as shipped
        self.head["resumed_at"] = samples

    def step(self, steps):
        if self.fd is None:
            return
        now = time.time()
        if self.first is None:
            self.first = now
        rec = dict(self.head, first_step=self.first, last_step=now, steps=steps)
        # Fixed width, so each rewrite replaces the whole record.
        os.pwrite(self.fd, json.dumps(rec).ljust(400).encode(), 0)


def main():
    args = parse_args()
    torch.set_num_threads(args.threads)
    use_cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if use_cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    batch = elastic.per_device_batch(default=args.batch)
    device = torch.device(f"cuda:{local_rank}") if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    tracer = Tracer(args.trace_dir, rank, world)

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, args.width), nn.ReLU(), nn.Linear(args.width, args.width), nn.ReLU(),
                          nn.Linear(args.width, 1)).to(device)
    target = torch.randn(64, 1, generator=torch.Generator().manual_seed(1)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    ckpt = args.checkpoint or os.path.join(os.environ.get("SLURM_SUBMIT_DIR", "."),
                                           f"elastic-{os.environ.get('ELASTIC_JOB_ID', 'job')}.ckpt")
    done = 0
    if os.path.exists(ckpt):
        state = torch.load(ckpt, map_location=device)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        done = state["samples"]
    tracer.resumed(done)
    ddp = DistributedDataParallel(model)  # broadcasts rank 0's parameters to the new world
    if rank == 0:
        print(f"world {world} formed (restart {os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}), "
              f"resuming at {done} samples", flush=True)

    @elastic.on_resize
    def resized(old, new):
        if rank == 0:
            print(f"world resized from {old} to {new} processes: global batch {new * batch}", flush=True)

    # Runs the hook when this world's size differs from the one this worker's previous processes
    # had (torchrun restarts them at every change), and reports every --report-interval.
    reporter = elastic.Reporter(samples_per_step=batch, interval=args.report_interval)
    gen = torch.Generator().manual_seed(1000 * rank + done)
    steps = 0
    while done < args.total_samples:
        with reporter.step() as step:
            x = torch.randn(batch, 64, generator=gen).to(device)
            loss = nn.functional.mse_loss(ddp(x), x @ target)
            if use_cuda:
                torch.cuda.synchronize(device)
            step.computed()  # this process's own work; what follows waits for the slowest
            opt.zero_grad()
            loss.backward()  # the allreduce: every step is a collective of the whole world
            opt.step()
        steps += 1
        done += batch * world
        tracer.step(steps)
        if rank == 0 and steps % args.checkpoint_every == 0:
            tmp = f"{ckpt}.tmp"
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "samples": done}, tmp)
            os.replace(tmp, ckpt)
    if rank == 0:
        print(f"trained {done} samples, loss {loss.item():.4f}", flush=True)
        if os.path.exists(ckpt):
            os.remove(ckpt)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
