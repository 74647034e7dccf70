"""Numba kernels: greedy interference-aware bin-packing over GPU state classes.

The contract (``docs/placement.md``; oracle :mod:`horus_core.testing.kernel_twin`): jobs in queue
order; a job of g GPUs goes to the node whose g cheapest feasible GPUs (by cost, then index) cost
least in sum (ties: lowest node index). Per job every non-empty state class is scored once; a
1-GPU job takes the smallest-index GPU of the best class, a gang the lowest-index node of the best
node class (:mod:`._nodes`).
"""

from __future__ import annotations

import numba
import numpy as np
from numpy.typing import NDArray

from horus_core.jit import helper
from horus_core.packing import _heap
from horus_core.packing._nodes import best_gang, node_move, node_pick
from horus_core.packing._state import (
    C_KIND,
    C_N,
    C_R0,
    C_R1,
    C_ROOT,
    G_EXCL,
    G_KIND,
    G_NODE,
    G_NRES,
    G_RES,
    K_ACT,
    K_BLOCKED,
    K_STRIDE,
    add_job,
    class_of,
    join_in_order,
)
from horus_core.packing.codes import (
    MODE_HORUS,
    R_GANG,
    R_LOOKAHEAD,
    R_NO_GPUS,
    ST_FULL,
    ST_INTERFERENCE,
    ST_MEMORY,
    ST_OK,
)

I8 = NDArray[np.int8]
I32 = NDArray[np.int32]
I64 = NDArray[np.int64]
F64 = NDArray[np.float64]
B = NDArray[np.bool_]
MEMO_LIMIT = 1 << 22  # memo entries (job classes x state classes) before keeping one row only


@helper
def gpu_cost(mode: int, mem: int, peak: float, cap: int, used: int, util: float, n: int) -> float:
    """The Horus cost (MODE_HORUS, docs/placement.md section 2) or the free memory left
    (MODE_BINPACK); lower is better."""
    if mode == MODE_HORUS:
        mem_cost = (used + mem) / cap
        over = util + peak - 100.0
        util_cost = 1.6 * over if over > 0.0 else -over
        return 1.3 * mem_cost + util_cost / 100.0 + n
    return (cap - used - mem) / cap


@helper
def gpu_stage(
    s: F64, floor: F64, min_speed: float, min_gain: float, t: int, k: int, n: int, r0: int, r1: int
) -> int:
    """Interference check of job class t next to residents r0 <= r1 (memory already fits):
    every pair may share, nobody of class c drops below ``max(min_speed, floor[c])`` and the
    GPU's summed normalised speed grows by at least ``min_gain`` (speeds in a triple: products
    of pair speeds)."""
    if n == 0:
        return ST_OK
    own = s[k, t, r0]
    first = s[k, r0, t]
    if own <= 0.0 or first <= 0.0:
        return ST_INTERFERENCE
    before = 1.0
    after = own + first
    if n == 2:
        own2 = s[k, t, r1]
        second = s[k, r1, t]
        if own2 <= 0.0 or second <= 0.0:
            return ST_INTERFERENCE
        own = own * own2
        first = first * s[k, r0, r1]
        second = second * s[k, r1, r0]
        if second < max(min_speed, floor[r1]):
            return ST_INTERFERENCE
        before = s[k, r0, r1] + s[k, r1, r0]
        after = own + first + second
    if own < max(min_speed, floor[t]) or first < max(min_speed, floor[r0]) or after < before + min_gain:
        return ST_INTERFERENCE
    return ST_OK


