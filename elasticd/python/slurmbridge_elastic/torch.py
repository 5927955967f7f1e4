"""In-place elastic transitions for PyTorch: the processes that stay keep running.

When elasticd adds a worker job or stops one, the processes that stay keep their model and
optimizer in memory. At the next step boundary every process learns of the change (one small
all_gather per check), the old process group is left, rank 0 decides the next world (survivors
keep their order, whole joining jobs follow: membership.py), a new process group forms, and a
joining process receives the state from rank 0 by broadcast, not from a checkpoint file. The API
follows Horovod Elastic:

    import slurmbridge_elastic.torch as et

    et.init()                                    # connects to the job's rendezvous
    state = et.TorchState(model, optimizer, samples=0)

    @et.run
    def train(state):                            # joins (or forms) a world on the first call
        ddp = DistributedDataParallel(state.model)   # a new wrapper for each world
        while state.samples < total:
            ...one step...
            state.samples += batch * et.size()
            state.check()                            # re-forms here when the membership changed
            if step % 100 == 0:
                state.commit()                       # what a failure goes back to

    train(state)                                 # None in a process that left the job

run() calls train again after each re-formation, with the same state object. A process joins
only when it reaches run(), its model built, so the world it joins waits only for the group to
form and the state to arrive. A worker that gets elasticd's TERM finishes its step, takes part
in the check and leaves; train returns None in it. Should a process die instead (a failed node),
the others' collective fails: each goes back to its last commit, the survivors form the next
world without it (and without the rest of its Slurm job), and training goes on. That recovery
is tested with gloo; with NCCL a collective with a dead peer may block until the process
group's timeout, and torch 2.2 and later then end every process (TORCH_NCCL_ASYNC_ERROR_HANDLING).

Where torchrun launches the processes (TORCHELASTIC_RUN_ID is set), torchrun restarts them at
every membership change: mode() is "restart", init() takes torchrun's process group, check()
does nothing and the training code loads its checkpoint at start. Elsewhere (the job's processes
started by examples/elastic_launch.py) mode() is "in-place", and the rendezvous is this
module's own, on a TCPStore that the main job's first process hosts at ELASTIC_RDZV_ENDPOINT.

Environment: the elasticd contract (ELASTIC_RDZV_ENDPOINT, ELASTIC_ROLE, ELASTIC_JOB_ID,
ELASTIC_MIN, ELASTIC_MAX, ELASTIC_GPUS_PER_WORKER) and LOCAL_RANK / LOCAL_WORLD_SIZE from the
launcher. RANK and WORLD_SIZE are set again at each formation, so slurmbridge_elastic.world_size()
and its Reporter follow the world as it changes.
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
           "is_host", "MembershipChanged", "RecoveryFailed", "shutdown"]

# The failures after which run() gives up: the code fails in every world, or the main job (and
# its store) is gone.
MAX_RECOVERIES = 3
# How long rank 0 waits, after a failure, for the other members to answer.
RECOVERY_WAIT_S = 10
# How long an arrival may stay half-written (its counter taken, its key not yet set) before
# rank 0 passes over it.
ARRIVAL_GRACE_S = 30


class MembershipChanged(Exception):
    """Raised by State.check() in every process when the world must re-form; run() catches it."""


class RecoveryFailed(Exception):
    """The world failed MAX_RECOVERIES times with no commit between them."""


class _Leave(Exception):
    """This process is not in the next world (it was told to stop, or its job ended)."""


class _Rejoin(Exception):
    """This process was left out of the world formed after a failure: it joins again."""


class _Context:
    def __init__(self):
        self.mode = None
        self.store = None  # the job's keys (a PrefixStore over the TCPStore)
        self.me = None  # this process's member id, new at each (re)join
        self.job = None
        self.gen = None
        self.backend = None
        self.device = None
        self.is_host = False
        self.max_procs = 1
        self.min_procs = 1
        self.per_job = 1
        self.timeout = timedelta(minutes=10)  # the process group's collectives
        self.join_timeout = timedelta(seconds=60)  # waits on the store
        self.formation_wait = 0.5
        self.seen_arrivals = 0
        self.half_written = {}  # arrival number -> when rank 0 first found it unset
        self.waiting = []  # joiners in arrival order, as rank 0 last read them
        self.stop_requested = threading.Event()
        self.recoveries_since_commit = 0
        self.retired = []  # the process groups of past worlds (_leave_group)


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


def is_host():
    """Whether this process hosts the rendezvous: the main job's first process, rank 0 of every
    world in place (it loads a checkpoint for the first world)."""
    return _ctx.is_host


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


def init(backend=None, timeout=timedelta(minutes=10), join_timeout=timedelta(seconds=60),
         store_timeout=timedelta(minutes=30), formation_wait=0.5):
    """Connects to the job's rendezvous (in place) or takes torchrun's process group (restart).
    Returns the mode. backend defaults to nccl with CUDA, else gloo. timeout bounds the process
    group's collectives, join_timeout each wait on the store, formation_wait how long the first
    world waits for more processes once ELASTIC_MIN workers' processes have arrived."""
    if _ctx.mode is not None:
        return _ctx.mode
    _ctx.backend = backend or ("nccl" if torch.cuda.is_available() else "gloo")
    _ctx.timeout, _ctx.join_timeout, _ctx.formation_wait = timeout, join_timeout, formation_wait
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
    _ctx.per_job = _env_int("ELASTIC_GPUS_PER_WORKER", 1)
    _ctx.max_procs = _env_int("ELASTIC_MAX", 1) * _ctx.per_job
    _ctx.min_procs = _env_int("ELASTIC_MIN", 1) * _ctx.per_job
    _ctx.job = os.environ.get("SLURM_JOB_ID", str(os.getpid()))
    _ctx.is_host = role() == "main" and lr == 0
    _install_term_handler()
    # The elastic job's own keys: a process of another job that reaches this port (the port is
    # derived from the job id, so two jobs can share one) never sees or answers them. The prefix
    # store holds the TCPStore, whose server runs in the host process.
    _ctx.store = dist.PrefixStore(f"slurmbridge-elastic/{os.environ.get('ELASTIC_JOB_ID', _ctx.job)}/",
                                  _make_store(host, int(port), _ctx.is_host, store_timeout))
    if _ctx.is_host:
        _ctx.store.set("mode", "in-place")
    else:
        try:
            _ctx.store.wait(["mode"], join_timeout)
        except RuntimeError:
            raise RuntimeError(
                f"the main job's rendezvous at {endpoint} is not an in-place one after {join_timeout}: its "
                "processes run under torchrun (ELASTIC_TRANSITION=restart), or it is not up. The worker jobs "
                "elasticd adds run the job's script without sbatch's environment: set ELASTIC_TRANSITION in "
                "the script itself") from None
    return _ctx.mode


