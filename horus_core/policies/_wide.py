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
import operator
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from itertools import compress

import numba
import numpy as np
from numpy.typing import NDArray

from horus_core.model import Action, Assign, ClusterSnapshot, Job, JobState, Node, NodeState, Wait
from horus_core.packing.cluster import ClusterLayout, gpu_type
from horus_core.packing.jobs import Live
from horus_core.policies import spread
from horus_core.policies.base import arrival_order, busy_gpu_uuids

_ID = operator.attrgetter("id")
Ix = NDArray[np.intp]


def has_wide(live: Live, layout: ClusterLayout) -> bool:
    """Whether any live job (pending or active) is wide: the cheap test run every pass."""
    largest = layout.largest_node
    if largest == 0:
        return False  # no ready GPU: every job waits with the kernel's reason
    return _any_beyond(live.table.reach, live.p_slot, live.a_slot, largest)


@numba.njit(cache=True, nogil=True)
def _any_beyond(reach: NDArray[np.int32], p_slot: Ix, a_slot: Ix, largest: int) -> bool:
    """Whether a job of either slot list reaches beyond ``largest`` GPUs (:func:`_wide`), in
    one loop (a pass's cheap test)."""
    for k in range(p_slot.shape[0]):
        if reach[p_slot[k]] > largest:
            return True
    for k in range(a_slot.shape[0]):  # noqa: SIM110 (compiled: a loop, not a generator)
        if reach[a_slot[k]] > largest:
            return True
    return False


def _wide(live: Live, slots: Ix, largest: int) -> NDArray[np.bool_]:
    """Per job of ``slots``: wider than every node (``largest`` GPUs), or shaped over nodes."""
    reach: NDArray[np.bool_] = live.table.reach[slots] > largest
    return reach


def split(snapshot: ClusterSnapshot) -> tuple[list[Action], ClusterSnapshot]:
    """:func:`place_wide` where the snapshot has a wide job, else no actions and the snapshot
    itself (for the policies that do not keep a :class:`Live` table)."""
    largest = spread.largest_node(snapshot)
    wide = [j for j in snapshot.jobs if spread.spec_spans(j.spec, largest)]
    if not wide:
        return [], snapshot
    pending = [j for j in wide if j.state is JobState.PENDING]
    busy = busy_gpu_uuids(snapshot.jobs)
    return place_wide(snapshot, largest, pending, [j for j in wide if j.state.active], busy.keys())


def wide_of(live: Live, layout: ClusterLayout) -> tuple[list[Job], list[Job]]:
    """The wide pending and active jobs of a pass, from the job table's arrays."""
    largest = layout.largest_node
    pw = np.flatnonzero(_wide(live, live.p_slot, largest)).tolist()
    aw = np.flatnonzero(_wide(live, live.a_slot, largest)).tolist()
    return [live.pending[i] for i in pw], [live.active[i] for i in aw]


def narrowed(live: Live, layout: ClusterLayout) -> Live:
    """``live`` without its wide pending jobs: what a scan of :func:`place_wide`'s snapshot
    gives (pending jobs in snapshot order, the same active jobs), with no second scan."""
    table, p = live.table, live.p_slot
    keep = np.flatnonzero(~_wide(live, p, layout.largest_node))
    out = Live(table, list(map(live.pending.__getitem__, keep.tolist())), p[keep], live.active, live.a_slot,
               live.a_versions, duplicates=live.duplicates)  # fmt: skip
    out.profiles = live.profiles
    return out


