"""The one index from a source's job numbers to rows of a table (the job table's slots, the
progress reports' rows): a source that numbers its jobs for good (the master's live index, the
simulator) hands a pass's jobs with their numbers, and their rows are array reads.

Each row remembers the number it was put for, so a row given to another job since (freed,
taken again) never reads as its old job's. The numbers are kept from a ``base`` on (the lowest
live number when the index last moved up), so a long-running source's old numbers cost nothing.
"""

from __future__ import annotations

import numba
import numpy as np
from numpy.typing import NDArray

I64 = NDArray[np.int64]
Ix = NDArray[np.intp]
_SPREAD = 8  # numbers further apart than this many per job (+ _SLACK) are looked up by id
_SLACK = 65536


@numba.njit(cache=True, nogil=True)  # (the master's loop runs meanwhile)
def _rows(numbers: I64, base: int, row_of: Ix, number_of: I64, out: Ix) -> int:
    """``out[k]``: the row of ``numbers[k]`` (-1: none); returns how many have none, or -1 at
    once for a number the array from ``base`` does not cover (compiled: numpy costs ~10x)."""
    misses = 0
    for k in range(numbers.shape[0]):
        p = numbers[k] - base
        if p < 0 or p >= row_of.shape[0]:
            return -1
        r = row_of[p]
        if r >= 0 and number_of[r] == numbers[k]:
            out[k] = r
        else:
            out[k], misses = -1, misses + 1
    return misses


class NumberIndex:
    def __init__(self) -> None:
        self.source = ""
        self.base = 0
        self._row: Ix = np.full(0, -1, np.intp)  # number - base -> the row put for it (-1: none)
        self._number: I64 = np.full(0, -1, np.int64)  # row -> the number it was put for (-1: none)

    def find(self, source: str, numbers: I64) -> tuple[Ix, int] | None:
        """The row of each number (-1: none) and how many have none; None where the numbers
        are too far apart to map (look them up by id)."""
        if source != self.source:  # another source's numbers name other jobs
            self.source, self.base, self._row = source, 0, np.full(0, -1, np.intp)
        out = np.empty(len(numbers), np.intp)
        misses = _rows(numbers, self.base, self._row, self._number, out)
        if misses >= 0:
            return out, misses
        lo, hi = int(numbers.min()), int(numbers.max()) + 1
        if lo < 0 or hi - lo > _SPREAD * len(numbers) + _SLACK:
            return None
        if not len(self._row) or hi - lo + len(self._row) > 4 * (_SPREAD * len(numbers) + _SLACK):
            self.base, self._row = lo, np.full(0, -1, np.intp)
        if lo < self.base or hi - self.base > len(self._row):  # cover lo..hi from ``lo`` on
            keep = max(lo, self.base)  # (the numbers below ``lo`` are let go)
            kept = self._row[keep - self.base :]
            self._row = np.full(max(2 * (max(hi, keep + len(kept)) - lo), 1024), -1, np.intp)
            self._row[keep - lo : keep - lo + len(kept)] = kept
            self.base = lo
        return out, _rows(numbers, self.base, self._row, self._number, out)

    def put(self, numbers: I64, rows: Ix) -> None:
        """``rows[k]`` is the row of ``numbers[k]`` (numbers found by :meth:`find` just before)."""
        if len(rows) and int(rows.max()) >= len(self._number):
            grown = np.full(max(2 * len(self._number), int(rows.max()) + 1, 64), -1, np.int64)
            grown[: len(self._number)] = self._number
            self._number = grown
        self._row[numbers - self.base] = rows
        self._number[rows] = numbers

    def free(self, rows: list[int]) -> None:
        """Rows given back: no number finds them any more."""
        at = [r for r in rows if r < len(self._number)]
        self._number[at] = -1