@helper
def score_classes(
    ci: I32, cused: I64, cutil: F64, act: I32, ctr: I64, mtag: I32, mstage: I8, mcost: F64,
    kind_cap: I64, cls_mem: I64, cls_peak: F64, speed: F64, floor: F64, mode: int, min_speed: float,
    min_gain: float, reserve: int, t: int, exclusive: bool, cst: I8, ccost: F64, heap: I32, gcls: I32,
) -> tuple[int, int]:  # fmt: skip
    """Stage and cost of job class t on every non-empty state class into cst/ccost.

    Returns the highest stage reached and the cheapest feasible GPU by (cost, index), -1 if
    none: all a 1-GPU job needs."""
    top = ST_FULL if ctr[K_BLOCKED] > 0 else 0
    stride = ctr[K_STRIDE]
    best_cost, best_gpu = np.inf, -1
    for i in range(ctr[K_ACT]):
        c = act[i]
        idx = t * stride + c
        if exclusive and ci[c, C_N] > 0:
            stage = ST_FULL
        elif mtag[idx] == t:
            stage = mstage[idx]
            ccost[c] = mcost[idx]
        else:
            k = ci[c, C_KIND]
            stage = ST_MEMORY
            if kind_cap[k] - cused[c] - cls_mem[t] > reserve:
                stage = gpu_stage(
                    speed, floor, min_speed, min_gain, t, k, ci[c, C_N], ci[c, C_R0], ci[c, C_R1]
                )
            cost = 0.0
            if stage == ST_OK:
                cost = gpu_cost(mode, cls_mem[t], cls_peak[t], kind_cap[k], cused[c], cutil[c], ci[c, C_N])
            mtag[idx], mstage[idx], mcost[idx] = t, stage, cost
            ccost[c] = cost
        cst[c] = stage
        top = max(top, stage)
        if stage == ST_OK and ccost[c] <= best_cost:
            root, gpu = _heap.clean_top(ci[c, C_ROOT], c, heap, gcls)
            ci[c, C_ROOT] = root
            if ccost[c] < best_cost or gpu < best_gpu:
                best_cost, best_gpu = ccost[c], gpu
    return top, best_gpu


@helper
def final_speed(gi: I32, speed: F64, t: int, gpus: I32) -> float:
    """Worst over the job's GPUs of the product of its speeds next to everyone else there."""
    worst = 1.0
    for gpu in gpus:
        k = gi[gpu, G_KIND]
        own = 1.0
        skipped = False
        for i in range(gi[gpu, G_NRES]):
            r = gi[gpu, G_RES + i]
            if r == t and not skipped:
                skipped = True
                continue
            own *= speed[k, t, r]
        worst = min(worst, own)
    return worst


@numba.njit(cache=True, nogil=True)  # the master's loop runs meanwhile
def gpu_tables(
    node_start: I32, gpu_kind: I32, gpu_nres: I32, gpu_res: I32, gpu_excl: B, n_classes: int, moves: int
) -> tuple[I32, I32, I32, I64, F64, I32, I64, I32, I32, I64]:
    """GPU rows and empty class tables: gi, gcls, ci, cused, cutil, heap, hkeys, hvals, act, ctr.
    Every GPU enters a class at most once per move (and once at the start): the heap pool size."""
    n_gpus = gpu_kind.shape[0]
    gi = np.zeros((n_gpus, 8), np.int32)
    for node in range(node_start.shape[0] - 1):
        for gpu in range(node_start[node], node_start[node + 1]):  # (element by element: a slice
            gi[gpu, G_NODE] = node  # is a view, with its reference count kept per row)
    for gpu in range(n_gpus):
        gi[gpu, G_KIND], gi[gpu, G_NRES], gi[gpu, G_EXCL] = gpu_kind[gpu], gpu_nres[gpu], gpu_excl[gpu]
        for i in range(3):
            gi[gpu, G_RES + i] = gpu_res[gpu, i]
    hsize = 4
    while hsize < 2 * n_classes:
        hsize *= 2
    return (
        gi, np.full(n_gpus, -1, np.int32), np.empty((n_classes, 8), np.int32), np.empty(n_classes, np.int64),
        np.empty(n_classes), np.empty((n_gpus + moves + 1, 3), np.int32), np.full(hsize, -1, np.int64),
        np.empty(hsize, np.int32), np.empty(n_classes, np.int32), np.zeros(8, np.int64),
    )  # fmt: skip


@numba.njit(cache=True, nogil=True)  # the master's loop runs meanwhile
def node_tables(
    n_nodes: int, widest: int, n_classes: int
) -> tuple[I32, I32, F64, I32, I32, I64, I32, I64, I32]:
    """Empty node-class tables: nci, nsig, nnb, ncls, nact, nctr, nheap, nkeys, nvals."""
    hsize = 4
    while hsize < 2 * n_classes:
        hsize *= 2
    return (
        np.empty((n_classes, 6), np.int32), np.empty((n_classes, widest), np.int32),
        np.zeros((n_classes, widest + 1)), np.full(n_nodes, -1, np.int32), np.empty(n_classes, np.int32),
        np.zeros(8, np.int64), np.empty((n_nodes + n_classes + 1, 3), np.int32), np.full(hsize, -1, np.int64),
        np.empty(hsize, np.int32),
    )  # fmt: skip


