"""Each tracked job's latest progress report and recent speeds, as columns (one row per job).

A row holds the last report's step and time, the number of reports taken, and a ring of the
steps/s of the last :data:`RATE_INTERVALS` intervals that made progress; a round of reports is
one compiled loop (``_add_row`` per report, in order), not a Python call per job.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numpy.typing import NDArray

from horus_core.jit import helper

RATE_INTERVALS = 8  # the last report intervals whose median gives steps/s
_START = 64


class Reported:
    """Rows of report state; :meth:`take` gives a row, :meth:`free` returns it."""

    def __init__(self) -> None:
        self.step = np.zeros(_START)  # the last report's step
        self.at = np.zeros(_START)  # and its time
        self.seen = np.zeros(_START, np.bool_)  # whether the row has had a report
        self.adds = np.zeros(_START, np.int64)  # reports taken
        self.ring = np.zeros((_START, RATE_INTERVALS))  # recent steps/s, oldest overwritten
        self.count = np.zeros(_START, np.int64)  # rates in the ring (at most RATE_INTERVALS)
        self.pos = np.zeros(_START, np.int64)  # where the next rate goes
        self._free: list[int] = []
        self._used = 0

    def take(self) -> int:
        """A fresh row (no report yet)."""
        if self._free:
            return self._free.pop()
        if self._used == len(self.adds):
            self._grow()
        self._used += 1
        return self._used - 1

    @property
    def held(self) -> int:
        """Rows given and not freed."""
        return self._used - len(self._free)

    def free(self, rows: list[int]) -> None:
        """Rows whose jobs left: cleared, to be given again (element by element: a round frees
        one or two)."""
        seen, adds, count, pos = self.seen, self.adds, self.count, self.pos
        for r in rows:
            seen[r], adds[r], count[r], pos[r] = False, 0, 0, 0
        self._free.extend(rows)

    def _grow(self) -> None:
        n = len(self.adds)
        for name in ("step", "at", "seen", "adds", "ring", "count", "pos"):
            old = getattr(self, name)
            new = np.zeros((2 * n, *old.shape[1:]), old.dtype)
            new[:n] = old
            setattr(self, name, new)

    def add_many(
        self, rows: NDArray[np.intp], steps: NDArray[np.float64], at: NDArray[np.float64]
    ) -> NDArray[np.bool_]:
        """Take one report per entry (row, step, time), in order; returns which were kept (a
        step that is not finite and >= 0, or a time that is not finite, is not)."""
        kept = np.empty(len(rows), np.bool_)
        _add_rows(
            rows, steps, at, self.step, self.at, self.seen, self.adds, self.ring, self.count, self.pos, kept
        )
        return kept

    def rates(self, row: int) -> list[float]:
        """The recent steps/s of ``row`` (at most RATE_INTERVALS), in ring order (callers take
        the median)."""
        rates: list[float] = self.ring[row, : int(self.count[row])].tolist()
        return rates

    def last(self, row: int) -> tuple[float, float] | None:
        """(step, time) of the row's latest report, or None before the first."""
        return (float(self.step[row]), float(self.at[row])) if self.seen[row] else None


@helper
def _add_row(
    r: int, s: float, now: float, step: NDArray[np.float64], at: NDArray[np.float64],
    seen: NDArray[np.bool_], adds: NDArray[np.int64], ring: NDArray[np.float64],
    count: NDArray[np.int64], pos: NDArray[np.int64],
) -> bool:  # fmt: skip
    """One report of row ``r`` (see :meth:`Reported.add_many`)."""
    if not (math.isfinite(now) and math.isfinite(s) and s >= 0):
        return False
    if seen[r]:
        d_step, d_t = s - step[r], now - at[r]
        if d_t > 0 and d_step > 0:
            p = pos[r]
            ring[r, p] = d_step / d_t
            pos[r] = (p + 1) % RATE_INTERVALS
            count[r] = min(count[r] + 1, RATE_INTERVALS)
    step[r], at[r], seen[r] = s, now, True
    adds[r] += 1
    return True


@numba.njit(cache=True)
def _add_rows(
    rows: NDArray[np.intp], steps: NDArray[np.float64], now: NDArray[np.float64], step: NDArray[np.float64],
    at: NDArray[np.float64], seen: NDArray[np.bool_], adds: NDArray[np.int64], ring: NDArray[np.float64],
    count: NDArray[np.int64], pos: NDArray[np.int64], kept: NDArray[np.bool_],
) -> None:  # fmt: skip
    """:func:`_add_row` for each row, as one loop."""
    for k in range(rows.shape[0]):
        kept[k] = _add_row(rows[k], steps[k], now[k], step, at, seen, adds, ring, count, pos)
