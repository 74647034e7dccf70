"""Jobs kept in the order of a number each was given once (its arrival), as they come and go:
the master's live index keeps its pending, active and running jobs so, and so does the
simulator, so a pass's split of the live jobs (``ClusterSnapshot.split_as``) walks no job.

Runs of at most ``2 * RUN`` jobs sorted by number: a change is one bisect and one short insert
or delete; the tuple of jobs and the columns of numbers and versions are built when asked,
once per change.
"""

from __future__ import annotations

from bisect import bisect_left
from itertools import chain

import numpy as np
from numpy.typing import NDArray

from horus_core.model import Job

I64 = NDArray[np.int64]
RUN = 256  # jobs per run (between this and twice this, once grown)


class InOrder:
    def __init__(self) -> None:
        self._at: list[list[int]] = []  # numbers, a run per chunk, ascending throughout
        self._jobs: list[list[Job]] = []  # the jobs, in the same runs
        self._ver: list[list[int]] = []  # their versions, in the same runs
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
            self._ver.append([job.version])
            self._tops.append(number)
            return
        c = min(bisect_left(self._tops, number), len(self._tops) - 1)
        run, jobs, ver = self._at[c], self._jobs[c], self._ver[c]
        i = bisect_left(run, number)
        if i < len(run) and run[i] == number:
            jobs[i], ver[i] = job, job.version
            return
        run.insert(i, number)
        jobs.insert(i, job)
        ver.insert(i, job.version)
        self._tops[c] = run[-1]
        if len(run) > 2 * RUN:  # split the run in two
            self._at[c : c + 1] = [run[:RUN], run[RUN:]]
            self._jobs[c : c + 1] = [jobs[:RUN], jobs[RUN:]]
            self._ver[c : c + 1] = [ver[:RUN], ver[RUN:]]
            self._tops[c : c + 1] = [run[RUN - 1], run[-1]]

    def drop(self, number: int) -> None:
        """Job ``number`` left (nothing if it was not in)."""
        c = bisect_left(self._tops, number)
        if c == len(self._tops):
            return
        run = self._at[c]
        i = bisect_left(run, number)
        if i == len(run) or run[i] != number:
            return
        self._tuple = self._columns = None
        del run[i], self._jobs[c][i], self._ver[c][i]
        if run:
            self._tops[c] = run[-1]
        else:
            del self._at[c], self._jobs[c], self._ver[c], self._tops[c]

    def jobs(self) -> tuple[Job, ...]:
        """The jobs, in order."""
        if self._tuple is None:
            self._tuple = tuple(chain.from_iterable(self._jobs))
        return self._tuple

    def ids(self) -> list[str]:
        return [j.id for j in self.jobs()]

    def numbers(self) -> I64:
        """Each job's number, in order."""
        return self._cols()[0]

    def versions(self) -> I64:
        """Each job's version, in order."""
        return self._cols()[1]

    def _cols(self) -> tuple[I64, I64]:
        if self._columns is None:
            n = len(self.jobs())
            numbers = np.fromiter(chain.from_iterable(self._at), np.int64, n)
            self._columns = numbers, np.fromiter(chain.from_iterable(self._ver), np.int64, n)
        return self._columns
