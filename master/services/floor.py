"""The master side of speed-floor enforcement (issue 10): every reading round it hands the running
jobs' measured speeds to :mod:`horus_core.floor` and turns the co-runners it names into Preempts
for the scheduling pass (which re-queues them; the policy places them again, elsewhere when the
learned pair speed now breaks the floor). docs/policies.md."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from horus_core.floor import FloorWatch, decide_moves
from horus_core.model import Job, Preempt
from master.clock import Clock
from master.store.live import LiveIndex

log = logging.getLogger(__name__)
READING_S = 20.0  # one measured-speed reading per running job this often (master clock)


class FloorEnforcer:
    def __init__(
        self,
        *,
        min_speed: float,
        clock: Clock,
        live: Callable[[], LiveIndex],
        measure: Callable[[list[Job]], Awaitable[dict[str, float]]],
        reading_s: float = READING_S,
        min_run_s: float = 0.0,
    ) -> None:
        self.min_speed, self.clock = min_speed, clock
        self.min_run_s = min_run_s  # a co-runner is never moved before it has run this long
        self._live = live  # (the index is replaced when it is rebuilt at start)
        self._measure = measure  # job id -> measured normalised speed (master/observe/view.py)
        self.reading_s = reading_s
        self.watch = FloorWatch()
        self._last = float("-inf")

    def _watched(self, live: LiveIndex) -> bool:
        """A floor applies to some running job (else a round looks at no job: the usual case)."""
        return self.min_speed > 0.0 or live.floored()

    async def preempts(self) -> list[Preempt]:
        """This round's co-runner moves (none between reading rounds). Only the jobs that share a
        GPU are measured and watched: a job alone on its GPUs has no co-runner to move, and its
        count of readings below its floor starts again once it shares one."""
        now = self.clock.now()
        if now - self._last < self.reading_s:
            return []
        self._last = now
        live = self._live()
        if not self._watched(live):
            return []
        shared = live.sharing()  # (a job alone on its GPUs has no co-runner to move)
        active = [j for j in live.jobs() if j.id in shared]
        speeds = await self._measure(active)
        moves = decide_moves(self.watch, active, speeds, now, self.min_speed, self.min_run_s)
        for victim, reason in moves:
            log.info("preempting %s: %s", victim.id, reason)
        return [Preempt(victim.id, reason) for victim, reason in moves]
