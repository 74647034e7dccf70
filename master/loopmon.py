"""How responsive the master is: its event loop's lag and its heartbeat handling time, each kept
in a bounded window of recent samples and summarised (p50 / p99 / max) by ``snapshot()``.

The event loop serves every RPC and stream, so a late wake-up of a task that only sleeps is the
delay every message sees before the master even looks at it (docs/reliability.md, "Load").
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from horus_core.plane import Heartbeat
from master.services.attempts import AttemptHandler
from master.services.session import Session

log = logging.getLogger(__name__)

LOOP_INTERVAL_S = 0.1
LOOP_WINDOW = 3000  # samples: the last 5 minutes at the default interval
HEARTBEAT_WINDOW = 50_000  # 100 s of heartbeats from 1,000 workers at the default 2 s


@dataclass(frozen=True, slots=True)
class LatencySnapshot:
    """A window's summary, in milliseconds; ``samples`` is how many it holds, ``total`` how many
    were ever recorded."""

    samples: int
    total: int
    p50_ms: float
    p99_ms: float
    max_ms: float


def percentile(ordered: list[float], q: float) -> float:
    """Nearest-rank percentile ``q`` (0-100) of an ascending list; 0.0 for an empty one."""
    if not ordered:
        return 0.0
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


class LatencyWindow:
    """The last ``size`` durations (seconds)."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"window size must be at least 1, not {size}")
        self._samples: deque[float] = deque(maxlen=size)
        self.total = 0

    def add(self, seconds: float) -> None:
        self._samples.append(max(0.0, seconds))
        self.total += 1

    def clear(self) -> None:
        """Start a new window (``total`` keeps counting)."""
        self._samples.clear()

    def snapshot(self) -> LatencySnapshot:
        ordered = sorted(self._samples)
        ms = [percentile(ordered, q) * 1000 for q in (50, 99, 100)]
        return LatencySnapshot(len(ordered), self.total, *(round(v, 3) for v in ms))


class LoopMonitor:
    """A task that sleeps ``interval_s`` over and over and records how late it wakes.

    ``now`` and ``sleep`` default to the real monotonic clock and ``asyncio.sleep``: the lag of the
    real loop is the point (tests pass fakes).
    """

    def __init__(
        self,
        interval_s: float = LOOP_INTERVAL_S,
        window: int = LOOP_WINDOW,
        *,
        now: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if not interval_s > 0:
            raise ValueError(f"interval must be positive, not {interval_s}")
        self.interval_s = interval_s
        self.lags = LatencyWindow(window)
        self._now = now
        self._sleep = sleep

    async def run(self) -> None:
        """Forever (until cancelled)."""
        while True:
            start = self._now()
            await self._sleep(self.interval_s)
            self.lags.add(self._now() - start - self.interval_s)

    def snapshot(self) -> LatencySnapshot:
        return self.lags.snapshot()


class TimedAttempts(AttemptHandler):
    """The worker messages' handler, timing each heartbeat from the moment the master reads it
    off the stream to the end of its handling (database reads included)."""

    def __init__(self, *args: Any, window: int = HEARTBEAT_WINDOW, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # (whatever AttemptHandler takes)
        self.heartbeats = LatencyWindow(window)

    async def heartbeat(self, session: Session, hb: Heartbeat) -> None:
        start = time.perf_counter()
        try:
            await super().heartbeat(session, hb)
        finally:
            self.heartbeats.add(time.perf_counter() - start)
