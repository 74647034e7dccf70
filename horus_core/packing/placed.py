"""Each active job's kernel GPU indices, kept across passes by ``(job id, version)`` (the job's
table slot standing for its id).

A pass encodes only the jobs whose version it has not seen on the same layout. Each job's GPUs
(-1: not in the layout) lie in one pool array at ``start[slot]`` for ``length[slot]``, with their
version; a record encoded again is appended, and a full pool is compacted to the pass's active
jobs. A new layout starts over; a view of the pass reads through :meth:`Records.seen_by`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain

import numpy as np
from numpy.typing import NDArray

from horus_core.model import Job
from horus_core.packing.cluster import ClusterLayout

I32 = NDArray[np.int32]
I64 = NDArray[np.int64]
Ix = NDArray[np.intp]
_NONE = np.iinfo(np.int64).min  # "no record" for a slot: a value no job version takes
_FIRST = 1024  # pool entries at the start
_ONE_BY_ONE = 8  # records encoded one by one up to this many in a pass (else in bulk)


@dataclass(frozen=True, eq=False)
class Records:
    """Per table slot: where its job's GPUs start in ``pool`` and how many there are (valid for
    the slots the pass asked about, until the next pass)."""

    start: I64
    length: I32
    pool: I64
    used: int  # pool entries in use

    def of(self, slot: int) -> list[int]:
        lo = int(self.start[slot])
        out: list[int] = self.pool[lo : lo + int(self.length[slot])].tolist()
        return out

    def seen_by(self, layout: ClusterLayout, placed: Sequence[tuple[int, list[int]]]) -> Records:
        """The records on ``layout`` (a mask of theirs: each GPU at its index there, -1 where
        hidden), with the GPUs of jobs placed in the pass (slot, their indices on ``layout``)."""
        if layout.to_view is None and not placed:
            return self
        pool = self.pool[: self.used]
        if layout.to_view is not None:
            pool = np.where(pool >= 0, layout.to_view[np.maximum(pool, 0)], -1)
        if not placed:
            return Records(self.start, self.length, pool, len(pool))
        size = max(len(self.start), 1 + max(slot for slot, _ in placed))
        start, length = np.zeros(size, np.int64), np.zeros(size, np.int32)
        start[: len(self.start)], length[: len(self.length)] = self.start, self.length
        extra: list[int] = []
        for slot, gpus in placed:
            start[slot], length[slot] = len(pool) + len(extra), len(gpus)
            extra += gpus
        pool = np.concatenate([pool, np.array(extra, np.int64)])
        return Records(start, length, pool, len(pool))


class PlacedGpus:
    def __init__(self) -> None:
        self._layout: ClusterLayout | None = None
        self._start_over()

    def _start_over(self) -> None:
        self._version: I64 = np.full(0, _NONE, np.int64)  # per table slot: the version its record is of
        self._start: I64 = np.zeros(0, np.int64)
        self._length: I32 = np.zeros(0, np.int32)
        self._pool: I64 = np.empty(_FIRST, np.int64)
        self._used = 0  # pool entries taken (live records and spans left unused)

    def records(self, layout: ClusterLayout, active: Sequence[Job], at: Ix, version: I64) -> Records:
        """The records of the active jobs (``at``: each one's table slot, which stands for its
        id while the table keeps it; ``version``: each one's version, as the caller read them)."""
        if layout is not self._layout:
            self._layout = layout
            self._start_over()
        try:
            seen = self._version[at]
        except IndexError:  # a slot beyond the columns: grow them
            self._grow(int(at.max()) + 1)
            seen = self._version[at]
        miss = (seen != version).nonzero()[0]
        if len(miss):
            self._encode(miss.tolist(), at, version, layout.index, active)
        return Records(self._start, self._length, self._pool, self._used)

    def _grow(self, size: int) -> None:
        size = max(size, 2 * len(self._version))
        old = len(self._version)
        self._version = np.concatenate([self._version, np.full(size - old, _NONE, np.int64)])
        self._start = np.concatenate([self._start, np.zeros(size - old, np.int64)])
        self._length = np.concatenate([self._length, np.zeros(size - old, np.int32)])

    def _encode(
        self, miss: list[int], at: Ix, version: I64, index: dict[str, int], active: Sequence[Job]
    ) -> None:
        """Encode the records of the jobs at ``miss`` (positions in ``active``) at the pool's
        end, and remember them by slot at their version (a few one by one, many in bulk)."""
        spans = [[index.get(u, -1) for u in active[i].gpus] for i in miss]
        need = sum(map(len, spans))
        if self._used + need > len(self._pool):
            self._compact(at, need)
        pos, pool = self._used, self._pool
        if len(miss) <= _ONE_BY_ONE:  # (a simulator round's one or two: ~4 % of its decide)
            start, length, seen = self._start, self._length, self._version
            for i, span in zip(miss, spans, strict=True):
                s, n = at[i], len(span)
                pool[pos : pos + n] = span
                start[s], length[s], seen[s] = pos, n, version[i]
                pos += n
        else:
            slots, lengths = at[miss], np.fromiter(map(len, spans), np.int64, len(spans))
            pool[pos : pos + need] = np.fromiter(chain.from_iterable(spans), np.int64, need)
            self._start[slots] = pos + np.cumsum(lengths) - lengths
            self._length[slots] = lengths
            self._version[slots] = version[miss]
            pos += need
        self._used = pos

    def _compact(self, at: Ix, need: int) -> None:
        """Keep the records of the slots ``at`` (the pass's active jobs) alone, in a pool with
        room for ``need`` more and as many again; the other slots' records are dropped."""
        keep = np.zeros(len(self._version), np.bool_)
        keep[at] = True
        kept = np.flatnonzero(keep & (self._version != _NONE))
        spans = [
            self._pool[s : s + n]
            for s, n in zip(self._start[kept].tolist(), self._length[kept].tolist(), strict=True)
        ]
        live = sum(map(len, spans))
        pool = np.empty(max(_FIRST, 2 * (live + need)), np.int64)
        pool[:live] = np.concatenate(spans) if spans else pool[:0]
        lengths = self._length[kept]
        self._start[kept] = np.cumsum(lengths, dtype=np.int64) - lengths
        self._version[~keep] = _NONE
        self._pool, self._used = pool, live
