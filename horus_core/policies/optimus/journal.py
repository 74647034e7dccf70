"""A job's reported progress as the live master keeps it: full points (attempt, step, loss,
samples/s, time), bounded and decimated so the kept points always span the whole run.

Decimated like :class:`.history.ProgressHistory`; the latest report is always known
(:attr:`ProgressJournal.latest`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

JOURNAL_CAP = 256


@dataclass(frozen=True, slots=True)
class ProgressPoint:
    attempt: int
    step: int
    loss: float | None  # None: the job reported no loss
    samples_per_s: float
    at: float  # unix seconds

    @property
    def valid(self) -> bool:
        finite = all(math.isfinite(v) for v in (self.samples_per_s, self.at))
        loss_ok = self.loss is None or math.isfinite(self.loss)
        return finite and loss_ok and self.step >= 0 and self.attempt >= 0 and self.samples_per_s >= 0


@dataclass(slots=True)
class ProgressJournal:
    cap: int = JOURNAL_CAP
    points: list[ProgressPoint] = field(default_factory=list)
    latest: ProgressPoint | None = None
    stride: int = 1
    thinned: int = 0  # decimations so far (a store that appends rewrites after one)
    _seen: int = 0

    def __post_init__(self) -> None:
        if self.cap < 4:
            raise ValueError("a progress journal needs room for at least 4 points")

    def add(self, point: ProgressPoint) -> bool:
        """Record a report; True if it joined the kept points (False: decimated or invalid)."""
        if not point.valid:
            return False
        self.latest = point
        self._seen += 1
        if self._seen % self.stride:
            return False
        self.points.append(point)
        if len(self.points) >= self.cap:
            self.points = self.points[::2]
            self.stride *= 2
            self.thinned += 1
        return True

    @classmethod
    def restore(cls, points: list[ProgressPoint], cap: int = JOURNAL_CAP) -> ProgressJournal:
        """A journal holding stored ``points`` (oldest first), as if they had been reported."""
        journal = cls(cap)
        kept = [p for p in points if p.valid][-(cap - 1) :]
        journal.points = kept
        journal.latest = kept[-1] if kept else None
        return journal
