"""What each queue holds now: the GPUs its jobs occupy, per GPU type, against its quota.

A queue holds a GPU while any of its active jobs runs there; jobs of one queue sharing a GPU
hold it once, so packing a queue's jobs costs it no quota. A queue's *borrowed* GPUs are those
beyond its nominal quota: per type, the GPUs above that type's quota, less the GPUs its
any-type quota (``"*"``) covers. A queue may hold at most its borrowing limit of borrowed GPUs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from horus_core import reasoncodes as rc
from horus_core.model import Job
from horus_core.queues.config import ANY_TYPE, Queue, QueueConfig

WAIT_QUOTA = rc.QUOTA_EXCEEDED
WAIT_RECLAIM = rc.WAITING_FOR_RECLAIM
WAIT_PRIORITY = rc.PRIORITY


def job_queue(config: QueueConfig, job: Job) -> str:
    return config.queue_of(job.spec.owner, job.spec.queue)


def demand(job: Job) -> int:
    """GPUs a pending job asks for at least (an elastic job: its minimum)."""
    return max(1, job.spec.gpus_min if job.spec.elastic else job.spec.gpus)


def borrowed(queue: Queue, used: Mapping[str, int]) -> int:
    """GPUs ``queue`` holds beyond its nominal quota, given its GPUs in use per type."""
    over = sum(max(0, n - queue.nominal.get(t, 0)) for t, n in used.items())
    return max(0, over - queue.nominal.get(ANY_TYPE, 0))


@dataclass
class Ledger:
    """The GPUs each queue holds, plus GPUs planned for admitted jobs not yet placed."""

    config: QueueConfig
    types: Mapping[str, str]  # GPU uuid -> type
    held: dict[str, set[str]] = field(default_factory=dict)
    planned: dict[str, int] = field(default_factory=dict)
    counts: dict[str, dict[str, int]] = field(default_factory=dict)  # queue -> type -> held GPUs

    @classmethod
    def of(cls, config: QueueConfig, active: Iterable[Job], types: Mapping[str, str]) -> Ledger:
        ledger = cls(config, types)
        for job in active:
            ledger.hold(job_queue(config, job), job.gpus)
        return ledger

    def copy(self) -> Ledger:
        held = {q: set(g) for q, g in self.held.items()}
        return Ledger(
            self.config, self.types, held, dict(self.planned), {q: dict(c) for q, c in self.counts.items()}
        )

    def hold(self, queue: str, uuids: Iterable[str]) -> None:
        held, row = self.held.setdefault(queue, set()), self.counts.setdefault(queue, {})
        for uuid in uuids:
            if uuid not in held:
                held.add(uuid)
                t = self.types.get(uuid, "")
                row[t] = row.get(t, 0) + 1

    def plan(self, queue: str, gpus: int) -> None:
        self.planned[queue] = self.planned.get(queue, 0) + gpus

    def used(self, queue: str, extra: Iterable[str] = ()) -> dict[str, int]:
        """GPUs held per type (with ``extra`` GPUs added)."""
        row, held = dict(self.counts.get(queue, {})), self.held.get(queue, set())
        for uuid in set(extra) - held:
            t = self.types.get(uuid, "")
            row[t] = row.get(t, 0) + 1
        return row

    def total(self, queue: str) -> int:
        return len(self.held.get(queue, ())) + self.planned.get(queue, 0)

    def borrowed(self, queue: str) -> int:
        q = self.config.queues.get(queue)
        return 0 if q is None else borrowed(q, self.used(queue))

    def fits(self, queue: str, uuids: Iterable[str]) -> bool:
        """Whether ``queue`` stays within nominal + borrowing limit also holding ``uuids``."""
        q = self.config.queues.get(queue)
        return q is not None and borrowed(q, self.used(queue, uuids)) <= q.borrowing_limit

    def within_nominal(self, queue: str, gpus: int) -> bool:
        """Whether ``gpus`` more (of any type) keep the queue within its nominal total."""
        q = self.config.queues.get(queue)
        return q is not None and self.total(queue) + gpus <= q.nominal_total

    def within_limit(self, queue: str, gpus: int) -> bool:
        q = self.config.queues.get(queue)
        return q is not None and self.total(queue) + gpus <= q.nominal_total + q.borrowing_limit
