"""Attained service (GPU-seconds run so far) per job id, kept by the policy object across
passes, and the discrete Tiresias-style priority levels and preemptions it implies.

The policy keeps the ledger itself because neither the live master's nor the simulator's Job
carries an attempt history: each pass adds ``GPUs x (now - last pass)`` to every running job
(from the later of the last pass and the moment its current attempt was first seen running), and forgets
ids that left the snapshot (finished). A master restart starts the ledger at zero.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from horus_core.errors import InvalidArgument
from horus_core.model import Action, ClusterSnapshot, Job, JobState, Preempt, Wait

# One GPU-hour: the scale of a short Philly job; levels grow 4x (1, 4, 16, 64 GPU-hours).
BASE_GPU_S = 3600.0
FACTOR = 4.0
LEVELS = 5
MIN_SLICE_S = 360.0  # a running attempt is never stopped before this (restart costs ~30 s)
_RUNNING = JobState.RUNNING


def thresholds(base_gpu_s: float, factor: float, levels: int) -> list[float]:
    """The level boundaries in GPU-seconds: ``base x factor^k`` for k < levels - 1."""
    if not (base_gpu_s > 0 and factor > 1 and levels >= 1):
        raise InvalidArgument(
            "las", f"need base > 0, factor > 1, levels >= 1; got {base_gpu_s}, {factor}, {levels}"
        )
    return [base_gpu_s * factor**k for k in range(levels - 1)]


@dataclass
class Attained:
    """The ledger, its levels, and the preemption rule (see the module doc)."""

    base_gpu_s: float = BASE_GPU_S
    factor: float = FACTOR
    levels: int = LEVELS
    min_slice_s: float = MIN_SLICE_S
    service: dict[str, float] = field(default_factory=dict)  # job id -> GPU-seconds
    since: dict[str, tuple[int, float]] = field(default_factory=dict)  # id -> (attempt, first seen)
    last: float | None = None
    bounds: list[float] = field(init=False)

    def __post_init__(self) -> None:
        self.bounds = thresholds(self.base_gpu_s, self.factor, self.levels)

    def observe(self, snapshot: ClusterSnapshot, now: float) -> None:
        """Credit every running job with its GPU-seconds since the last pass."""
        last = now if self.last is None or now < self.last else self.last
        running: dict[str, tuple[int, float]] = {}
        for job in snapshot.jobs:
            if job.state is _RUNNING:
                seen = self.since.get(job.id)
                running[job.id] = seen if seen is not None and seen[0] == job.attempt else (job.attempt, now)
                begun = running[job.id][1]
                span = now - max(last, begun)
                if span > 0:
                    self.service[job.id] = self.service.get(job.id, 0.0) + span * len(job.gpus)
        self.since = running
        present = {j.id for j in snapshot.jobs}
        if len(self.service) > len(present):
            self.service = {k: v for k, v in self.service.items() if k in present}
        self.last = now

    def level(self, job_id: str) -> int:
        return bisect.bisect_right(self.bounds, self.service.get(job_id, 0.0))

    def levels_of(self, ids: Sequence[str]) -> NDArray[np.int64]:
        return np.fromiter((self.level(i) for i in ids), np.int64, len(ids))

    def preempts(self, snapshot: ClusterSnapshot, actions: list[Action], now: float) -> list[Preempt]:
        """Stop running jobs of a lower class (priority, then level) than the first job left
        waiting, most attained first, until the GPUs they free cover that job's gang."""
        waits = {a.job_id for a in actions if isinstance(a, Wait)}
        waiting = [j for j in snapshot.jobs if j.id in waits and j.state is JobState.PENDING]
        if not waiting:
            return []
        head = min(waiting, key=lambda j: (self._class(j), j.submitted_at, j.id))
        victims = [j for j in snapshot.jobs if j.state is _RUNNING and self._class(j) > self._class(head)]
        victims = [j for j in victims if now - self.since.get(j.id, (0, now))[1] >= self.min_slice_s]
        victims.sort(key=lambda j: (self._class(j), self.service.get(j.id, 0.0), j.id), reverse=True)
        out: list[Preempt] = []
        freed = 0
        for job in victims:
            if freed >= head.spec.gpus:
                break
            out.append(
                Preempt(job.id, f"job {head.id} has attained less service (level {self.level(head.id)})")
            )
            freed += len(job.gpus)
        return out

    def _class(self, job: Job) -> tuple[int, int]:
        return (-job.spec.priority, self.level(job.id))
