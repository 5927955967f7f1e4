"""Who trains in the next world: the pure rule of an in-place transition (no torch, no I/O).

A world is the list of processes ("members", each "<slurm job id>.<local rank>.<nonce>") that
train together, in rank order. A Slurm job (the main job, or a worker job elasticd added) is
the unit: its processes join together, once all of them have arrived, and leave together. At a
membership change the members that stay keep their order and so their relative ranks (rank 0,
the main job's first process, hosts the rendezvous store and is never removed by elasticd); the
joining jobs follow in the order their first process arrived, as many whole jobs as the job's
largest world holds. A job whose process is leaving (its worker job got elasticd's TERM) or did
not answer after a failure leaves whole; in the main job only the processes that did not
answer are dropped.
"""
import re
from dataclasses import dataclass, field

__all__ = ["Generation", "next_generation", "first_generation", "member_id", "job_of", "valid_member"]


def member_id(job, local_rank, nonce):
    """The id of one training process: its Slurm job, local rank, and a nonce of its own (a
    requeued worker job comes back with its job id and must not pass for the process it was)."""
    return f"{job}.{local_rank}.{nonce}"


def job_of(member):
    return member.split(".", 1)[0]


_MEMBER = re.compile(r"[0-9A-Za-z_]{1,32}\.[0-9]{1,4}\.[0-9a-f]{1,32}")


def valid_member(member):
    """Whether member reads as an id member_id makes: anything else in the store is not a
    process of this job."""
    return bool(_MEMBER.fullmatch(member))


def _processes(n):
    return f"{n} process" if n == 1 else f"{n} processes"


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


def complete_jobs(waiting, procs_per_job, exclude=()):
    """The waiting processes grouped by job, in the order each job's first process arrived,
    keeping only jobs all of whose procs_per_job processes wait (a member id once)."""
    by_job = {}
    for m in dict.fromkeys(waiting):
        if m not in exclude:
            by_job.setdefault(job_of(m), []).append(m)
    return [ms for ms in by_job.values() if len(ms) >= procs_per_job]


def _admit(jobs, room, procs_per_job):
    """Whole jobs, in order, while room holds one more; each job's first procs_per_job."""
    out = []
    for ms in jobs:
        if room - len(out) < procs_per_job:
            break
        out.extend(ms[:procs_per_job])
    return out


def first_generation(host, waiting, max_procs, procs_per_job=1):
    """The first world: the host and the rest of its job first, then the whole jobs waiting in
    arrival order, up to max_procs."""
    host_job = [host] + [m for m in dict.fromkeys(waiting) if m != host and job_of(m) == job_of(host)]
    others = complete_jobs([m for m in waiting if job_of(m) != job_of(host)], procs_per_job)
    admitted = host_job[:max_procs] + _admit(others, max_procs - min(len(host_job), max_procs), procs_per_job)
    reasons = [f"{_processes(len(admitted))} formed the first world"]
    waiting_jobs = len(others) - (len(admitted) - min(len(host_job), max_procs)) // max(procs_per_job, 1)
    if waiting_jobs > 0:
        reasons.append(f"{waiting_jobs} job(s) wait: the job's largest world is {max_procs}")
    return Generation(number=1, members=tuple(admitted), joined=tuple(admitted), reasons=tuple(reasons))


def next_generation(current, leaving=(), waiting=(), max_procs=None, alive=None, procs_per_job=1):
    """The world after current: its members minus the jobs of those leaving (and, after a
    failure, minus the jobs of those not in alive, the host's job losing only those), then the
    whole waiting jobs in arrival order up to max_procs."""
    recovered = alive is not None
    host_job = job_of(current.members[0]) if current.members else None
    gone = set(leaving) & set(current.members)
    dead = {m for m in current.members if recovered and m not in alive}
    gone_jobs = {job_of(m) for m in gone | dead if job_of(m) != host_job}
    kept, left, reasons = [], [], []
    for m in current.members:
        if m in gone or m in dead or job_of(m) in gone_jobs:
            left.append(m)
        else:
            kept.append(m)
    if gone:
        reasons.append(f"{_processes(len(gone))} leaving")
    for m in sorted(dead):
        reasons.append(f"{m} did not answer after the failure")
    if len(left) > len(gone | dead):
        reasons.append(f"{_processes(len(left) - len(gone | dead))} leaving with their job")
    jobs = complete_jobs(waiting, procs_per_job, exclude=set(current.members))
    room = max_procs if max_procs is not None else len(kept) + sum(len(ms) for ms in jobs)
    joined = _admit(jobs, room - len(kept), procs_per_job)
    if joined:
        reasons.append(f"{_processes(len(joined))} joining")
    waiting_jobs = len(jobs) - len(joined) // max(procs_per_job, 1)
    if waiting_jobs > 0:
        reasons.append(f"{waiting_jobs} job(s) wait: the job's largest world is {max_procs}")
    return Generation(number=current.number + 1, members=tuple(kept + joined), joined=tuple(joined),
                      left=tuple(left), recovered=recovered, reasons=tuple(reasons))
