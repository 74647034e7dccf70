"""The hints of unknown job types, handed to the model in the one order a packing pass defines.

``model.profile(spec)`` remembers an unknown job type's hints, the last call winning; a pass calls
it for the active jobs (snapshot order), then the queue, only when some hints differ from the
model's: the order of the oracle (``horus_core/testing/plain_packer.py``).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from horus_core.interference import InterferenceModel
from horus_core.model import Job
from horus_core.packing.cluster import ClusterLayout
from horus_core.packing.jobs import Live

Ix = NDArray[np.intp]


def register_hints(live: Live, layout: ClusterLayout, queue: Ix, model: InterferenceModel) -> None:
    """Hand the model the hints of the pass's jobs (``queue``: positions into ``live.pending``,
    in the order to serve them) and reload ``live.profiles`` if that changed one."""
    table = live.table
    if not table.hinted():
        return
    q_slot = live.p_slot[queue]
    if not table.hints_conflict(np.concatenate([live.a_slot, q_slot]), model):
        return
    version = model.version
    for job in _in_order(live, layout, queue):
        model.profile(job.spec)
    if model.version != version:
        live.profiles = table.profiles(model)


def _in_order(live: Live, layout: ClusterLayout, queue: Ix) -> list[Job]:
    """The hinted jobs: active ones holding a GPU of the layout, then the queue."""
    table, index = live.table, layout.index
    a_hint = table.hint[live.a_slot].tolist()
    active = [
        j for j, h in zip(live.active, a_hint, strict=True) if h >= 0 and any(u in index for u in j.gpus)
    ]
    q_hint = table.hint[live.p_slot[queue]].tolist()
    return active + [live.pending[p] for p, h in zip(queue.tolist(), q_hint, strict=True) if h >= 0]
