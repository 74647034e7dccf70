"""Each Gavel objective as LP rows (:class:`~horus_core.policies.gavel.lp.Rows`) over classes,
and how a class splits its aggregate time among its jobs.

- max-min fairness (``las``): job j's normalised throughput is ``gpus_j * thr_j(A) / mean_j``,
  with ``mean_j`` its throughput on a GPU drawn at random from the cluster (an equal share of
  every type); every job is owed ``weight_j`` times the same value, which is maximised. With
  ``gpus_j`` in it, an 8-GPU job is owed eight times the GPU time of a 1-GPU job, not eight
  times less (least attained *GPU* service). A class splits its time equally.
- makespan: every job finishes its remaining steps within M, ``thr_j(A) >= rem_j / M``;
  ``s = T0 / M`` is maximised. A class splits its time in proportion to remaining steps.
- finish-time fairness: ``rho_j = (age_j + rem_j / thr_j(A)) / (age_j + rem_j / thr_eq_j)`` (the
  finish time it gets over the one an equal 1/n share would give it, counted from arrival);
  the largest ``rho`` is minimised by bisection over feasibility LPs with floors
  ``thr_j >= rem_j / (rho * D_j - age_j)``. A class splits its time in proportion to the floors.

Proportional splits stay feasible per job (time at most 1) because the class's time limit is
lowered to ``sum / max`` of the split's weights: that is what grouping costs for makespan and
FTF (a slightly tighter LP than the per-job one); for max-min fairness it costs nothing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from horus_core.policies.gavel.classes import Problem
from horus_core.policies.gavel.lp import Infeasible, Pairs, Rows, Solution, solve

FTF_PRECISION = 1.02  # bisection stops when the bracket of rho is this narrow (hi / lo)
FTF_STEPS = 12  # at most this many bisection steps
FTF_GROW = 20  # widenings of the bracket before giving up


@dataclass(frozen=True, slots=True)
class Members:
    """Per class, one entry per member job (same order as JobClass.members)."""

    remaining: Sequence[NDArray[np.float64]]  # steps left
    age: Sequence[NDArray[np.float64]]  # seconds since arrival


def mean_throughput(problem: Problem) -> NDArray[np.float64]:
    caps = problem.capacity
    out: NDArray[np.float64] = (problem.throughput * caps).sum(axis=1) / max(float(caps.sum()), 1.0)
    return out


def max_min_rows(problem: Problem) -> Rows:
    mean = mean_throughput(problem)
    norm = problem.throughput / mean[:, None]
    return Rows(norm, problem.weights * problem.sizes / problem.gpus, problem.sizes)


def solve_max_min(
    problem: Problem, pairs: Pairs, second_stage: bool = True
) -> tuple[Solution, list[NDArray[np.float64]]]:
    sol = solve(problem, max_min_rows(problem), pairs, second_stage=second_stage)
    return sol, [np.full(len(c.members), 1.0 / len(c.members)) for c in problem.classes]


def solve_makespan(problem: Problem, members: Members) -> tuple[Solution, list[NDArray[np.float64]]]:
    best = problem.throughput.max(axis=1)
    total = np.array([r.sum() for r in members.remaining])
    largest = np.array([max(r.max(), 1e-9) for r in members.remaining])
    seconds = total / best
    horizon = max(float(seconds.max()), 1e-9)
    limit = np.minimum(problem.sizes, total / largest)
    rows = Rows(problem.throughput / best[:, None], seconds / horizon, limit)
    return solve(problem, rows, Pairs.none(len(problem.types))), _shares(members.remaining)


def solve_ftf(
    problem: Problem, members: Members, hint: float | None = None
) -> tuple[Solution, list[NDArray[np.float64]], float]:
    """The allocation, the splits and the largest finish-time ratio ``rho`` found (within
    ``FTF_PRECISION``). ``hint``: the previous call's ``rho``, to start the bracket near it."""
    best = problem.throughput.max(axis=1)
    fair = _fair_times(problem, members)
    lo = max(
        float(((a + r / b) / d).max())
        for a, r, b, d in zip(members.age, members.remaining, best, fair, strict=True)
    )
    lo = max(lo, 1e-6)
    start = lo * 1.01 if hint is None or hint <= lo else hint * 1.05
    hi, found = _grow(problem, members, fair, best, start)
    if hint is not None and hi > lo * 1.01:
        lo = max(lo, hi / 1.1) if _infeasible_at(problem, members, fair, best, hi / 1.1) else lo
    for _ in range(FTF_STEPS):
        if hi / lo <= FTF_PRECISION:
            break
        mid = math.sqrt(lo * hi)
        try:
            found = _ftf_at(problem, members, fair, best, mid)
            hi = mid
        except Infeasible:
            lo = mid
    return found[0], found[1], hi


def _infeasible_at(
    problem: Problem, members: Members, fair: list[NDArray[np.float64]], best: NDArray[np.float64], rho: float
) -> bool:
    try:
        _ftf_at(problem, members, fair, best, rho)
    except Infeasible:
        return True
    return False


def _fair_times(problem: Problem, members: Members) -> list[NDArray[np.float64]]:
    """``D_j``: finish time (from arrival) with an equal share of the cluster's GPUs."""
    mean = mean_throughput(problem)
    n_jobs = max(sum(len(c.members) for c in problem.classes), 1)
    share = np.minimum(1.0, problem.capacity.sum() / (n_jobs * problem.gpus))
    eq = mean * share
    return [a + r / e for a, r, e in zip(members.age, members.remaining, eq, strict=True)]


Found = tuple[Solution, list[NDArray[np.float64]]]


def _grow(
    problem: Problem, members: Members, fair: list[NDArray[np.float64]], best: NDArray[np.float64], rho: float
) -> tuple[float, Found]:
    for _ in range(FTF_GROW):
        try:
            return rho, _ftf_at(problem, members, fair, best, rho)
        except Infeasible:
            rho *= 2.0
    raise Infeasible("no finish-time ratio is feasible")


def _ftf_at(
    problem: Problem, members: Members, fair: list[NDArray[np.float64]], best: NDArray[np.float64], rho: float
) -> Found:
    needs = []
    for age, rem, d, top in zip(members.age, members.remaining, fair, best, strict=True):
        budget = rho * d - age
        if np.any(budget <= 0):
            raise Infeasible("a job is already past this finish-time ratio")
        need = rem / budget
        if np.any(need > top * (1 + 1e-9)):
            raise Infeasible("a job would need more than its best speed")
        needs.append(need)
    total = np.array([n.sum() for n in needs])
    largest = np.array([max(n.max(), 1e-12) for n in needs])
    limit = np.minimum(problem.sizes, total / largest)
    rows = Rows(problem.throughput / best[:, None], total / best, limit)
    return solve(problem, rows, Pairs.none(len(problem.types)), fixed_s=1.0), _shares(needs)


def _shares(weights: Sequence[NDArray[np.float64]]) -> list[NDArray[np.float64]]:
    out = []
    for w in weights:
        total = float(w.sum())
        out.append(w / total if total > 0 else np.full(len(w), 1.0 / len(w)))
    return out
