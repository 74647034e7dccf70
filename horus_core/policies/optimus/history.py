"""Each job's progress as Optimus keeps it: a bounded, decimated history of (step, loss) and
the latest step, fed by progress reports (the live master) or the simulator.

A history holds at most ``cap`` points (default 256). When full, every other point is dropped
and from then on only every ``stride``-th report is kept (the stride doubles at each
decimation), so the history always spans the job's whole run at an even density.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

HISTORY_CAP = 256


@dataclass(slots=True)
class ProgressHistory:
    cap: int = HISTORY_CAP
    steps: list[float] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    last_step: float = 0.0
    version: int = 0  # bumps when a point is kept (fits cache on it)
    _stride: int = 1
    _seen: int = 0

    def add(self, step: float, loss: float | None) -> None:
        if not math.isfinite(step) or step < 0:
            return
        self.last_step = step
        if loss is None or not math.isfinite(loss):
            return
        self._seen += 1
        if self._seen % self._stride:
            return
        self.steps.append(step)
        self.losses.append(loss)
        self.version += 1
        if len(self.steps) >= self.cap:
            self.steps, self.losses = self.steps[::2], self.losses[::2]
            self._stride *= 2


class ProgressBook:
    """Histories by job id; :meth:`forget` drops jobs no longer in the snapshot."""

    def __init__(self, cap: int = HISTORY_CAP) -> None:
        if cap < 4:
            raise ValueError("a progress history needs room for at least 4 points")
        self.cap = cap
        self.jobs: dict[str, ProgressHistory] = {}

    def record(self, job_id: str, step: float, loss: float | None) -> None:
        history = self.jobs.get(job_id)
        if history is None:
            history = self.jobs[job_id] = ProgressHistory(self.cap)
        history.add(step, loss)

    def get(self, job_id: str) -> ProgressHistory | None:
        return self.jobs.get(job_id)

    def forget(self, keep: set[str]) -> None:
        for job_id in [j for j in self.jobs if j not in keep]:
            del self.jobs[job_id]
