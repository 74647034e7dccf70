"""Completion of a pair-speed matrix by collaborative filtering with biases (IASP-style).

``values[i, j]`` is the normalised speed of job i when sharing a GPU with job j; ``known``
marks the measured entries. We fit

    values[i, j] ~ mean + sensitivity_i + intensity_j + U_i . V_j

over the known entries by alternating ridge regressions: ``sensitivity_i`` (row bias) is how
much job i suffers next to anyone, ``intensity_j`` (column bias) how much job j hurts anyone,
and the rank-r term the interactions the biases miss. The ridge penalty is a fixed amount per
job, so a job with few measured partners has its biases and factors shrunk towards zero, i.e.
its predictions towards the mean of the known entries; a job with none is predicted from its
partner's bias alone. A job described by a model card has priors instead: its biases shrink
towards the sensitivity and intensity predicted from its card (:mod:`.predictor`), so its first
measurements refine that prediction rather than the mean. How much structure the data supports
(the rank, the strength of the shrinkage, down to biases only or the plain mean) is chosen per
matrix by k-fold cross-validation over the known entries, preferring the simpler model unless
the richer one is better by more than half its standard error, so sparse or noisy data gets a
simple model and dense data a richer one. Deterministic (fixed seeds).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

Matrix = NDArray[np.float64]
Mask = NDArray[np.bool_]
Priors = tuple[Matrix, Matrix]  # (row biases, column biases) to shrink towards

FLOOR = 0.05  # a prediction is never 0 (0 means: does not fit)
FOLDS = 4
ITERS = 40  # alternating rounds at most; fewer once no column term moves by TOLERANCE
TOLERANCE = 1e-4


@dataclass(frozen=True, slots=True)
class Fit:
    rank: int  # number of latent factors (0: biases only)
    reg: float  # ridge penalty on the factors
    reg_bias: float  # ridge penalty on the biases (large: the plain mean)


# From the plain mean to rank 4; cross-validation picks one per matrix.
CANDIDATES: tuple[Fit, ...] = (
    Fit(0, 0.0, 1e6),
    Fit(0, 0.0, 3.0),
    Fit(0, 0.0, 1.0),
    Fit(1, 0.3, 0.3),
    Fit(2, 0.3, 0.3),
    Fit(3, 0.3, 0.3),
    Fit(3, 0.1, 0.3),
    Fit(4, 0.3, 0.3),
)
SE_FACTOR = 0.5  # how many standard errors a richer model must win by
MIN_FOR_CV = 2 * FOLDS  # fewer known entries than this: biases with strong shrinkage, no choice


def complete(
    values: Matrix, known: Mask, *, fit: Fit | None = None, seed: int = 0, priors: Priors | None = None
) -> Matrix:
    """Every entry predicted from the known ones (known entries are smoothed, not kept); a row or
    column with ``priors`` is shrunk towards its prior bias, not towards the mean."""
    if values.shape != known.shape or values.ndim != 2:
        raise ValueError(f"values {values.shape} and known {known.shape} must be one 2-D shape")
    if not np.isfinite(values[known]).all():
        raise ValueError("known entries must be finite")
    if not known.any():
        return np.ones_like(values)
    chosen = fit or choose(values, known, seed=seed)
    out: Matrix = np.clip(fit_matrix(values, known, chosen, seed=seed, priors=priors), FLOOR, 1.0)
    return out


def choose(values: Matrix, known: Mask, *, seed: int = 0) -> Fit:
    """The simplest candidate whose k-fold absolute error on the known entries is within one
    half a standard error of the best one's (paired over the entries): a richer model must earn its
    place, which keeps sparse or noisy data close to the mean."""
    cells = np.argwhere(known)
    if len(cells) < MIN_FOR_CV:
        return CANDIDATES[1]
    folds = np.random.default_rng(seed).permutation(len(cells)) % FOLDS
    errors = np.array([_cv_errors(values, known, cells, folds, fit, seed) for fit in CANDIDATES])
    best = errors[int(np.argmin(errors.mean(axis=1)))]
    for fit, error in zip(CANDIDATES, errors, strict=True):
        excess = error - best
        if excess.mean() <= SE_FACTOR * excess.std() / np.sqrt(len(excess)):
            return fit
    raise AssertionError("unreachable: the best candidate is within its own error")


def _cv_errors(
    values: Matrix, known: Mask, cells: NDArray[np.intp], folds: NDArray[np.intp], fit: Fit, seed: int
) -> Matrix:
    """Absolute error of every known entry, predicted with its fold left out."""
    out = np.zeros(len(cells))
    for k in range(FOLDS):
        rows, cols = cells[folds == k].T
        train = known.copy()
        train[rows, cols] = False
        predicted = np.clip(fit_matrix(values, train, fit, seed=seed), FLOOR, 1.0)
        out[folds == k] = np.abs(predicted[rows, cols] - values[rows, cols])
    return out


def fit_matrix(
    values: Matrix, known: Mask, fit: Fit, *, seed: int = 0, priors: Priors | None = None
) -> Matrix:
    """mean + row bias + column bias + rank-r product, fitted to the known entries (unclipped).
    ``priors``: per row and per column, the bias to shrink towards instead of 0 (a job's
    predicted sensitivity and intensity, :mod:`.predictor`)."""
    mean, row_bias, col_bias, left, right = fit_terms(values, known, fit, seed=seed, priors=priors)
    out: Matrix = mean + row_bias[:, None] + col_bias[None, :] + left @ right.T
    return out


def fit_terms(
    values: Matrix, known: Mask, fit: Fit, *, seed: int = 0, priors: Priors | None = None
) -> tuple[float, Matrix, Matrix, Matrix, Matrix]:
    """(mean, row biases, column biases, row factors, column factors) of :func:`fit_matrix`."""
    mean = float(values[known].mean()) if known.any() else 0.0
    weights = known.astype(np.float64)
    centred = np.where(known, values - mean, 0.0)
    n, m = values.shape
    rng = np.random.default_rng(seed)
    left, right = rng.normal(0.0, 0.1, (n, fit.rank)), rng.normal(0.0, 0.1, (m, fit.rank))
    row_prior, col_prior = priors if priors is not None else (np.zeros(n), np.zeros(m))
    row_bias, col_bias = row_prior.copy(), col_prior.copy()
    ridge = np.diag([fit.reg] * fit.rank + [fit.reg_bias])
    for _ in range(ITERS):
        # rows: solve [U_i, row_i] against [V_j, 1] with the column bias taken out; then columns
        solved = _ridge_rows(_with_ones(right), centred - col_bias, weights, ridge, row_prior)
        left, row_bias = solved[:, : fit.rank], solved[:, fit.rank]
        solved = _ridge_rows(_with_ones(left), (centred - row_bias[:, None]).T, weights.T, ridge, col_prior)
        moved = float(np.abs(solved[:, fit.rank] - col_bias).max(initial=0.0))
        moved = max(moved, float(np.abs(solved[:, : fit.rank] - right).max(initial=0.0)))
        right, col_bias = solved[:, : fit.rank], solved[:, fit.rank]
        if moved < TOLERANCE:
            break
    return mean, row_bias, col_bias, left, right


def _with_ones(factor: Matrix) -> Matrix:
    return np.hstack([factor, np.ones((factor.shape[0], 1))])


def _ridge_rows(
    factor: Matrix, target: Matrix, weights: Matrix, ridge: Matrix, bias_prior: Matrix | None = None
) -> Matrix:
    """For every row i: argmin_u sum_k w_ik (target_ik - u . factor_k)^2 + (u - p_i)' ridge (u - p_i),
    where p_i is 0 but for its last (bias) component, ``bias_prior[i]``."""
    r = factor.shape[1]
    outer = (factor[:, :, None] * factor[:, None, :]).reshape(len(factor), r * r)
    gram = (weights @ outer).reshape(len(weights), r, r) + ridge  # one BLAS product, not an einsum
    rhs = (weights * target) @ factor
    if bias_prior is not None and bias_prior.any():
        rhs[:, r - 1] += ridge[r - 1, r - 1] * bias_prior
    solved = np.linalg.solve(gram, rhs[..., None])[..., 0]
    return np.asarray(solved, dtype=np.float64)