def _install_term_handler():
    def on_term(signum, frame):
        _ctx.stop_requested.set()
    # Only the main thread may set handlers; elsewhere the launcher's TERM still ends the job.
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, on_term)


def _flag(key):
    """A counter's value, 0 when never set. Flags are counters because every torch release's
    TCPStore has add, where check (a key's presence) came later."""
    return _ctx.store.add(key, 0)


_ABSENT = "\x00slurmbridge-elastic: absent"


def _peek(key):
    """key's value, or None when it is not set, without blocking. Not store.wait with a short
    timeout: on the classic TCPStore server (torch 2.6's among others) a wait that times out
    leaves its answer on the connection, and every later command reads the one before's."""
    value = _ctx.store.compare_set(key, _ABSENT, _ABSENT)
    return None if value == _ABSENT.encode() else value


def _read_waiting():
    """Rank 0: the processes that arrived and are still waiting, in arrival order. An arrival
    whose key is not written yet holds the ones after it back, at most ARRIVAL_GRACE_S."""
    store = _ctx.store
    count = store.add("arrivals", 0)
    while _ctx.seen_arrivals < count:
        n = _ctx.seen_arrivals + 1
        raw = _peek(f"arrival/{n}")
        if raw is None:
            first = _ctx.half_written.setdefault(n, time.monotonic())
            if time.monotonic() - first < ARRIVAL_GRACE_S:
                break
            raw = b""  # its process died between its two writes: passed over
        _ctx.half_written.pop(n, None)
        _ctx.seen_arrivals = n
        try:
            member = raw.decode("ascii")
        except UnicodeDecodeError:
            continue
        if membership.valid_member(member):
            _ctx.waiting.append(member)
    members = set(_ctx.gen.members) if _ctx.gen else set()
    _ctx.waiting = [m for m in _ctx.waiting if m not in members and not _flag(f"withdrawn/{m}")]
    return list(_ctx.waiting)


def _join():
    """Registers this process and waits until it is in a world (the host forms the first)."""
    _ctx.me = membership.member_id(_ctx.job, local_rank(), uuid.uuid4().hex[:8])  # new at each (re)join
    n = _ctx.store.add("arrivals", 1)
    _ctx.store.set(f"arrival/{n}", _ctx.me)
    if _ctx.is_host and _ctx.gen is None:
        gen = _form_first()
    else:
        gen = _await_admission()
    _enter(gen)


