#!/usr/bin/env python3
"""Elastic data-parallel training for elasticd (see torchrun.sbatch), in place by default.

A small but real PyTorch DistributedDataParallel job: an MLP regressing a fixed random linear
map, on the GPUs each process is given (NCCL) or on CPU (gloo) where there are none, as on the
testbed. Its training loop is written for slurmbridge_elastic.torch (elasticd/python):

- in place (the processes started by elastic_launch.py, the default of torchrun.sbatch): when
  elasticd adds or removes a worker job, the processes that stay keep their model and optimizer
  in memory, the world re-forms at the next step, and a joining process gets the state from
  rank 0 by broadcast;
- restart (under torchrun, torchrun.sbatch with ELASTIC_TRANSITION=restart): torchrun restarts
  every process at each membership change and they resume from the last checkpoint.

Either way rank 0 writes a checkpoint atomically every --checkpoint-every steps, so the job's
progress also survives a requeue, and the first world of a run starts from it.

It uses the slurmbridge_elastic helper (imported through elastic_report.py): the per-device
batch elasticd gives the job (ELASTIC_BATCH_PER_DEVICE, else --batch), an on-resize hook, and a
Reporter through which local rank 0 of each Slurm job reports that job's samples/s (all its
processes) and its compute time per step before the gradient exchange (the forward pass;
backward is where DDP's allreduce waits for the slowest worker), which is how elasticd tells a
slow worker apart when all report the same samples/s. The job ends once --total-samples have
been trained, summed over all workers: a bigger world finishes sooner.

With --trace-dir, each process records, for each world it trains in, when the world formed and
when it completed its first and latest step, so the idle time of a transition (last step of the
old world -> first step of the new) can be measured (bench/cmd/elastictransition). The latest
step is rewritten in place, one small pwrite per step, since a process that is stopped gets no
chance to say goodbye.
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from elastic_report import elastic  # noqa: E402
from torch_stores import classic_servers_where_needed  # noqa: E402
import slurmbridge_elastic.torch as et  # noqa: E402  (found where elastic_report found the helper)

classic_servers_where_needed()


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    # Long enough to watch elasticd measure, grow and settle on the testbed's CPUs: 2 million
    # could end before the first grow on a busy machine. On GPUs, ask for more.
    ap.add_argument("--total-samples", type=int, default=20_000_000, help="stop after this many samples (all workers)")
    ap.add_argument("--batch", type=int, default=256,
                    help="samples per process per step, unless elasticd gives ELASTIC_BATCH_PER_DEVICE")
    ap.add_argument("--width", type=int, default=256,
                    help="hidden width of the MLP (256: 82,689 parameters; 3200: 10,454,401)")
    ap.add_argument("--report-interval", type=float, default=1.0, help="seconds between throughput reports")
    ap.add_argument("--checkpoint", default="", help="checkpoint file (default: elastic-JOBID.ckpt in the submit dir)")
    ap.add_argument("--checkpoint-every", type=int, default=50, help="steps between checkpoints (and in-memory commits)")
    ap.add_argument("--threads", type=int, default=1, help="CPU threads per process (CPU runs)")
    ap.add_argument("--backend", choices=["auto", "nccl", "gloo"], default="auto",
                    help="process group backend (auto: nccl with GPUs, else gloo)")
    ap.add_argument("--trace-dir", default="", help="write transition traces here (benchmarks)")
    return ap.parse_args()


class Tracer:
    """Records, for each world this process trains in, its step times in
    TRACE_DIR/<job>.<pid>.<world>.json."""

    def __init__(self, directory):
        self.directory = directory
        self.fd = None

    def world(self, rank, world, generation, samples):
        """A new world formed: a new record, starting at the samples the state held."""
        if not self.directory:
            return  # not tracing: the example as shipped
        if self.fd is not None:
            os.close(self.fd)
        job = os.environ.get("SLURM_JOB_ID", "nojob")
        restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
        path = os.path.join(self.directory, f"{job}.{os.getpid()}.{generation}.json")
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self.head = {"job": job, "pid": os.getpid(), "restart": int(restart), "rank": rank, "world_size": world,
                     "mode": et.mode(), "generation": generation,
                     "started": float(os.environ.get("ELASTIC_TRAIN_T0", "0")) or None, "formed": time.time(),
                     "resumed_at": samples}
        self.first = None

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
    # In place: connects to the job's rendezvous (the world is joined in train, below); under
    # torchrun: torchrun's process group.
    et.init(backend=None if args.backend == "auto" else args.backend)
    device = et.device()
    batch = elastic.per_device_batch(default=args.batch)
    tracer = Tracer(args.trace_dir)

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, args.width), nn.ReLU(), nn.Linear(args.width, args.width), nn.ReLU(),
                          nn.Linear(args.width, 1)).to(device)
    target = torch.randn(64, 1, generator=torch.Generator().manual_seed(1)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    state = et.TorchState(model, opt, samples=0)
    ckpt = args.checkpoint or os.path.join(os.environ.get("SLURM_SUBMIT_DIR", "."),
                                           f"elastic-{os.environ.get('ELASTIC_JOB_ID', 'job')}.ckpt")
    # A run's first world starts from the checkpoint (a requeued job, or every torchrun restart);
    # in place, rank 0 reads it and the first world gets it from rank 0, and a process that
    # joins later gets the live state instead.
    if os.path.exists(ckpt) and (et.mode() == "restart" or et.is_host()):
        state.load(ckpt)
        state.commit_copy()

    @elastic.on_resize
    def resized(old, new):
        if et.rank() == 0:
            print(f"world resized from {old} to {new} processes: global batch {new * batch}", flush=True)

    # Runs the hook when this world's size differs from the last one this worker saw, and
    # reports every --report-interval.
    reporter = elastic.Reporter(samples_per_step=batch, interval=args.report_interval)

    @et.run
    def train(state):
        rank, world = et.rank(), et.size()
        tracer.world(rank, world, et.generation(), state.samples)
        if rank == 0:
            print(f"world {world} formed ({et.mode()}, world {et.generation()}, restart "
                  f"{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}), at {state.samples} samples", flush=True)
        ddp = DistributedDataParallel(state.model)  # one wrapper per world
        gen = torch.Generator().manual_seed(1000 * rank + state.samples)
        steps, loss = 0, None
        while state.samples < args.total_samples:
            with reporter.step() as step:
                x = torch.randn(batch, 64, generator=gen).to(device)
                loss = nn.functional.mse_loss(ddp(x), x @ target)
                if device.type == "cuda":
                    torch.cuda.synchronize(device)
                step.computed()  # this process's own work; what follows waits for the slowest
                opt.zero_grad()
                loss.backward()  # the allreduce: every step is a collective of the whole world
                opt.step()
            steps += 1
            state.samples += batch * world
            tracer.step(steps)
            if steps % args.checkpoint_every == 0:
                if rank == 0:
                    state.save(ckpt)
                state.commit()  # what a failure goes back to; also checks the membership
            else:
                state.check()  # in place: a grow or shrink re-forms the world here
        return float("nan") if loss is None else loss.item()

    loss = train(state)
    if loss is None:
        # This process left at a step boundary: elasticd stopped its worker, or the main job is
        # stopping (a requeue among other things). The main job's first process then saves the
        # state it holds, so that the next run starts from this step rather than the last
        # checkpoint.
        if et.is_host():
            state.save(ckpt)
            print(f"stopped at {state.samples} samples; saved to {ckpt}", flush=True)
        return
    if et.rank() == 0:
        print(f"trained {state.samples} samples, loss {loss:.4f}", flush=True)
        if os.path.exists(ckpt):
            os.remove(ckpt)
    et.shutdown()


if __name__ == "__main__":
    main()
