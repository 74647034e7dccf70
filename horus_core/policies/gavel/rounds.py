"""Gavel's round mechanism: the time each job received per GPU type, and which jobs run next.

Each round, every (job, GPU type) with a positive allocation gets the priority
``allocation / share of time received there so far`` (the share counts from the job's arrival),
and jobs are taken in decreasing priority while the type has GPUs left for their gang. A job
that the LP pairs with others may instead join a job of a partner class already chosen on that
type and still alone on its GPUs (it then takes no GPU of its own). Capacity the allocation
leaves unused goes to the remaining jobs, each on its fastest type with room (work-conserving).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from horus_core.model import Job
from horus_core.policies.gavel.shares import JobShare

_FLOOR = 1e-6  # share of time used in place of 0: never-served jobs come first, by allocation


@dataclass
class Ledger:
    """Seconds each job ran on each GPU type, and when the policy first saw it. Keyed by job id;
    a job that leaves the snapshot is forgotten; seeing the same instant twice adds nothing."""

    received: dict[str, dict[str, float]] = field(default_factory=dict)
    first_seen: dict[str, float] = field(default_factory=dict)
    last_now: float | None = None

    def update(self, jobs: Sequence[Job], type_of: Mapping[str, str], now: float) -> None:
        dt = 0.0 if self.last_now is None else max(0.0, now - self.last_now)
        present = set()
        for job in jobs:
            present.add(job.id)
            self.first_seen.setdefault(job.id, now)
            if dt > 0 and job.state.active and job.gpus:
                per_type = self.received.setdefault(job.id, {})
                t = type_of.get(job.gpus[0], "")
                per_type[t] = per_type.get(t, 0.0) + dt
        for gone in [j for j in self.first_seen if j not in present]:
            self.first_seen.pop(gone)
            self.received.pop(gone, None)
        self.last_now = now if self.last_now is None else max(self.last_now, now)

    def share(self, job_id: str, gpu_type: str, now: float) -> float:
        age = now - self.first_seen.get(job_id, now)
        if age <= 0:
            return 0.0
        return self.received.get(job_id, {}).get(gpu_type, 0.0) / age

    def run_s(self, job_id: str, gpu_type: str) -> float:
        return self.received.get(job_id, {}).get(gpu_type, 0.0)


@dataclass(frozen=True, slots=True)
class Slot:
    """A job's place in a round: its GPU type, and the job it shares GPUs with (or "")."""

    gpu_type: str
    host: str = ""


@dataclass
class _Room:
    left: dict[str, int]  # GPUs not yet promised, per type
    alone: dict[tuple[str, str, int], list[str]] = field(default_factory=dict)  # (type, sig, gpus) -> hosts

    def take(self, job: Job, sig: str, gpu_type: str) -> bool:
        if self.left.get(gpu_type, 0) < job.spec.gpus:
            return False
        self.left[gpu_type] -= job.spec.gpus
        self.alone.setdefault((gpu_type, sig, job.spec.gpus), []).append(job.id)
        return True

    def join(self, job: Job, partners: Iterable[str], gpu_type: str) -> str:
        for sig in sorted(partners):
            hosts = self.alone.get((gpu_type, sig, job.spec.gpus))
            if hosts:
                return hosts.pop(0)
        return ""


def choose(
    jobs: Sequence[Job],
    shares: Mapping[str, JobShare],
    ledger: Ledger,
    room: dict[str, int],
    signature: Mapping[str, str],
    speeds: Mapping[str, Mapping[str, float]],
    now: float,
) -> dict[str, Slot]:
    """The round's slots for ``jobs`` within ``room`` (free GPUs per type). ``speeds``: job id ->
    GPU type -> steps/s alone (0: cannot run there)."""
    types = sorted(room)
    state = _Room(dict(room))
    plan: dict[str, Slot] = {}
    for _, job, t in _ranked(jobs, shares, ledger, types, now):
        if job.id not in plan:
            _place(job, t, shares.get(job.id), state, signature, plan)
    for job in jobs:  # what the allocation leaves idle: fastest type with room
        if job.id in plan:
            continue
        speed = speeds.get(job.id, {})  # none: outside the LP (accepts no type it can run on)
        for t in sorted(types, key=lambda t: -speed.get(t, 0.0)):
            if speed.get(t, 0.0) > 0 and state.take(job, signature[job.id], t):
                plan[job.id] = Slot(t)
                break
    return plan


def _ranked(
    jobs: Sequence[Job], shares: Mapping[str, JobShare], ledger: Ledger, types: Sequence[str], now: float
) -> list[tuple[float, Job, str]]:
    """(priority, job, type), best first; ties (e.g. types a job never ran on) go to the job
    that received the least time overall."""
    out = []
    for order, job in enumerate(jobs):
        share = shares.get(job.id)
        if share is None:
            continue
        overall = sum(ledger.share(job.id, t, now) for t in types)
        for i, t in enumerate(types):
            frac = float(share.total[i])
            if frac > 1e-9:
                prio = frac / max(ledger.share(job.id, t, now), _FLOOR)
                out.append((-prio, overall, order, i, job, t))
    out.sort(key=lambda e: e[:4])
    return [(-e[0], e[4], e[5]) for e in out]


def _place(
    job: Job,
    t: str,
    share: JobShare | None,
    state: _Room,
    signature: Mapping[str, str],
    plan: dict[str, Slot],
) -> None:
    i = sorted(state.left).index(t)
    if share is not None and share.paired[i] > share.total[i] / 2:
        host = state.join(job, share.partners[i], t)
        if host:
            plan[job.id] = Slot(t, host)
            return
    if state.take(job, signature[job.id], t):
        plan[job.id] = Slot(t)
