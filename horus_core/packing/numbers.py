"""The one index from a source's job numbers to rows of a table (the job table's slots, the
progress reports' rows): a source that numbers its jobs for good (the master's live index, the
simulator) hands a pass's jobs with their numbers, and their rows are array reads.

Each row remembers the number it was put for, so a row given to another job since (freed,
taken again) never reads as its old job's. The numbers are kept from a ``base`` on (the lowest
live number when the index last moved up), so a long-running source's old numbers cost nothing.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

I64 = NDArray[np.int64]
Ix = NDArray[np.intp]
_SPREAD = 8  # numbers further apart than this many per job (+ _SLACK) are looked up by id
_SLACK = 65536


class NumberIndex:
    def __init__(self) -> None:
        self.source = ""
        self.base = 0
        self._row: Ix = np.full(0, -1, np.intp)  # number - base -> the row put for it (-1: none)
        self._number: I64 = np.full(0, -1, np.int64)  # row -> the number it was put for (-1: none)

    def find(self, source: str, numbers: I64) -> Ix | None:
        """The row of each number (-1: none); None where the numbers are too far apart to map
        (look them up by id)."""
        if source != self.source:  # another source's numbers name other jobs
            self.source, self.base, self._row = source, 0, np.full(0, -1, np.intp)
        if not len(numbers):
            return np.zeros(0, np.intp)
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
        rows = self._row[numbers - self.base]
        known = rows >= 0
        known[known] = self._number[rows[known]] == numbers[known]
        out: Ix = np.where(known, rows, -1)
        return out

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
