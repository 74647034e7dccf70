"""Jobs kept in the order of a number each was given once (its arrival), as they come and go:
the master's live index keeps its pending, active and running jobs so, and so does the
simulator, so a pass's split of the live jobs (``ClusterSnapshot.split_as``) walks no job.

Runs of at most ``2 * RUN`` jobs sorted by number: a change is one bisect and one short insert
or delete, in the run's lists (jobs, ids, numbers) and in its arrays (numbers, versions, with
room for the run's most). What a pass reads is joined in C when asked, once per change: the
tuple of jobs and the list of ids from the runs' lists, the columns of numbers and versions
from the runs' arrays; nothing walks the jobs in Python (a simulator round changes one job of
a thousand and reads them all).
"""

from __future__ import annotations

from bisect import bisect_left
from itertools import chain

import numpy as np
from numpy.typing import NDArray

from horus_core.model import Job

I64 = NDArray[np.int64]
RUN = 256  # jobs per run (between this and twice this, once grown)
_ROOM = 2 * RUN + 1  # a run's arrays' length: its most, and one more before it splits
_NONE = np.zeros(0, np.int64)


class InOrder:
    def __init__(self) -> None:
        self._at: list[list[int]] = []  # numbers, a run per chunk, ascending throughout
        self._jobs: list[list[Job]] = []  # the jobs, in the same runs
        self._ids: list[list[str]] = []  # their ids
        self._num: list[I64] = []  # each run's numbers as an array (its first len(run) entries)
        self._ver: list[I64] = []  # their versions, likewise
        self._tops: list[int] = []  # each run's last number
        self._tuple: tuple[Job, ...] | None = None
        self._columns: tuple[I64, I64] | None = None

    def __len__(self) -> int:
        return sum(map(len, self._at))

    def put(self, number: int, job: Job) -> None:
        """Job ``number`` is ``job`` now (in, or in again as another view)."""
        self._tuple = self._columns = None
        if not self._tops:
            self._at.append([number])
            self._jobs.append([job])
            self._ids.append([job.id])
            self._num.append(np.full(_ROOM, number, np.int64))
            self._ver.append(np.full(_ROOM, job.version, np.int64))
            self._tops.append(number)
            return
        c = min(bisect_left(self._tops, number), len(self._tops) - 1)
        run, num, ver = self._at[c], self._num[c], self._ver[c]
        i, n = bisect_left(run, number), len(run)
        if i < n and run[i] == number:
            self._jobs[c][i], self._ids[c][i], ver[i] = job, job.id, job.version
            return
        run.insert(i, number)
        self._jobs[c].insert(i, job)
        self._ids[c].insert(i, job.id)
        if i < n:  # (numpy copies overlapping slices as via a buffer)
            num[i + 1 : n + 1], ver[i + 1 : n + 1] = num[i:n], ver[i:n]
        num[i], ver[i] = number, job.version
        self._tops[c] = run[-1]
        if n + 1 > 2 * RUN:  # split the run in two
            self._split(c)

    def _split(self, c: int) -> None:
        run, jobs, ids, num, ver = self._at[c], self._jobs[c], self._ids[c], self._num[c], self._ver[c]
        upper_num, upper_ver = np.empty(_ROOM, np.int64), np.empty(_ROOM, np.int64)
        upper_num[: len(run) - RUN], upper_ver[: len(run) - RUN] = num[RUN : len(run)], ver[RUN : len(run)]
        self._at[c : c + 1] = [run[:RUN], run[RUN:]]
        self._jobs[c : c + 1] = [jobs[:RUN], jobs[RUN:]]
        self._ids[c : c + 1] = [ids[:RUN], ids[RUN:]]
        self._num[c + 1 : c + 1] = [upper_num]
        self._ver[c + 1 : c + 1] = [upper_ver]
        self._tops[c : c + 1] = [run[RUN - 1], run[-1]]

    def drop(self, number: int) -> None:
        """Job ``number`` left (nothing if it was not in)."""
        c = bisect_left(self._tops, number)
        if c == len(self._tops):
            return
        run = self._at[c]
        i, n = bisect_left(run, number), len(run)
        if i == n or run[i] != number:
            return
        self._tuple = self._columns = None
        del run[i], self._jobs[c][i], self._ids[c][i]
        num, ver = self._num[c], self._ver[c]
        num[i : n - 1], ver[i : n - 1] = num[i + 1 : n], ver[i + 1 : n]
        if run:
            self._tops[c] = run[-1]
        else:
            del self._at[c], self._jobs[c], self._ids[c], self._num[c], self._ver[c], self._tops[c]

    def jobs(self) -> tuple[Job, ...]:
        """The jobs, in order."""
        if self._tuple is None:
            jobs = self._jobs
            self._tuple = tuple(jobs[0]) if len(jobs) == 1 else tuple(chain.from_iterable(jobs))
        return self._tuple

    def ids(self) -> list[str]:
        """Their ids, in order (a new list)."""
        ids = self._ids
        return ids[0].copy() if len(ids) == 1 else list(chain.from_iterable(ids))

    def numbers(self) -> I64:
        """Each job's number, in order (read it before the next change)."""
        return self._cols()[0]

    def versions(self) -> I64:
        """Each job's version, in order (read it before the next change)."""
        return self._cols()[1]

    def _cols(self) -> tuple[I64, I64]:
        if self._columns is None and len(self._at) <= 1:  # (none, or a simulator's few hundred)
            n = len(self._at[0]) if self._at else 0
            self._columns = (self._num[0][:n], self._ver[0][:n]) if n else (_NONE, _NONE)
        elif self._columns is None:
            sizes = list(map(len, self._at))
            self._columns = (
                np.concatenate([a[:n] for a, n in zip(self._num, sizes, strict=True)] or [_NONE]),
                np.concatenate([a[:n] for a, n in zip(self._ver, sizes, strict=True)] or [_NONE]),
            )
        return self._columns
