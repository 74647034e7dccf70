"""Since when each job has been in its current attempt, as a policy first saw it: the ledger
that the backfill reservation and least-attained-service keep across passes, in bulk.

A pass looks at every active job (10,000s at scale), so the update runs as C-level maps over
the ids: no Python step for a job seen before in the same attempt.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import compress, repeat

from horus_core.model import Job

_ID, _ATTEMPT = operator.attrgetter("id"), operator.attrgetter("attempt")


@dataclass(frozen=True, slots=True)
class Stints:
    since: dict[str, float]  # job id -> when its current attempt was first seen
    attempts: dict[str, int]  # job id -> its current attempt
    ids: list[str]  # the jobs' ids, in their order
    same: list[bool]  # per job: seen before in this attempt

    def changed(self) -> list[str]:
        """The ids new, or seen before in another attempt."""
        return list(compress(self.ids, map(operator.not_, self.same)))

    def kept(self) -> list[str]:
        """The ids seen before in the same attempt."""
        return list(compress(self.ids, self.same))


def stints(jobs: Sequence[Job], since: dict[str, float], attempts: dict[str, int], now: float) -> Stints:
    """The ledger after a pass that sees ``jobs`` at ``now`` (``since``/``attempts``: the last
    pass's): a job new or in a new attempt starts its stint now."""
    ids, tries = list(map(_ID, jobs)), list(map(_ATTEMPT, jobs))
    same = list(map(operator.eq, map(attempts.get, ids), tries))
    out = dict(zip(ids, map(since.get, ids, repeat(now)), strict=True))
    out.update(zip(compress(ids, map(operator.not_, same)), repeat(now)))
    return Stints(out, dict(zip(ids, tries, strict=True)), ids, same)


def follow(
    changed: Mapping[str, Job | None],
    keep: Callable[[Job], bool],
    since: dict[str, float],
    attempts: dict[str, int],
    views: dict[str, Job] | None,
    now: float,
) -> set[str]:
    """:func:`stints` job by job, in place: the ledger (``since``, ``attempts``, and ``views``,
    each kept job as last seen; None: kept by the caller) after the jobs ``changed`` since the
    last pass (None: gone).
    A job ``keep`` refuses leaves it; one new or in a new attempt starts its stint now. Returns
    the ids whose stint started now."""
    started: set[str] = set()
    for i, job in changed.items():
        if job is None or not keep(job):
            since.pop(i, None)
            attempts.pop(i, None)
            if views is not None:
                views.pop(i, None)
            continue
        if attempts.get(i) != job.attempt:
            attempts[i], since[i] = job.attempt, now
            started.add(i)
        if views is not None:
            views[i] = job
    return started
