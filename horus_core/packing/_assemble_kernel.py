"""The per-job part of :func:`horus_core.packing.assemble.assemble`, compiled: job classes in
order of first appearance and each GPU's first 3 residents, from the active jobs' records
(:mod:`horus_core.packing.placed`) and the queue's slots, in one pass without Python objects."""

from __future__ import annotations

import numba
import numpy as np
from numpy.typing import NDArray

from horus_core.jit import helper
from horus_core.packing._hash import slot_of

I32 = NDArray[np.int32]
I64 = NDArray[np.int64]
Ix = NDArray[np.intp]
B = NDArray[np.bool_]
SHIFT = 1 << 32  # class key = signature code * SHIFT + (GPUs + BIAS when split by GPUs, else BIAS)
BIAS = 1 << 31


@helper
def _class(
    hkeys: I64, hvals: I64, keys: I64, n_cls: int, code: int, gpus: int, split: bool
) -> tuple[int, int]:
    """The class of (signature code, GPUs when split), numbered on first sight; and the count.
    ``hkeys``/``hvals``: an open-addressing table of the keys seen (-1: free), a power of 2
    larger than the count can grow."""
    key = code * SHIFT + ((gpus + BIAS) if split else BIAS)
    h = slot_of(hkeys, key)
    if hkeys[h] == key:
        return int(hvals[h]), n_cls
    hkeys[h], hvals[h] = key, n_cls
    keys[n_cls] = key
    return n_cls, n_cls + 1


@numba.njit(cache=True, nogil=True)  # the master's loop runs meanwhile
def classes_and_residents(
    a_slot: Ix, start: I64, length: I32, pool: I64, q_slot: Ix, code: I32, gpus: I32, excl: B,
    n_gpus: int, split: bool,
) -> tuple[I64, I32, I32, I32, B]:  # fmt: skip
    """Returns (class keys in class order, the queue's classes, per GPU: residents (at most 3
    counted), their classes [gpus, 3], an exclusive job there). The active jobs' GPUs are read
    from their records (:class:`~horus_core.packing.placed.Records`: per slot, a span of
    ``pool``)."""
    n_act = a_slot.shape[0]
    keys = np.empty(n_act + q_slot.shape[0], np.int64)
    size = 4
    while size < 2 * keys.shape[0]:
        size *= 2
    hkeys, hvals = np.full(size, -1, np.int64), np.empty(size, np.int64)
    n_cls = 0
    nres = np.zeros(n_gpus, np.int32)
    res = np.full((n_gpus, 3), -1, np.int32)
    ex = np.zeros(n_gpus, np.bool_)
    for i in range(n_act):
        slot = a_slot[i]
        first = start[slot]
        last = first + length[slot]
        ready = False
        for k in range(first, last):
            if pool[k] >= 0:
                ready = True
                break
        if not ready:
            continue
        c, n_cls = _class(hkeys, hvals, keys, n_cls, code[slot], gpus[slot], split)
        for k in range(first, last):
            g = pool[k]
            if g >= 0:
                if nres[g] < 3:
                    res[g, nres[g]] = c
                    nres[g] += 1
                if excl[slot]:
                    ex[g] = True
    job_cls = np.empty(q_slot.shape[0], np.int32)
    for i in range(q_slot.shape[0]):
        job_cls[i], n_cls = _class(hkeys, hvals, keys, n_cls, code[q_slot[i]], gpus[q_slot[i]], split)
    return keys[:n_cls].copy(), job_cls, nres, res, ex


@numba.njit(cache=True, nogil=True)
def code_floors(
    a_slot: Ix, q_slot: Ix, code: I32, floor: NDArray[np.float64], n_codes: int
) -> NDArray[np.float64]:
    """The highest floor per signature code over the active jobs then the queue (0: none),
    as ``numpy.maximum.at`` leaves it (a NaN floor stays)."""
    out = np.zeros(n_codes, np.float64)
    for slots in (a_slot, q_slot):
        for k in range(slots.shape[0]):
            c, f = code[slots[k]], floor[slots[k]]
            m = out[c]
            out[c] = m if m >= f else (f if f > m else np.nan)
    return out
