"""In-place elastic transitions for PyTorch: the processes that stay keep running.

When elasticd adds a worker job or stops one, the processes that stay keep their model and
optimizer in memory. At the next step boundary every process learns of the change (one small
all_gather per check), the old process group is left, the members of the next world are
decided by rank 0 (survivors keep their order, joiners follow: membership.py), a new process
group forms, and a joining process receives the state from rank 0 by broadcast, not from a
checkpoint file. The API follows Horovod Elastic:

    import slurmbridge_elastic.torch as et

    et.init()                                    # joins the job's rendezvous (blocks until admitted)
    state = et.TorchState(model, optimizer, samples=0)

    @et.run
    def train(state):
        ddp = DistributedDataParallel(state.model)   # a new wrapper for each world
        while state.samples < total:
            ...one step...
            state.samples += batch * et.size()
            state.check()                            # re-forms here when the membership changed
            if step % 100 == 0:
                state.commit()                       # what a failure goes back to

    train(state)

run() calls train again after each re-formation, with the same state object. A worker that
gets elasticd's TERM finishes its step, takes part in the check and leaves; train returns in
it. Should a process die instead (a failed node), the others' collective fails: each goes back
to its last commit, the survivors form the next world without it, and training goes on.

Where torchrun launches the processes (TORCHELASTIC_RUN_ID is set), torchrun restarts them at
every membership change: mode() is "restart", init() takes torchrun's process group, check()
does nothing and the training code loads its checkpoint at start. Elsewhere (the job's processes
started by examples/elastic_launch.py or srun) mode() is "in-place", and the rendezvous is this
module's own, on a TCPStore that the main job's first process hosts at ELASTIC_RDZV_ENDPOINT.

Environment: the elasticd contract (ELASTIC_RDZV_ENDPOINT, ELASTIC_ROLE, ELASTIC_MIN,
ELASTIC_MAX, ELASTIC_GPUS_PER_WORKER) and LOCAL_RANK / LOCAL_WORLD_SIZE from the launcher.
RANK and WORLD_SIZE are set again at each formation, so slurmbridge_elastic.world_size() and its
Reporter follow the world as it changes.
"""
import copy
import json
import os
import signal
import sys
import threading
import time
import uuid
from datetime import timedelta

import torch
import torch.distributed as dist

from . import _env_int, membership, role, set_transition_mode

__all__ = ["init", "run", "TorchState", "mode", "rank", "size", "local_rank", "device", "generation", "leaving",
           "MembershipChanged", "RecoveryFailed", "shutdown"]



class MembershipChanged(Exception):
    """Raised by State.check() in every process when the world must re-form; run() catches it."""


class RecoveryFailed(Exception):
    """The world failed again after three re-formations with no commit between them."""


class _Leave(Exception):
    """This process is not in the next world (it was told to stop, or its job ended)."""


class _Context:
    def __init__(self):
        self.mode = None
        self.store = None  # the job's keys (a PrefixStore over raw_store)
        self.raw_store = None  # the TCPStore: its server, in the host process
        self.me = None
        self.gen = None
        self.backend = None
        self.device = None
        self.is_host = False
        self.max_procs = None
        self.min_procs = 1
        self.timeout = timedelta(seconds=60)
        self.seen_arrivals = 0
        self.waiting = []  # joiners in arrival order, as rank 0 last read them
        self.stop_requested = threading.Event()
        self.recoveries_since_commit = 0


_ctx = _Context()


def mode():
    """"in-place" or "restart" (under torchrun); None before init()."""
    return _ctx.mode


def rank():
    return dist.get_rank()


def size():
    return dist.get_world_size()


def local_rank():
    return _env_int("LOCAL_RANK", 0, minimum=0)


def device():
    """The device this process trains on: cuda:LOCAL_RANK with GPUs, else the CPU."""
    return _ctx.device


def generation():
    """The number of the current world (1 for the first); 0 under torchrun."""
    return _ctx.gen.number if _ctx.gen else 0


def leaving():
    """Whether this process was told to stop (TERM) and leaves at the next check."""
    return _ctx.stop_requested.is_set()


def _log(msg):
    print(f"slurmbridge_elastic: {msg}", file=sys.stderr, flush=True)


def _make_store(host, port, is_master, timeout):
    kwargs = dict(host_name=host, port=port, is_master=is_master, timeout=timeout, wait_for_workers=False)
    try:
        # The classic server: a handful of clients, and torch builds without libuv (Debian
        # 13's) fail on the libuv default.
        return dist.TCPStore(**kwargs, use_libuv=False)
    except TypeError:
        return dist.TCPStore(**kwargs)  # torch before 2.3 has only the classic server


