"""Optimus's allocation (pure): how many GPUs each job gets, one GPU at a time.

Every job is first admitted with its minimum (fixed jobs, then those marked ``keep``, then the
rest shortest remaining time first, while GPUs last); then each next GPU goes to the job whose
remaining time drops the most by it, until no job gains or no GPU is left.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Demand:
    """One job's options. ``times[w]`` is its estimated remaining time (s) on ``w`` GPUs for
    ``w`` in ``0..hi`` (``times[0]`` is unused). ``fixed``: it keeps this count (not re-planned);
    ``keep``: admitted before the jobs that are not."""

    key: str
    lo: int
    hi: int
    times: tuple[float, ...]
    fixed: int | None = None
    keep: bool = False

    def __post_init__(self) -> None:
        if not 1 <= self.lo <= self.hi or len(self.times) != self.hi + 1:
            raise ValueError(f"{self.key}: need 1 <= lo <= hi and hi + 1 times")


def allocate(demands: Sequence[Demand], capacity: int) -> dict[str, int]:
    """GPU count per admitted job (jobs left out wait); the total never exceeds ``capacity``."""
    alloc: dict[str, int] = {}
    free = capacity
    for d in demands:
        if d.fixed is not None:
            alloc[d.key] = d.fixed
            free -= d.fixed
    free = max(free, 0)
    variable = sorted(
        (d for d in demands if d.fixed is None), key=lambda d: (not d.keep, d.times[d.lo], d.key)
    )
    heap: list[tuple[float, str, int]] = []
    by_key = {d.key: d for d in variable}
    for d in variable:
        if d.lo <= free:
            alloc[d.key] = d.lo
            free -= d.lo
            _push(heap, d, d.lo)
    while free > 0 and heap:
        neg_gain, key, w = heapq.heappop(heap)
        if neg_gain >= 0:
            break
        alloc[key] = w + 1
        free -= 1
        _push(heap, by_key[key], w + 1)
    return alloc


def _push(heap: list[tuple[float, str, int]], d: Demand, w: int) -> None:
    """Offer ``d``'s next GPU (from ``w`` to ``w + 1``) at its gain; a job that cannot run on
    ``w + 1`` GPUs (infinite time) is not offered more."""
    if w < d.hi and d.times[w + 1] < math.inf:
        heapq.heappush(heap, (d.times[w + 1] - d.times[w], d.key, w))
