"""From a class-level LP solution to each job's time fractions per GPU type."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from horus_core.policies.gavel.classes import Problem
from horus_core.policies.gavel.lp import Pairs, Solution

_EPS = 1e-9


@dataclass(frozen=True, slots=True)
class JobShare:
    """One job's allocation: ``total[t]`` the fraction of time it should run on type t (alone or
    paired), ``paired[t]`` the part of it spent sharing, ``partners[t]`` the signatures it may
    share with there."""

    total: NDArray[np.float64]
    paired: NDArray[np.float64]
    partners: tuple[frozenset[str], ...]


def job_shares(
    problem: Problem, sol: Solution, splits: Sequence[NDArray[np.float64]], pairs: Pairs
) -> dict[str, JobShare]:
    t_n = len(problem.types)
    paired = np.zeros((len(problem.classes), t_n))
    partners: list[list[set[str]]] = [[set() for _ in range(t_n)] for _ in problem.classes]
    for q in range(len(pairs)):
        a, b = int(pairs.first[q]), int(pairs.second[q])
        paired[a] += sol.paired[q]
        paired[b] += sol.paired[q]
        for t in np.flatnonzero(sol.paired[q] > _EPS):
            partners[a][t].add(problem.classes[b].signature)
            partners[b][t].add(problem.classes[a].signature)
    out: dict[str, JobShare] = {}
    for c, cls in enumerate(problem.classes):
        total = sol.single[c] + paired[c]
        frozen = tuple(frozenset(p) for p in partners[c])
        for job_id, part in zip(cls.members, splits[c], strict=True):
            out[job_id] = JobShare(np.minimum(total * part, 1.0), paired[c] * part, frozen)
    return out
