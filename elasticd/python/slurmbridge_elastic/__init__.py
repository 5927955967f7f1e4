"""What an elastic training job needs from elasticd (slurmbridge), in one small module.

elasticd grows a training job by adding Slurm jobs ("workers") that join its rendezvous, and
decides from what the workers report. This module reads the environment contract elasticd and
its SPANK plugin give every worker (elasticd/README.md) and writes the reports:

    import slurmbridge_elastic as elastic

    batch = elastic.per_device_batch(default=256)   # ELASTIC_BATCH_PER_DEVICE, else 256
    rdzv = elastic.rendezvous()                     # endpoint, id, nnodes: torchrun's --rdzv-*
    print(elastic.world_size(), elastic.workers())  # processes; worker jobs (hosts file)

    elastic.on_resize(lambda old, new: print(f"world {old} -> {new}"))
    reporter = elastic.Reporter(samples_per_step=batch)
    for x, y in data:
        with reporter.step() as step:
            loss = loss_fn(model(x), y)   # this process's own compute
            step.computed()               # the gradient exchange follows
            loss.backward()
            opt.step()

Every process calls step(); the local rank 0 of each worker job appends one JSON line per
interval to $ELASTIC_REPORT_DIR/$SLURM_JOB_ID.jsonl:

    {"time": 1795341352.5, "worker": "1234", "samples_per_sec": 95.0, "compute_s": 0.101,
     "step_s": 0.270, "steps": 4, "world_size": 3, "rank": 0}

samples_per_sec is the worker job's own rate (all its processes); compute_s the mean time per
step its slowest local process spent before the gradient exchange (step.computed()); step_s the
mean whole step. In synchronous data-parallel training every worker waits for the slowest at
the exchange, so all report the same samples/s: compute_s is what tells elasticd which worker
is slow. Without step.computed() no compute_s is reported.

The module needs only the standard library: torch, Horovod or nothing at all. For PyTorch,
slurmbridge_elastic.torch (which imports torch) changes the world in place, in the style of
Horovod Elastic: the processes that stay keep their model and optimizer through a grow or shrink.
"""
import contextlib
import json
import os
import tempfile
import time
from dataclasses import dataclass

__all__ = [
    "Rendezvous", "Reporter", "on_resize", "per_device_batch", "rendezvous", "report", "role",
    "check_resize", "world_size", "workers", "transition_mode",
]

BATCH_VAR = "ELASTIC_BATCH_PER_DEVICE"


def _env_int(name, default=None, minimum=1):
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        n = int(value)
    except ValueError:
        raise ValueError(f"{name}={value!r} is not a whole number") from None
    if n < minimum:
        raise ValueError(f"{name}={value!r} must be at least {minimum}")
    return n


def role():
    """"main" for the main job, "worker" for a worker job elasticd added, "" outside elasticd."""
    return os.environ.get("ELASTIC_ROLE", "")


def per_device_batch(default=None):
    """The per-device (per process) batch size elasticd gives this job (ELASTIC_BATCH_PER_DEVICE),
    so that the global batch stays within the job's declared limit whatever the world size; else
    default. A malformed value raises ValueError rather than train with a wrong batch."""
    return _env_int(BATCH_VAR, default)


def workers(hosts_file=None):
    """The number of worker jobs in the job now, the main job included: the lines of
    $ELASTIC_HOSTS_FILE, which elasticd keeps current. 1 when there is no such file."""
    path = hosts_file or os.environ.get("ELASTIC_HOSTS_FILE", "")
    try:
        with open(path) as f:
            return max(1, sum(1 for line in f if line.strip()))
    except OSError:
        return 1


def world_size():
    """The number of training processes: WORLD_SIZE where torchrun (or torch.distributed's
    launcher) set it, HOROVOD_SIZE under horovodrun, else the worker jobs times
    ELASTIC_GPUS_PER_WORKER."""
    for name in ("WORLD_SIZE", "HOROVOD_SIZE"):
        n = _env_int(name)
        if n:
            return n
    return workers() * (_env_int("ELASTIC_GPUS_PER_WORKER", 1))


