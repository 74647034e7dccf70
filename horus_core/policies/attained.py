"""Attained service (GPU-seconds run so far) per job id, kept by the policy object across
passes, and the discrete Tiresias-style priority levels and preemptions it implies.

Neither Job carries an attempt history, so each pass adds ``GPUs x (now - last pass)`` to every
running job and forgets ids that left; a restarted master rebuilds the ledger from the store
(:meth:`Attained.restore`). With ``work`` (progress reports) a job whose remaining work is
confidently estimated takes the level of its remaining GPU-seconds where that is lower than its
LAS level, and goes first within it; an estimate never moves a job behind its LAS level (the
others' levels understate what they have left: docs/history.md, evaluation notes §11).
"""

from __future__ import annotations

import bisect
import math
import operator
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat

import numpy as np
from numpy.typing import NDArray

from horus_core.errors import InvalidArgument
from horus_core.model import Action, ClusterSnapshot, Job, Node, NodeState, Preempt, Wait
from horus_core.policies.base import residents
from horus_core.policies.ledger import Columns
from horus_core.policies.remaining import RemainingWork
from horus_core.policies.state import PassState

# One GPU-hour (the scale of a short job), doubling like a multi-level feedback queue: levels
# end at 1, 2, 4 and 8 GPU-hours; beyond that FIFO, so long gangs are served in arrival order.
BASE_GPU_S = 3600.0
FACTOR = 2.0
LEVELS = 5
MIN_SLICE_S = 360.0  # a running attempt is never stopped before this (restart costs ~30 s)
_PRIORITY = operator.attrgetter("spec.priority")


def thresholds(base_gpu_s: float, factor: float, levels: int) -> list[float]:
    """The level boundaries in GPU-seconds: ``base x factor^k`` for k < levels - 1."""
    if not (base_gpu_s > 0 and factor > 1 and levels >= 1):
        raise InvalidArgument(
            "las", f"need base > 0, factor > 1, levels >= 1; got {base_gpu_s}, {factor}, {levels}"
        )
    return [base_gpu_s * factor**k for k in range(levels - 1)]