@numba.njit(cache=True, nogil=True)  # the master's loop runs meanwhile
def gang_rows(
    job_cls: I32, job_gpus: I32, job_excl: B, n_types: int, widest: int, n_node_classes: int, limit: int
) -> tuple[I32, int]:
    """Memo row per gang job: one per distinct (job class, GPUs, exclusive), -1 for 1-GPU jobs,
    jobs wider than any node, or once the memo would pass ``limit`` entries."""
    rows = np.full(job_cls.shape[0], -1, np.int32)
    seen = np.full((n_types, widest + 1, 2), -1, np.int32)
    n_rows = 0
    for j in range(job_cls.shape[0]):
        g = job_gpus[j]
        if g < 2 or g > widest:
            continue
        key = seen[job_cls[j], g, 1 if job_excl[j] else 0]
        if key < 0 and (n_rows + 1) * n_node_classes <= limit:
            key = n_rows
            seen[job_cls[j], g, 1 if job_excl[j] else 0] = key
            n_rows += 1
        rows[j] = key
    return rows, n_rows


@numba.njit(cache=True, nogil=True)  # the master's loop runs meanwhile
def place_kernel(
    node_start: I32, gpu_kind: I32, gpu_nres: I32, gpu_res: I32, gpu_excl: B,
    kind_cap: I64, cls_mem: I64, cls_util: F64, cls_peak: F64, speed: F64, cls_floor: F64,
    mode: int, max_per_gpu: int, min_speed: float, min_gain: float, reserve: int, lookahead: int,
    job_cls: I32, job_gpus: I32, job_excl: B, job_off: I64, memo_limit: int,
    out_node: I32, out_gpus: I32, out_speed: F64, out_reason: I32, out_detail: I32,
) -> None:  # fmt: skip
    n_gpus, n_nodes = gpu_kind.shape[0], node_start.shape[0] - 1
    n_types, n_jobs = cls_mem.shape[0], job_cls.shape[0]
    moves = min(int(job_off[n_jobs]), max_per_gpu * n_gpus)
    n_cls = min(n_gpus + moves, kind_cap.shape[0] * (n_types + 1) * (n_types + 2) // 2) + 1
    gi, gcls, ci, cused, cutil, heap, hkeys, hvals, act, ctr = gpu_tables(
        node_start, gpu_kind, gpu_nres, gpu_res, gpu_excl, n_cls, moves
    )
    rows = n_types if n_types * n_cls <= memo_limit else 1
    ctr[K_STRIDE] = n_cls if rows > 1 else 0
    mtag, mstage, mcost = (
        np.full(rows * n_cls, -1, np.int32),
        np.empty(rows * n_cls, np.int8),
        np.empty(rows * n_cls),
    )
    cst, ccost = np.zeros(n_cls, np.int8), np.zeros(n_cls)
    tail = np.empty(n_cls, np.int32)
    for gpu in range(n_gpus):
        c = class_of(gi, ci, cused, cutil, hkeys, hvals, ctr, cls_mem, cls_util, max_per_gpu, gpu)
        if c >= 0:
            join_in_order(gcls, ci, heap, act, ctr, gpu, c, tail)
    widest = 1
    for node in range(n_nodes):
        widest = max(widest, node_start[node + 1] - node_start[node])
    gangs = False  # node classes serve gangs alone: a queue without one keeps none
    for j in range(n_jobs):
        gangs = gangs or job_gpus[j] > 1
    n_ncls = n_nodes + n_jobs + 1 if gangs else 1
    n_held = n_nodes if gangs else 0
    nci, nsig, nnb, ncls, nact, nctr, nheap, nkeys, nvals = node_tables(n_held, widest, n_ncls)
    buf, sig = np.empty(widest), np.empty(widest, np.int32)
    for node in range(n_held):
        node_move(
            node, node_start[node], node_start[node + 1], gcls, ci, cused, kind_cap, mode,
            nci, nsig, nnb, ncls, nact, nctr, nheap, nkeys, nvals, sig,
        )  # fmt: skip
    grow, n_rows = gang_rows(job_cls, job_gpus, job_excl, n_types, widest, n_ncls, memo_limit)
    gfound, gtotal = np.full(n_rows * n_ncls, -1, np.int32), np.empty(n_rows * n_ncls)
    row_best = np.full(max(1, n_rows), -1, np.int32)
    cap_max = kind_cap.max() if kind_cap.shape[0] > 0 else 1
    cap_min = kind_cap.min() if kind_cap.shape[0] > 0 else 1
    failed = 0
    for j in range(n_jobs):
        out_node[j], out_detail[j], out_speed[j] = -1, 0, 0.0
        if lookahead >= 0 and failed > lookahead:
            out_reason[j] = R_LOOKAHEAD
            continue
        t, g, ex = job_cls[j], job_gpus[j], job_excl[j]
        chosen = out_gpus[job_off[j] : job_off[j] + g]
        top, single = score_classes(
            ci, cused, cutil, act, ctr, mtag, mstage, mcost, kind_cap, cls_mem, cls_peak, speed, cls_floor,
            mode, min_speed, min_gain, reserve, t, ex, cst, ccost, heap, gcls,
        )  # fmt: skip
        largest = 0
        if g == 1:
            chosen[0] = single
            node = gi[single, G_NODE] if single >= 0 else -1
        else:
            own = 1.3 * cls_mem[t] / cap_max if mode == MODE_HORUS else -cls_mem[t] / cap_min
            row = grow[j]
            hint = row_best[row] if row >= 0 else -1
            node, nc, largest = best_gang(
                nci, nsig, nnb, nact, nctr, nheap, ncls, cst, ccost, g, ex, own, buf,
                gfound, gtotal, row, hint,
            )  # fmt: skip
            if row >= 0:
                row_best[row] = nc
            if node >= 0:
                node_pick(gcls, cst, ccost, g, node_start[node], node_start[node + 1], buf, chosen)
        if node < 0:
            failed += 1
            out_reason[j] = R_NO_GPUS if n_gpus == 0 else (R_GANG if largest > 0 else top)
            out_detail[j] = largest
            chosen[:] = -1
            continue
        chosen.sort()
        for gpu in chosen:
            add_job(
                gi, gcls, ci, cused, cutil, heap, hkeys, hvals, act, ctr,
                cls_mem, cls_util, max_per_gpu, gpu, t, ex,
            )  # fmt: skip
        if gangs:
            node_move(
                node, node_start[node], node_start[node + 1], gcls, ci, cused, kind_cap, mode,
                nci, nsig, nnb, ncls, nact, nctr, nheap, nkeys, nvals, sig,
            )  # fmt: skip
        out_node[j], out_reason[j] = node, 0
    for j in range(n_jobs):
        if out_node[j] >= 0:
            out_speed[j] = final_speed(gi, speed, job_cls[j], out_gpus[job_off[j] : job_off[j] + job_gpus[j]])


@numba.njit(cache=True, nogil=True)  # the master's loop runs meanwhile
def place_all(
    node_start: I32, gpu_kind: I32, gpu_nres: I32, gpu_res: I32, gpu_excl: B,
    kind_cap: I64, cls_mem: I64, cls_util: F64, cls_peak: F64, speed: F64, cls_floor: F64,
    mode: int, max_per_gpu: int, min_speed: float, min_gain: float, reserve: int, lookahead: int,
    job_cls: I32, job_gpus: I32, job_excl: B, memo_limit: int,
) -> tuple[I32, I32, I64, F64, I32, I32]:  # fmt: skip
    """:func:`place_kernel` with its outputs made here: (node, GPUs, offsets, speed, reason,
    detail) of :class:`~horus_core.packing.problem.Placement`."""
    n = job_cls.shape[0]
    offsets = np.zeros(n + 1, np.int64)
    for j in range(n):
        offsets[j + 1] = offsets[j] + job_gpus[j]
    node, gpus = np.empty(n, np.int32), np.full(offsets[n], -1, np.int32)
    speed_out, reason, detail = np.empty(n), np.empty(n, np.int32), np.empty(n, np.int32)
    place_kernel(
        node_start, gpu_kind, gpu_nres, gpu_res, gpu_excl, kind_cap, cls_mem, cls_util, cls_peak, speed,
        cls_floor, mode, max_per_gpu, min_speed, min_gain, reserve, lookahead, job_cls, job_gpus, job_excl,
        offsets, memo_limit, node, gpus, speed_out, reason, detail,
    )  # fmt: skip
    return node, gpus, offsets, speed_out, reason, detail
