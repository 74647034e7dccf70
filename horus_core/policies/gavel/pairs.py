"""Which co-located pairs of classes become LP rows for ``gavel-las-packed``, and their speeds.

A pair row joins two *classes* of the same GPU count (not two jobs, as in Gavel), and only where
on some GPU type both fit, their normalised speeds sum above 1 and neither falls below its floor
(the highest ``min_speed`` among the classes of its signature: a round lets a job join any job of
a partner signature). Each class keeps its ``MAX_PARTNERS`` best partners; a pair stays if
either class keeps it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from horus_core.policies.gavel.classes import Problem
from horus_core.policies.gavel.lp import Pairs

MAX_PARTNERS = 6
# (signature a, signature b, GPU type) -> (speed of a, speed of b) sharing one GPU; 0, 0: no fit
PairSpeeds = Callable[[str, str, str], tuple[float, float]]


def choose_pairs(problem: Problem, speeds: PairSpeeds) -> Pairs:
    classes, types = problem.classes, problem.types
    floors: dict[str, float] = {}
    for c in classes:
        floors[c.signature] = max(floors.get(c.signature, 0.0), c.min_speed)
    found: dict[tuple[int, int], tuple[list[float], list[float]]] = {}
    for a in range(len(classes)):
        for b in range(a, len(classes)):
            if classes[a].gpus != classes[b].gpus:
                continue
            if a == b and len(classes[a].members) < 2:
                continue
            pair = _speeds(problem, a, b, speeds, floors)
            if pair is not None:
                found[(a, b)] = pair
    kept = _top_partners(found, len(classes))
    if not kept:
        return Pairs.none(len(types))
    first = np.array([a for a, _ in kept], dtype=np.int64)
    second = np.array([b for _, b in kept], dtype=np.int64)
    sf = np.array([found[k][0] for k in kept], dtype=np.float64)
    ss = np.array([found[k][1] for k in kept], dtype=np.float64)
    return Pairs(first, second, sf, ss)


def _speeds(
    problem: Problem, a: int, b: int, speeds: PairSpeeds, floors: dict[str, float]
) -> tuple[list[float], list[float]] | None:
    ca, cb = problem.classes[a], problem.classes[b]
    floor_a, floor_b = floors[ca.signature], floors[cb.signature]
    sa, sb, useful = [], [], False
    for t, gpu_type in enumerate(problem.types):
        if problem.throughput[a, t] <= 0 or problem.throughput[b, t] <= 0:
            x, y = 0.0, 0.0
        else:
            x, y = speeds(ca.signature, cb.signature, gpu_type)
            if x <= 0 or y <= 0 or x < floor_a or y < floor_b:
                x, y = 0.0, 0.0
        useful = useful or x + y > 1.0
        sa.append(x)
        sb.append(y)
    return (sa, sb) if useful else None


def _top_partners(
    found: dict[tuple[int, int], tuple[list[float], list[float]]], n_classes: int
) -> list[tuple[int, int]]:
    by_class: dict[int, list[tuple[float, tuple[int, int]]]] = {c: [] for c in range(n_classes)}
    for key, (sa, sb) in found.items():
        score = max(x + y for x, y in zip(sa, sb, strict=True))
        by_class[key[0]].append((score, key))
        if key[1] != key[0]:
            by_class[key[1]].append((score, key))
    kept: set[tuple[int, int]] = set()
    for options in by_class.values():
        options.sort(key=lambda o: (-o[0], o[1]))
        kept.update(key for _, key in options[:MAX_PARTNERS])
    return sorted(kept)
