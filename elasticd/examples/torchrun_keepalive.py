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

A worker job's agent that stops (elasticd's SIGTERM) leaves the rendezvous open for the others:
torch 2.x would close it for every agent (_leave_without_closing, below).

It also turns off the TCPStore sharing of torch 2.4 and later (TORCH_DISABLE_SHARE_RDZV_TCP_STORE,
below), without which an agent that joins a running job never gets past its first rendezvous.
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
    if params.get_as_bool("is_host") is False:
        handler.shutdown = _leave_without_closing.__get__(handler)
    return handler


# Since torch 2.x an agent that stops, on SIGTERM too, shuts its rendezvous handler down
# (agent/server/api.py, run: "except SignalException" -> self._shutdown(e.sigval);
# local_elastic_agent.py, _shutdown: "if not is_restart and self._rdzv_handler:
# self._rdzv_handler.shutdown()"), and DynamicRendezvousHandler.shutdown runs _close, which marks
# the whole rendezvous closed in the shared state. When elasticd stops a worker job, the agents
# that remain then fail their next round with RendezvousClosedError and exit: the shrink ends the
# job. (torch 1.13's agent never calls shutdown.) A worker job's agent (is_host=false) therefore
# only stops its heartbeats, as torch 1.13's did: it leaves like a failed node, and the others'
# next round drops it once keep_alive_interval x keep_alive_max_attempt have passed. The main
# job's agent, which hosts the store, still closes the rendezvous when it stops.
def _leave_without_closing(handler):
    handler._stop_heartbeats()
    return True


# Since 2.4 the c10d rendezvous shares one TCPStore with the workers, and each agent works out
# that store's address once, in its first rendezvous (dynamic_rendezvous.py, next_rendezvous:
# "if self._bootstrap_store_info is None"): rank 0 writes MASTER_ADDR/MASTER_PORT under that
# round's key prefix (RendezvousStoreInfo.build in rendezvous/api.py), the others read them
# there with a blocking get. An agent that joins a later round (every grow) reads under the new
# round's prefix, but rank 0 has its address from round 0 and never writes it again: the new
# agent waits in store.get and the old one waits in _assign_worker_ranks for the new one's
# keys. torch 2.14 still caches it the same way. torch's own opt-out makes every round
# publish rank 0's address again and the workers make their own store, as on torch before 2.4
# (which ignores the variable). Set before any handler exists; the agent reads it each round.
os.environ["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "1"
dynamic_rendezvous.create_handler = create_handler
registry.create_handler = create_handler  # the c10d and etcd-v2 backends call it from here
classic_servers_where_needed()

if __name__ == "__main__":
    sys.exit(main())
