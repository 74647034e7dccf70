"""The one linear program behind every Gavel policy here, solved with SciPy's HiGHS.

Variables: ``A[c, t]``, the time fraction class c's jobs run alone on GPU type t, summed over
the class's jobs; optionally ``P[q, t]``, the time fraction the co-located pair q (one job of
class q1 and one of q2 sharing the same GPUs) runs on type t; and one scalar ``s``. Rows:

- floor, per class:  ``coef[c] * s <= sum_t Xn[c, t] * (A[c, t] + sum_{q with c} m * speed * P[q, t])``
  (Xn: the class's throughput in the unit its policy normalises by; m = 2 for a pair of one class);
- time, per class:   ``sum_t A[c, t] + sum_{q with c} m * P[q, t] <= limit[c]`` (each job at most 1);
- capacity, per type: ``sum_c gpus[c] * A[c, t] + sum_q gpus[q] * P[q, t] <= GPUs of type t``;
- ``A[c, t] = 0`` and ``P[q, t] = 0`` where the class (either job) cannot run on t.

Stage 1 maximises ``s`` (or checks feasibility with ``s`` fixed); stage 2 keeps ``s`` at its
optimum and maximises the total normalised GPU throughput, so that capacity the fairness
objective leaves idle still goes to jobs that can use it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray
from scipy.optimize import linprog

from horus_core.policies.gavel.classes import Problem

_KEEP = 1.0 - 1e-6  # stage 2 keeps s at this fraction of its optimum (solver tolerance)


@dataclass(frozen=True, slots=True)
class Pairs:
    """Co-location rows: pair q = (first[q], second[q]); speed_*[q, t] = each job's normalised
    speed (1.0 = alone) sharing a GPU of type t; 0 where they do not fit there."""

    first: NDArray[np.int64]
    second: NDArray[np.int64]
    speed_first: NDArray[np.float64]
    speed_second: NDArray[np.float64]

    @staticmethod
    def none(types: int) -> Pairs:
        empty = np.zeros(0, dtype=np.int64)
        return Pairs(empty, empty, np.zeros((0, types)), np.zeros((0, types)))

    def __len__(self) -> int:
        return len(self.first)


@dataclass(frozen=True, slots=True)
class Rows:
    """What a policy puts into the LP besides the problem: see the module doc."""

    norm: NDArray[np.float64]  # Xn[c, t]
    coef: NDArray[np.float64]  # floor coefficient per class
    limit: NDArray[np.float64]  # time limit per class


@dataclass(frozen=True, slots=True)
class Solution:
    single: NDArray[np.float64]  # A[c, t]
    paired: NDArray[np.float64]  # P[q, t]
    s: float


class Infeasible(Exception):
    """No allocation meets the floors (only when ``s`` is fixed)."""


def solve(
    problem: Problem, rows: Rows, pairs: Pairs, fixed_s: float | None = None, second_stage: bool = True
) -> Solution:
    """Stage 1 then stage 2 (see the module doc). ``fixed_s``: feasibility at this ``s``.
    ``second_stage=False``: stage 1's solution as the solver returns it (as Gavel does)."""
    lp = _Matrices.build(problem, rows, pairs)
    if fixed_s is None:
        first = _run(lp, lp.objective_s(), (0.0, np.inf))
        s = float(first[-1])
        if not second_stage:
            return lp.split(first)
        second = lp.split(_run(lp, lp.objective_total(), (s * _KEEP, np.inf)))
        return Solution(second.single, second.paired, s)
    return lp.split(_run(lp, lp.objective_total(), (fixed_s, fixed_s)))


def _run(lp: _Matrices, cost: NDArray[np.float64], s_bounds: tuple[float, float]) -> NDArray[np.float64]:
    bounds = np.column_stack([np.zeros(lp.n_vars), lp.upper])
    bounds[-1] = s_bounds
    res = linprog(cost, A_ub=lp.a_ub, b_ub=lp.b_ub, bounds=bounds, method="highs")
    if res.status == 2:
        raise Infeasible("the floors cannot all be met")
    if res.status != 0 or res.x is None:
        raise RuntimeError(f"HiGHS failed: {res.message}")
    return np.asarray(res.x, dtype=np.float64)