def _form_first():
    deadline = None
    while True:
        waiting = _read_waiting()
        gen = membership.first_generation(_ctx.me, waiting, _ctx.max_procs, _ctx.per_job)
        if gen.size >= _ctx.max_procs:
            break
        if gen.size >= _ctx.min_procs:
            deadline = deadline or time.monotonic() + _ctx.formation_wait
            if time.monotonic() >= deadline:
                break
        if _ctx.stop_requested.is_set():
            raise _Leave()
        time.sleep(0.05)
    _publish(gen)
    return gen


def _publish(gen):
    store = _ctx.store
    store.set(f"gen/{gen.number}", json.dumps(gen.to_record()))
    for m in gen.joined:
        store.add(f"assigned/{m}", gen.number)


def _read_gen(number):
    key = f"gen/{number}"
    _ctx.store.wait([key], _ctx.join_timeout)
    return membership.Generation.from_record(json.loads(_ctx.store.get(key)))


def _await_admission():
    try:
        while not (number := _flag(f"assigned/{_ctx.me}")):
            if _ctx.stop_requested.is_set():
                _ctx.store.add(f"withdrawn/{_ctx.me}", 1)
                _log(f"{_ctx.me} was stopped before it was admitted")
                raise _Leave()
            time.sleep(0.05)
        return _read_gen(number)
    except RuntimeError as err:
        # The main job, which hosts the store, has ended: so does this job.
        _log(f"the job's rendezvous is gone ({err}); this process ends")
        raise _Leave() from None


def _enter(gen):
    """Forms the process group of gen, which includes this process."""
    r = gen.rank_of(_ctx.me)
    if r is None:
        raise _Rejoin()
    started = time.monotonic()
    # Each world's keys under its own prefix: a new world never reads an old one's. The world
    # this process is in from now on, formed or not: should the forming fail (an admitted
    # joiner never came), the recovery starts from it and numbers the next one after.
    _ctx.gen = gen
    dist.init_process_group(_ctx.backend, store=dist.PrefixStore(f"pg/{gen.number}/", _ctx.store), rank=r,
                            world_size=gen.size, timeout=_ctx.timeout)
    os.environ["RANK"], os.environ["WORLD_SIZE"] = str(r), str(gen.size)
    if r == 0:
        _log(f"world {gen.number} formed in place: {membership._processes(gen.size)} "
             f"({'; '.join(gen.reasons) or 'no change'}), process group in {time.monotonic() - started:.2f}s")


def _leave_group():
    if dist.is_initialized():
        # The old group's object is kept, not freed: on torch 2.6 freeing a gloo group (its
        # destructor joins its threads) could block a survivor for good while the others
        # formed the next world. It holds two idle threads and its closed connections.
        _ctx.retired.append(dist.group.WORLD)
        dist.destroy_process_group()


def _check():
    """The collective check: every rank says whether it is leaving; rank 0 says whether a whole
    job waits to join. Raises MembershipChanged in every rank when either holds."""
    pending = 0
    if dist.get_rank() == 0 and dist.get_world_size() + _ctx.per_job <= _ctx.max_procs:
        if membership.complete_jobs(_read_waiting(), _ctx.per_job):
            pending = 1
    flags = torch.tensor([1 if _ctx.stop_requested.is_set() else 0, pending], dtype=torch.int32,
                         device=_ctx.device if _ctx.backend == "nccl" else "cpu")
    gathered = [torch.zeros_like(flags) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, flags)
    gathered = torch.stack(gathered).cpu().tolist()
    leaving_ranks = [i for i, f in enumerate(gathered) if f[0]]
    if leaving_ranks or gathered[0][1]:
        raise MembershipChanged(leaving_ranks)


def _reform(leaving_ranks):
    """After a MembershipChanged at a step boundary: the next world, without a restore."""
    old = _ctx.gen
    leavers = [old.members[i] for i in leaving_ranks]
    _leave_group()
    if old.members[0] in leavers:
        # The main job is stopping: its store goes with it, and so does the job.
        _log("the main job is stopping; this process ends with it")
        raise _Leave()
    if old.rank_of(_ctx.me) == 0:
        gen = membership.next_generation(old, leaving=leavers, waiting=_read_waiting(), max_procs=_ctx.max_procs,
                                         procs_per_job=_ctx.per_job)
        _publish(gen)
    else:
        gen = _read_gen(old.number + 1)
    if _ctx.me in gen.left:
        _log(f"{_ctx.me} leaves the world ({'told to stop' if _ctx.me in leavers else 'with its job'})")
        raise _Leave()
    _enter(gen)


