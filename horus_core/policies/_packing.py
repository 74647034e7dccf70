"""Shared by the packing policies: run the kernel on a queue and turn the result into actions."""

from __future__ import annotations

from collections.abc import Sequence

from horus_core.interference import InterferenceModel
from horus_core.model import Action, Assign, ClusterSnapshot, Job, Wait
from horus_core.packing import PackParams, PairFilter, build_problem, codes, place
from horus_core.policies.reasons import WaitFacts, wait_reason


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
    """An Assign for every job of ``queue`` the kernel places, a Wait with a reason for the rest."""
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
        actions.append(Wait(job.id, wait_reason(facts, params, refuse_text)))
        if facts.code != codes.R_LOOKAHEAD:
            blocked += 1
    return actions


def util_order(jobs: Sequence[Job], model: InterferenceModel) -> list[Job]:
    """Horus's queue order: higher priority, then lowest predicted utilisation, then arrival."""
    return sorted(
        jobs, key=lambda j: (-j.spec.priority, model.profile(j.spec).util_avg, j.submitted_at, j.id)
    )
