"""Shared by the packing policies: run the kernel on a queue and turn the result into actions.

:class:`Packer` is the one pipeline a policy object keeps across calls: per-job facts by
``(job id, version)``, the GPU layout by node, reason sentences by the facts they mention, and
last pass's ``Wait`` objects (reused while a job's reason stays the same; actions are
immutable). Each policy writes its queue order once, over the pass's live jobs (``Order``).
There is one path: the placement of that queue is exactly what the plain per-job oracle
(``horus_core/testing/plain_packer.py``, imported only by tests and benches) gives, which the
property tests check. A snapshot that lists one job id twice with two specs is refused.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable
from itertools import chain

import numpy as np
from numpy.typing import NDArray

from horus_core.interference import InterferenceModel
from horus_core.model import Action, Assign, ClusterSnapshot, Wait
from horus_core.packing import PackParams, PairFilter, Placement, Problem, codes, place
from horus_core.packing.assemble import assemble
from horus_core.packing.cluster import ClusterLayout, NodeCache
from horus_core.packing.hints import register_hints
from horus_core.packing.jobs import JobTable, Live
from horus_core.policies._wide import Memo, has_wide, narrowed, place_wide, wide_of
from horus_core.policies.reasons import wait_codes, wait_texts

# A policy's queue order: positions into ``live.pending``, first served first.
Ix = NDArray[np.intp]
Order = Callable[[Live, ClusterLayout], Ix]
_REASON_CACHE = 4096
_GPUS = operator.attrgetter("gpus")


class Packer:
    def __init__(self) -> None:
        self.jobs = JobTable()
        self.nodes = NodeCache()
        self._texts: dict[tuple[object, ...], str] = {}
        self._waits: dict[str, Wait] = {}
        self.around = NodeCache()  # the layout with wide gangs' GPUs hidden (kept apart: both stay cached)
        self._wide = Memo()  # gangs over nodes: their Waits, nodes with their GPUs hidden (_wide)

    def pack(
        self,
        snapshot: ClusterSnapshot,
        model: InterferenceModel,
        params: PackParams,
        refuse_text: str,
        order: Order,
        *,
        split_by_gpus: bool = False,
        pair_filter: PairFilter | None = None,
    ) -> list[Action]:
        """An Assign for every pending job the kernel places, a Wait with a reason for the rest,
        in queue order (``order``)."""
        if not snapshot.pending():
            return []
        live = self.jobs.scan(snapshot.jobs, model, (snapshot.pending(), snapshot.active()), snapshot.changes)
        if live.duplicates:
            self.jobs = JobTable()  # forget what the refused snapshot left behind
            raise ValueError("the snapshot lists one job id twice with two different specs")
        layout = self.nodes.layout(snapshot.nodes)
        if has_wide(live, layout):  # gangs across nodes: placed apart, the rest packed around them
            pending, active = wide_of(live, layout)
            busy = set(chain.from_iterable(map(_GPUS, live.active)))
            wide, rest = place_wide(snapshot, layout.largest_node, pending, active, busy, self._wide)
            narrow = narrowed(live, layout)
            if not narrow.pending:
                return wide
            around = self.around.layout(rest.nodes)
            packed = self._pack(rest, model, params, refuse_text, order, split_by_gpus=split_by_gpus,
                                pair_filter=pair_filter, live=narrow, layout=around)  # fmt: skip
            return [*wide, *packed]
        return self._pack(snapshot, model, params, refuse_text, order, split_by_gpus=split_by_gpus,
                          pair_filter=pair_filter, live=live, layout=layout)  # fmt: skip

    def _pack(
        self,
        snapshot: ClusterSnapshot,
        model: InterferenceModel,
        params: PackParams,
        refuse_text: str,
        order: Order,
        *,
        split_by_gpus: bool = False,
        pair_filter: PairFilter | None = None,
        live: Live,
        layout: ClusterLayout,
    ) -> list[Action]:
        positions = order(live, layout)
        return self._place(snapshot, live, layout, positions, model, params, refuse_text,
                           split_by_gpus=split_by_gpus, pair_filter=pair_filter)  # fmt: skip

    def _place(
        self,
        snapshot: ClusterSnapshot,
        live: Live,
        layout: ClusterLayout,
        positions: Ix,
        model: InterferenceModel,
        params: PackParams,
        refuse_text: str,
        *,
        split_by_gpus: bool,
        pair_filter: PairFilter | None,
    ) -> list[Action]:
        """Place the queue (``positions`` into ``live.pending``) with the kernel."""
        register_hints(live, layout, positions, model)
        problem, _ = assemble(layout, live, positions, model, split_by_gpus=split_by_gpus,
                              pair_filter=pair_filter)  # fmt: skip
        placement = place(problem, params)
        failed = placement.node < 0
        at = np.flatnonzero(failed)  # (the jobs left waiting)
        texts = self._reasons(placement, failed, at, problem, layout.largest_node, params, refuse_text)
        why = wait_codes(placement.reason[at], problem.job_gpus[at], layout.largest_node)
        ids: NDArray[np.object_] = np.array(live.p_ids, dtype=object)[positions]
        return self._actions(ids, placement, at, problem.job_gpus, layout, list(zip(texts, why, strict=True)))

    def _reasons(
        self,
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
        if len(self._texts) > _REASON_CACHE:
            self._texts = {}
        gpus, excl, mem = problem.job_gpus[at], problem.job_excl[at], problem.cls_mem[problem.job_cls[at]]
        return wait_texts(placement.reason[at], gpus, excl, mem, placement.detail[at], blocked[at], largest,
                          params, refuse_text, self._texts)  # fmt: skip

    def _actions(
        self,
        ids: NDArray[np.object_],
        placement: Placement,
        failed: NDArray[np.intp],
        job_gpus: NDArray[np.int32],
        layout: ClusterLayout,
        texts: list[tuple[str, str]],
    ) -> list[Action]:
        """Actions in queue order: Assigns built in bulk, 1-GPU and gang apart; Waits (for the
        jobs at ``failed``) reused from the last pass where the job's reason is the same string."""
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
        waiting: list[str] = ids[failed].tolist()
        old, waits = self._waits, []
        for jid, (text, code) in zip(waiting, texts, strict=True):
            w = old.get(jid)
            waits.append(
                w if w is not None and w.reason is text and w.code == code else Wait(jid, text, code)
            )
        _put(out, failed, waits)
        self._waits = dict(zip(waiting, waits, strict=True))
        return out


_NONE = Wait("", "")


def _put(out: list[Action], at: NDArray[np.intp], items: Iterable[Action]) -> None:
    for i, item in zip(at.tolist(), items, strict=True):
        out[i] = item
