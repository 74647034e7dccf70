"""``horus+``: Horus with multiple queues and credits.

Pending jobs are grouped into 3-5 queues by k-means over (GPUs, util avg, util peak, memory),
each feature standardised, distinct job shapes weighted by how many jobs share them (so the
clustering costs the same for 10 or 10,000 pending jobs). A queue's credit is the median time
its jobs have waited times its length; queues are served highest credit first, each in Horus
order (least attained service first, or shortest remaining work for a job with a confident
estimate from its progress reports, and preempting for waiting jobs like ``horus``, with
hysteresis: a job's minimum slice grows 1.5x each time it is stopped, because the credit
queues may hand freed GPUs to another job than the one they were freed for, which thrashed:
docs/evaluation.md §11), and packed with the ``horus`` rule (look-ahead 5).
Long-waiting groups of, e.g., big gangs thus rise to the front instead of starving behind a
stream of small jobs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from horus_core.interference import InterferenceModel, default_model
from horus_core.model import Action, ClusterSnapshot
from horus_core.packing import PackParams, codes
from horus_core.packing.jobs import Live
from horus_core.policies._order import las_positions
from horus_core.policies._packing import Ix, Packer
from horus_core.policies.attained import Attained
from horus_core.policies.gputypes import HeteroRule, TypeGate
from horus_core.policies.horus import LOOKAHEAD, MIN_GAIN, MIN_SPEED
from horus_core.policies.kmeans import choose_k
from horus_core.policies.reasons import interference_text
from horus_core.policies.remaining import HearsProgress, RemainingWork

# Hysteresis against thrashing (docs/evaluation.md §11): a job stopped k times for a waiting one
# runs 6 min x 1.5^k before it may be stopped again (8,314 -> 1,199 preemptions on 2869ce_cap).
SLICE_GROWTH = 1.5


@dataclass
class HorusPlusPolicy(HearsProgress):
    model: InterferenceModel
    name: str = "horus+"
    min_speed: float = MIN_SPEED
    min_gain: float = MIN_GAIN
    lookahead: int = LOOKAHEAD
    seed: int = 0
    las: Attained = field(default_factory=lambda: Attained(slice_growth=SLICE_GROWTH, work=RemainingWork()))
    packer: Packer = field(default_factory=Packer, init=False, repr=False, compare=False)
    gate: TypeGate = field(default_factory=TypeGate, repr=False, compare=False)

    def decide(self, snapshot: ClusterSnapshot, now: float) -> list[Action]:
        return self.gate.decide(snapshot, now, self._decide, self.model)

    def _decide(self, snapshot: ClusterSnapshot, now: float) -> list[Action]:
        params = PackParams(
            mode=codes.MODE_HORUS,
            max_per_gpu=3,
            min_speed=self.min_speed,
            min_gain=self.min_gain,
            lookahead=self.lookahead,
        )
        refused = interference_text(self.min_speed, self.min_gain)
        self.las.observe(snapshot, now)
        actions = self.packer.pack(
            snapshot, self.model, params, refused,
            lambda live, _layout: self.positions(live, now),
        )  # fmt: skip
        return [*self.las.preempts(snapshot, actions, now), *actions]

    def positions(self, live: Live, now: float) -> Ix:
        """The k-means queues (one per class of job shapes: GPUs, predicted utilisation and
        memory), highest credit first (median pending time x queue length), each least
        attained service first, flattened, as positions into ``live.pending``."""
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
        group = choose_k(scaled, weights, seed=self.seed)[shape_of]
        labels, at = np.unique(group, return_index=True)
        sub = live.p_sub
        members = [np.flatnonzero(group == labels[i]) for i in np.argsort(at, kind="stable").tolist()]
        members.sort(key=lambda m: (-_credit(sub[m], now), sub[m].min()))
        levels = self.las.levels_of(live.p_ids)
        left = self.las.left_of(live.p_ids) if self.las.work is not None else None
        return np.concatenate([las_positions(live, levels, m, left) for m in members])

    def progress_work(self) -> RemainingWork | None:
        """Progress reports go to the remaining-work estimates (as ``horus``)."""
        return self.las.work


def _credit(submitted: NDArray[np.float64], now: float) -> float:
    """A queue's credit: median pending time (from submission times) x queue length."""
    waited = now - submitted
    data = np.sort(np.where(waited > 0.0, waited, 0.0)).tolist()
    n = len(data)
    mid = data[n // 2] if n % 2 == 1 else (data[n // 2 - 1] + data[n // 2]) / 2
    return float(mid * n)


def make(model: InterferenceModel | None) -> HorusPlusPolicy:
    return HorusPlusPolicy(model or default_model(), gate=TypeGate(HeteroRule()))  # heterogeneity-aware
