"""The kernel's :class:`Problem` from cached pieces, with numpy instead of per-job Python.

Exactly what the oracle :func:`horus_core.testing.plain_problem.build_problem` computes: job
classes in order of first appearance (active jobs in snapshot order, then the queue), each GPU's
first 3 residents, the pair-speed tables per GPU kind.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from horus_core.interference import InterferenceModel
from horus_core.packing._assemble_kernel import SHIFT, classes_and_residents, code_floors
from horus_core.packing.build import PairFilter
from horus_core.packing.cluster import ClusterLayout
from horus_core.packing.jobs import Live
from horus_core.packing.problem import Problem

Ix = NDArray[np.intp]


def assemble(
    layout: ClusterLayout,
    live: Live,
    queue: Ix,
    model: InterferenceModel,
    *,
    split_by_gpus: bool = False,
    pair_filter: PairFilter | None = None,
) -> tuple[Problem, NDArray[np.int64]]:
    """``queue``: positions into ``live.pending``, in the order to serve them. Returns the
    problem and its job classes' keys (:meth:`JobTable.class_keys` names them)."""
    table, scan = live.table, live.scan or live
    q_slot = live.p_slot[queue]
    rec = table.placed.records(layout.base or layout, scan.active, scan.a_slot, scan.a_versions)
    index = layout.index
    placed = [(int(live.a_slot[k]), [index.get(u, -1) for u in live.active[k].gpus]) for k in live.placed]
    rec = rec.seen_by(layout, placed)
    ordered, job_cls, nres, res, excl = classes_and_residents(
        live.a_slot, rec.start, rec.length, rec.pool, q_slot, table.code, table.gpus, table.excl,
        layout.n_gpus, split_by_gpus,
    )  # fmt: skip
    codes = ordered // SHIFT
    prof = live.profiles
    problem = Problem(
        node_start=layout.node_start,
        gpu_kind=layout.gpu_kind,
        gpu_nres=nres,
        gpu_res=res,
        gpu_excl=excl,
        kind_cap=layout.kind_cap,
        cls_mem=prof.mem[codes],
        cls_util=prof.util[codes],
        cls_peak=prof.peak[codes],
        speed=table.speeds(model, ordered, layout.kinds, split_by_gpus, pair_filter),
        job_cls=job_cls,
        job_gpus=np.maximum(table.gpus[q_slot], 1),
        job_excl=table.excl[q_slot],
        cls_floor=_floors(live, q_slot, codes),
    )
    return problem, ordered


def _floors(live: Live, q_slot: Ix, codes: NDArray[np.int64]) -> NDArray[np.float64]:
    """:func:`~horus_core.packing.build.class_floors`: the highest floor per signature code
    over the active jobs and the queue, for each class."""
    table = live.table
    by_code = code_floors(live.a_slot, q_slot, table.code, table.floor, len(table.sigs.names))
    out: NDArray[np.float64] = by_code[codes]
    return out