def place_wide(
    snapshot: ClusterSnapshot,
    largest: int,
    pending: Sequence[Job],
    active: Sequence[Job],
    busy: AbstractSet[str],
    memo: Memo | None = None,
) -> tuple[list[Action], ClusterSnapshot]:
    """The wide pending jobs' actions, and the snapshot the kernel should pack the rest on
    (``busy``: the GPUs any active job holds). ``memo`` keeps, across passes, the Waits of wide
    jobs (reused while the reason is the same) and the nodes with hidden GPUs (the same
    objects while the same GPUs are hidden, so the kernel's layout cache still holds)."""
    memo = memo if memo is not None else Memo()
    pool = spread.Pool(memo.free(snapshot.nodes, busy))
    actions: list[Action] = []
    hidden = {u for j in active for u in j.gpus}
    waits: dict[str, Wait] = {}
    total = -1  # the cluster's GPUs, counted at the first new Wait
    for job in arrival_order(pending):
        plan = pool.place(spread.shape_of(job.spec, largest))
        if isinstance(plan, str):
            w = memo.waits.get(job.id)
            if w is None or w.reason != plan:
                total = total if total >= 0 else sum(len(n.gpus) for n in snapshot.nodes)
                w = spread.wait_for(job, plan, total)
            waits[job.id] = w
            actions.append(w)
            continue
        pool.take(plan)
        gpus = plan.gpus
        hidden.update(gpus)
        actions.append(Assign(job.id, plan.node, gpus))
    memo.waits = waits
    gone = {j.id for j in pending}
    rest = tuple(compress(snapshot.jobs, map(operator.not_, map(gone.__contains__, map(_ID, snapshot.jobs)))))
    return actions, ClusterSnapshot(memo.hide(snapshot.nodes, hidden), rest)


class Memo:
    """What :func:`place_wide` keeps across passes: last pass's Waits of wide jobs, and per
    node (by name, while it is the same node object) its GPUs, its offer to gangs when none is
    taken, and the node with a given set of GPUs hidden."""

    def __init__(self) -> None:
        self.waits: dict[str, Wait] = {}
        self._facts: dict[str, _Facts] = {}

    def facts(self, node: Node) -> _Facts:
        got = self._facts.get(node.name)
        if got is None or got.node is not node:
            got = self._facts[node.name] = _Facts.of(node)
        return got

    def free(self, nodes: Sequence[Node], taken: AbstractSet[str]) -> list[spread.FreeNode]:
        """:func:`spread.free_nodes` for ``nodes``, a node none of whose GPUs is taken reusing
        its offer from before."""
        if len(self._facts) > 2 * len(nodes) + 64:
            self._facts = {}  # drop the nodes that are gone
        out = []
        for n in nodes:
            if n.state is NodeState.READY:
                f = self.facts(n)
                out.append(f.offer if taken.isdisjoint(f.ready) else f.offer_without(taken))
        return out

    def hide(self, nodes: Sequence[Node], hidden: set[str]) -> tuple[Node, ...]:
        """``nodes`` with the ``hidden`` GPUs marked unhealthy (a node object per node and set)."""
        if not hidden:
            return tuple(nodes)
        out = []
        for n in nodes:
            f = self.facts(n)
            if hidden.isdisjoint(f.uuids):
                out.append(n)
                continue
            here = frozenset(hidden.intersection(f.uuids))
            if f.hid is None or f.hid[0] != here:
                off = tuple(dataclasses.replace(g, healthy=False) if g.uuid in here else g for g in n.gpus)
                f.hid = (here, dataclasses.replace(n, gpus=off))
            out.append(f.hid[1])
        return tuple(out)


@dataclasses.dataclass(eq=False, slots=True)
class _Facts:
    """One node object's GPUs: all of them, the healthy ones in index order (``ready``), what it
    offers a gang with none taken, and the node with the GPUs ``hid[0]`` hidden."""

    node: Node
    uuids: tuple[str, ...]
    ready: tuple[str, ...]
    offer: spread.FreeNode
    hid: tuple[frozenset[str], Node] | None = None

    @staticmethod
    def of(node: Node) -> _Facts:
        gpus = sorted((g for g in node.gpus if g.healthy), key=lambda g: g.index)
        ready = tuple(g.uuid for g in gpus)
        kind = gpu_type(gpus[0]) if gpus else ""
        offer = spread.FreeNode(node.name, ready, node.rack, kind)
        return _Facts(node, tuple(g.uuid for g in node.gpus), ready, offer)

    def offer_without(self, taken: AbstractSet[str]) -> spread.FreeNode:
        o = self.offer
        return spread.FreeNode(o.name, tuple(u for u in self.ready if u not in taken), o.rack, o.kind)