@dataclass(frozen=True)
class Rendezvous:
    """Where the job's workers meet: torchrun's --rdzv-endpoint, --rdzv-id and --nnodes."""
    endpoint: str  # host:port on the main job's node
    id: str  # "slurm-<main job id>", the same in every worker
    min_workers: int
    max_workers: int
    procs_per_worker: int
    is_host: bool  # the main job's agent hosts the rendezvous store

    @property
    def host(self):
        return self.endpoint.rsplit(":", 1)[0]

    @property
    def port(self):
        return int(self.endpoint.rsplit(":", 1)[1])

    @property
    def nnodes(self):
        return f"{self.min_workers}:{self.max_workers}"

    def torchrun_args(self):
        """torchrun's rendezvous options, as torchrun.sbatch passes them."""
        return [f"--nnodes={self.nnodes}", f"--nproc_per_node={self.procs_per_worker}",
                "--rdzv_backend=c10d", f"--rdzv_endpoint={self.endpoint}", f"--rdzv_id={self.id}"]


def rendezvous():
    """The job's rendezvous from the environment contract; KeyError names a missing variable
    (the job was not started by elasticd or its SPANK plugin)."""
    endpoint = os.environ["ELASTIC_RDZV_ENDPOINT"]
    if ":" not in endpoint:
        raise ValueError(f"ELASTIC_RDZV_ENDPOINT={endpoint!r} is not host:port")
    return Rendezvous(endpoint=endpoint, id="slurm-" + os.environ["ELASTIC_JOB_ID"],
                      min_workers=_env_int("ELASTIC_MIN", 1), max_workers=_env_int("ELASTIC_MAX", 1),
                      procs_per_worker=_env_int("ELASTIC_GPUS_PER_WORKER", 1), is_host=role() == "main")


def _worker_id(worker=None):
    return str(worker or os.environ["SLURM_JOB_ID"])


def report(samples_per_sec, worker=None, report_dir=None, **fields):
    """Appends one report line for this worker job: its samples/s (all its processes) and any
    further fields (compute_s, step_s, world_size, ...). Under Horovod, whose ranks run over ssh
    without Slurm's environment, pass worker= explicitly."""
    worker = _worker_id(worker)
    record = {"time": time.time(), "worker": worker, "samples_per_sec": float(samples_per_sec)}
    record.update({k: v for k, v in fields.items() if v is not None})
    directory = report_dir or os.environ["ELASTIC_REPORT_DIR"]
    # One write of a whole line: elasticd skips a line still being written.
    with open(os.path.join(directory, f"{worker}.jsonl"), "a") as f:
        f.write(json.dumps(record) + "\n")


_resize_hooks = []
_transition_mode = None


def set_transition_mode(mode):
    """Set by slurmbridge_elastic.torch: "in-place" or "restart", then carried in every report."""
    global _transition_mode
    _transition_mode = mode


def transition_mode():
    """How this process's world changes size: "in-place" (the processes stay, see
    slurmbridge_elastic.torch), "restart" (torchrun restarts them), or None (not said)."""
    return _transition_mode


def on_resize(fn):
    """Registers fn(old_world_size, new_world_size), called when the world changes size. A
    torchrun job restarts its processes at every change: the first Reporter or check_resize()
    of the new processes calls it, with the size the previous processes of this worker saw.
    Where the world changes in place (Horovod, the synthetic trainer), Reporter calls it at the
    next report. Returns fn, so it can be a decorator."""
    _resize_hooks.append(fn)
    return fn


def _state_path(worker, local_rank, report_dir):
    return os.path.join(report_dir, f".{worker}.{local_rank}.world")


def check_resize(size=None, worker=None, local_rank=None, report_dir=None):
    """Calls the on_resize hooks if the world size differs from the last one this process (or
    its predecessor on this worker, across a torchrun restart) saw. Returns the size."""
    size = size or world_size()
    directory = report_dir or os.environ.get("ELASTIC_REPORT_DIR", "")
    if not directory:
        return size
    path = _state_path(_worker_id(worker), local_rank if local_rank is not None else _local_rank(), directory)
    try:
        with open(path) as f:
            last = int(f.read().strip() or 0)
    except (OSError, ValueError):
        last = 0
    if last != size:
        _write_atomic(path, str(size))
        if last:
            for hook in list(_resize_hooks):
                hook(last, size)
    return size


