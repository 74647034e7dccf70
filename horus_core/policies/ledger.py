"""The least-attained-service ledger as columns: one slot per job id it knows (running now, or
with service attained), kept across passes.

Crediting and finding stoppable jobs are array operations over the slots; only the jobs that
changed since the last pass are written one by one. Slot 0 is never a job's: an unknown id reads
as no service, not running.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from itertools import repeat

import numba
import numpy as np
from numpy.typing import NDArray

from horus_core.model import Job

_FIRST = 64  # slots at first; the columns double when full
Ix = NDArray[np.intp]


class Columns:
    """Per slot: GPU-seconds attained (``served``; ``credited``: the job has an entry at all),
    and for a running job its stint's start (``begun``), its GPUs (``width``), its class's
    first key (``rank``: minus its priority) and its view (``views``)."""

    def __init__(self) -> None:
        self.slots: dict[str, int] = {}
        self.served = np.zeros(_FIRST)
        self.credited = np.zeros(_FIRST, np.bool_)
        self.running = np.zeros(_FIRST, np.bool_)
        self.begun = np.zeros(_FIRST)
        self.width = np.zeros(_FIRST)
        self.rank = np.zeros(_FIRST, np.int64)
        self.views: list[Job | None] = [None] * _FIRST
        self._free = list(range(_FIRST - 1, 0, -1))

    def slot(self, job_id: str) -> int:
        """The job's slot, taken now if it has none."""
        found = self.slots.get(job_id)
        if found is not None:
            return found
        if not self._free:
            n = len(self.views)
            for name in ("served", "credited", "running", "begun", "width", "rank"):
                column = getattr(self, name)
                setattr(self, name, np.concatenate([column, np.zeros_like(column)]))
            self.views += [None] * n
            self._free = list(range(2 * n - 1, n - 1, -1))
        taken = self.slots[job_id] = self._free.pop()
        return taken

    def run(self, job: Job, since: float) -> None:
        """``job`` runs, in a stint that began at ``since``."""
        s = self.slot(job.id)
        self.running[s], self.begun[s], self.width[s] = True, since, len(job.gpus)
        self.rank[s], self.views[s] = -job.spec.priority, job

    def halt(self, job_id: str) -> None:
        """The job runs no more (its service is kept)."""
        s = self.slots.get(job_id)
        if s is not None:
            self.running[s], self.views[s] = False, None

    def release(self, ids: Iterable[str]) -> None:
        """Forget the jobs (they left): their slots are given again."""
        for job_id in ids:
            s = self.slots.pop(job_id, None)
            if s is not None:
                self.served[s], self.credited[s], self.running[s], self.views[s] = 0.0, False, False, None
                self._free.append(s)

    def load(self, gpu_s: Mapping[str, float]) -> None:
        """Set the attained service to ``gpu_s`` (the running stints are kept)."""
        self.served[:], self.credited[:] = 0.0, False
        for job_id, value in gpu_s.items():
            s = self.slot(job_id)
            self.served[s], self.credited[s] = value, True

    def service(self) -> dict[str, float]:
        """Job id -> GPU-seconds attained (the ids credited at least once)."""
        return {i: float(self.served[s]) for i, s in self.slots.items() if self.credited[s]}

    def credit(self, span: float, fresh: Collection[str]) -> None:
        """Add ``GPUs x span`` to every running job but those of ``fresh`` (stints begun now)."""
        skip = np.fromiter(map(self.slots.__getitem__, fresh), np.intp, len(fresh))
        _credit(span, skip, self.running, self.width, self.served, self.credited)

    def served_of(self, ids: Sequence[str]) -> NDArray[np.float64]:
        """GPU-seconds attained per id (0: none), in bulk."""
        at = np.fromiter(map(self.slots.get, ids, repeat(0)), np.intp, len(ids))
        return self.served[at]

    def stoppable(self, now: float, slices: float | NDArray[np.float64]) -> NDArray[np.bool_]:
        """Per slot: running, for at least its minimum slice."""
        return self.running & (now - self.begun >= slices)

    def tops(self, stoppable: NDArray[np.bool_], bounds: NDArray[np.float64]) -> tuple[int, Ix, Ix]:
        """Of the jobs ``stoppable`` marks (one at least): the highest class's first key (minus
        the priority), and the slots of the jobs of that priority with their LAS levels (the
        number of ``bounds`` at or below their service), highest level first, then by slot."""
        order, levels = np.empty(len(self.views), np.intp), np.empty(len(self.views), np.intp)
        high, n = _tops(stoppable, self.rank, self.served, bounds, order, levels)
        return int(high), order[:n], levels[:n]

    def jobs(self, mask: NDArray[np.bool_]) -> list[Job]:
        """The views of the running jobs ``mask`` marks."""
        return [self.view(s) for s in np.flatnonzero(mask).tolist()]

    def view(self, s: int) -> Job:
        """The view of the running job in slot ``s``."""
        job = self.views[s]
        if job is None:
            raise KeyError(f"slot {s} holds no running job")
        return job


# The two steps a pass takes over every slot, compiled: a simulator's round takes them on a few
# hundred slots, where numpy's steps (a copy, masks, a sort) cost ~3x as much (bench/sim_scale.py).


@numba.njit(cache=True)
def _credit(
    span: float, skip: NDArray[np.intp], running: NDArray[np.bool_], width: NDArray[np.float64],
    served: NDArray[np.float64], credited: NDArray[np.bool_],
) -> None:  # fmt: skip
    """:meth:`Columns.credit`, as one loop (``skip``: slots of running jobs left out)."""
    for k in range(skip.shape[0]):
        running[skip[k]] = False
    for s in range(running.shape[0]):
        if running[s]:
            served[s] += width[s] * span
            credited[s] = True
    for k in range(skip.shape[0]):
        running[skip[k]] = True


@numba.njit(cache=True)
def _tops(
    stoppable: NDArray[np.bool_], rank: NDArray[np.int64], served: NDArray[np.float64],
    bounds: NDArray[np.float64], order: Ix, levels: Ix,
) -> tuple[int, int]:  # fmt: skip
    """:meth:`Columns.tops` into ``order`` and ``levels``; returns the rank and how many."""
    high, top = rank[0], 0
    first = True
    for s in range(stoppable.shape[0]):
        if stoppable[s] and (first or rank[s] > high):
            high, first = rank[s], False
    level = np.empty(stoppable.shape[0], np.intp)
    most = 0
    for s in range(stoppable.shape[0]):
        if stoppable[s] and rank[s] == high:
            k = 0
            while k < bounds.shape[0] and bounds[k] <= served[s]:
                k += 1
            level[s] = k
            most = max(most, k)
    for k in range(most, -1, -1):  # (highest level first; a level's slots in order)
        for s in range(stoppable.shape[0]):
            if stoppable[s] and rank[s] == high and level[s] == k:
                order[top], levels[top] = s, k
                top += 1
    return high, top
