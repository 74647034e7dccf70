"""The kernel's :class:`Problem` from cached pieces, with numpy instead of per-job Python.

Computes exactly what :func:`horus_core.packing.build.build_problem` computes (that function
is the plain twin; a property test checks they agree): job classes numbered in order of first
appearance (active jobs on ready GPUs in snapshot order, then the queue), each GPU's first 3
residents in snapshot order, the pair-speed tables per GPU kind.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from horus_core.interference import InterferenceModel
from horus_core.packing.build import PairFilter, class_speeds
from horus_core.packing.cluster import ClusterLayout
from horus_core.packing.jobs import Live
from horus_core.packing.problem import Problem

I32 = NDArray[np.int32]
I64 = NDArray[np.int64]
Ix = NDArray[np.intp]
_SHIFT = 1 << 32
_BIAS = 1 << 31


def assemble(
    layout: ClusterLayout,
    live: Live,
    queue: Ix,
    model: InterferenceModel,
    *,
    split_by_gpus: bool = False,
    pair_filter: PairFilter | None = None,
) -> tuple[Problem, tuple[tuple[str, int], ...]]:
    """``queue``: positions into ``live.pending``, in the order to serve them. Returns the
    problem and the job classes (signature, GPUs or 0)."""
    table = live.table
    n_gpus = layout.n_gpus
    # active jobs: their GPUs' kernel indices, flat, in snapshot order
    act = live.active
    index = layout.index
    flat = [index.get(u, -1) for j in act for u in j.gpus]
    lens = np.fromiter((len(j.gpus) for j in act), np.intp, len(act))
    d = np.array(flat, np.intp)
    owner = np.repeat(np.arange(len(act), dtype=np.intp), lens)
    hit = d >= 0
    on_ready = np.zeros(len(act), np.bool_)
    on_ready[owner[hit]] = True
    a_slot = live.a_slot[on_ready]
    q_slot = live.p_slot[queue]
    slots = np.concatenate([a_slot, q_slot])
    g = table.gpus[slots].astype(np.int64)
    key = table.code[slots].astype(np.int64) * _SHIFT + ((g + _BIAS) if split_by_gpus else _BIAS)
    uniq, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    by_first = np.argsort(first, kind="stable")
    rank = np.empty(len(uniq), np.int32)
    rank[by_first] = np.arange(len(uniq), dtype=np.int32)
    cls = rank[inverse.reshape(-1)]
    names = table.sigs.names
    ordered = uniq[by_first].tolist()
    keys = tuple((names[k // _SHIFT], k % _SHIFT - _BIAS if split_by_gpus else 0) for k in ordered)
    # residents: per GPU, the classes of its first 3 active jobs (snapshot order)
    act_cls = np.full(len(act), -1, np.int32)
    act_cls[on_ready] = cls[: len(a_slot)]
    nres, res, excl = _residents(n_gpus, d[hit], act_cls[owner[hit]], table.excl[live.a_slot][owner[hit]])
    codes = np.array([k // _SHIFT for k in ordered], np.intp)
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
        speed=class_speeds(model, keys, layout.kinds, split_by_gpus, pair_filter),
        job_cls=cls[len(a_slot) :],
        job_gpus=np.maximum(table.gpus[q_slot], 1),
        job_excl=table.excl[q_slot],
    )
    return problem, keys


def _residents(n: int, gpu: Ix, cls: I32, excl: NDArray[np.bool_]) -> tuple[I32, I32, NDArray[np.bool_]]:
    nres = np.minimum(np.bincount(gpu, minlength=n), 3).astype(np.int32)
    res = np.full((n, 3), -1, np.int32)
    order = np.argsort(gpu, kind="stable")
    sorted_gpu = gpu[order]
    starts = np.flatnonzero(np.r_[True, sorted_gpu[1:] != sorted_gpu[:-1]]) if len(gpu) else order
    group_start = np.repeat(starts, np.diff(np.r_[starts, len(gpu)]))
    rank = np.arange(len(gpu)) - group_start
    keep = rank < 3
    res[sorted_gpu[keep], rank[keep]] = cls[order][keep]
    excl_out = np.zeros(n, np.bool_)
    excl_out[gpu[excl]] = True
    return nres, res, excl_out
