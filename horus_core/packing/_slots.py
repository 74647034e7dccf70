"""The job table's look-up by the source's job numbers (:meth:`JobTable.scan
<horus_core.packing.jobs.JobTable.scan>`): the map from numbers to slots, and the compiled loop
that reads each job's slot there and finds the jobs whose slot is not confirmed at their
version."""

from __future__ import annotations

import numba
import numpy as np
from numpy.typing import NDArray

from horus_core.model import JobChanges

I64 = NDArray[np.int64]
Ix = NDArray[np.intp]


@numba.njit(cache=True, nogil=True)  # the master's loop runs meanwhile
def slots_by_number(
    numbers: I64, base: int, by_number: Ix, seen: I64, versions: I64, got: Ix, stale: Ix
) -> int:
    """``got[k]``: the slot the map holds for job k's number (-1: none); the positions of the
    jobs with no slot, or one last confirmed at another version, into ``stale``. Returns how
    many those are, or -1 at once for a number the map does not cover."""
    n_stale = 0
    for k in range(numbers.shape[0]):
        p = numbers[k] - base
        if p < 0 or p >= by_number.shape[0]:
            return -1
        s = by_number[p]
        got[k] = s
        if s < 0 or seen[s] != versions[k]:
            stale[n_stale] = k
            n_stale += 1
    return n_stale


class NumberMap:
    """One source's job numbers (JobChanges.numbers) -> the job table's slots, as an array from
    the number ``base`` on; another source's numbers are forgotten, and the numbers below the
    lowest live one are let go as the map moves up."""

    def __init__(self) -> None:
        self.source = ""
        self.base = 0
        self.slot: Ix = np.full(0, -1, np.intp)  # a job's number - base -> its slot (-1: none)

    def usable(self, changes: JobChanges | None, n: int) -> bool:
        """Whether a scan of ``n`` jobs looks them up by the numbers ``changes`` gives them:
        given, one per job, and this map set up for their source (here, if it is not)."""
        if changes is None or changes.numbers is None or changes.versions is None:
            return False
        if len(changes.numbers) != n or n == 0:
            return False
        return changes.source == self.source or self.cover(changes.source, changes.numbers)

    def cover(self, source: str, numbers: I64) -> bool:
        """Set the map up for ``numbers`` of ``source``; False where they are too far apart for
        an array of a size near the live jobs'."""
        lo, hi = int(numbers.min()), int(numbers.max()) + 1
        if hi - lo > 8 * len(numbers) + 65536:
            return False
        if source != self.source or lo < self.base:
            self.source, self.base, self.slot = source, lo, np.full(0, -1, np.intp)
        if hi - self.base > len(self.slot):  # move the map up to ``lo``, and grow it
            kept = self.slot[lo - self.base :]
            grown = np.full(max(2 * (hi - lo), 1024), -1, np.intp)
            grown[: len(kept)] = kept
            self.base, self.slot = lo, grown
        return True

    def find(self, changes: JobChanges, seen: I64, got: Ix) -> Ix | None:
        """:func:`slots_by_number` of the jobs ``changes`` numbers (the map grown where they
        pass its end): the positions of those not confirmed; None where the numbers are too far
        apart (look the jobs up by id)."""
        numbers, versions = changes.numbers, changes.versions
        if numbers is None or versions is None:  # (not usable: by id)
            return None
        at = np.empty(len(numbers), np.intp)
        k = slots_by_number(numbers, self.base, self.slot, seen, versions, got, at)
        if k < 0 and self.cover(changes.source, numbers):
            k = slots_by_number(numbers, self.base, self.slot, seen, versions, got, at)
        return at[:k] if k >= 0 else None

    def keep(self, numbers: I64, at: Ix, got: Ix) -> None:
        """Map the numbers of the jobs at ``at`` to their slots (the others are as mapped)."""
        self.slot[numbers[at] - self.base] = got[at]