@dataclass
class Attained:
    """The ledger, its levels, and the preemption rule (see the module doc)."""

    base_gpu_s: float = BASE_GPU_S
    factor: float = FACTOR
    levels: int = LEVELS
    min_slice_s: float = MIN_SLICE_S
    # Hysteresis (``horus+``): a job stopped k times runs ``min_slice_s x slice_growth^k`` before
    # it may be stopped again; a victim must be ``min_gap`` levels above the waiting job.
    slice_growth: float = 1.0
    min_gap: int = 1
    stops: dict[str, int] = field(default_factory=dict)  # job id -> times stopped here
    columns: Columns = field(default_factory=Columns, repr=False)  # service, running stints (ledger.py)
    last: float | None = None
    work: RemainingWork | None = None  # None: LAS alone
    left: Mapping[str, float] = field(default_factory=dict)  # id -> confident GPU-seconds left
    bounds: list[float] = field(init=False)
    _bounds: NDArray[np.float64] = field(init=False, repr=False)  # the same, as an array

    def __post_init__(self) -> None:
        self.bounds = thresholds(self.base_gpu_s, self.factor, self.levels)
        self._bounds = np.asarray(self.bounds, np.float64)
        if not (self.slice_growth >= 1.0 and self.min_gap >= 1):
            raise InvalidArgument("las", f"need slice_growth >= 1 and min_gap >= 1; got {self.slice_growth}, "
                                  f"{self.min_gap}")  # fmt: skip

    def observe(self, state: PassState) -> None:
        """Credit every running job with its GPU-seconds since the last pass."""
        now = state.now
        last = now if self.last is None or now < self.last else self.last
        columns, stints, changed = self.columns, state.book.stints, state.delta.changed
        for i in changed:
            stint = stints.get(i)
            if stint is not None and stint.running is not None:
                columns.run(stint.job, stint.running)
            else:
                columns.halt(i)
        if now > last:  # (an attempt seen before was first seen by ``last``: credited the whole span)
            columns.credit(now - last, state.delta.started)
        gone = [i for i, job in changed.items() if job is None]
        columns.release(gone)
        for i in gone:
            self.stops.pop(i, None)
        self.last = now
        if self.work is not None:
            self.left = self._left(state, self.work, gone)

    @property
    def service(self) -> dict[str, float]:
        """Job id -> GPU-seconds attained (the ids credited at least once)."""
        return self.columns.service()

    @service.setter
    def service(self, gpu_s: Mapping[str, float]) -> None:
        self.columns.load(gpu_s)

    @staticmethod
    def _left(state: PassState, work: RemainingWork, gone: list[str]) -> Mapping[str, float]:
        """Confident GPU-seconds left of the tracked jobs, worked out per id when asked."""
        work.drop(gone)
        if not work.tracks:
            return {}
        snapshot = state.snapshot
        left = LeftOnAsk(work, snapshot)
        if work.due:
            work.refit(snapshot.by_id())
        return left

    def restore(self, service: Mapping[str, float], now: float) -> None:
        """Start from a ledger rebuilt from the store: GPU-seconds per job up to ``now``."""
        self.columns = Columns()
        self.service = {k: v for k, v in service.items() if v > 0}
        self.last = now

    def level(self, job_id: str) -> int:
        """The level of the job's attained service, or of its confident remaining work if lower."""
        las = bisect.bisect_right(self.bounds, self._served(job_id))
        left = self.left.get(job_id)
        return las if left is None else min(las, bisect.bisect_right(self.bounds, left))

    def levels_of(self, ids: Sequence[str]) -> NDArray[np.int64]:
        """:meth:`level` of each id, in bulk (no estimate: ``left`` is inf, the top level)."""
        las = self._las_levels(ids)
        if self.left:
            las = np.minimum(las, np.searchsorted(self._bounds, self.left_of(ids), side="right"))
        return las.astype(np.int64)

    def left_of(self, ids: Sequence[str]) -> NDArray[np.float64]:
        """Confident GPU-seconds left per id (inf: no confident estimate), the order within a level."""
        return np.fromiter(map(self.left.get, ids, repeat(math.inf)), np.float64, len(ids))

    def preempts(self, snapshot: ClusterSnapshot, actions: list[Action], now: float) -> list[Preempt]:
        """Make room for the waiting jobs, lowest class (priority, level) first: on the node where
        that takes the fewest, stop running jobs of a higher class past their minimum slice, most
        attained first, and keep the freed GPUs for that job."""
        pending = snapshot.pending()
        if not pending:  # (half the simulator's rounds: a completion, nothing waits)
            return []
        stoppable = self._stoppable(now)
        if not stoppable.any():
            return []
        # (the usual pass: no waiting job outranks a victim, known before sorting either list)
        top = self._top(stoppable)
        if (-max(map(_PRIORITY, pending)), self.min_gap - 1) >= top:
            return []
        waits = {a.job_id for a in actions if isinstance(a, Wait)}
        waiting = [j for j in pending if j.id in waits]
        if not waiting or min(map(self._bar, waiting)) >= top:
            return []
        victims = self.columns.jobs(stoppable)
        waiting.sort(key=lambda j: (self._class(j), j.submitted_at, j.id))
        victims.sort(key=lambda j: (self._class(j), self._served(j.id), j.id), reverse=True)
        held = {uuid: {j.id for j in on} for uuid, on in residents(snapshot.jobs).items()}  # (one walk)
        rooms = [_Node(n, held) for n in snapshot.nodes if n.state is NodeState.READY]
        out: list[Preempt] = []
        for job in waiting:
            top = self._bar(job)
            best: tuple[int, _Node, list[Job]] | None = None
            for room in rooms:
                here = [v for v in victims if room.runs(v) and self._class(v) > top]
                chosen = room.free_for(job.spec.gpus, here)
                if chosen is not None and (best is None or len(chosen) < best[0]):
                    best = (len(chosen), room, chosen)
            if best is not None:
                best[1].take(job.spec.gpus, best[2])
                why = f"job {job.id} has attained less service (level {self.level(job.id)})"
                out += [Preempt(v.id, why) for v in best[2]]
                for v in best[2]:
                    self.stops[v.id] = self.stops.get(v.id, 0) + 1
                victims = [v for v in victims if v not in best[2]]
        return out

    def _stoppable(self, now: float) -> NDArray[np.bool_]:
        """Per slot of the ledger's columns: a running job past its minimum slice."""
        if self.slice_growth == 1.0 or not self.stops:
            return self.columns.stoppable(now, self.min_slice_s)
        slices = np.full(len(self.columns.views), self.min_slice_s)
        for job_id, s in self.columns.slots.items():
            if job_id in self.stops:
                slices[s] = self._slice(job_id)
        return self.columns.stoppable(now, slices)

    def _top(self, stoppable: NDArray[np.bool_]) -> tuple[int, int]:
        """The highest class (:meth:`_class`) of the jobs ``stoppable`` marks (one at least): an
        estimate only lowers a level, so LAS levels are read from the top until none can beat it."""
        cols = self.columns
        high, slots, levels = cols.tops(stoppable, self._bounds)
        if not self.left:
            return (high, int(levels[0]))
        best, bounds = -1, self.bounds
        for k in range(len(slots)):  # (read one by one: the loop usually ends at the first or second)
            level = int(levels[k])
            if level <= best:
                break
            estimate = self._estimate(cols.view(int(slots[k])))
            best = max(best, level if estimate is None else min(level, bisect.bisect_right(bounds, estimate)))
        return (high, best)

    def _served(self, job_id: str) -> float:
        s = self.columns.slots.get(job_id)
        return 0.0 if s is None else float(self.columns.served[s])

    def _las_levels(self, ids: Sequence[str]) -> NDArray[np.intp]:
        """The LAS level of each id (attained service alone)."""
        return np.searchsorted(self._bounds, self.columns.served_of(ids), side="right")

    def _estimate(self, job: Job) -> float | None:
        """``self.left.get(job.id)`` for a job at hand (not looked up by its id again)."""
        left = self.left
        return left.of(job) if isinstance(left, LeftOnAsk) else left.get(job.id)

    def _class(self, job: Job) -> tuple[int, int]:
        return (-job.spec.priority, self.level(job.id))

    def _bar(self, job: Job) -> tuple[int, int]:
        """The class a victim must be above to be stopped for ``job`` (``min_gap`` levels up)."""
        return (-job.spec.priority, self.level(job.id) + self.min_gap - 1)

    def _slice(self, job_id: str) -> float:
        """The minimum run of the job's current attempt (longer for a job stopped before)."""
        return self.min_slice_s * self.slice_growth ** self.stops.get(job_id, 0)


