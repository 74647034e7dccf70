"""Queue orders over a pass's pending jobs, vectorised: each returns positions into
``live.pending`` in exactly the order ``sorted(pending, key=...)`` gives (ids break ties)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from horus_core.interference import InterferenceModel
from horus_core.packing.cluster import ClusterLayout
from horus_core.packing.jobs import Live

Ix = NDArray[np.intp]
Key = NDArray[np.int64] | NDArray[np.float64]


def by_keys(keys: Sequence[Key], ids: Sequence[str], among: Ix | None = None) -> Ix:
    """Positions (all, or ``among``) sorted by ``keys`` (first key first), then by id."""
    if among is not None:
        keys = [k[among] for k in keys]
    order: Ix = np.lexsort(tuple(reversed(keys))) if len(keys) else np.zeros(0, np.intp)
    if len(order) > 1:
        same = np.ones(len(order) - 1, np.bool_)
        for k in keys:
            ks = k[order]
            same &= ks[1:] == ks[:-1]
        if same.any():
            order = _break_ties(order, same, ids if among is None else [ids[i] for i in among.tolist()])
    out: Ix = order if among is None else among[order]
    return out


def _break_ties(order: Ix, same: NDArray[np.bool_], ids: Sequence[str]) -> Ix:
    order = order.copy()
    edges = np.diff(np.r_[0, same.astype(np.int8), 0])
    for lo, hi in zip(np.flatnonzero(edges == 1).tolist(), np.flatnonzero(edges == -1).tolist(), strict=True):
        run = order[lo : hi + 1].tolist()
        order[lo : hi + 1] = sorted(run, key=ids.__getitem__)
    return order


def util_positions(live: Live, among: Ix | None = None) -> Ix:
    """Horus order: higher priority, then lowest predicted utilisation, then arrival, then id."""
    return by_keys([-live.p_prio, live.p_util(), live.p_sub], live.p_ids, among)


def las_positions(
    live: Live, levels: NDArray[np.int64], among: Ix | None = None, left: Key | None = None
) -> Ix:
    """Least attained service (discrete): higher priority, then lower service level (``levels``:
    one per pending job), then (with ``left``) less confidently-estimated remaining work (inf:
    none), then arrival (FIFO within a level), then id."""
    keys: list[Key] = [-live.p_prio, levels, live.p_sub]
    if left is not None:
        keys.insert(2, left)
    return by_keys(keys, live.p_ids, among)


def arrival_positions(live: Live, layout: ClusterLayout | None = None) -> Ix:
    """Higher priority first, then submission time, then id."""
    return by_keys([-live.p_prio, live.p_sub], live.p_ids)


def work_positions(live: Live, layout: ClusterLayout, model: InterferenceModel) -> Ix:
    """Lucid's order: higher priority, then shortest estimated work x GPUs (unknown: last), then
    arrival, then id; work = total steps / solo steps per second on the main GPU type."""
    work = solo_seconds(live, layout, model) * live.table.gpus[live.p_slot].astype(np.float64)
    return by_keys([-live.p_prio, work, live.p_sub], live.p_ids)


def solo_seconds(live: Live, layout: ClusterLayout, model: InterferenceModel) -> NDArray[np.float64]:
    """Per pending job, its whole length run alone on the main GPU type: total steps / solo
    steps per second (inf: no total steps, or no solo speed known)."""
    table, slots = live.table, live.p_slot
    tcode, gpus = table.tcode[slots], table.gpus[slots]
    steps = table.steps[slots]
    pair = tcode.astype(np.int64) * (1 << 32) + (gpus.astype(np.int64) + (1 << 31))
    uniq, inverse = np.unique(pair, return_inverse=True)
    main, names = layout.main_type, table.sigs.names
    rates = []
    for k in uniq.tolist():
        rate = model.solo_throughput(names[k >> 32], (k & 0xFFFFFFFF) - (1 << 31), main)
        rates.append(rate or 0.0)
    rate = np.array(rates, np.float64)[inverse.reshape(-1)]
    known = (rate != 0.0) & (steps > 0)
    seconds = np.full(len(slots), np.inf)
    seconds[known] = steps[known].astype(np.float64) / rate[known]
    return seconds
