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

import numba
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
        if source != self._source:
            self._source, self._row, self._number = source, np.full(0, -1, np.intp), np.full(0, -1, np.int64)
        rows: Ix = np.empty(len(ids), np.intp)
        misses = _find(numbers, self._row, self._number, rows)
        if misses < 0:  # a number beyond the map (grow it), or one not to map
            top = int(numbers.max()) + 1
            if int(numbers.min()) < 0 or top > _FAR:
                return np.array([track(i).row for i in ids], np.intp)
            self._row = _grown(self._row, top)
            misses = _find(numbers, self._row, self._number, rows)
        if misses:
            for k in np.flatnonzero(rows < 0).tolist():
                r = rows[k] = track(ids[k]).row
                if r >= len(self._number):
                    self._number = _grown(self._number, r + 1)
                self._row[numbers[k]], self._number[r] = r, numbers[k]
        return rows

    def free(self, rows: list[int]) -> None:
        """Rows given back: no number finds them any more."""
        number, n = self._number, len(self._number)
        for r in rows:
            if r < n:
                number[r] = -1


@numba.njit(cache=True, nogil=True)
def _find(numbers: I64, row_of: Ix, number_of: I64, rows: Ix) -> int:
    """``rows[k]``: the row number k was last found at, while that row is still the number's
    (else -1); returns how many are -1, or -1 at once for a number outside ``row_of``."""
    misses = 0
    for k in range(numbers.shape[0]):
        n = numbers[k]
        if n < 0 or n >= row_of.shape[0]:
            return -1
        r = row_of[n]
        if r < 0 or r >= number_of.shape[0] or number_of[r] != n:
            rows[k] = -1
            misses += 1
        else:
            rows[k] = r
    return misses


def _grown(a: NDArray[T], size: int) -> NDArray[T]:
    out: NDArray[T] = np.full(max(size, 2 * len(a), 64), -1, a.dtype)
    out[: len(a)] = a
    return out