@dataclass(frozen=True, slots=True)
class _Matrices:
    a_ub: sp.csr_matrix
    b_ub: NDArray[np.float64]
    upper: NDArray[np.float64]  # per variable, s last (its entry unused)
    gain: NDArray[np.float64]  # normalised GPU throughput per unit of each variable
    n_single: int
    shape: tuple[int, int, int]  # classes, pairs, types

    @property
    def n_vars(self) -> int:
        return len(self.upper)

    def objective_s(self) -> NDArray[np.float64]:
        cost = np.zeros(self.n_vars)
        cost[-1] = -1.0
        return cost

    def objective_total(self) -> NDArray[np.float64]:
        cost = np.zeros(self.n_vars)
        cost[:-1] = -self.gain
        return cost

    def split(self, x: NDArray[np.float64]) -> Solution:
        c, q, t = self.shape
        x = np.maximum(x, 0.0)
        return Solution(x[: c * t].reshape(c, t), x[c * t : c * t + q * t].reshape(q, t), float(x[-1]))

    @staticmethod
    def build(problem: Problem, rows: Rows, pairs: Pairs) -> _Matrices:
        c_n, t_n, q_n = len(problem.classes), len(problem.types), len(pairs)
        n_single = c_n * t_n
        s_col = n_single + q_n * t_n
        parts = [_single_entries(problem, rows, c_n, t_n), _pair_entries(pairs, rows, problem.gpus, c_n, t_n)]
        parts.append((np.arange(c_n), np.full(c_n, s_col), rows.coef))
        r, col, val = (np.concatenate([p[i] for p in parts]) for i in range(3))
        a_ub = sp.coo_matrix((val, (r, col)), shape=(2 * c_n + t_n, s_col + 1)).tocsr()
        b_ub = np.concatenate([np.zeros(c_n), rows.limit, problem.capacity])
        upper = np.concatenate([_single_upper(problem, rows), _pair_upper(pairs, rows), [0.0]])
        gain = np.concatenate([_single_gain(problem, rows), _pair_gain(pairs, rows, problem.gpus)])
        return _Matrices(a_ub, b_ub, upper, gain, n_single, (c_n, q_n, t_n))


Entries = tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]]


def _single_entries(problem: Problem, rows: Rows, c_n: int, t_n: int) -> Entries:
    """Floor, time and capacity entries of the A columns (row blocks: C floors, C times, T caps)."""
    cols = np.arange(c_n * t_n)
    c, t = cols // t_n, cols % t_n
    r = np.concatenate([c, c_n + c, 2 * c_n + t])
    v = np.concatenate([-rows.norm[c, t], np.ones(len(cols)), problem.gpus[c]])
    return r, np.tile(cols, 3), v


def _pair_entries(pairs: Pairs, rows: Rows, gpus: NDArray[np.float64], c_n: int, t_n: int) -> Entries:
    q_n = len(pairs)
    cols = c_n * t_n + np.arange(q_n * t_n)
    q, t = np.arange(q_n * t_n) // t_n, np.arange(q_n * t_n) % t_n
    a, b = pairs.first[q], pairs.second[q]
    r = np.concatenate([a, b, c_n + a, c_n + b, 2 * c_n + t])
    v = np.concatenate(
        [
            -rows.norm[a, t] * pairs.speed_first[q, t],
            -rows.norm[b, t] * pairs.speed_second[q, t],
            np.ones(len(cols)),
            np.ones(len(cols)),
            gpus[a],
        ]
    )
    return r, np.tile(cols, 5), v


def _single_gain(problem: Problem, rows: Rows) -> NDArray[np.float64]:
    return (problem.gpus[:, None] * rows.norm).ravel()


def _pair_gain(pairs: Pairs, rows: Rows, gpus: NDArray[np.float64]) -> NDArray[np.float64]:
    a, b = pairs.first, pairs.second
    both = rows.norm[a] * pairs.speed_first + rows.norm[b] * pairs.speed_second
    return (gpus[a][:, None] * both).ravel()


def _single_upper(problem: Problem, rows: Rows) -> NDArray[np.float64]:
    runs = problem.throughput > 0
    return np.where(runs, rows.limit[:, None], 0.0).ravel()


def _pair_upper(pairs: Pairs, rows: Rows) -> NDArray[np.float64]:
    if not len(pairs):
        return np.zeros(0)
    fits = (pairs.speed_first > 0) & (pairs.speed_second > 0)
    lim = np.minimum(rows.limit[pairs.first], rows.limit[pairs.second])[:, None]
    return np.where(fits, lim, 0.0).ravel()
