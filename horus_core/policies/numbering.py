"""Report rows found by the source's job numbers (the simulator's job indices) instead of ids.

A source that numbers its jobs (one number names one job for good, within that source) hands a
round of reports with their numbers; the rows are then array reads, checked against the number
each row was last found by, and only the jobs not found so (new, or their row given to another
job since) are looked up by id. Rows freed are unmarked, so a row given again is never read as
its old job's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

import numpy as np
from numpy.typing import NDArray

Ix = NDArray[np.intp]
I64 = NDArray[np.int64]
Numbered = tuple[str, I64]  # (source, each job's number there, >= 0)
T = TypeVar("T", bound=np.generic)
_FAR = 1 << 26  # numbers beyond this: looked up by id (the map would be too large)


class _Row(Protocol):
    @property
    def row(self) -> int: ...


class Numbering:
    def __init__(self) -> None:
        self._source = ""
        self._row: Ix = np.full(0, -1, np.intp)  # number -> the row it was last found at (-1: none)
        self._number: I64 = np.full(0, -1, np.int64)  # row -> the number it was found by (-1: none)

    def rows(self, numbered: Numbered, ids: Sequence[str], track: Callable[[str], _Row]) -> Ix:
        """The rows of ``ids`` (numbered ``numbered``); ``track(id)`` gives (or makes) a job's
        row where the numbers do not."""
        source, numbers = numbered
        if len(numbers) != len(ids):
            raise ValueError(f"{len(ids)} reports with {len(numbers)} numbers")
        top = int(numbers.max()) + 1 if len(numbers) else 0
        if source != self._source:
            self._source, self._row, self._number = source, np.full(0, -1, np.intp), np.full(0, -1, np.int64)
        if len(numbers) and (int(numbers.min()) < 0 or top > _FAR):
            return np.array([track(i).row for i in ids], np.intp)
        if top > len(self._row):
            self._row = _grown(self._row, top)
        rows: Ix = self._row[numbers]
        stale = np.flatnonzero((rows < 0) | (self._number[rows] != numbers)) if len(self._number) else None
        for k in range(len(ids)) if stale is None else stale.tolist():
            r = rows[k] = track(ids[k]).row
            if r >= len(self._number):
                self._number = _grown(self._number, r + 1)
            self._row[numbers[k]], self._number[r] = r, numbers[k]
        return rows

    def free(self, rows: list[int]) -> None:
        """Rows given back: no number finds them any more."""
        at = [r for r in rows if r < len(self._number)]
        self._number[at] = -1


def _grown(a: NDArray[T], size: int) -> NDArray[T]:
    out: NDArray[T] = np.full(max(size, 2 * len(a), 64), -1, a.dtype)
    out[: len(a)] = a
    return out
