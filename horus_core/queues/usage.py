"""What ``hctl queues`` shows per queue: quota, GPUs in use, GPUs borrowed, pending jobs and GPUs."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from horus_core.model import Job, JobState
from horus_core.queues.config import QueueConfig
from horus_core.queues.ledger import Ledger, demand, job_queue
from horus_core.queueusage import QueueUsage


def queue_usage(config: QueueConfig, jobs: Iterable[Job], types: Mapping[str, str]) -> list[QueueUsage]:
    """One row per configured queue (in file order), from the pending and active jobs."""
    jobs = list(jobs)
    active = [j for j in jobs if j.state.active]
    ledger = Ledger.of(config, active, types)
    out = []
    for name, q in config.queues.items():
        mine = [j for j in jobs if job_queue(config, j) == name]
        waiting = [j for j in mine if j.state is JobState.PENDING]
        out.append(
            QueueUsage(
                name,
                dict(q.nominal),
                q.borrowing_limit,
                ledger.total(name),
                ledger.borrowed(name),
                sum(1 for j in mine if j.state.active),
                len(waiting),
                sum(demand(j) for j in waiting),
            )
        )
    return out