class LeftOnAsk(Mapping[str, float]):
    """``{id: work.gpu_s_left(job)}`` over a snapshot's tracked jobs, computed per id when asked."""

    def __init__(self, work: RemainingWork, snapshot: ClusterSnapshot) -> None:
        self.work, self.snapshot = work, snapshot

    def __getitem__(self, job_id: str) -> float:
        left = self.get(job_id)
        if left is None:
            raise KeyError(job_id)
        return left

    def get(self, job_id: str, default: float | None = None) -> float | None:  # type: ignore[override]
        job = self.snapshot.by_id().get(job_id) if job_id in self.work.tracks else None
        left = None if job is None else self.work.gpu_s_left(job)
        return default if left is None else left

    def of(self, job: Job) -> float | None:
        """:meth:`get` of a job of the snapshot at hand."""
        return self.work.gpu_s_left(job) if job.id in self.work.tracks else None

    def __iter__(self) -> Iterator[str]:
        return (i for i in self.snapshot.by_id() if i in self.work.tracks and self.get(i) is not None)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __bool__(self) -> bool:  # (cheap: an id without a track has no estimate)
        return bool(self.work.tracks)


class _Node:
    """One node's GPUs during :meth:`Attained.preempts`: who holds each, which are kept."""

    def __init__(self, node: Node, held: Mapping[str, set[str]]) -> None:
        self.name = node.name
        self.healthy = {g.uuid for g in node.gpus if g.healthy}
        self.uuids = {g.uuid for g in node.gpus}
        self.holders = {uuid: set(held[uuid]) for uuid in self.uuids if uuid in held}
        self.kept: set[str] = set()  # freed (or free) GPUs promised to an earlier waiting job

    def runs(self, job: Job) -> bool:
        """Whether ``job`` runs on this node alone (a gang over nodes is never a victim)."""
        return all(uuid in self.uuids for uuid in job.gpus)

    def _free(self, gone: set[str]) -> set[str]:
        return {u for u in self.healthy - self.kept if self.holders.get(u, set()) <= gone}

    def free_for(self, need: int, victims: list[Job]) -> list[Job] | None:
        """The fewest of ``victims`` (in order) whose stopping frees ``need`` GPUs, or None."""
        chosen: list[Job] = []
        gone: set[str] = set()
        for job in victims:
            if len(self._free(gone)) >= need:
                break
            chosen.append(job)
            gone.add(job.id)
        return chosen if len(self._free(gone)) >= need else None

    def take(self, need: int, victims: list[Job]) -> None:
        gone = {v.id for v in victims}
        self.kept |= set(sorted(self._free(gone))[:need])
        for v in victims:
            for uuid in v.gpus:
                self.holders.get(uuid, set()).discard(v.id)
