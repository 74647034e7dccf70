"""Gangs spread over nodes, for the packing policies: placed apart from the sharing kernel.

A *wide* job is larger than every READY node or shaped over several
(:func:`horus_core.policies.spread.spec_spans`). Wide jobs never share a GPU: in arrival order
each takes GPUs no job uses (:mod:`.spread`) or waits; the kernel then packs the other jobs with
the wide jobs' GPUs hidden (one slow GPU would slow a whole gang across nodes).
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from itertools import compress

from horus_core.model import Action, Assign, ClusterSnapshot, Job, JobState
from horus_core.packing.cluster import ClusterLayout
from horus_core.policies import spread
from horus_core.policies.base import arrival_order, busy_gpu_uuids, hide_gpus

_ID = operator.attrgetter("id")


def split(snapshot: ClusterSnapshot) -> tuple[list[Action], ClusterSnapshot]:
    """:func:`place_wide` where the snapshot has a wide job, else no actions and the snapshot
    itself (for the policies that do not keep a :class:`Live` table)."""
    largest = spread.largest_node(snapshot)
    wide = [j for j in snapshot.jobs if spread.spec_spans(j.spec, largest)]
    if not wide:
        return [], snapshot
    pending = [j for j in wide if j.state is JobState.PENDING]
    busy = busy_gpu_uuids(snapshot.jobs)
    actions, hidden = place_wide(snapshot, largest, pending, [j for j in wide if j.state.active], busy.keys())
    gone = {j.id for j in pending}
    rest = tuple(compress(snapshot.jobs, map(operator.not_, map(gone.__contains__, map(_ID, snapshot.jobs)))))
    return actions, ClusterSnapshot(hide_gpus(snapshot.nodes, hidden), rest)


def free_on(layout: ClusterLayout, racks: Mapping[str, str], busy: AbstractSet[str]) -> list[spread.FreeNode]:
    """:func:`spread.free_nodes` read from a layout (its ready GPUs, in index order per node):
    each node's GPUs not in ``busy``, its rack and the type of its first GPU."""
    uuids, start, kinds = layout.gpu_uuids, layout.node_start.tolist(), layout.types
    out = []
    for n, name in enumerate(layout.node_names):
        lo, hi = start[n], start[n + 1]
        free = tuple(u for u in uuids[lo:hi] if u not in busy)
        out.append(spread.FreeNode(name, free, racks[name], kinds[lo] if hi > lo else ""))
    return out


def place_wide(
    snapshot: ClusterSnapshot,
    largest: int,
    pending: Sequence[Job],
    active: Sequence[Job],
    busy: AbstractSet[str],
    free: list[spread.FreeNode] | None = None,
) -> tuple[list[Action], set[str]]:
    """The wide pending jobs' actions, and the GPUs of wide jobs to hide from the kernel
    (``busy``: the GPUs any active job holds; ``free``: per node, if the caller has them)."""
    pool = spread.Pool(spread.free_nodes(snapshot, busy) if free is None else free)
    actions: list[Action] = []
    hidden = {u for j in active for u in j.gpus}
    total = sum(len(n.gpus) for n in snapshot.nodes)
    for job in arrival_order(pending):
        plan = pool.place(spread.shape_of(job.spec, largest))
        if isinstance(plan, str):
            actions.append(spread.wait_for(job, plan, total))
            continue
        pool.take(plan)
        hidden.update(plan.gpus)
        actions.append(Assign(job.id, plan.node, plan.gpus))
    return actions, hidden
