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
from collections.abc import Container, Sequence

import numpy as np

from horus_core.model import Action, Assign, ClusterSnapshot, Job, JobState, Node, Wait
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
    wide = [j for j in snapshot.jobs if spread.spec_spans(j.spec, largest)]
    if not wide:
        return [], snapshot
    pending = [j for j in wide if j.state is JobState.PENDING]
    busy = busy_gpu_uuids(snapshot.jobs)
    return place_wide(snapshot, largest, pending, [j for j in wide if j.state.active], busy)


def wide_of(live: Live, layout: ClusterLayout) -> tuple[list[Job], list[Job]]:
    """The wide pending and active jobs of a pass, from the job table's arrays."""
    table, largest = live.table, layout.largest_node
    p, a = live.p_slot, live.a_slot
    pw = np.flatnonzero((table.gpus[p] > largest) | table.shaped[p]).tolist()
    aw = np.flatnonzero((table.gpus[a] > largest) | table.shaped[a]).tolist() if len(a) else []
    return [live.pending[i] for i in pw], [live.active[i] for i in aw]


def place_wide(
    snapshot: ClusterSnapshot,
    largest: int,
    pending: Sequence[Job],
    active: Sequence[Job],
    busy: Container[str],
    memo: Memo | None = None,
) -> tuple[list[Action], ClusterSnapshot]:
    """The wide pending jobs' actions, and the snapshot the kernel should pack the rest on
    (``busy``: the GPUs any active job holds). ``memo`` keeps, across passes, the Waits of wide
    jobs (reused while the reason is the same) and the nodes with hidden GPUs (the same
    objects while the same GPUs are hidden, so the kernel's layout cache still holds)."""
    memo = memo if memo is not None else Memo()
    pool = spread.Pool(spread.free_nodes(snapshot, busy))
    actions: list[Action] = []
    hidden = {u for j in active for u in j.gpus}
    waits: dict[str, Wait] = {}
    for job in arrival_order(pending):
        plan = pool.place(spread.shape_of(job.spec, largest))
        if isinstance(plan, str):
            w = memo.waits.get(job.id)
            waits[job.id] = w = w if w is not None and w.reason == plan else spread.wait(job, plan, snapshot)
            actions.append(w)
            continue
        pool.take(plan)
        hidden.update(plan.gpus)
        actions.append(Assign(job.id, plan.node, plan.gpus))
    memo.waits = waits
    gone = {j.id for j in pending}
    rest = tuple(j for j in snapshot.jobs if j.id not in gone)
    return actions, ClusterSnapshot(memo.hide(snapshot.nodes, hidden), rest)


class Memo:
    def __init__(self) -> None:
        self.waits: dict[str, Wait] = {}
        self._nodes: dict[str, tuple[Node, frozenset[str], Node]] = {}

    def hide(self, nodes: Sequence[Node], hidden: set[str]) -> tuple[Node, ...]:
        """``nodes`` with the ``hidden`` GPUs marked unhealthy (a node object per node and set)."""
        if not hidden:
            return tuple(nodes)
        out = []
        for n in nodes:
            here = frozenset(g.uuid for g in n.gpus if g.uuid in hidden)
            if not here:
                out.append(n)
                continue
            got = self._nodes.get(n.name)
            if got is None or got[0] is not n or got[1] != here:
                off = tuple(dataclasses.replace(g, healthy=False) if g.uuid in here else g for g in n.gpus)
                got = self._nodes[n.name] = (n, here, dataclasses.replace(n, gpus=off))
            out.append(got[2])
        return tuple(out)
