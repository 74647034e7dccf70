"""Mutable packing state for the Numba kernel: GPU state classes and their bookkeeping.

A GPU that can still take a job belongs to a *state class* (kind, sorted resident job classes):
every GPU of a class costs the same for a given job, so the kernel scores classes. Classes live in
flat arrays, found through a hash of their key, their GPUs in a skew heap (smallest index first),
the non-empty ones in ``act``. Full or exclusive GPUs belong to no class (``gcls[gpu] == -1``).
The arrays are passed one by one (a tuple would cost a reference-count update per access).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from horus_core.jit import helper
from horus_core.packing import _heap
from horus_core.packing._hash import slot_of

I32 = NDArray[np.int32]
I64 = NDArray[np.int64]
F64 = NDArray[np.float64]

# columns of gi: int32[gpus, 8]
G_NODE, G_KIND, G_NRES, G_RES, G_EXCL = 0, 1, 3, 4, 7  # residents in columns 4..6; gcls apart
# columns of ci: int32[classes, 8]
C_KIND, C_N, C_R0, C_R1, C_COUNT, C_ROOT, C_POS = 0, 1, 2, 3, 4, 5, 6
# ctr: int64[8]
K_ACT, K_CLASSES, K_BLOCKED, K_STRIDE, K_POOL = 0, 1, 2, 3, 4


@helper
def find_class(
    ci: I32, cused: I64, cutil: F64, hkeys: I64, hvals: I32, ctr: I64,
    cls_mem: I64, cls_util: F64, kind: int, r0: int, r1: int, n: int,
) -> int:  # fmt: skip
    """The class of (kind, residents r0 <= r1, -1 = none); created when first needed."""
    width = cls_mem.shape[0] + 1
    key = (kind * width + r0 + 1) * width + r1 + 1
    h = slot_of(hkeys, key)
    if hkeys[h] == key:
        return int(hvals[h])
    c = ctr[K_CLASSES]
    ctr[K_CLASSES] = c + 1
    hkeys[h] = key
    hvals[h] = c
    ci[c, C_KIND], ci[c, C_N], ci[c, C_R0], ci[c, C_R1] = kind, n, r0, r1
    ci[c, C_COUNT], ci[c, C_ROOT], ci[c, C_POS] = 0, -1, -1
    used = 0
    util = 0.0
    if n >= 1:
        used += cls_mem[r0]
        util += cls_util[r0]
    if n >= 2:
        used += cls_mem[r1]
        util += cls_util[r1]
    cused[c] = used
    cutil[c] = util
    return int(c)


@helper
def join_class(gcls: I32, ci: I32, heap: I32, act: I32, ctr: I64, gpu: int, c: int) -> None:
    ci[c, C_ROOT] = _heap.push(ci[c, C_ROOT], gpu, ctr, K_POOL, heap)
    _counted(gcls, ci, act, ctr, gpu, c)


@helper
def join_in_order(gcls: I32, ci: I32, heap: I32, act: I32, ctr: I64, gpu: int, c: int, tail: I32) -> None:
    """:func:`join_class` for GPUs in ascending order (a pass's first settling): the GPU becomes
    the left child of the class's last one (``tail``), so each heap is an ordered chain."""
    entry = _heap.entry(gpu, ctr, K_POOL, heap)
    if ci[c, C_ROOT] < 0:
        ci[c, C_ROOT] = entry
    else:
        heap[tail[c], _heap.LEFT] = entry
    tail[c] = entry
    _counted(gcls, ci, act, ctr, gpu, c)


@helper
def _counted(gcls: I32, ci: I32, act: I32, ctr: I64, gpu: int, c: int) -> None:
    gcls[gpu] = c
    ci[c, C_COUNT] += 1
    if ci[c, C_COUNT] == 1:
        pos = ctr[K_ACT]
        act[pos] = c
        ci[c, C_POS] = pos
        ctr[K_ACT] = pos + 1


@helper
def leave_class(gcls: I32, ci: I32, act: I32, ctr: I64, gpu: int) -> None:
    c = gcls[gpu]
    gcls[gpu] = -1
    ci[c, C_COUNT] -= 1
    if ci[c, C_COUNT] == 0:
        last = ctr[K_ACT] - 1
        pos = ci[c, C_POS]
        moved = act[last]
        act[pos] = moved
        ci[moved, C_POS] = pos
        ci[c, C_POS] = -1
        ctr[K_ACT] = last


@helper
def settle(
    gi: I32, gcls: I32, ci: I32, cused: I64, cutil: F64, heap: I32, hkeys: I64, hvals: I32, act: I32,
    ctr: I64, cls_mem: I64, cls_util: F64, max_per_gpu: int, gpu: int,
) -> None:  # fmt: skip
    """Put a GPU that is in no class into the class its residents say (or count it blocked)."""
    c = class_of(gi, ci, cused, cutil, hkeys, hvals, ctr, cls_mem, cls_util, max_per_gpu, gpu)
    if c >= 0:
        join_class(gcls, ci, heap, act, ctr, gpu, c)


@helper
def class_of(
    gi: I32, ci: I32, cused: I64, cutil: F64, hkeys: I64, hvals: I32, ctr: I64, cls_mem: I64,
    cls_util: F64, max_per_gpu: int, gpu: int,
) -> int:  # fmt: skip
    """The class a GPU's residents say, or -1 (counted blocked): full, or an exclusive job."""
    n = gi[gpu, G_NRES]
    if gi[gpu, G_EXCL] != 0 or n >= max_per_gpu:
        ctr[K_BLOCKED] += 1
        return -1
    r0, r1 = -1, -1
    if n == 1:
        r0 = gi[gpu, G_RES]
    elif n == 2:
        r0 = min(gi[gpu, G_RES], gi[gpu, G_RES + 1])
        r1 = max(gi[gpu, G_RES], gi[gpu, G_RES + 1])
    return find_class(ci, cused, cutil, hkeys, hvals, ctr, cls_mem, cls_util, gi[gpu, G_KIND], r0, r1, n)


@helper
def add_job(
    gi: I32, gcls: I32, ci: I32, cused: I64, cutil: F64, heap: I32, hkeys: I64, hvals: I32, act: I32,
    ctr: I64, cls_mem: I64, cls_util: F64, max_per_gpu: int, gpu: int, job_cls: int, exclusive: bool,
) -> None:  # fmt: skip
    """Place one job of class ``job_cls`` on ``gpu`` (which must be in a class)."""
    leave_class(gcls, ci, act, ctr, gpu)
    gi[gpu, G_RES + gi[gpu, G_NRES]] = job_cls
    gi[gpu, G_NRES] += 1
    if exclusive:
        gi[gpu, G_EXCL] = 1
    settle(gi, gcls, ci, cused, cutil, heap, hkeys, hvals, act, ctr, cls_mem, cls_util, max_per_gpu, gpu)
