"""Each active job's slot and kernel GPU indices, kept across passes by ``(job id, version)``
(the job's table slot standing for its id).

An active job's GPUs only change with a new attempt, which is a new version of the job, so a
pass encodes only the jobs whose version it has not seen (on the same layout). Each job is one
record of int64s, ``[slot, n, gpu_1 .. gpu_n]`` (-1: a GPU the layout does not have), kept as
bytes so a pass joins them into one array without a Python step per GPU. It starts over when
it holds mostly jobs that have gone.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from horus_core.model import Job
from horus_core.packing.cluster import ClusterLayout

I64 = NDArray[np.int64]
_VERSION = operator.attrgetter("version")
Key = tuple[int, int]  # (table slot, job version)


class PlacedGpus:
    def __init__(self) -> None:
        self._layout: ClusterLayout | None = None
        self._memo: dict[Key, bytes] = {}  # (slot, job version) -> record

    def records(self, layout: ClusterLayout, active: Sequence[Job], slots: Sequence[int]) -> I64:
        """The active jobs' records (``slots``: each one's table slot, which stands for its id
        while the table keeps it), in order, as one array."""
        if layout is not self._layout or len(self._memo) > 2 * len(active) + 256:
            self._layout, self._memo = layout, {}  # start over: layout changed, or stale
        keys = list(zip(slots, map(_VERSION, active), strict=True))
        per = list(map(self._memo.get, keys))
        if None in per:
            self._encode(per, keys, layout.index, active)
        out: I64 = np.frombuffer(b"".join(per), np.int64)  # type: ignore[arg-type]
        return out

    def _encode(
        self, per: list[bytes | None], keys: list[Key], index: dict[str, int], active: Sequence[Job]
    ) -> None:
        """Fill in the records of the jobs not in the memo, all in one array, and remember them."""
        miss = [i for i, r in enumerate(per) if r is None]
        flat: list[int] = []
        bounds = [0]
        for i in miss:
            gpus = active[i].gpus
            flat += [keys[i][0], len(gpus), *[index.get(u, -1) for u in gpus]]
            bounds.append(8 * len(flat))
        buf = np.array(flat, np.int64).tobytes()
        for i, lo, hi in zip(miss, bounds[:-1], bounds[1:], strict=True):
            per[i] = self._memo[keys[i]] = buf[lo:hi]