def init(backend=None, timeout=timedelta(seconds=60), store_timeout=timedelta(minutes=30), formation_wait=0.5):
    """Joins the job's rendezvous and forms (or waits to be admitted to) a world. Returns the
    mode. backend defaults to nccl with CUDA, else gloo. formation_wait: how long the first world
    waits for more processes once ELASTIC_MIN workers' processes have arrived."""
    if _ctx.mode is not None:
        return _ctx.mode
    _ctx.backend = backend or ("nccl" if torch.cuda.is_available() else "gloo")
    _ctx.timeout = timeout
    lr = local_rank()
    if torch.cuda.is_available():
        _ctx.device = torch.device("cuda", lr % torch.cuda.device_count())
        torch.cuda.set_device(_ctx.device)
    else:
        _ctx.device = torch.device("cpu")
    if os.environ.get("TORCHELASTIC_RUN_ID"):
        _ctx.mode = "restart"
        set_transition_mode("restart")
        dist.init_process_group(_ctx.backend, timeout=timeout)
        _log(f"restart mode (torchrun): rank {dist.get_rank()} of {dist.get_world_size()}")
        return _ctx.mode
    _ctx.mode = "in-place"
    set_transition_mode("in-place")
    endpoint = os.environ["ELASTIC_RDZV_ENDPOINT"]
    host, port = endpoint.rsplit(":", 1)
    per_worker = _env_int("ELASTIC_GPUS_PER_WORKER", 1)
    _ctx.max_procs = _env_int("ELASTIC_MAX", 1) * per_worker
    _ctx.min_procs = _env_int("ELASTIC_MIN", 1) * per_worker
    job = os.environ.get("SLURM_JOB_ID", str(os.getpid()))
    # Unique to this process: a requeued worker job comes back with its job id, and must not
    # be taken for the process it was before.
    _ctx.me = membership.member_id(job, lr, uuid.uuid4().hex[:8])
    _ctx.is_host = role() == "main" and lr == 0
    _install_term_handler()
    raw = _make_store(host, int(port), _ctx.is_host, store_timeout)
    # The elastic job's own keys: a process of another job that reaches this port (the port is
    # derived from the job id, so two jobs can share one) never sees or answers them.
    _ctx.store = dist.PrefixStore(f"slurmbridge-elastic/{os.environ.get('ELASTIC_JOB_ID', job)}/", raw)
    _ctx.raw_store = raw
    store = _ctx.store
    n = store.add("arrivals", 1)
    store.set(f"arrival/{n}", _ctx.me)
    if _ctx.is_host:
        gen = _form_first(formation_wait)
    else:
        gen = _await_admission()
    _enter(gen)
    return _ctx.mode


def _install_term_handler():
    def on_term(signum, frame):
        _ctx.stop_requested.set()
    # Only the main thread may set handlers; elsewhere the launcher's TERM still ends the job.
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, on_term)


def _read_waiting():
    """Rank 0: the joiners that arrived and are still waiting, in arrival order."""
    store = _ctx.store
    count = store.add("arrivals", 0)
    for n in range(_ctx.seen_arrivals + 1, count + 1):
        try:
            member = store.get(f"arrival/{n}").decode("ascii")
        except UnicodeDecodeError:
            continue
        if membership.valid_member(member):
            _ctx.waiting.append(member)
    _ctx.seen_arrivals = count
    withdrawn = [m for m in _ctx.waiting if _flag(f"withdrawn/{m}")]
    members = set(_ctx.gen.members) if _ctx.gen else set()
    _ctx.waiting = [m for m in _ctx.waiting if m not in withdrawn and m not in members]
    return list(_ctx.waiting)


def _flag(key):
    """A counter's value, 0 when never set. Flags are counters because every torch release's
    TCPStore has add, where check (a key's presence) came later."""
    return _ctx.store.add(key, 0)


def _form_first(formation_wait):
    deadline = None
    while True:
        waiting = _read_waiting()
        if len(waiting) >= _ctx.max_procs:
            break
        if len(waiting) >= _ctx.min_procs:
            deadline = deadline or time.monotonic() + formation_wait
            if time.monotonic() >= deadline:
                break
        if _ctx.stop_requested.is_set():
            raise SystemExit(0)
        time.sleep(0.05)
    gen = membership.first_generation(_ctx.me, waiting, _ctx.max_procs)
    _publish(gen)
    return gen