def _write_atomic(path, text):
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _local_rank():
    for name in ("LOCAL_RANK", "HOROVOD_LOCAL_RANK"):
        n = _env_int(name, minimum=0)
        if n is not None:
            return n
    return 0


def _local_world():
    return _env_int("LOCAL_WORLD_SIZE") or _env_int("HOROVOD_LOCAL_SIZE") or 1


class _Step:
    def __init__(self):
        self.start = time.perf_counter()
        self.compute = None

    def computed(self):
        """Marks the end of this process's own compute: what follows is the gradient exchange,
        where a fast process waits for the slowest."""
        self.compute = time.perf_counter() - self.start


class Reporter:
    """Measures steps and reports them for elasticd (see the module's documentation).

    samples_per_step: samples one process trains per step (its per-device batch).
    interval: seconds between reports. worker: the worker job's id (default SLURM_JOB_ID).
    local_rank, local_world, world: default to torchrun's (or Horovod's) environment; a callable
    is asked at each report (Horovod's hvd.local_size() changes in place).
    """

    def __init__(self, samples_per_step, interval=1.0, worker=None, local_rank=None, local_world=None,
                 world=None, report_dir=None):
        self.samples_per_step = samples_per_step
        self.interval = interval
        self.worker = _worker_id(worker)
        self._local_rank = local_rank
        self._local_world = local_world
        self._world = world
        self.report_dir = report_dir or os.environ["ELASTIC_REPORT_DIR"]
        self._reset(time.perf_counter())
        self.last_world = check_resize(self.world(), self.worker, self.local_rank(), self.report_dir)

    @staticmethod
    def _value(v, default):
        if v is None:
            return default()
        return v() if callable(v) else v

    def local_rank(self):
        return self._value(self._local_rank, _local_rank)

    def local_world(self):
        return self._value(self._local_world, _local_world)

    def world(self):
        return self._value(self._world, world_size)

    def _reset(self, now):
        self.window_start, self.steps, self.compute_sum, self.computed_steps = now, 0, 0.0, 0

    @contextlib.contextmanager
    def step(self):
        """One training step; call .computed() on what it yields once the local compute is done."""
        s = _Step()
        yield s
        self.end_step(s.compute)

    def end_step(self, compute_s=None):
        """Counts a step whose local compute took compute_s seconds (None: not measured), for
        loops that cannot use step()."""
        self.steps += 1
        if compute_s is not None:
            self.compute_sum += compute_s
            self.computed_steps += 1
        now = time.perf_counter()
        if now - self.window_start >= self.interval:
            self._flush(now)

    def _sibling_path(self, local_rank):
        return os.path.join(self.report_dir, f".{self.worker}.{local_rank}.compute")

    def _flush(self, now):
        elapsed = now - self.window_start
        compute = self.compute_sum / self.computed_steps if self.computed_steps else None
        local_rank, local_world = self.local_rank(), self.local_world()
        if local_rank != 0:
            # The local rank 0 reports for the whole worker job, with the slowest process's
            # compute time: the one the others wait for.
            if compute is not None:
                _write_atomic(self._sibling_path(local_rank), json.dumps({"time": time.time(), "compute_s": compute}))
        else:
            if compute is not None:
                compute = max([compute] + self._siblings(local_world))
            report(self.steps * self.samples_per_step * local_world / elapsed, worker=self.worker,
                   report_dir=self.report_dir, compute_s=None if compute is None else round(compute, 6),
                   step_s=round(elapsed / self.steps, 6), steps=self.steps, world_size=self.world(),
                   transition=_transition_mode)
        # Every process runs the hooks of an in-place resize (a torchrun restart is seen at start).
        world = self.world()
        if world != self.last_world:
            self.last_world = check_resize(world, self.worker, local_rank, self.report_dir)
        self._reset(now)

    def _siblings(self, local_world):
        """The other local processes' latest compute times, if fresh (3 intervals)."""
        out = []
        for rank in range(1, local_world):
            try:
                with open(self._sibling_path(rank)) as f:
                    rec = json.load(f)
            except (OSError, ValueError):
                continue
            if time.time() - float(rec.get("time", 0)) <= 3 * max(self.interval, 1.0):
                out.append(float(rec["compute_s"]))
        return out
