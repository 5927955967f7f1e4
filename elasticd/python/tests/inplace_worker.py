"""One process of a tiny in-place elastic job, for test_inplace.py: it trains a small model with
slurmbridge_elastic.torch and appends one JSON line per world it enters, and one when it ends, to
$EVENTS (its pid, world, rank, size, samples, and a checksum of its parameters)."""
import faulthandler
import json
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import torch  # noqa: E402
import slurmbridge_elastic.torch as et  # noqa: E402


def event(**fields):
    with open(os.environ["EVENTS"], "a") as f:
        f.write(json.dumps(dict(fields, pid=os.getpid(), job=os.environ["SLURM_JOB_ID"], time=time.time())) + "\n")


def checksum(model):
    return round(float(sum(p.detach().double().sum() for p in model.parameters())), 9)


def opt_checksum(opt):
    """The optimizer's momentum buffers, which only the state sync carries to a joiner."""
    return round(float(sum(s["momentum_buffer"].double().sum() for s in opt.state.values()
                           if s.get("momentum_buffer") is not None)), 9)


def main():
    # The test asks for every thread's stack (SIGUSR1) when a process does not do what it should.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    torch.set_num_threads(1)
    et.init(formation_wait=0.2)
    torch.manual_seed(int(os.environ["SLURM_JOB_ID"]))  # every job starts from different weights
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)  # optimizer state to carry
    state = et.TorchState(model, opt, samples=0)

    @et.run
    def train(state):
        event(kind="world", gen=et.generation(), rank=et.rank(), size=et.size(), samples=state.samples,
              checksum=checksum(state.model), opt_checksum=opt_checksum(opt), mode=et.mode())
        ddp = torch.nn.parallel.DistributedDataParallel(state.model)
        steps = 0
        while True:
            x = torch.randn(4, 8)
            loss = ddp(x).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            state.samples += 4 * et.size()
            steps += 1
            time.sleep(0.02)
            if steps % 10 == 0:
                state.commit()
            else:
                state.check()

    train(state)
    event(kind="left", samples=state.samples)


if __name__ == "__main__":
    main()
