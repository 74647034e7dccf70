"""``horus+``: Horus with multiple queues and credits.

Pending jobs are grouped into 3-5 queues by k-means over (GPUs, util avg, util peak, memory),
each feature standardised, distinct job shapes weighted by how many jobs share them (so the
clustering costs the same for 10 or 10,000 pending jobs). A queue's credit is the median time
its jobs have waited times its length; queues are served highest credit first, each in Horus
order (lowest predicted utilisation first), and packed with the ``horus`` rule (look-ahead 5).
Long-waiting groups of, e.g., big gangs thus rise to the front instead of starving behind a
stream of small jobs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median

import numpy as np

from horus_core.interference import InterferenceModel, default_model
from horus_core.model import Action, ClusterSnapshot, Job
from horus_core.packing import PackParams, codes
from horus_core.policies._packing import pack_actions, util_order
from horus_core.policies.horus import LOOKAHEAD, MIN_GAIN, MIN_SPEED
from horus_core.policies.kmeans import choose_k
from horus_core.policies.reasons import interference_text


@dataclass
class HorusPlusPolicy:
    model: InterferenceModel
    name: str = "horus+"
    min_speed: float = MIN_SPEED
    min_gain: float = MIN_GAIN
    lookahead: int = LOOKAHEAD
    seed: int = 0

    def decide(self, snapshot: ClusterSnapshot, now: float) -> list[Action]:
        queue = [job for group in self.queues(snapshot.pending(), now) for job in group]
        params = PackParams(
            mode=codes.MODE_HORUS,
            max_per_gpu=3,
            min_speed=self.min_speed,
            min_gain=self.min_gain,
            lookahead=self.lookahead,
        )
        refused = interference_text(self.min_speed, self.min_gain)
        return pack_actions(snapshot, queue, self.model, params, refused)

    def queues(self, pending: Sequence[Job], now: float) -> list[list[Job]]:
        """The k-means queues, highest credit first, each in Horus order."""
        if not pending:
            return []
        shapes: dict[tuple[float, float, float, float], int] = {}
        shape_of = []
        for job in pending:
            p = self.model.profile(job.spec)
            key = (float(job.spec.gpus), p.util_avg, p.util_peak, float(p.mem_mib))
            shape_of.append(shapes.setdefault(key, len(shapes)))
        points = np.array(list(shapes), dtype=np.float64)
        weights = np.bincount(shape_of, minlength=len(shapes)).astype(np.float64)
        spread = points.std(axis=0)
        scaled = (points - points.mean(axis=0)) / np.where(spread > 0, spread, 1.0)
        labels = choose_k(scaled, weights, seed=self.seed)
        groups: dict[int, list[Job]] = {}
        for job, shape in zip(pending, shape_of, strict=True):
            groups.setdefault(int(labels[shape]), []).append(job)
        ordered = sorted(groups.values(), key=lambda g: (-credit(g, now), min(j.submitted_at for j in g)))
        return [util_order(g, self.model) for g in ordered]


def credit(jobs: Sequence[Job], now: float) -> float:
    """Median pending time x queue length."""
    return median(max(0.0, now - j.submitted_at) for j in jobs) * len(jobs)


def make(model: InterferenceModel | None) -> HorusPlusPolicy:
    return HorusPlusPolicy(model or default_model())