def _publish(gen):
    store = _ctx.store
    store.set(f"gen/{gen.number}", json.dumps(gen.to_record()))
    for m in gen.joined:
        store.add(f"assigned/{m}", gen.number)
    store.set("current", str(gen.number))


def _read_gen(number):
    key = f"gen/{number}"
    _ctx.store.wait([key], _ctx.timeout)
    return membership.Generation.from_record(json.loads(_ctx.store.get(key)))


def _await_admission():
    while not (number := _flag(f"assigned/{_ctx.me}")):
        if _ctx.stop_requested.is_set():
            _ctx.store.add(f"withdrawn/{_ctx.me}", 1)
            _log(f"{_ctx.me} was stopped before it was admitted")
            raise SystemExit(0)
        time.sleep(0.05)
    return _read_gen(number)


def _enter(gen):
    """Forms the process group of gen, which includes this process."""
    r = gen.rank_of(_ctx.me)
    started = time.monotonic()
    # Each world's keys under its own prefix: a new world never reads an old one's.
    pg_store = dist.PrefixStore(f"pg/{gen.number}/", _ctx.store)
    # The world this process is in from now on, formed or not: should the forming fail (an
    # admitted joiner never came), the recovery starts from it and numbers the next one after.
    _ctx.gen = gen
    dist.init_process_group(_ctx.backend, store=pg_store, rank=r, world_size=gen.size, timeout=_ctx.timeout)
    os.environ["RANK"], os.environ["WORLD_SIZE"] = str(r), str(gen.size)
    if r == 0:
        _log(f"world {gen.number} formed in place: {membership._processes(gen.size)} "
             f"({'; '.join(gen.reasons) or 'no change'}), process group in {time.monotonic() - started:.2f}s")


def _leave_group():
    if dist.is_initialized():
        dist.destroy_process_group()


def _check():
    """The collective check: every rank says whether it is leaving; rank 0 says whether joiners
    wait. Raises MembershipChanged in every rank when either holds."""
    pending = 0
    if dist.get_rank() == 0 and dist.get_world_size() < _ctx.max_procs and _read_waiting():
        pending = 1
    flags = torch.tensor([1 if _ctx.stop_requested.is_set() else 0, pending], dtype=torch.int32,
                         device=_ctx.device if _ctx.backend == "nccl" else "cpu")
    gathered = [torch.zeros_like(flags) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, flags)
    leaving_ranks = [i for i, f in enumerate(gathered) if int(f[0])]
    if leaving_ranks or int(gathered[0][1]):
        raise MembershipChanged(leaving_ranks)


def _reform(leaving_ranks):
    """After a MembershipChanged at a step boundary: the next world, without a restore."""
    old = _ctx.gen
    leavers = [old.members[i] for i in leaving_ranks]
    me_leaving = _ctx.me in leavers
    host_leaving = old.members[0] in leavers
    _leave_group()
    if host_leaving:
        # The main job is ending: its store goes with it, and so does the job.
        _log("the main job is stopping; this process ends with it")
        raise _Leave()
    if me_leaving:
        _log(f"{_ctx.me} leaves the world (told to stop)")
        raise _Leave()
    if old.rank_of(_ctx.me) == 0:
        gen = membership.next_generation(old, leaving=leavers, waiting=_read_waiting(), max_procs=_ctx.max_procs)
        _publish(gen)
    else:
        gen = _read_gen(old.number + 1)
    _enter(gen)
    return gen


def _recover(error):
    """After a collective failed (a process died): the survivors form the next world."""
    old = _ctx.gen
    _ctx.recoveries_since_commit += 1
    if _ctx.recoveries_since_commit > 3:
        # It fails again in every world: not a departed process but the code, or the main job
        # (and its store) is gone.
        raise RecoveryFailed(f"world {old.number}: {error}") from error
    _log(f"collective failed in world {old.number} ({type(error).__name__}: {error}); re-forming")
    _leave_group()
    store = _ctx.store
    store.add(f"alive/{old.number}/{_ctx.me}", 1)
    if old.rank_of(_ctx.me) == 0:
        # Wait for every other member's answer, or until the slowest survivor's collective would
        # have timed out too.
        deadline = time.monotonic() + min(_ctx.timeout.total_seconds(), 10)
        while time.monotonic() < deadline:
            alive = [m for m in old.members if _flag(f"alive/{old.number}/{m}")]
            if len(alive) == old.size:
                break
            time.sleep(0.05)
        alive = [m for m in old.members if _flag(f"alive/{old.number}/{m}")]
        gen = membership.next_generation(old, waiting=_read_waiting(), max_procs=_ctx.max_procs, alive=alive)
        _publish(gen)
    else:
        gen = _read_gen(old.number + 1)
        if gen.rank_of(_ctx.me) is None:
            raise _Leave()
    _enter(gen)
    return gen