def _recover(error):
    """After a collective or a forming failed (a process died or never came): the survivors
    form the next world, rank 0 deciding from who answers."""
    old = _ctx.gen
    _ctx.recoveries_since_commit += 1
    if _ctx.recoveries_since_commit > MAX_RECOVERIES:
        raise RecoveryFailed(f"world {old.number if old else 0}: {error}") from error
    _leave_group()
    if old is None:
        raise error  # never in a world: nothing to recover (the first world failed to form)
    _log(f"collective failed in world {old.number} ({type(error).__name__}: {error}); re-forming")
    store = _ctx.store
    store.add(f"alive/{old.number}/{_ctx.me}", 1)
    if old.rank_of(_ctx.me) == 0:
        deadline = time.monotonic() + RECOVERY_WAIT_S
        while time.monotonic() < deadline:
            if all(_flag(f"alive/{old.number}/{m}") for m in old.members):
                break
            time.sleep(0.05)
        alive = [m for m in old.members if _flag(f"alive/{old.number}/{m}")]
        gen = membership.next_generation(old, waiting=_read_waiting(), max_procs=_ctx.max_procs, alive=alive,
                                         procs_per_job=_ctx.per_job)
        _publish(gen)
    else:
        gen = _read_gen(old.number + 1)
    if gen.rank_of(_ctx.me) is None:
        # Left out (it answered too late): it joins again, as a new member, rather than end.
        raise _Rejoin()
    _enter(gen)


def _to_cpu(obj):
    """A copy of a state dict with every tensor in host memory: a commit costs no GPU memory."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().to("cpu", copy=True)
    if isinstance(obj, dict):
        return {k: _to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_cpu(v) for v in obj)
    return copy.deepcopy(obj)


def _encode(obj, tensors):
    """obj (a state dict: dicts, lists, tensors, numbers, strings) as JSON-able values, its
    tensors appended to tensors and named by index. No pickle: what a process receives from
    rank 0 can only be data."""
    if isinstance(obj, torch.Tensor):
        tensors.append(obj)
        return {"t": len(tensors) - 1, "shape": list(obj.shape), "dtype": str(obj.dtype).removeprefix("torch.")}
    if isinstance(obj, dict):
        return {"d": [[_encode(k, tensors), _encode(v, tensors)] for k, v in obj.items()]}
    if isinstance(obj, (list, tuple)):
        return {"l" if isinstance(obj, list) else "u": [_encode(v, tensors) for v in obj]}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return {"v": obj}
    raise TypeError(f"cannot send a {type(obj).__name__} between processes: numbers, strings, tensors, "
                    "lists and dicts only")


def _decode(obj, tensors):
    if "t" in obj:
        return tensors[obj["t"]]
    if "d" in obj:
        return {_decode(k, tensors): _decode(v, tensors) for k, v in obj["d"]}
    if "l" in obj:
        return [_decode(v, tensors) for v in obj["l"]]
    if "u" in obj:
        return tuple(_decode(v, tensors) for v in obj["u"])
    return obj["v"]


def _broadcast_data(obj):
    """obj from rank 0 to every rank: its structure as JSON, its tensors by broadcast."""
    where = _ctx.device if _ctx.backend == "nccl" else torch.device("cpu")
    tensors = []
    text = json.dumps(_encode(obj, tensors)).encode() if dist.get_rank() == 0 else b""
    length = torch.tensor([len(text)], dtype=torch.int64, device=where)
    dist.broadcast(length, src=0)
    if dist.get_rank() == 0:
        buf = torch.tensor(list(text), dtype=torch.uint8, device=where)
    else:
        buf = torch.empty(int(length.item()), dtype=torch.uint8, device=where)
    dist.broadcast(buf, src=0)
    skeleton = json.loads(bytes(buf.cpu().tolist()).decode())
    if dist.get_rank() != 0:
        def specs(o):
            if isinstance(o, dict):
                if "t" in o:
                    yield o
                for v in o.values():
                    yield from specs(v)
            elif isinstance(o, list):
                for v in o:
                    yield from specs(v)
        for spec in sorted(specs(skeleton), key=lambda o: o["t"]):
            tensors.append(torch.empty(spec["shape"], dtype=getattr(torch, spec["dtype"]), device=where))
    for t in tensors:
        moved = t.to(where).contiguous()
        dist.broadcast(moved, src=0)
        if moved is not t:
            t.copy_(moved)
    return _decode(skeleton, tensors)


class TorchState:
    """The training state that survives a membership change: a model, an optimizer and any
    scalars (samples=0, epoch=0 ...: numbers, strings, lists and dicts of them) given as
    keywords, read and written as attributes.

    commit() keeps a copy in host memory (and checks the membership); restore() goes back to
    it; sync() sends rank 0's state to every process. save(path) and load(path) write and read a
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
        """Keeps the current state in host memory, without checking membership."""
        self._saved = (_to_cpu(self.model.state_dict()),
                       _to_cpu(self.optimizer.state_dict()) if self.optimizer else None,
                       copy.deepcopy(self.scalars()))

    def commit(self):
        """Keeps the current state as the one a failure goes back to, then checks membership."""
        self.commit_copy()
        _ctx.recoveries_since_commit = 0
        self.check()

    def check(self):
        """At a step boundary, in every process: raises MembershipChanged (caught by run) when a
        process is leaving or a job waits to join. A no-op in restart mode."""
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
        """Rank 0's model, optimizer and scalars to every process of the world: the parameters
        and buffers by broadcast in place, the rest as JSON and tensors (no process unpickles
        what another sent)."""
        with torch.no_grad():
            for t in list(self.model.parameters()) + list(self.model.buffers()):
                dist.broadcast(t.data, src=0)
        rest = _broadcast_data({"opt": self.optimizer.state_dict() if self.optimizer else None,
                                "scalars": self.scalars()} if dist.get_rank() == 0 else None)
        if dist.get_rank() != 0:
            if self.optimizer and rest["opt"] is not None:
                self.optimizer.load_state_dict(rest["opt"])
            for k, v in rest["scalars"].items():
                setattr(self, k, v)

    def save(self, path):
        """Writes the state to path atomically (a checkpoint for restarts and requeues)."""
        tmp = f"{path}.tmp"
        torch.save({"model": self.model.state_dict(), "opt": self.optimizer.state_dict() if self.optimizer else None,
                    "scalars": self.scalars()}, tmp)
        os.replace(tmp, path)

    def load(self, path, map_location=None):
        saved = torch.load(path, map_location=map_location or _ctx.device)  # the job's own file
        self.model.load_state_dict(saved["model"])
        if self.optimizer and saved.get("opt") is not None:
            self.optimizer.load_state_dict(saved["opt"])
        for k, v in saved.get("scalars", {}).items():
            setattr(self, k, v)


