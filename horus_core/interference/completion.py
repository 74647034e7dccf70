"""Low-rank completion of a pair-speed matrix (IASP-style collaborative filtering).

``values[i, j]`` is the normalised speed of job i when sharing a GPU with job j; ``known``
marks the measured entries. Job types that slow or suffer alike have similar rows and
columns, so the matrix is close to low rank: we fit ``values ~ mean + row_i + col_j + U_i . V_j``
(biases plus rank 3) by alternating ridge regressions over the known entries and read the
missing ones off the model. Deterministic (fixed seed).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

Matrix = NDArray[np.float64]


def complete(
    values: Matrix,
    known: NDArray[np.bool_],
    *,
    rank: int = 3,
    reg: float = 0.3,
    iters: int = 40,
    seed: int = 0,
) -> Matrix:
    """Every entry predicted from the known ones (known entries are smoothed, not kept)."""
    if not known.any():
        return np.ones_like(values)
    mean = float(values[known].mean())
    weights = known.astype(np.float64)
    centred = np.where(known, values - mean, 0.0)
    rng = np.random.default_rng(seed)
    n, m = values.shape
    left = rng.normal(0.0, 0.1, (n, rank))
    right = rng.normal(0.0, 0.1, (m, rank))
    row_bias, col_bias = np.zeros(n), np.zeros(m)
    ridge = reg * np.eye(rank + 1)
    for _ in range(iters):
        # rows: solve [U_i, row_i] against [V_j, 1] with the column bias taken out
        solved = _ridge_rows(_with_ones(right), centred - col_bias, weights, ridge)
        left, row_bias = solved[:, :rank], solved[:, rank]
        solved = _ridge_rows(_with_ones(left), (centred - row_bias[:, None]).T, weights.T, ridge)
        right, col_bias = solved[:, :rank], solved[:, rank]
    fitted = mean + row_bias[:, None] + col_bias[None, :] + left @ right.T
    out: Matrix = np.clip(fitted, 0.05, 1.0)  # a prediction, never 0 (0 means: does not fit)
    return out


def _with_ones(factor: Matrix) -> Matrix:
    return np.hstack([factor, np.ones((factor.shape[0], 1))])


def _ridge_rows(factor: Matrix, target: Matrix, weights: Matrix, ridge: Matrix) -> Matrix:
    """For every row i: argmin_u sum_k w_ik (target_ik - u . factor_k)^2 + reg |u|^2."""
    gram = np.einsum("ik,kr,ks->irs", weights, factor, factor) + ridge
    rhs = (weights * target) @ factor
    solved: Matrix = np.linalg.solve(gram, rhs[..., None])[..., 0]
    return solved
