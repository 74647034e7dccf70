"""``gandiva``: introspective packing (after Gandiva, OSDI 2018).

Placement is blind to interference (arrival order, an idle GPU while there is one, a second job
per GPU when memory permits). Then every tick a GPU whose jobs' normalised throughputs sum below
1.0 is split by preempting the job that started last, and that pair is never packed again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from horus_core.interference import InterferenceModel, default_model
from horus_core.interference.signature import split_demand
from horus_core.model import Action, ClusterSnapshot, Job, Preempt
from horus_core.packing import PackParams, PairFilter, codes
from horus_core.packing.cluster import gpu_type
from horus_core.policies.base import busy_gpu_uuids
from horus_core.policies.pack import PackingPolicy
from horus_core.policies.packing_config import Packing, by_arrival
from horus_core.policies.views import View

PARAMS = PackParams(mode=codes.MODE_HORUS, max_per_gpu=2)
REFUSED = "every GPU with enough memory runs a job it was split from before (or that it does not fit next to)"

# A gang may hold a reservation (:mod:`.backfill`) once queued this long, not the default 1 h:
# reserving sooner against gandiva's order cost average JCT (docs/history.md, evaluation notes §14).
GANG_WAIT_S = 48 * 3600.0
GANDIVA = Packing("gandiva", PARAMS, REFUSED, by_arrival, hetero=True, gang_wait_s=GANG_WAIT_S)


@dataclass
class GandivaPolicy(PackingPolicy):
    """The packing shell with Gandiva's introspection: split bad pairs, never pack them again."""

    bad_pairs: set[frozenset[str]] = field(default_factory=set)

    @property
    def pair_filter(self) -> PairFilter | None:
        return self.allowed

    def serve(self, view: View) -> list[Action]:
        return [*self.split_bad_pairs(view.snapshot), *super().serve(view)]

    def split_bad_pairs(self, snapshot: ClusterSnapshot) -> list[Preempt]:
        jobs = {j.id: j for j in snapshot.active()}
        types = {g.uuid: gpu_type(g) for n in snapshot.nodes for g in n.gpus}
        out: dict[str, Preempt] = {}
        for uuid, ids in busy_gpu_uuids(jobs.values()).items():
            if len(ids) < 2 or any(i in out for i in ids):
                continue
            sharing = [jobs[i] for i in ids]
            sigs = [self.model.signature(j.spec) for j in sharing]
            speeds = self.model.co_speeds(sigs, types.get(uuid, "v100"))
            if sum(speeds) >= 1.0:
                continue
            self.bad_pairs.update(frozenset((a, b)) for a in sigs for b in sigs)
            last = max(sharing, key=_started)
            out[last.id] = Preempt(
                last.id, f"split from its co-runners: their normalised speeds sum to {sum(speeds):.2f} < 1.0"
            )
        return list(out.values())

    def allowed(self, speed: NDArray[np.float64], classes: Sequence[tuple[str, int]]) -> NDArray[np.bool_]:
        ok = np.ones(speed.shape, np.bool_)
        rows: dict[str, list[int]] = {}
        for i, (key, _) in enumerate(classes):
            rows.setdefault(split_demand(key)[0], []).append(i)  # (a class may carry a memory cap)
        for pair in self.bad_pairs:
            a, b = min(pair), max(pair)
            for i in rows.get(a, []):
                for k in rows.get(b, []):
                    ok[i, k] = ok[k, i] = False
        return ok


def _started(job: Job) -> tuple[float, str]:
    return (job.started_at if job.started_at is not None else job.updated_at, job.id)


def make(model: InterferenceModel | None) -> GandivaPolicy:
    return GandivaPolicy(model or default_model(), GANDIVA)
