"""Optimus's two fits: a job's loss curve (steps left to converge) and its speed per GPU count.

**Loss curve.** ``l(k) = 1 / (b0*k + b1) + b2`` with ``b0, b1, b2 >= 0`` (Optimus, EuroSys 2018).
For a fixed floor ``b2`` below every observed loss the curve is linear in ``(b0, b1)`` after the
substitution ``y = 1 / (l - b2) = b0*k + b1``; that is solved by non-negative least squares
(``scipy.optimize.nnls``). Each row is weighted by ``(l - b2)**2``, the first-order factor that
turns an error in ``y`` back into an error in loss (``dy = -dl / (l - b2)**2``), so noise at low
loss does not dominate. ``b2`` itself is found by a grid over ``[0, min(l))`` (squared error in
loss units) refined by a golden-section search around the best grid point.

*Convergence* (used when the spec gives no ``total_steps``): the step ``K`` at which the curve's
predicted loss decrease over the next 1,000 steps falls below ``drop`` times the reducible loss
at step 0 (``1/b1``): ``1000 * b0 / (b0*K + b1)**2 <= drop / b1``, i.e.
``K = (sqrt(1000 * b0 * b1 / drop) - b1) / b0``. The default ``drop`` is :data:`CONVERGE_DROP`.

**Speed.** Optimus's step-time model with all-reduce, no parameter servers and a fixed batch:
``1/f(w) = a/w + b + c*w`` (compute split over w GPUs, a fixed per-step cost, a cost growing with
the ring), linear in ``(a, b, c) >= 0`` and fitted by NNLS on measured (GPU count, steps/s) points.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import nnls

from horus_core.errors import InvalidArgument

CONVERGE_DROP = 1e-5  # loss decrease per 1,000 steps, as a fraction of the reducible loss at step 0
MIN_POINTS = 4  # fewer points than this give no loss fit
_GRID = 24
_GOLDEN_ITERS = 24
_INV_PHI = (math.sqrt(5.0) - 1.0) / 2.0


@dataclass(frozen=True, slots=True)
class LossCurve:
    b0: float
    b1: float
    b2: float

    def loss(self, step: float) -> float:
        denom = self.b0 * step + self.b1
        return math.inf if denom <= 0 else 1.0 / denom + self.b2

    def converge_step(self, drop: float = CONVERGE_DROP) -> float:
        """The step where the predicted decrease per 1,000 steps falls below ``drop / b1``
        (inf when the curve never descends: ``b0 == 0`` or ``b1 == 0``)."""
        if self.b0 <= 0 or self.b1 <= 0:
            return math.inf
        return max(0.0, (math.sqrt(1000.0 * self.b0 * self.b1 / drop) - self.b1) / self.b0)


def fit_loss_curve(steps: Sequence[float], losses: Sequence[float]) -> LossCurve | None:
    """The NNLS fit of the curve to (step, loss) points; None with fewer than
    :data:`MIN_POINTS` finite points or no positive loss spread to fit."""
    k, loss = _clean(steps, losses)
    if len(k) < MIN_POINTS or float(loss.min()) <= 0.0 or float(np.ptp(loss)) <= 0.0:
        return None
    top = float(loss.min()) * (1.0 - 1e-6)
    grid = np.linspace(0.0, top, _GRID)
    errors = [_fit_at(k, loss, b2)[1] for b2 in grid]
    best = int(np.argmin(errors))
    lo, hi = grid[max(best - 1, 0)], grid[min(best + 1, _GRID - 1)]
    b2 = _golden(k, loss, float(lo), float(hi))
    (b0, b1), _ = _fit_at(k, loss, b2)
    return LossCurve(b0, b1, b2)


def _clean(steps: Sequence[float], losses: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    if len(steps) != len(losses):
        raise InvalidArgument("progress", f"{len(steps)} steps but {len(losses)} losses")
    k = np.asarray(steps, dtype=np.float64)
    loss = np.asarray(losses, dtype=np.float64)
    keep = np.isfinite(k) & np.isfinite(loss) & (k >= 0)
    return k[keep], loss[keep]


def _fit_at(k: np.ndarray, loss: np.ndarray, b2: float) -> tuple[tuple[float, float], float]:
    """(b0, b1) for floor ``b2`` and the squared error in loss units."""
    gap = loss - b2
    weight = gap * gap
    design = np.column_stack((k * weight, weight))
    coef, _ = nnls(design, weight / gap)
    b0, b1 = float(coef[0]), float(coef[1])
    denom = b0 * k + b1
    if not np.all(denom > 0):
        return (b0, b1), math.inf
    err = float(np.sum((1.0 / denom + b2 - loss) ** 2))
    return (b0, b1), err


def _golden(k: np.ndarray, loss: np.ndarray, lo: float, hi: float) -> float:
    """Golden-section search for the error-minimising floor in [lo, hi] (one fit per step)."""

    def err(b2: float) -> float:
        return _fit_at(k, loss, b2)[1]

    a, b = lo, hi
    c, d = b - _INV_PHI * (b - a), a + _INV_PHI * (b - a)
    fc, fd = err(c), err(d)
    for _ in range(_GOLDEN_ITERS):
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - _INV_PHI * (b - a)
            fc = err(c)
        else:
            a, c, fc = c, d, fd
            d = a + _INV_PHI * (b - a)
            fd = err(d)
    return (a + b) / 2.0


@dataclass(frozen=True, slots=True)
class SpeedModel:
    """``1 / rate(w) = a/w + b + c*w`` seconds per step on w GPUs."""

    a: float
    b: float
    c: float

    def rate(self, gpus: int) -> float:
        """Steps/s on ``gpus`` GPUs (0 for no GPU)."""
        if gpus <= 0:
            return 0.0
        step_s = self.a / gpus + self.b + self.c * gpus
        return 1.0 / step_s if step_s > 0 else 0.0


def fit_speed(gpus: Sequence[int], rates: Sequence[float]) -> SpeedModel | None:
    """NNLS fit of ``1/f`` on measured (GPU count, steps/s) points; None without a positive point.
    One point (or one distinct count) fits the ideal-scaling model ``a/w`` through it."""
    pairs = [(w, r) for w, r in zip(gpus, rates, strict=True) if w > 0 and math.isfinite(r) and r > 0]
    if not pairs:
        return None
    counts = {w for w, _ in pairs}
    if len(counts) == 1:
        w = pairs[0][0]
        mean = sum(r for _, r in pairs) / len(pairs)
        return SpeedModel(w / mean, 0.0, 0.0)
    w_arr = np.array([w for w, _ in pairs], dtype=np.float64)
    inv = np.array([1.0 / r for _, r in pairs], dtype=np.float64)
    # Relative error: scale each row by the measured rate.
    design = np.column_stack((1.0 / w_arr, np.ones_like(w_arr), w_arr)) / inv[:, None]
    coef, _ = nnls(design, np.ones_like(w_arr))
    return SpeedModel(float(coef[0]), float(coef[1]), float(coef[2]))
