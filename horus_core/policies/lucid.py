"""``lucid``: packing by sharing scores (after Lucid, ASPLOS 2023).

A job's sharing score in a pair comes from its predicted speed next to the other job:
below 0.85x scores 2, below 0.95x scores 1, else 0. Two jobs may share a GPU only if their
scores sum to at most 2 (one suffers a lot, or both a little) and they ask for the same number
of GPUs; at most 2 jobs per GPU. Jobs are served shortest estimated work first: total steps /
solo throughput on the cluster's most common GPU type, times GPUs (unknown work goes last,
in arrival order). Placement uses the Horus cost, so a job takes an idle GPU while there is
one and is packed when the cluster is busy.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from horus_core.packing import PackParams, codes
from horus_core.packing.cluster import ClusterLayout
from horus_core.packing.jobs import Live
from horus_core.policies.order import work_positions
from horus_core.policies.pack import PackingPolicy
from horus_core.policies.packing_config import Ix, Packing

PARAMS = PackParams(mode=codes.MODE_HORUS, max_per_gpu=2)
REFUSED = (
    "every GPU with enough memory runs a job it may not share with "
    "(sharing scores sum above 2, or a different GPU count)"
)

# A gang may hold a reservation (:mod:`.backfill`) once queued this long, not the default 1 h:
# reserving sooner against lucid's order cost average JCT (docs/history.md, evaluation notes §14).
GANG_WAIT_S = 96 * 3600.0


def sharing_scores(speed: NDArray[np.float64]) -> NDArray[np.int64]:
    out: NDArray[np.int64] = np.where(speed < 0.85, 2, np.where(speed < 0.95, 1, 0))
    return out


def lucid_filter(speed: NDArray[np.float64], classes: Sequence[tuple[str, int]]) -> NDArray[np.bool_]:
    scores = sharing_scores(speed)
    out: NDArray[np.bool_] = (scores + scores.T) <= 2
    return out


def by_work(policy: PackingPolicy, live: Live, layout: ClusterLayout, now: float) -> Ix:
    """Shortest estimated work x GPUs first (:func:`~.order.work_positions`)."""
    return work_positions(live, layout, policy.model)


LUCID = Packing(
    "lucid", PARAMS, REFUSED, by_work, split_by_gpus=True, pair_filter=lucid_filter, hetero=True,
    gang_wait_s=GANG_WAIT_S,
)  # fmt: skip
