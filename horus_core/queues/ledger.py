"""What each queue holds now: GPUs in use per GPU type, against its nominal quota and borrowing limit.

A queue's *borrowed* GPUs are those beyond its nominal quota: per type, the GPUs above that
type's quota, less the GPUs its any-type quota (``"*"``) covers. A queue may hold at most its
borrowing limit of borrowed GPUs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from horus_core.model import Job
from horus_core.queues.config import ANY_TYPE, Queue, QueueConfig

WAIT_QUOTA = "QuotaExceeded"
WAIT_RECLAIM = "WaitingForReclaim"
WAIT_PRIORITY = "Priority"


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
    """GPUs in use per queue and type; grows as a pass admits and places jobs."""

    config: QueueConfig
    used: dict[str, dict[str, int]] = field(default_factory=dict)

    @classmethod
    def of(cls, config: QueueConfig, active: Iterable[Job], types: Mapping[str, str]) -> Ledger:
        ledger = cls(config)
        for job in active:
            ledger.add(job_queue(config, job), [types.get(u, "") for u in job.gpus])
        return ledger

    def add(self, queue: str, gpu_types: Iterable[str]) -> None:
        row = self.used.setdefault(queue, {})
        for t in gpu_types:
            row[t] = row.get(t, 0) + 1

    def total(self, queue: str) -> int:
        return sum(self.used.get(queue, {}).values())

    def borrowed(self, queue: str) -> int:
        q = self.config.queues.get(queue)
        return 0 if q is None else borrowed(q, self.used.get(queue, {}))

    def fits(self, queue: str, gpu_types: Iterable[str]) -> bool:
        """Whether ``queue`` stays within nominal + borrowing limit with these GPUs added."""
        q = self.config.queues.get(queue)
        if q is None:
            return False
        row = dict(self.used.get(queue, {}))
        for t in gpu_types:
            row[t] = row.get(t, 0) + 1
        return borrowed(q, row) <= q.borrowing_limit

    def within_nominal(self, queue: str, gpus: int) -> bool:
        """Whether ``gpus`` more (of any type) keep the queue within its nominal total."""
        q = self.config.queues.get(queue)
        return q is not None and self.total(queue) + gpus <= q.nominal_total

    def within_limit(self, queue: str, gpus: int) -> bool:
        q = self.config.queues.get(queue)
        return q is not None and self.total(queue) + gpus <= q.nominal_total + q.borrowing_limit
