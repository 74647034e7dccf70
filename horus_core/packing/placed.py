"""Each active job's slot and kernel GPU indices, kept across passes by ``(job id, version)``.

An active job's GPUs only change with a new attempt, which is a new version of the job, so a
pass encodes only the jobs whose version it has not seen (on the same layout). Each job is one
record of int64s, ``[slot, n, gpu_1 .. gpu_n]`` (-1: a GPU the layout does not have), kept as
bytes so a pass joins them into one array without a Python step per GPU. It starts over when
it holds mostly jobs that have gone.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from horus_core.model import Job
from horus_core.packing.cluster import ClusterLayout

I64 = NDArray[np.int64]


class PlacedGpus:
    def __init__(self) -> None:
        self._layout: ClusterLayout | None = None
        self._memo: dict[str, tuple[int, bytes]] = {}  # job id -> (version, record)

    def records(self, layout: ClusterLayout, active: Sequence[Job], slots: Sequence[int]) -> I64:
        """The active jobs' records (``slots``: each one's table slot), in order, as one array."""
        if layout is not self._layout or len(self._memo) > 2 * len(active) + 256:
            self._layout, self._memo = layout, {}  # start over: layout changed, or stale
        memo = self._memo
        per: list[bytes | None] = []
        for job in active:
            got = memo.get(job.id)
            per.append(got[1] if got is not None and got[0] == job.version else None)
        if None in per:
            self._encode(per, layout.index, active, slots)
        out: I64 = np.frombuffer(b"".join(per), np.int64)  # type: ignore[arg-type]
        return out

    def _encode(
        self, per: list[bytes | None], index: dict[str, int], active: Sequence[Job], slots: Sequence[int]
    ) -> None:
        """Fill in the records of the jobs not in the memo, all in one array, and remember them."""
        miss = [i for i, r in enumerate(per) if r is None]
        flat: list[int] = []
        bounds = [0]
        for i in miss:
            gpus = active[i].gpus
            flat += [slots[i], len(gpus), *[index.get(u, -1) for u in gpus]]
            bounds.append(8 * len(flat))
        buf = np.array(flat, np.int64).tobytes()
        for i, lo, hi in zip(miss, bounds[:-1], bounds[1:], strict=True):
            job, rec = active[i], buf[lo:hi]
            per[i] = rec
            self._memo[job.id] = (job.version, rec)
