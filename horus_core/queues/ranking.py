"""The order a queue wrapper hands the inner policy: class, then fair share, then ``priority``.

Every policy serves higher ``JobSpec.priority`` first, so the wrapper shows it jobs whose
priority folds in, as Slurm's multifactor priority does, the job's priority class (dominant)
and its user's fair-share factor (in tenths), above the user's own ``priority``. A rewritten job
gets a distinct ``version`` too, so that policy caches keyed on ``(id, version)`` see the change.
Gavel is left as it is: it reads ``priority`` as an LP weight, and has its own fairness.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from horus_core.model import Job

_SPAN = 2001  # a spec's priority is within +-1000 (validation.MAX_PRIORITY)
_BUCKETS = 11  # fair-share factor in tenths: 0 .. 10
_VERSION_SHIFT = 40


def rank_key(class_rank: int, factor: float) -> int:
    """The composite rank above a job's own priority (0 = lowest class, no share)."""
    return class_rank * _BUCKETS + min(_BUCKETS - 1, max(0, int(factor * 10)))


Memo = dict[str, tuple[int, int, Job]]  # job id -> (its version, rank key, the rewritten job)


def ranked(jobs: Sequence[Job], key: Callable[[Job], int], inner_name: str, memo: Memo) -> list[Job]:
    """``jobs`` with ``priority`` and ``version`` rewritten by ``key`` (unchanged if all tie).

    ``memo`` keeps each rewritten job while its version and key stay (the caller prunes it)."""
    keys = [key(j) for j in jobs]
    if inner_name.startswith("gavel") or len(set(keys)) <= 1:
        return list(jobs)
    out = []
    for j, k in zip(jobs, keys, strict=True):
        hit = memo.get(j.id)
        if hit is None or hit[0] != j.version or hit[1] != k:
            hit = memo[j.id] = (j.version, k, _with(j, k))
        out.append(hit[2])
    return out


def _with(job: Job, k: int) -> Job:
    spec = dataclasses.replace(job.spec, priority=k * _SPAN + job.spec.priority)
    return dataclasses.replace(job, spec=spec, version=job.version | (k << _VERSION_SHIFT))
