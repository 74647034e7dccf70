"""The simulator's per-job running totals as columns, one row per job (its index).

A :class:`~horus_core.sim.state.SimJob` reads and writes its progress, rate and speed
statistics here (its attributes are views of its row), so settling every running job before a
round, to report their steps to a policy, is a few array operations instead of a Python call per
job. :meth:`JobColumns.settle` (one job) and :meth:`JobColumns.settle_many` (many) do the same
floating-point operations in the same order: a run settles to the same values either way.
"""

from __future__ import annotations

import math

import numba
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
        """:meth:`settle` of every row of ``rows`` (distinct, all running), in bulk (one
        compiled loop); returns their steps done."""
        out = np.empty(len(rows))
        _settle_rows(
            rows, now, slow_threshold, self.done, self.rate, self.speed, self.last,
            self.run_s, self.speed_s, self.slow_s, self.min_speed, out,
        )  # fmt: skip
        return out


@numba.njit(cache=True)
def _settle_rows(
    rows: NDArray[np.intp], now: float, slow_threshold: float, done: NDArray[np.float64],
    rate: NDArray[np.float64], speed: NDArray[np.float64], last: NDArray[np.float64],
    run_s: NDArray[np.float64], speed_s: NDArray[np.float64], slow_s: NDArray[np.float64],
    min_speed: NDArray[np.float64], out: NDArray[np.float64],
) -> None:  # fmt: skip
    """:meth:`JobColumns.settle` of each row (running), as one loop: the same operations."""
    for k in range(rows.shape[0]):
        i = rows[k]
        dt = now - last[i]
        if dt > 0:
            s = speed[i]
            done[i] = done[i] + rate[i] * dt
            run_s[i] = run_s[i] + dt
            speed_s[i] = speed_s[i] + s * dt
            if s < slow_threshold:
                slow_s[i] = slow_s[i] + dt
            min_speed[i] = min(min_speed[i], s)
        last[i] = now
        out[k] = done[i]
