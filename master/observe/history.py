"""Recent GPU utilisation per job, sampled from the heartbeats in memory, for the dashboard's chart.

Bounded: ``points`` samples per job and ``max_jobs`` jobs (the least recently seen go first).
Nothing here touches the database.
"""

from __future__ import annotations

import logging
from collections import OrderedDict, deque

from master.clock import Clock
from master.services.nodes import NodeRegistry

log = logging.getLogger(__name__)


class UtilHistory:
    def __init__(self, *, points: int = 360, max_jobs: int = 5000) -> None:
        self._points = points
        self._max_jobs = max_jobs
        self._jobs: OrderedDict[str, deque[tuple[float, float]]] = OrderedDict()

    def sample(self, registry: NodeRegistry, now: float) -> None:
        """One point per job now reported by a worker: its mean utilisation over its GPUs."""
        per_job: dict[str, list[float]] = {}
        for entry in registry.all():
            if not entry.connected:
                continue
            for s in entry.job_stats:
                per_job.setdefault(s.job_id, []).append(s.util_sm)
        for job_id, utils in per_job.items():
            series = self._jobs.get(job_id)
            if series is None:
                series = self._jobs[job_id] = deque(maxlen=self._points)
            self._jobs.move_to_end(job_id)
            series.append((now, sum(utils) / len(utils)))
        while len(self._jobs) > self._max_jobs:
            self._jobs.popitem(last=False)

    def of(self, job_id: str) -> list[tuple[float, float]]:
        return list(self._jobs.get(job_id, ()))

    async def run(self, registry: NodeRegistry, clock: Clock, interval_s: float) -> None:
        """Sample every ``interval_s`` until cancelled."""
        while True:
            try:
                self.sample(registry, clock.now())
            except Exception:
                log.exception("utilisation history: sampling failed")
            await clock.sleep(interval_s)
