"""The packing policies' placement stage: a view's queue through the kernel, into actions.

:class:`Packer` places a view's pending jobs in a policy's ``Order`` with the Numba kernel: an
Assign for each job it places, a Wait with a reason for the rest. Wide gangs are placed apart
first (:mod:`._wide`). The oracle it must match is ``horus_core/testing/plain_packer.py``.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import chain

import numpy as np
from numpy.typing import NDArray

from horus_core.interference import InterferenceModel
from horus_core.model import Action, Assign, Job, Wait
from horus_core.packing import PackParams, PairFilter, Placement, Problem, codes, place
from horus_core.packing.assemble import assemble
from horus_core.packing.cluster import ClusterLayout
from horus_core.packing.jobs import Live
from horus_core.policies._wide import free_on, place_wide
from horus_core.policies.reasons import wait_codes, wait_texts
from horus_core.policies.views import View

# A policy's queue order: positions into ``live.pending``, first served first.
Ix = NDArray[np.intp]
Order = Callable[[Live, ClusterLayout], Ix]
_GPUS = operator.attrgetter("gpus")


@dataclass(frozen=True)
class Ask:
    """What a packing pass is asked: the model, the kernel's parameters, the Wait wording, the
    queue order, and who may share a GPU (``split_by_gpus``, ``pair_filter``)."""

    model: InterferenceModel
    params: PackParams
    refused: str
    order: Order
    split_by_gpus: bool = False
    pair_filter: PairFilter | None = None


class Packer:
    """The place stage; a job whose reason is unchanged gets the last pass's Wait again (~10 % of
    a pass at 10,000 jobs)."""

    def __init__(self) -> None:
        self._waits: dict[str, Wait] = {}

    def pack(self, view: View, ask: Ask) -> list[Action]:
        """An Assign for every pending job of ``view`` the kernel places, a Wait with a reason
        for the rest, in queue order (``ask.order``)."""
        if not view.pending():
            return []
        live, layout = view.live(ask.model), view.layout
        if not has_wide(live, layout):
            return self._place(view, live, layout, ask)
        pending, active = wide_of(
            live, layout
        )  # gangs across nodes: placed apart, the rest packed around them
        busy = set(chain.from_iterable(map(_GPUS, live.active)))
        free = free_on(layout, {n.name: n.rack for n in view.state.snapshot.nodes}, busy)
        wide, hidden = place_wide(view.snapshot, layout.largest_node, pending, active, busy, free)
        narrow = narrowed(live, layout)
        if not narrow.pending:
            return wide
        around = view.hide_uuids(hidden)
        return [*wide, *self._place(around, narrow, around.layout, ask)]

    def _place(self, view: View, live: Live, layout: ClusterLayout, ask: Ask) -> list[Action]:
        """Place the queue (``ask.order`` over ``live.pending``) with the kernel."""
        positions = ask.order(live, layout)
        problem, _ = assemble(layout, live, positions, ask.model, split_by_gpus=ask.split_by_gpus,
                              pair_filter=ask.pair_filter)  # fmt: skip
        placement = place(problem, ask.params)
        failed = placement.node < 0
        at = np.flatnonzero(failed)  # (the jobs left waiting)
        texts = _reasons(placement, failed, at, problem, layout.largest_node, ask.params, ask.refused)
        why = wait_codes(placement.reason[at], problem.job_gpus[at], layout.largest_node)
        ids: NDArray[np.object_] = np.array(live.p_ids, dtype=object)[positions]
        actions = _actions(ids, placement, at, problem.job_gpus, layout)
        waiting: list[str] = ids[at].tolist()
        old, waits = self._waits, []
        for jid, text, code in zip(waiting, texts, why, strict=True):
            w = old.get(jid)
            waits.append(
                w if w is not None and w.code == code and w.reason == text else Wait(jid, text, code)
            )
        _put(actions, at, waits)
        self._waits = dict(zip(waiting, waits, strict=True))
        return actions


def _reasons(
    placement: Placement,
    failed: NDArray[np.bool_],
    at: NDArray[np.intp],
    problem: Problem,
    largest: int,
    params: PackParams,
    refuse_text: str,
) -> list[str]:
    """The reason of each job left waiting (``failed``, at positions ``at``)."""
    if not len(at):
        return []
    counted = failed & (placement.reason != codes.R_LOOKAHEAD)
    blocked = np.cumsum(counted) - counted  # misses (not look-ahead ones) before each job
    gpus, excl, mem = problem.job_gpus[at], problem.job_excl[at], problem.cls_mem[problem.job_cls[at]]
    return wait_texts(placement.reason[at], gpus, excl, mem, placement.detail[at], blocked[at], largest,
                      params, refuse_text)  # fmt: skip


def _actions(
    ids: NDArray[np.object_], placement: Placement, failed: NDArray[np.intp], job_gpus: NDArray[np.int32],
    layout: ClusterLayout,
) -> list[Action]:  # fmt: skip
    """Actions in queue order: Assigns built in bulk, 1-GPU and gang apart (the jobs at
    ``failed`` get their Waits from the caller)."""
    node, off = placement.node, placement.offsets
    out: list[Action] = [_NONE] * len(ids)  # every slot is filled below
    names = layout.node_names
    one = np.flatnonzero((node >= 0) & (job_gpus == 1))
    singles = layout.singles
    _put(out, one, map(
        Assign, ids[one].tolist(), [names[n] for n in node[one].tolist()],
        [singles[d] for d in placement.gpus[off[one]].tolist()], placement.speed[one].tolist(),
    ))  # fmt: skip
    gang = np.flatnonzero((node >= 0) & (job_gpus > 1))
    uuids, flat = layout.gpu_uuids, placement.gpus.tolist()
    spans = zip(off[gang].tolist(), off[gang + 1].tolist(), strict=True)
    _put(out, gang, map(
        Assign, ids[gang].tolist(), [names[n] for n in node[gang].tolist()],
        [tuple([uuids[d] for d in flat[lo:hi]]) for lo, hi in spans], placement.speed[gang].tolist(),
    ))  # fmt: skip
    return out


_NONE = Wait("", "")


def _put(out: list[Action], at: NDArray[np.intp], items: Iterable[Action]) -> None:
    for i, item in zip(at.tolist(), items, strict=True):
        out[i] = item


# ---------------------------------------------------------------- wide gangs in the job table


def has_wide(live: Live, layout: ClusterLayout) -> bool:
    """Whether any live job (pending or active) is wide: the cheap test run every pass."""
    largest = layout.largest_node
    if largest == 0:
        return False  # no ready GPU: every job waits with the kernel's reason
    reach = live.table.reach
    return bool((reach[live.p_slot] > largest).any() or (reach[live.a_slot] > largest).any())


def _wide(live: Live, slots: Ix, largest: int) -> NDArray[np.bool_]:
    """Per job of ``slots``: wider than every node (``largest`` GPUs), or shaped over nodes."""
    reach: NDArray[np.bool_] = live.table.reach[slots] > largest
    return reach


def wide_of(live: Live, layout: ClusterLayout) -> tuple[list[Job], list[Job]]:
    """The wide pending and active jobs of a pass, from the job table's arrays."""
    largest = layout.largest_node
    pw = np.flatnonzero(_wide(live, live.p_slot, largest)).tolist()
    aw = np.flatnonzero(_wide(live, live.a_slot, largest)).tolist()
    return [live.pending[i] for i in pw], [live.active[i] for i in aw]


def narrowed(live: Live, layout: ClusterLayout) -> Live:
    """``live`` without its wide pending jobs (the same active jobs)."""
    table, p = live.table, live.p_slot
    keep = np.flatnonzero(~_wide(live, p, layout.largest_node))
    out = Live(table, list(map(live.pending.__getitem__, keep.tolist())), p[keep], live.active, live.a_slot,
               live.a_versions, duplicates=live.duplicates, scan=live.scan, placed=live.placed,
               prio=None if live.prio is None else live.prio[keep])  # fmt: skip
    out.profiles = live.profiles
    return out
