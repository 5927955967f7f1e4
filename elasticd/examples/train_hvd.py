#!/usr/bin/env python3
"""Elastic data-parallel training under horovodrun, for elasticd (see horovod.sbatch).

The same model and work as train.py, through Horovod's elastic API: horovodrun re-runs
train() with a new hvd.size() whenever discover_hosts.sh (elasticd's hosts file) changes, and
the state rolls back to its last commit. Ranks are started over ssh without Slurm's
environment, so each host's local rank 0 reports for the worker job that holds the host: the
job id that horovod.sbatch left in $ELASTIC_REPORT_DIR/host-<hostname>.

Not run by this project's tests: Horovod is in neither Debian nor this project's registries.
"""
import argparse
import os
import socket
import sys

import horovod.torch as hvd
import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from elastic_report import elastic  # noqa: E402


def worker_job():
    path = os.path.join(os.environ["ELASTIC_REPORT_DIR"], "host-" + socket.gethostname().split(".")[0])
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return os.environ.get("SLURM_JOB_ID")  # the main job's own host


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--total-samples", type=int, default=2_000_000)
    ap.add_argument("--batch", type=int, default=256, help="per process, unless elasticd gives ELASTIC_BATCH_PER_DEVICE")
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--report-interval", type=float, default=1.0)
    ap.add_argument("--commit-every", type=int, default=50, help="steps between state commits")
    args = ap.parse_args()

    hvd.init()
    use_cuda = torch.cuda.is_available()
    if use_cuda:
        torch.cuda.set_device(hvd.local_rank())
    device = torch.device("cuda") if use_cuda else torch.device("cpu")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, args.width), nn.ReLU(), nn.Linear(args.width, args.width), nn.ReLU(),
                          nn.Linear(args.width, 1)).to(device)
    target = torch.randn(64, 1, generator=torch.Generator().manual_seed(1)).to(device)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.01),
                                   named_parameters=model.named_parameters())
    state = hvd.elastic.TorchState(model=model, optimizer=opt, samples=0)
    batch = elastic.per_device_batch(default=args.batch)

    @elastic.on_resize
    def resized(old, new):
        if hvd.rank() == 0:
            print(f"world resized from {old} to {new} ranks: global batch {new * batch}", flush=True)

    reporter = elastic.Reporter(samples_per_step=batch, interval=args.report_interval, worker=worker_job(),
                                local_rank=hvd.local_rank, local_world=hvd.local_size, world=hvd.size)

    @hvd.elastic.run
    def train(state):
        gen = torch.Generator().manual_seed(1000 * hvd.rank() + state.samples)
        steps = 0
        while state.samples < args.total_samples:
            with reporter.step() as step:
                x = torch.randn(batch, 64, generator=gen).to(device)
                loss = nn.functional.mse_loss(model(x), x @ target)
                if use_cuda:
                    torch.cuda.synchronize()
                step.computed()  # the allreduce follows, in backward and step
                opt.zero_grad()
                loss.backward()
                opt.step()  # the allreduce
            steps += 1
            state.samples += batch * hvd.size()
            if steps % args.commit_every == 0:
                state.commit()  # also where horovodrun applies a host change
        return loss.item()

    loss = train(state)
    if hvd.rank() == 0:
        print(f"trained {state.samples} samples, loss {loss:.4f}", flush=True)


if __name__ == "__main__":
    main()
