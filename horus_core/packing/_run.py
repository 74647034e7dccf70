"""Calls the kernel on a :class:`Problem` (converts the parameters; a compiled wrapper makes the outputs)."""

from __future__ import annotations

from horus_core.packing._kernels import MEMO_LIMIT, place_all
from horus_core.packing.problem import PackParams, Placement, Problem


def place(problem: Problem, params: PackParams | None = None, *, memo_limit: int = MEMO_LIMIT) -> Placement:
    """Greedy placement of the queue (see docs/placement.md); compiled, fast. ``memo_limit``
    caps the kernel's memo tables (entries); tests lower it to exercise the fallback."""
    params = params or PackParams()
    if not 1 <= params.max_per_gpu <= 3:
        raise ValueError("max_per_gpu must be 1, 2 or 3")
    p = problem
    node, gpus, offsets, speed, reason, detail = place_all(
        p.node_start, p.gpu_kind, p.gpu_nres, p.gpu_res, p.gpu_excl,
        p.kind_cap, p.cls_mem, p.cls_util, p.cls_peak, p.speed, p.floors(),
        int(params.mode), int(params.max_per_gpu), float(params.min_speed), float(params.min_gain),
        int(params.reserve_mib), int(params.lookahead), p.job_cls, p.job_gpus, p.job_excl, int(memo_limit),
    )  # fmt: skip
    return Placement(node=node, gpus=gpus, offsets=offsets, speed=speed, reason=reason, detail=detail)
