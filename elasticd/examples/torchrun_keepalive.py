#!/usr/bin/env python3
"""torchrun, taking keep_alive_interval and keep_alive_max_attempt from --rdzv_conf on every torch.

When elasticd shrinks a job, the worker it stops leaves torchrun's c10d rendezvous the way a
failed node does: the remaining agents start a new round, which waits until the departed
agent's heartbeats expire, keep_alive_interval x keep_alive_max_attempt. Recent torch reads both
from --rdzv_conf; older releases (Debian 12's 1.13 among them) fix them at 5 s x 3, so every
shrink idles the job for about 15 s. This launcher is torchrun with the same command line that
applies the two settings on those releases too (and changes nothing where torch already did).

    python3 torchrun_keepalive.py --rdzv_conf=keep_alive_interval=1,keep_alive_max_attempt=3 ...

A short interval costs one small write to the rendezvous store per agent per interval.

On a torch built without libuv (Debian 13's 2.6) its stores use the classic server
(torch_stores.py beside it).
"""
import os
import sys
from datetime import timedelta

from torch.distributed.elastic.rendezvous import dynamic_rendezvous, registry
from torch.distributed.run import main

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_stores import classic_servers_where_needed  # noqa: E402

_create_handler = dynamic_rendezvous.create_handler


def create_handler(store, backend, params):
    handler = _create_handler(store, backend, params)
    settings = handler._settings  # shared with the handler's state holder, which expires nodes
    interval = params.get_as_int("keep_alive_interval", None)
    attempts = params.get_as_int("keep_alive_max_attempt", None)
    # RendezvousSettings is a frozen dataclass; the handler reads it when heartbeats start.
    if interval:
        object.__setattr__(settings, "keep_alive_interval", timedelta(seconds=interval))
    if attempts:
        object.__setattr__(settings, "keep_alive_max_attempt", attempts)
    return handler


dynamic_rendezvous.create_handler = create_handler
registry.create_handler = create_handler  # the c10d and etcd-v2 backends call it from here
classic_servers_where_needed()

if __name__ == "__main__":
    sys.exit(main())
