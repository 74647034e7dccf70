"""The analytic model's constants per GPU type, learned from the pairs observed on that type.

:func:`profiles.analytic_speed` has two constants, fitted once on the V100 table (``ALPHA``,
``GAMMA``). A GPU type the table lacks would borrow them forever; instead, each type's constants
are the least-squares fit to the pairs observed on it (the observed speed of a job against the
speed the formula gives from the two jobs' profiles), with a Gaussian prior centred on the V100
fit worth about :data:`PRIOR_PAIRS` observations: with none the V100 constants hold exactly, a
handful of consistent observations move them. A grid search (deterministic, no SciPy).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from horus_core.interference.profiles import ALPHA, GAMMA

PRIOR_PAIRS = 3.0  # the prior's weight, in observed pairs
RESIDUAL = 0.14  # spread of an observed speed around the formula (the V100 fit's RMS error)
ALPHA_SPREAD = 0.1
GAMMA_SPREAD = 1.0
_ALPHAS = np.linspace(0.0, 0.6, 61)
_GAMMAS = np.linspace(0.25, 4.0, 16)

Sample = tuple[float, float, float]  # (own peak %, co-runners' summed avg %, observed speed)


def speeds(own_peak: np.ndarray, others: np.ndarray, alpha: np.ndarray, gamma: np.ndarray) -> np.ndarray:
    """:func:`profiles.analytic_speed` over arrays (broadcasting)."""
    base = np.maximum(0.0, 1.0 - alpha * others / 100.0)
    load = own_peak + others
    over = (others > 0.0) & (load > 100.0)
    out: np.ndarray = np.where(over, base * (100.0 / np.maximum(load, 1e-9)) ** gamma, base)
    return out


def fit_constants(samples: Sequence[Sample]) -> tuple[float, float]:
    """(alpha, gamma) for one GPU type from its observed samples (none: the V100 constants)."""
    if not samples:
        return ALPHA, GAMMA
    data = np.asarray(samples, dtype=np.float64)
    alpha = _ALPHAS[:, None, None]
    gamma = _GAMMAS[None, :, None]
    predicted = speeds(data[:, 0], data[:, 1], alpha, gamma)
    misfit = (((predicted - data[:, 2]) / RESIDUAL) ** 2).sum(axis=2)
    weight = PRIOR_PAIRS / 3.0  # per constant, scaled so the prior counts as PRIOR_PAIRS samples
    off_alpha = ((_ALPHAS[:, None] - ALPHA) / ALPHA_SPREAD) ** 2
    off_gamma = ((_GAMMAS[None, :] - GAMMA) / GAMMA_SPREAD) ** 2
    prior = weight * (off_alpha + off_gamma)
    i, j = np.unravel_index(int(np.argmin(misfit + prior)), misfit.shape)
    return float(_ALPHAS[i]), float(_GAMMAS[j])
