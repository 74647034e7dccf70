"""``horus+``: Horus with multiple queues and credits.

Pending jobs are grouped into 3-5 queues by k-means over standardised (GPUs, util avg, util peak,
memory) of the distinct job shapes, weighted by their counts. A queue's credit is the median time
its jobs have waited times its length; queues are served highest credit first, each in ``horus``
order (with its preemption, and :data:`SLICE_GROWTH` hysteresis), packed with the ``horus`` rule.
Long-waiting groups (e.g. big gangs) thus rise to the front instead of starving.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from horus_core.packing.cluster import ClusterLayout
from horus_core.packing.jobs import Live
from horus_core.policies.attained import Attained
from horus_core.policies.horus import MIN_GAIN, MIN_SPEED, params
from horus_core.policies.kmeans import choose_k
from horus_core.policies.order import las_positions
from horus_core.policies.pack import PackingPolicy
from horus_core.policies.packing_config import Ix, Order, Packing
from horus_core.policies.reasons import interference_text

# Hysteresis against thrashing: a job stopped k times for a waiting one runs 6 min x 1.5^k before
# it may be stopped again (docs/history.md, evaluation notes §11).
SLICE_GROWTH = 1.5


def by_credit(seed: int = 0) -> Order:
    """The k-means queues, highest credit first, each least attained service first."""

    def order(policy: PackingPolicy, live: Live, layout: ClusterLayout, now: float) -> Ix:
        if policy.las is None:
            raise ValueError(f"{policy.name}: the credit queues need las=True")
        return positions(policy.las, live, now, seed)

    return order


def positions(las: Attained, live: Live, now: float, seed: int = 0) -> Ix:
    """The k-means queues, highest credit first, each in LAS order, as positions into ``live.pending``."""
    prof = live.profiles
    code, gpus = live.p_code, live.p_gpus
    pair = code.astype(np.int64) * (1 << 32) + (gpus.astype(np.int64) + (1 << 31))
    uniq, first, inverse = np.unique(pair, return_index=True, return_inverse=True)
    shapes: dict[tuple[float, float, float, float], int] = {}
    pair_shape = np.empty(len(uniq), np.intp)
    for i in np.argsort(first, kind="stable").tolist():
        c, g = int(uniq[i]) >> 32, (int(uniq[i]) & 0xFFFFFFFF) - (1 << 31)
        key = (float(g), float(prof.util[c]), float(prof.peak[c]), float(prof.mem[c]))
        pair_shape[i] = shapes.setdefault(key, len(shapes))
    shape_of = pair_shape[inverse.reshape(-1)]
    points = np.array(list(shapes), dtype=np.float64)
    weights = np.bincount(shape_of, minlength=len(shapes)).astype(np.float64)
    spread = points.std(axis=0)
    scaled = (points - points.mean(axis=0)) / np.where(spread > 0, spread, 1.0)
    group = choose_k(scaled, weights, seed=seed)[shape_of]
    labels, at = np.unique(group, return_index=True)
    sub = live.p_sub
    members = [np.flatnonzero(group == labels[i]) for i in np.argsort(at, kind="stable").tolist()]
    members.sort(key=lambda m: (-_credit(sub[m], now), sub[m].min()))
    levels = las.levels_of(live.p_ids)
    left = las.left_of(live.p_ids) if las.work is not None else None
    return np.concatenate([las_positions(live, levels, m, left) for m in members])


def _credit(submitted: NDArray[np.float64], now: float) -> float:
    """A queue's credit: median pending time (from submission times) x queue length."""
    waited = now - submitted
    data = np.sort(np.where(waited > 0.0, waited, 0.0)).tolist()
    n = len(data)
    mid = data[n // 2] if n % 2 == 1 else (data[n // 2 - 1] + data[n // 2]) / 2
    return float(mid * n)


HORUS_PLUS = Packing(
    "horus+", params(), interference_text(MIN_SPEED, MIN_GAIN), by_credit(), las=True,
    slice_growth=SLICE_GROWTH, hears=True, hetero=True,
)  # fmt: skip