class TorchState:
    """The training state that survives a membership change: a model, an optimizer and any
    scalars (samples=0, epoch=0 ...) given as keywords, read and written as attributes.

    commit() keeps a copy in memory (and checks the membership); restore() goes back to it;
    sync() sends rank 0's state to every process. save(path) and load(path) write and read a
    checkpoint file, for restarts and requeues."""

    def __init__(self, model, optimizer=None, **scalars):
        self.model = model
        self.optimizer = optimizer
        self._scalar_names = list(scalars)
        for k, v in scalars.items():
            setattr(self, k, v)
        self._saved = None
        self.commit_copy()

    def scalars(self):
        return {k: getattr(self, k) for k in self._scalar_names}

    def commit_copy(self):
        self._saved = (copy.deepcopy(self.model.state_dict()),
                       copy.deepcopy(self.optimizer.state_dict()) if self.optimizer else None,
                       copy.deepcopy(self.scalars()))

    def commit(self):
        """Keeps the current state as the one a failure goes back to, then checks membership."""
        self.commit_copy()
        _ctx.recoveries_since_commit = 0
        self.check()

    def check(self):
        """At a step boundary, in every process: raises MembershipChanged (caught by run) when a
        process is leaving or one waits to join. A no-op in restart mode."""
        if _ctx.mode == "in-place":
            _check()

    def restore(self):
        model, opt, scalars = self._saved
        self.model.load_state_dict(model)
        if self.optimizer and opt is not None:
            self.optimizer.load_state_dict(opt)
        for k, v in scalars.items():
            setattr(self, k, v)

    def sync(self):
        """Rank 0's model, optimizer and scalars to every process of the world."""
        with torch.no_grad():
            for t in list(self.model.parameters()) + list(self.model.buffers()):
                dist.broadcast(t.data, src=0)
        objs = [self.optimizer.state_dict() if self.optimizer else None, self.scalars()]
        dist.broadcast_object_list(objs, src=0)
        if self.optimizer and objs[0] is not None and dist.get_rank() != 0:
            self.optimizer.load_state_dict(objs[0])
        for k, v in objs[1].items():
            setattr(self, k, v)

    def save(self, path):
        """Writes the state to path atomically (a checkpoint for restarts and requeues)."""
        tmp = f"{path}.tmp"
        torch.save({"model": self.model.state_dict(), "opt": self.optimizer.state_dict() if self.optimizer else None,
                    "scalars": self.scalars()}, tmp)
        os.replace(tmp, path)

    def load(self, path, map_location=None):
        saved = torch.load(path, map_location=map_location or _ctx.device)
        self.model.load_state_dict(saved["model"])
        if self.optimizer and saved.get("opt") is not None:
            self.optimizer.load_state_dict(saved["opt"])
        for k, v in saved.get("scalars", {}).items():
            setattr(self, k, v)


def run(func):
    """Wraps train(state, ...): in place, it runs in each world the process belongs to, with the
    state synced from rank 0 whenever the world has someone new or recovered from a failure.
    It returns func's result, or None in a process that left the job."""
    def wrapper(state, *args, **kwargs):
        if _ctx.mode != "in-place":
            return func(state, *args, **kwargs)
        change = failure = None
        while True:
            try:
                if change is not None:
                    _reform(change)
                elif failure is not None:
                    _recover(failure)
                    state.restore()
                change = failure = None
                if _ctx.gen.needs_sync():
                    state.sync()
                return func(state, *args, **kwargs)
            except MembershipChanged as c:
                change = c.args[0]
            except _Leave:
                return None
            except RuntimeError as err:
                # A collective or the forming of a world failed: a process died or never came.
                change, failure = None, err
    wrapper.__name__ = getattr(func, "__name__", "train")
    wrapper.__doc__ = func.__doc__
    return wrapper


def shutdown():
    """Leaves the process group at the end of training. The host keeps the store up until the
    other processes have left it, so that none fails reading it."""
    if _ctx.mode == "in-place" and _ctx.store is not None and _ctx.gen is not None:
        try:
            _ctx.store.add(f"done/{_ctx.gen.number}", 1)
            if _ctx.gen.rank_of(_ctx.me) == 0:
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline and _ctx.store.add(f"done/{_ctx.gen.number}", 0) < _ctx.gen.size:
                    time.sleep(0.05)
        except RuntimeError:
            pass
    _leave_group()
