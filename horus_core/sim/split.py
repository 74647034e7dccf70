"""The simulator's pending and running jobs, each kept in index order (the order of the live
jobs a snapshot lists) as they change: a round hands them to the policy as the snapshot's
split, with each job's number (its index) and version, as the master's live index does, so
neither the snapshot nor a policy's job table walks every live job to find them."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from horus_core.model import ClusterSnapshot, Job, JobChanges, Node

I64 = NDArray[np.int64]
Handout = Callable[[I64, I64], JobChanges]  # (numbers, versions) -> the round's changes


class InOrder:
    """Jobs' indices, versions, views and ids, sorted by index (most jobs join last: arrivals, and
    jobs that start after every running one)."""

    def __init__(self) -> None:
        self._n = 0
        self._at: I64 = np.empty(64, np.int64)  # indices, ascending (the first ``_n``)
        self._ver: I64 = np.empty(64, np.int64)  # their views' versions
        self.views: list[Job] = []  # their views
        self.ids: list[str] = []  # their ids

    def __len__(self) -> int:
        return self._n

    def add(self, idx: int, view: Job) -> None:
        """Job ``idx`` is in, seen as ``view`` (its view changes only as it joins)."""
        n, at = self._n, self._at
        i = n if n == 0 or at[n - 1] < idx else int(at[:n].searchsorted(idx))
        if i < n and at[i] == idx:
            self._ver[i], self.views[i], self.ids[i] = view.version, view, view.id
            return
        if n == len(at):
            self._at, self._ver = np.resize(at, 2 * n), np.resize(self._ver, 2 * n)
        at, ver = self._at, self._ver
        if i < n:  # (numpy copies overlapping slices as if through a buffer)
            at[i + 1 : n + 1], ver[i + 1 : n + 1] = at[i:n], ver[i:n]
        at[i], ver[i] = idx, view.version
        self.views.insert(i, view)
        self.ids.insert(i, view.id)
        self._n = n + 1

    def drop(self, idx: int) -> None:
        n, at = self._n, self._at
        i = int(at[:n].searchsorted(idx))
        if i == n or at[i] != idx:
            return
        at[i : n - 1], self._ver[i : n - 1] = at[i + 1 : n], self._ver[i + 1 : n]
        del self.views[i], self.ids[i]
        self._n = n - 1

    def numbers(self) -> I64:
        """The indices, ascending (a view of the kept array: valid until the next change)."""
        return self._at[: self._n]

    def versions(self) -> I64:
        return self._ver[: self._n]


def split_snapshot(
    nodes: tuple[Node, ...], live: dict[str, Job], waiting: InOrder, running: InOrder, handout: Handout
) -> ClusterSnapshot:
    """The round's snapshot of ``live`` (every live job's view, in index order): its pending
    jobs are ``waiting``'s, its active and running ones ``running``'s."""
    pending, active = tuple(waiting.views), tuple(running.views)
    numbers = np.concatenate((waiting.numbers(), running.numbers()))
    versions = np.concatenate((waiting.versions(), running.versions()))
    split = {"pending": pending, "active": active, "running": active}
    return ClusterSnapshot.split_as(nodes, tuple(live.values()), split, handout(numbers, versions))
