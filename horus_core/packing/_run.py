"""Calls the kernel on a :class:`Problem` (allocates the outputs, converts the parameters)."""

from __future__ import annotations

import numpy as np

from horus_core.packing._kernels import MEMO_LIMIT, place_kernel
from horus_core.packing.problem import PackParams, Placement, Problem


def place(problem: Problem, params: PackParams | None = None, *, memo_limit: int = MEMO_LIMIT) -> Placement:
    """Greedy placement of the queue (see docs/placement.md); compiled, fast. ``memo_limit``
    caps the kernel's memo tables (entries); tests lower it to exercise the fallback."""
    params = params or PackParams()
    if not 1 <= params.max_per_gpu <= 3:
        raise ValueError("max_per_gpu must be 1, 2 or 3")
    offsets = problem.job_offsets()
    n = problem.n_jobs
    out = Placement(
        node=np.empty(n, np.int32),
        gpus=np.full(int(offsets[-1]), -1, np.int32),
        offsets=offsets,
        speed=np.empty(n, np.float64),
        reason=np.empty(n, np.int32),
        detail=np.empty(n, np.int32),
    )
    p = problem
    place_kernel(
        p.node_start, p.gpu_kind, p.gpu_nres, p.gpu_res, p.gpu_excl,
        p.kind_cap, p.cls_mem, p.cls_util, p.cls_peak, p.speed, p.floors(),
        int(params.mode), int(params.max_per_gpu), float(params.min_speed), float(params.min_gain),
        int(params.reserve_mib),
        int(params.lookahead), p.job_cls, p.job_gpus, p.job_excl, offsets, int(memo_limit),
        out.node, out.gpus, out.speed, out.reason, out.detail,
    )  # fmt: skip
    return out
