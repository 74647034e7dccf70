"""Gangs spread over nodes, for the packing policies: placed apart from the sharing kernel.

A *wide* job is one larger than every READY node, or whose shape asks for several nodes
(:func:`horus_core.policies.spread.spans`). Wide jobs never share a GPU: in arrival order
(priority, then submission) each takes GPUs no job uses, chosen by the spread module (one rack,
fewest nodes), or waits with a reason. The sharing kernel then packs the other jobs on a snapshot
where the GPUs of wide jobs (running ones and those just placed) are hidden (marked unhealthy),
so it never puts a job next to a gang that crosses nodes, where one slow GPU would slow them all.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from horus_core.model import Action, Assign, ClusterSnapshot, Gpu, Job, JobState, Node, Wait
from horus_core.packing.cluster import ClusterLayout
from horus_core.packing.jobs import Live
from horus_core.policies import spread
from horus_core.policies.base import arrival_order, busy_gpu_uuids


def has_wide(live: Live, layout: ClusterLayout) -> bool:
    """Whether any live job (pending or active) is wide: the cheap test run every pass."""
    table, largest = live.table, layout.largest_node
    if largest == 0:
        return False  # no ready GPU: every job waits with the kernel's reason
    p, a = live.p_slot, live.a_slot
    return bool(
        (table.gpus[p] > largest).any()
        or table.shaped[p].any()
        or (table.gpus[a] > largest).any()
        or table.shaped[a].any()
    )


def split(snapshot: ClusterSnapshot) -> tuple[list[Action], ClusterSnapshot]:
    """:func:`place_wide` where the snapshot has a wide job, else no actions and the snapshot
    itself (for the policies that do not keep a :class:`Live` table)."""
    largest = spread.largest_node(snapshot)
    if not any(_wide(j, largest) for j in snapshot.jobs):
        return [], snapshot
    return place_wide(snapshot, largest)


def place_wide(
    snapshot: ClusterSnapshot, largest: int, waits: dict[str, Wait] | None = None
) -> tuple[list[Action], ClusterSnapshot]:
    """The wide jobs' actions, and the snapshot the kernel should pack the rest on. ``waits``:
    last pass's Waits of wide jobs, reused while the reason is the same (replaced in place)."""
    old = dict(waits or {})
    if waits is not None:
        waits.clear()
    wide = [j for j in snapshot.jobs if _wide(j, largest)]
    pending = arrival_order([j for j in wide if j.state is JobState.PENDING])
    free = {n.name: n for n in spread.free_nodes(snapshot, busy_gpu_uuids(snapshot.jobs))}
    actions: list[Action] = []
    hidden = {u for j in wide if j.state.active for u in j.gpus}
    for job in pending:
        plan = spread.place(spread.shape_of(job.spec, largest), list(free.values()))
        if isinstance(plan, str):
            w = old.get(job.id)
            w = w if w is not None and w.reason == plan else Wait(job.id, plan)
            if waits is not None:
                waits[job.id] = w
            actions.append(w)
            continue
        for name, uuids in plan.parts:
            node = free[name]
            free[name] = dataclasses.replace(node, free=node.free[len(uuids) :])
        hidden.update(plan.gpus)
        actions.append(Assign(job.id, plan.node, plan.gpus))
    gone = {j.id for j in pending}
    rest = tuple(j for j in snapshot.jobs if j.id not in gone)
    return actions, ClusterSnapshot(_hide(snapshot.nodes, hidden), rest)


def _wide(job: Job, largest: int) -> bool:
    return spread.spec_spans(job.spec, largest)


def _hide(nodes: Sequence[Node], hidden: set[str]) -> tuple[Node, ...]:
    if not hidden:
        return tuple(nodes)
    return tuple(
        dataclasses.replace(n, gpus=tuple(_off(g) if g.uuid in hidden else g for g in n.gpus))
        if any(g.uuid in hidden for g in n.gpus)
        else n
        for n in nodes
    )


def _off(gpu: Gpu) -> Gpu:
    return dataclasses.replace(gpu, healthy=False)
