"""Node state classes for gang placement (a multi-GPU job on one node).

A node's cost for a g-GPU job depends only on the multiset of its GPUs' state classes, so
nodes are grouped into *node classes* keyed by that sorted multiset, kept like GPU classes
(hash lookup, member heap by node index, active list). A gang scores each active node class
once, from its multiset. ``nnb[nc, i]`` bounds the cost of any i GPUs of the class from below
(job-independent parts, sorted, prefix-summed) and lets the scan skip classes that cannot win.

Arrays: ``nci[nc] = (width, open, idle, count, heap root, active pos)``, ``nsig[nc, :width]``,
``nnb[nc, :]``, ``ncls[node]``, ``nctr = (active, classes, -, -, heap pool)``.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from horus_core.jit import helper
from horus_core.packing import _heap
from horus_core.packing._state import C_KIND, C_N
from horus_core.packing.codes import MODE_HORUS, ST_OK

I8 = NDArray[np.int8]
I32 = NDArray[np.int32]
I64 = NDArray[np.int64]
F64 = NDArray[np.float64]

W, OPEN, IDLE, COUNT, ROOT, POS = 0, 1, 2, 3, 4, 5
A_ACT, A_CLASSES, A_POOL = 0, 1, 4


@helper
def new_node_class(
    sig: I32, width: int, h: int, ci: I32, cused: I64, kind_cap: I64, mode: int,
    nci: I32, nsig: I32, nnb: F64, nctr: I64,
) -> int:  # fmt: skip
    nc = nctr[A_CLASSES]
    nctr[A_CLASSES] = nc + 1
    n_open, n_idle = 0, 0
    for i in range(width):
        c = sig[i]
        nsig[nc, i] = c
        if c < 0:
            continue
        cap = kind_cap[ci[c, C_KIND]]
        base = 1.3 * (cused[c] / cap) + ci[c, C_N] if mode == MODE_HORUS else (cap - cused[c]) / cap
        pos = n_open
        while pos > 0 and nnb[nc, pos] > base:
            nnb[nc, pos + 1] = nnb[nc, pos]
            pos -= 1
        nnb[nc, pos + 1] = base
        n_open += 1
        n_idle += ci[c, C_N] == 0
    nnb[nc, 0] = 0.0
    for i in range(1, n_open + 1):
        nnb[nc, i] += nnb[nc, i - 1]
    nci[nc, W], nci[nc, OPEN], nci[nc, IDLE] = width, n_open, n_idle
    nci[nc, COUNT], nci[nc, ROOT], nci[nc, POS] = 0, -1, -1
    return int(nc)


@helper
def node_move(
    node: int, lo: int, hi: int, gcls: I32, ci: I32, cused: I64, kind_cap: I64, mode: int,
    nci: I32, nsig: I32, nnb: F64, ncls: I32, nact: I32, nctr: I64, nheap: I32,
    nkeys: I64, nvals: I32, sig: I32,
) -> None:  # fmt: skip
    """Move a node whose GPUs changed into the node class of its new multiset."""
    width = hi - lo
    for gpu in range(lo, hi):
        c = gcls[gpu]
        pos = gpu - lo
        while pos > 0 and sig[pos - 1] > c:
            sig[pos] = sig[pos - 1]
            pos -= 1
        sig[pos] = c
    h = width
    for i in range(width):
        h = h * 1000003 + sig[i] + 2
    h = h ^ (h >> 29)
    mask = nkeys.shape[0] - 1
    slot = h & mask
    nc = -1
    while nkeys[slot] != -1 and nc < 0:
        if nkeys[slot] == h and nci[nvals[slot], W] == width:
            cand = nvals[slot]
            same = True
            for i in range(width):
                same = same and nsig[cand, i] == sig[i]
            if same:
                nc = cand
        if nc < 0:
            slot = (slot + 1) & mask
    if nc < 0:
        nc = new_node_class(sig, width, h, ci, cused, kind_cap, mode, nci, nsig, nnb, nctr)
        nkeys[slot], nvals[slot] = h, nc
    old = ncls[node]
    if old == nc:
        return
    if old >= 0:
        nci[old, COUNT] -= 1
        if nci[old, COUNT] == 0:
            last = nctr[A_ACT] - 1
            moved = nact[last]
            nact[nci[old, POS]] = moved
            nci[moved, POS] = nci[old, POS]
            nctr[A_ACT] = last
    ncls[node] = nc
    nci[nc, ROOT] = _heap.push(nci[nc, ROOT], node, nctr, A_POOL, nheap)
    nci[nc, COUNT] += 1
    if nci[nc, COUNT] == 1:
        nact[nctr[A_ACT]] = nc
        nci[nc, POS] = nctr[A_ACT]
        nctr[A_ACT] += 1


@helper
def class_pick(nsig: I32, nc: int, width: int, cst: I8, ccost: F64, g: int, buf: F64) -> tuple[int, float]:
    """(feasible GPUs, summed cost of the g cheapest, added cheapest first) of a node class."""
    found = 0
    for i in range(width):
        c = nsig[nc, i]
        if c < 0 or cst[c] != ST_OK:
            continue
        cost = ccost[c]
        pos = min(found, g)
        while pos > 0 and buf[pos - 1] > cost:
            if pos < g:
                buf[pos] = buf[pos - 1]
            pos -= 1
        if pos < g:
            buf[pos] = cost
        found += 1
    total = 0.0
    for i in range(min(found, g)):
        total += buf[i]
    return found, total


@helper
def node_pick(gcls: I32, cst: I8, ccost: F64, g: int, lo: int, hi: int, buf_cost: F64, out: I32) -> None:
    """The g cheapest feasible GPUs in [lo, hi) by (cost, index) into out."""
    found = 0
    for gpu in range(lo, hi):
        c = gcls[gpu]
        if c < 0 or cst[c] != ST_OK:
            continue
        cost = ccost[c]
        pos = min(found, g)
        while pos > 0 and buf_cost[pos - 1] > cost:
            if pos < g:
                buf_cost[pos] = buf_cost[pos - 1]
                out[pos] = out[pos - 1]
            pos -= 1
        if pos < g:
            buf_cost[pos] = cost
            out[pos] = gpu
        found += 1


@helper
def best_gang(
    nci: I32, nsig: I32, nnb: F64, nact: I32, nctr: I64, nheap: I32, ncls: I32,
    cst: I8, ccost: F64, g: int, exclusive: bool, own: float, buf: F64,
    memo_found: I32, memo_total: F64, row: int, hint: int,
) -> tuple[int, int, int]:  # fmt: skip
    """(node or -1, its node class, largest feasible set on one node when none fits) for a
    g-GPU job. Classes whose bound (``own``: the job's own term) cannot beat the best so far are
    skipped; ``hint`` (where the last job of this shape went) is scored first, else the lowest
    bound. A node class's score per job shape (``row``; -1 = none) is memoised."""
    col = IDLE if exclusive else OPEN
    n_act = nctr[A_ACT]
    first = -1
    if hint >= 0 and nci[hint, COUNT] > 0 and nci[hint, col] >= g:
        first = nci[hint, POS]
    else:
        first_bound = np.inf
        for i in range(n_act):
            nc = nact[i]
            if nci[nc, col] >= g and nnb[nc, g] < first_bound:
                first, first_bound = i, nnb[nc, g]
    best_total, best_node, best_nc, largest = np.inf, -1, -1, 0
    for step in range(n_act + 1):
        i = first if step == 0 else step - 1
        if i < 0 or (step > 0 and i == first):
            continue
        nc = nact[i]
        if nci[nc, col] < g or nnb[nc, g] + g * own > best_total + 1e-9:
            continue
        idx = row * nci.shape[0] + nc
        if row >= 0 and memo_found[idx] >= 0:
            found, total = memo_found[idx], memo_total[idx]
        else:
            found, total = class_pick(nsig, nc, nci[nc, W], cst, ccost, g, buf)
            if row >= 0:
                memo_found[idx], memo_total[idx] = found, total
        if found < g:
            largest = max(largest, found)
            continue
        if total <= best_total:
            root, node = _heap.clean_top(nci[nc, ROOT], nc, nheap, ncls)
            nci[nc, ROOT] = root
            if total < best_total or node < best_node:
                best_total, best_node, best_nc = total, node, nc
    if best_node >= 0:
        return best_node, best_nc, 0
    for i in range(n_act):  # nothing was pruned: only classes with fewer than g open GPUs remain
        nc = nact[i]
        if largest < nci[nc, col] < g:
            largest = max(largest, class_pick(nsig, nc, nci[nc, W], cst, ccost, 0, buf)[0])
    return -1, -1, largest
