"""torch's TCP stores on builds without libuv.

Since 2.4, TCPStore asks for its libuv server by default, and a torch built without libuv
(Debian 13's 2.6) then fails in every store it makes, the rendezvous's and each worker's:
"use_libuv was requested but PyTorch was build without libuv support". On such a build,
classic_servers_where_needed() makes every store of this process use the classic server, and
USE_LIBUV=0 tells the processes it starts to do the same. Elsewhere it changes nothing.
"""
import importlib
import os

import torch.distributed as dist


def _libuv_missing():
    try:
        probe = dist.TCPStore(host_name="127.0.0.1", port=0, world_size=1, is_master=True,
                              wait_for_workers=False, use_libuv=True)
    except TypeError:
        return False  # torch before 2.3 has no libuv server to ask for
    except RuntimeError as exc:
        return "libuv" in str(exc)
    del probe
    return False


def classic_servers_where_needed():
    if not _libuv_missing():
        return
    # torch.distributed.rendezvous names both a module and a function: take the module.
    rendezvous = importlib.import_module("torch.distributed.rendezvous")
    from torch.distributed.elastic.rendezvous import c10d_rendezvous_backend

    class ClassicTCPStore(dist.TCPStore):
        def __init__(self, *args, **kwargs):
            kwargs.setdefault("use_libuv", False)
            super().__init__(*args, **kwargs)

    # The names the rendezvous backend, the agent and init_process_group build stores through.
    for module in (dist, rendezvous, c10d_rendezvous_backend):
        module.TCPStore = ClassicTCPStore
    os.environ["USE_LIBUV"] = "0"
