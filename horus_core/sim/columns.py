"""The simulator's per-job running totals as columns, one row per job (its index).

A :class:`~horus_core.sim.state.SimJob` reads and writes its progress, rate and speed
statistics here (its attributes are views of its row), so settling every running job before a
round, to report their steps to a policy, is a few array operations instead of a Python call per
job. :meth:`JobColumns.settle` (one job) and :meth:`JobColumns.settle_many` (many) do the same
floating-point operations in the same order: a run settles to the same values either way.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

FIELDS = ("done", "rate", "speed", "last", "run_s", "speed_s", "slow_s", "min_speed")


class JobColumns:
    """``done`` steps, ``rate`` (steps/s now), normalised ``speed`` now, ``last`` (the time up to
    which the rest is settled), and the time held (``run_s``), the speed's integral
    (``speed_s``), the time below the slow threshold (``slow_s``) and the lowest speed seen."""

    def __init__(self, n: int) -> None:
        self.done = np.zeros(n)
        self.rate = np.zeros(n)
        self.speed = np.zeros(n)
        self.last = np.zeros(n)
        self.run_s = np.zeros(n)
        self.speed_s = np.zeros(n)
        self.slow_s = np.zeros(n)
        self.min_speed = np.full(n, math.inf)

    def settle(self, i: int, running: bool, now: float, slow_threshold: float) -> None:
        """Account for row ``i``'s time since ``last`` at its current rate (if ``running``)."""
        dt = now - float(self.last[i])
        if dt > 0 and running:
            speed = float(self.speed[i])
            self.done[i] = float(self.done[i]) + float(self.rate[i]) * dt
            self.run_s[i] = float(self.run_s[i]) + dt
            self.speed_s[i] = float(self.speed_s[i]) + speed * dt
            if speed < slow_threshold:
                self.slow_s[i] = float(self.slow_s[i]) + dt
            self.min_speed[i] = min(float(self.min_speed[i]), speed)
        self.last[i] = now

    def settle_many(self, rows: NDArray[np.intp], now: float, slow_threshold: float) -> NDArray[np.float64]:
        """:meth:`settle` of every row of ``rows`` (distinct, all running), in bulk; returns
        their steps done."""
        dt = now - self.last[rows]
        ahead = dt > 0
        up, dt = (rows, dt) if ahead.all() else (rows[ahead], dt[ahead])
        speed = self.speed[up]
        self.done[up] += self.rate[up] * dt
        self.run_s[up] += dt
        self.speed_s[up] += speed * dt
        slow = speed < slow_threshold
        if slow.any():
            self.slow_s[up[slow]] += dt[slow]
        self.min_speed[up] = np.minimum(self.min_speed[up], speed)
        self.last[rows] = now
        return self.done[rows]
