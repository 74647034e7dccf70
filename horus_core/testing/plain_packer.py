"""The plain packing path, one job at a time: the test oracle the policies' one path is held to.

:class:`PlainPacker` is a :class:`~horus_core.policies.packer.Packer` that places each
pass's queue with :func:`pack_actions` (:func:`~horus_core.testing.plain_problem.build_problem`, the
kernel, a Wait reason per job) instead of the cached, vectorised arrays. Tests and benches put
it on a policy (``policy.packer = PlainPacker()``) and compare; no production module imports
it (an import contract in pyproject.toml keeps product code off ``horus_core.testing``).
"""

from __future__ import annotations

from collections.abc import Sequence

from horus_core.interference import InterferenceModel
from horus_core.model import Action, Assign, ClusterSnapshot, Job, Wait
from horus_core.packing import PackParams, PairFilter, codes, place
from horus_core.packing.cluster import ClusterLayout
from horus_core.packing.jobs import Live
from horus_core.policies.packer import Ask, Packer
from horus_core.policies.reasons import WaitFacts, wait_code, wait_reason
from horus_core.policies.views import View
from horus_core.testing.plain_problem import build_problem


class PlainPacker(Packer):
    def _place(self, view: View, live: Live, layout: ClusterLayout, ask: Ask) -> list[Action]:
        queue = [live.pending[i] for i in ask.order(live, layout).tolist()]
        snapshot = ClusterSnapshot(view.nodes, tuple(view.snapshot.jobs))
        return pack_actions(snapshot, queue, ask.model, ask.params, ask.refused,
                            split_by_gpus=ask.split_by_gpus, pair_filter=ask.pair_filter)  # fmt: skip


def pack_actions(
    snapshot: ClusterSnapshot,
    queue: Sequence[Job],
    model: InterferenceModel,
    params: PackParams,
    refuse_text: str,
    *,
    split_by_gpus: bool = False,
    pair_filter: PairFilter | None = None,
) -> list[Action]:
    """The plain path: an Assign for every job of ``queue`` the kernel places, a Wait with a
    reason for the rest."""
    if not queue:
        return []
    problem, layout = build_problem(
        snapshot, queue, model, split_by_gpus=split_by_gpus, pair_filter=pair_filter
    )
    placement = place(problem, params)
    actions: list[Action] = []
    blocked = 0
    for j, job in enumerate(queue):
        node = int(placement.node[j])
        if node >= 0:
            uuids = tuple(layout.gpu_uuids[d] for d in placement.gpus_of(j))
            speed = float(placement.speed[j])
            actions.append(Assign(job.id, layout.node_names[node], uuids, predicted_slowdown=speed))
            continue
        facts = WaitFacts(
            gpus=int(problem.job_gpus[j]),
            exclusive=bool(problem.job_excl[j]),
            mem_mib=int(problem.cls_mem[problem.job_cls[j]]),
            code=int(placement.reason[j]),
            detail=int(placement.detail[j]),
            largest_node=layout.largest_node,
            blocked_ahead=blocked,
        )
        actions.append(Wait(job.id, wait_reason(facts, params, refuse_text), wait_code(facts)))
        if facts.code != codes.R_LOOKAHEAD:
            blocked += 1
    return actions
