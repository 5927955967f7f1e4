"""Who trains in the next world: the pure rule of an in-place transition (no torch, no I/O).

A world is the list of processes ("members", each "<slurm job id>.<local rank>.<nonce>") that train
together, in rank order. At a membership change the members that stay keep their order and so
their relative ranks (rank 0, the main job's first process, hosts the rendezvous store and is
never removed by elasticd); the joiners follow in the order they arrived, up to the job's
largest world. A member that is leaving (its worker job got elasticd's TERM) or that did not
answer after a failure is dropped.
"""
import re
from dataclasses import dataclass, field

__all__ = ["Generation", "next_generation", "first_generation", "member_id", "job_of", "valid_member"]


def member_id(job, local_rank, nonce):
    """The id of one training process: its Slurm job, local rank, and a nonce of its own."""
    return f"{job}.{local_rank}.{nonce}"


def job_of(member):
    return member.split(".", 1)[0]


_MEMBER = re.compile(r"[0-9A-Za-z_]{1,32}\.[0-9]{1,4}\.[0-9a-f]{1,32}")


def valid_member(member):
    """Whether member reads as an id member_id makes: anything else in the store is not a
    process of this job."""
    return bool(_MEMBER.fullmatch(member))


@dataclass(frozen=True)
class Generation:
    """One world: its number, members in rank order, and how it differs from the one before."""
    number: int
    members: tuple
    joined: tuple = ()
    left: tuple = ()
    recovered: bool = False  # formed after a failure: every member restores its last commit
    reasons: tuple = field(default=(), compare=False)

    @property
    def size(self):
        return len(self.members)

    def rank_of(self, member):
        return self.members.index(member) if member in self.members else None

    def needs_sync(self):
        """Whether the state must go out from rank 0: someone new, or after a failure (ranks may
        stand at different steps). After a graceful shrink the survivors hold the same state."""
        return self.number == 1 or bool(self.joined) or self.recovered

    def to_record(self):
        return {"gen": self.number, "members": list(self.members), "joined": list(self.joined),
                "left": list(self.left), "recovered": self.recovered, "reasons": list(self.reasons)}

    @classmethod
    def from_record(cls, rec):
        return cls(number=int(rec["gen"]), members=tuple(rec["members"]), joined=tuple(rec.get("joined", ())),
                   left=tuple(rec.get("left", ())), recovered=bool(rec.get("recovered", False)),
                   reasons=tuple(rec.get("reasons", ())))


def _processes(n):
    return f"{n} process" if n == 1 else f"{n} processes"


def first_generation(host, waiting, max_procs):
    """The first world: the host first, then the processes waiting in arrival order."""
    members = [host] + [m for m in waiting if m != host]
    admitted = members[:max_procs]
    reasons = [f"{_processes(len(admitted))} formed the first world"]
    if len(members) > max_procs:
        reasons.append(f"{len(members) - max_procs} wait: the job's largest world is {max_procs}")
    return Generation(number=1, members=tuple(admitted), joined=tuple(admitted), reasons=tuple(reasons))


def next_generation(current, leaving=(), waiting=(), max_procs=None, alive=None):
    """The world after current: its members minus those leaving (and, after a failure, minus
    those not in alive), then the waiting joiners in arrival order up to max_procs."""
    leaving = set(leaving)
    recovered = alive is not None
    kept, left, reasons = [], [], []
    for m in current.members:
        if m in leaving:
            left.append(m)
        elif recovered and m not in alive:
            left.append(m)
            reasons.append(f"{m} did not answer after the failure")
        else:
            kept.append(m)
    if len(leaving & set(current.members)):
        reasons.append(f"{len(leaving & set(current.members))} leaving")
    room = (max_procs if max_procs is not None else len(kept) + len(waiting)) - len(kept)
    joined = [m for m in dict.fromkeys(waiting) if m not in current.members][:max(room, 0)]
    if joined:
        reasons.append(f"{len(joined)} joining")
    waiting_left = len([m for m in dict.fromkeys(waiting) if m not in current.members]) - len(joined)
    if waiting_left > 0:
        reasons.append(f"{waiting_left} wait: the job's largest world is {max_procs}")
    return Generation(number=current.number + 1, members=tuple(kept + joined), joined=tuple(joined),
                      left=tuple(left), recovered=recovered, reasons=tuple(reasons))
