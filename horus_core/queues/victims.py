"""Which running jobs to preempt: for a queue reclaiming its quota, or for a higher priority class.

Pure choice over the active jobs. Reclaim takes only jobs of queues that are borrowing, and no
more from a queue than it borrows; priority preemption takes jobs of a lower class from the same
queue or from a borrowing queue. Both take the lowest class first, then the youngest attempt, and
never a job that has not yet run its minimum run time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from horus_core.model import Job


@dataclass(frozen=True, slots=True)
class Candidate:
    job: Job
    queue: str
    level: int
    since: float  # when the current attempt was first seen holding GPUs

    @property
    def gpus(self) -> int:
        return len(self.job.gpus)


def order(candidates: Sequence[Candidate]) -> list[Candidate]:
    """Lowest priority class first, then the youngest attempt, then the latest submitted, then id."""
    return sorted(candidates, key=lambda c: (c.level, -c.since, -c.job.submitted_at, c.job.id))


def pick(
    candidates: Sequence[Candidate],
    need: int,
    allowed: Callable[[Candidate], bool],
    budget: Mapping[str, int] | None = None,
) -> list[Candidate]:
    """Victims in :func:`order` until they hold ``need`` GPUs; [] if they cannot reach it.

    ``budget`` (queue -> GPUs) caps how many GPUs may be taken from each queue."""
    left = dict(budget) if budget is not None else None
    out: list[Candidate] = []
    freed = 0
    for c in order(candidates):
        if freed >= need:
            break
        if not allowed(c) or (left is not None and left.get(c.queue, 0) < c.gpus):
            continue
        if left is not None:
            left[c.queue] -= c.gpus
        out.append(c)
        freed += c.gpus
    return out if freed >= need else []