def _is_comm_failure(err):
    """Whether err may be a departed process: a RuntimeError other than running out of memory
    (torch raises its distributed errors as RuntimeErrors)."""
    oom = getattr(torch.cuda, "OutOfMemoryError", None)
    return isinstance(err, RuntimeError) and not (oom and isinstance(err, oom))


def run(func):
    """Wraps train(state, ...): in place, the first call joins a world (the host forms the
    first), and func runs in each world the process belongs to, with the state synced from rank
    0 whenever the world has someone new or recovered from a failure. It returns func's result,
    or None in a process that left the job."""
    def wrapper(state, *args, **kwargs):
        if _ctx.mode != "in-place":
            return func(state, *args, **kwargs)
        action, arg = ("join", None) if _ctx.gen is None or not dist.is_initialized() else (None, None)
        while True:
            try:
                if action == "join":
                    _join()
                elif action == "reform":
                    _reform(arg)
                elif action == "recover":
                    _recover(arg)
                    state.restore()
                action = arg = None
                if _ctx.gen.needs_sync():
                    state.sync()
                return func(state, *args, **kwargs)
            except MembershipChanged as change:
                action, arg = "reform", change.args[0]
            except _Leave:
                _leave_group()
                return None
            except _Rejoin:
                _leave_group()
                _log(f"{_ctx.me} was left out of the world formed after a failure; joining again")
                action, arg = "join", None
            except RuntimeError as err:
                if not _is_comm_failure(err):
                    raise
                # Without the traceback, which holds the failed world's objects (DDP and its
                # process group's connections) alive.
                action, arg = "recover", err.with_traceback(None)
    wrapper.__name__ = getattr(func, "__name__", "train")
    wrapper.__doc__ = func.__doc__
    return wrapper


def shutdown():
    """Leaves the process group at the end of training. The host keeps the store up until the
    other processes have left it, so that none fails reading it."""
    if _ctx.mode == "in-place" and _ctx.store is not None and _ctx.gen is not None and dist.is_initialized():
        try:
            _ctx.store.add(f"done/{_ctx.gen.number}", 1)
            if _ctx.gen.rank_of(_ctx.me) == 0:
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline and _flag(f"done/{_ctx.gen.number}") < _ctx.gen.size:
                    time.sleep(0.05)
        except RuntimeError:
            pass
    _leave_group()
