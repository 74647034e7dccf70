"""Each active job's slot and kernel GPU indices, kept across passes by ``(job id, version)``
(the job's table slot standing for its id).

An active job's GPUs only change with a new attempt, which is a new version of the job, so a
pass encodes only the jobs whose version it has not seen (on the same layout). Each job is one
record of int64s, ``[slot, n, gpu_1 .. gpu_n]`` (-1: a GPU the layout does not have), kept as
bytes so a pass joins them into one array without a Python step per GPU. Records are kept per
slot (with the version they are of), so the look-up is one array comparison; they start over
when the layout changes (the job table starts a new one when it reuses slots).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from horus_core.model import Job
from horus_core.packing.cluster import ClusterLayout

I64 = NDArray[np.int64]
Ix = NDArray[np.intp]
# "No record" for a slot: a value no job version takes (stored ones count up from 0, the views a
# pass places count down from -2: horus_core/policies/_placed.py), so none reads a missing record.
_NONE = np.iinfo(np.int64).min


class PlacedGpus:
    def __init__(self) -> None:
        self._layout: ClusterLayout | None = None
        self._version: I64 = np.full(0, _NONE, np.int64)  # per table slot: the version its record is of
        self._record: list[bytes] = []  # per table slot: that record (b"": none)

    def records(self, layout: ClusterLayout, active: Sequence[Job], at: Ix, version: I64) -> I64:
        """The active jobs' records (``at``: each one's table slot, which stands for its id
        while the table keeps it; ``version``: each one's version, as the caller read them), in
        order, as one array."""
        if layout is not self._layout:
            self._layout, self._version, self._record = layout, np.full(0, _NONE, np.int64), []  # start over
        slots: list[int] = at.tolist()
        if len(at) and int(at.max()) >= len(self._record):
            self._grow(int(at.max()) + 1)
        miss = np.flatnonzero(self._version[at] != version)
        if len(miss):
            self._encode(miss.tolist(), slots, version, layout.index, active)
        out: I64 = np.frombuffer(b"".join(map(self._record.__getitem__, slots)), np.int64)
        return out

    def _grow(self, size: int) -> None:
        size = max(size, 2 * len(self._record))
        self._version = np.concatenate([self._version, np.full(size - len(self._version), _NONE, np.int64)])
        self._record += [b""] * (size - len(self._record))

    def _encode(
        self,
        miss: list[int],
        slots: Sequence[int],
        version: I64,
        index: dict[str, int],
        active: Sequence[Job],
    ) -> None:
        """Encode the records of the jobs at ``miss`` (positions in ``active``), all in one
        array, and remember them by slot at their version."""
        flat: list[int] = []
        bounds = [0]
        for i in miss:
            gpus = active[i].gpus
            flat += [slots[i], len(gpus), *[index.get(u, -1) for u in gpus]]
            bounds.append(8 * len(flat))
        buf = np.array(flat, np.int64).tobytes()
        for i, lo, hi in zip(miss, bounds[:-1], bounds[1:], strict=True):
            self._record[slots[i]] = buf[lo:hi]
            self._version[slots[i]] = version[i]
