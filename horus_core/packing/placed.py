"""Each active job's slot and kernel GPU indices, kept across passes by job identity.

An active job's GPUs only change with a new attempt, which is a new (frozen) :class:`Job`
object, so a pass encodes only the jobs it has not seen (on the same layout). Each job is one
record of int64s, ``[slot, n, gpu_1 .. gpu_n]`` (-1: a GPU the layout does not have), kept as
bytes so a pass joins them into one array without a Python step per GPU. The memo holds every
job object it remembers, so no ``id()`` in it belongs to a newer object; it starts over when it
holds mostly jobs that have gone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from horus_core.model import Job
from horus_core.packing.cluster import ClusterLayout

if TYPE_CHECKING:
    from horus_core.packing.jobs import Live

I64 = NDArray[np.int64]


class PlacedGpus:
    def __init__(self) -> None:
        self._layout: ClusterLayout | None = None
        self._memo: dict[int, bytes] = {}
        self._held: list[Job] = []  # every job in the memo (so its id stays its own)

    def records(self, layout: ClusterLayout, live: Live) -> I64:
        """The active jobs' records, in ``live.active`` order, as one flat array."""
        ids, active = live.a_ids, live.active
        if layout is not self._layout or len(self._held) > 2 * len(active) + 256:
            self._layout, self._memo, self._held = layout, {}, []  # start over: layout changed, or stale
        memo = self._memo
        per = list(map(memo.get, ids))
        if None in per:
            self._encode(per, layout.index, live)
        out: I64 = np.frombuffer(b"".join(per), np.int64)  # type: ignore[arg-type]
        return out

    def _encode(self, per: list[bytes | None], index: dict[str, int], live: Live) -> None:
        """Fill in the records of the jobs not in the memo, all in one array, and remember them."""
        miss = [i for i, r in enumerate(per) if r is None]
        flat: list[int] = []
        bounds = [0]
        for i in miss:
            gpus = live.active[i].gpus
            flat += [live.a_slots[i], len(gpus), *[index.get(u, -1) for u in gpus]]
            bounds.append(8 * len(flat))
        buf = np.array(flat, np.int64).tobytes()
        for i, lo, hi in zip(miss, bounds[:-1], bounds[1:], strict=True):
            per[i] = self._memo[live.a_ids[i]] = buf[lo:hi]
            self._held.append(live.active[i])
