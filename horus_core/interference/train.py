"""Training the card predictor (:mod:`.predictor`) offline and reproducibly, and its errors.

    python -m horus_core.interference.train            # writes horus_core/data/predictor.json
    python -m horus_core.interference.train --report   # leave-one-family-out errors, JSON lines

Data, all in the repository: the cards of the packaged table's 26 job types
(``horus_core/data/reference_cards.json``, :mod:`horus_core.describe.cards`) and, as labels, what
:mod:`.derive` fitted from the table on the V100 (the GPU whose pairs the utilisations explain:
on the K80 and P100 nearly every pair time-slices at about 0.5 and the fit cannot tell the
utilisations apart): utilisation avg and peak and memory (``profiles.GAVEL_PROFILES``), and each
job type's sensitivity and intensity, the row and column biases of a biases-only completion of the
V100 pairs. No public measurement was added: the one we found with a permissive licence
(GPUMemNet, CC BY 4.0) holds synthetic MLPs and CNNs on one GPU with features that are not a card's.

Models, small and regularised (7 families, 26 points): ridge regressions on one standardised
feature (:meth:`Predictor.features`), their penalty chosen per target by leave-one-family-out
error on the training rows; memory = counted bytes + a fixed part, the median over the job types
(the footprints were fitted to out-of-memory outcomes and are coarse; a footprint below the
tensors it holds is not possible, so the slope is 1). Needs SciPy (as :mod:`.derive`).
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from horus_core.interference.completion import Fit, fit_terms
from horus_core.interference.derive import fit_utilisation, speed_matrix
from horus_core.interference.gpus import GPUS, REFERENCE_GPU
from horus_core.interference.predictor import CardPrediction, Linear, Predictor, predictor_text
from horus_core.interference.profiles import DEFAULT_PROFILE, GAVEL_PROFILES, analytic_speed
from horus_core.interference.table import packaged_table
from horus_core.modelcard import ModelCard, packaged_cards

Vector = NDArray[np.float64]
PACKAGED = Path(__file__).resolve().parents[1] / "data" / "predictor.json"
LAMBDAS = (0.1, 0.3, 1.0, 3.0, 10.0, 30.0)
BIAS_FIT = Fit(0, 0.0, 1.0)  # the completion's biases-only model, moderately shrunk
_MIB = 1 << 20


@dataclass(frozen=True)
class Labels:
    """Per job type of the table (in its order): family, card, and the targets."""

    names: tuple[str, ...]
    families: tuple[str, ...]
    cards: tuple[ModelCard, ...]
    util_avg: Vector
    util_peak: Vector
    memory: Vector
    sensitivity: Vector
    intensity: Vector
    mean_speed: float  # the mean of the known V100 pair speeds (the completion's mean)


def family(job_type: str) -> str:
    return job_type.split(" ")[0]


def table_labels(rows: Sequence[int] | None = None, *, refit: bool = False) -> Labels:
    """The labels of the table's job types (``rows``: a subset). ``refit``: the utilisations are
    fitted again on the subset's pairs alone (for held-out evaluation), else derive.py's."""
    table = packaged_table()
    names = list(table.job_types)
    keep = list(range(len(names))) if rows is None else list(rows)
    speeds = speed_matrix(table, REFERENCE_GPU)[np.ix_(keep, keep)]
    known = speeds > 0.0
    if refit:
        avg, peak, _alpha, _rmse = fit_utilisation(speeds)
    else:
        avg = np.array([GAVEL_PROFILES[names[i]][0] for i in keep])
        peak = np.array([GAVEL_PROFILES[names[i]][1] for i in keep])
    mean, row, col, _, _ = fit_terms(speeds, known, BIAS_FIT)
    cards = packaged_cards()
    return Labels(
        names=tuple(names[i] for i in keep),
        families=tuple(family(names[i]) for i in keep),
        cards=tuple(cards[names[i]] for i in keep),
        util_avg=np.asarray(avg, np.float64),
        util_peak=np.asarray(peak, np.float64),
        memory=np.array([GAVEL_PROFILES[names[i]][2] for i in keep], np.float64),
        sensitivity=row,
        intensity=col,
        mean_speed=mean,
    )


def raw_features(cards: Sequence[ModelCard], gpu_type: str = REFERENCE_GPU) -> NDArray[np.float64]:
    zero = Linear(0.0, (0.0,))
    unit = Predictor((0.0,), (1.0,), zero, zero, zero, zero, 0.0, 1.0)
    return np.array([unit.features(c, GPUS[gpu_type]) for c in cards])


def _logit(util: Vector) -> Vector:
    u = np.clip(util / 100.0, 0.01, 0.99)
    out: Vector = np.log(u / (1.0 - u))
    return out


def _ridge(z: NDArray[np.float64], y: Vector, lam: float) -> Linear:
    """Ridge on standardised features; the intercept is not penalised."""
    a = np.hstack([np.ones((len(z), 1)), z])
    penalty = lam * np.eye(a.shape[1])
    penalty[0, 0] = 0.0
    w = np.linalg.solve(a.T @ a + penalty, a.T @ y)
    return Linear(float(w[0]), tuple(float(v) for v in w[1:]))


def _groups(families: Sequence[str]) -> list[NDArray[np.bool_]]:
    return [np.array([f == g for f in families]) for g in sorted(set(families))]


def _choose(z: NDArray[np.float64], y: Vector, families: Sequence[str]) -> float:
    """The penalty with the least leave-one-family-out squared error (ties: the larger)."""
    best, best_err = LAMBDAS[-1], math.inf
    for lam in reversed(LAMBDAS):
        err = 0.0
        for held in _groups(families):
            f = _ridge(z[~held], y[~held], lam)
            err += float(sum((f(tuple(row)) - t) ** 2 for row, t in zip(z[held], y[held], strict=True)))
        if err < best_err - 1e-12:
            best, best_err = lam, err
    return best


def fit_predictor(labels: Labels) -> Predictor:
    raw = raw_features(labels.cards)
    mean, scale = raw.mean(axis=0), raw.std(axis=0)
    z = (raw - mean) / scale
    fams = labels.families

    def model(y: Vector) -> Linear:
        return _ridge(z, y, _choose(z, y, fams))

    counted = np.array([(c.static_bytes + c.activation_bytes) / _MIB for c in labels.cards])
    return Predictor(
        mean=tuple(float(_round(m)) for m in mean),
        scale=tuple(float(_round(s)) for s in scale),
        util_avg=_rounded(model(_logit(labels.util_avg))),
        util_peak=_rounded(model(_logit(labels.util_peak))),
        sensitivity=_rounded(model(labels.sensitivity)),
        intensity=_rounded(model(labels.intensity)),
        mem_base_mib=float(round(float(np.median(labels.memory - counted)))),
        mem_per_mib=1.0,
    )


def _round(x: float) -> float:
    return float(f"{x:.6g}")


def _rounded(f: Linear) -> Linear:
    return Linear(_round(f.intercept), tuple(_round(w) for w in f.weights))


def build() -> Predictor:
    """The predictor shipped in horus_core/data/predictor.json."""
    return fit_predictor(table_labels())


# --------------------------------------------------------------------------------- the report


def leave_one_family_out() -> list[dict[str, object]]:
    """Per held-out family: trained on the other families (their labels fitted again without the
    held-out family's pairs), the utilisation RMSLE and the V100 pair-speed MAE of the pairs that
    involve the held-out family, against predicting the training mean and against today's
    treatment of an unknown job (the default profile through the analytic model)."""
    table = packaged_table()
    names = list(table.job_types)
    truth_speeds = speed_matrix(table, REFERENCE_GPU)
    full = table_labels()
    out: list[dict[str, object]] = []
    for held_family in sorted({family(n) for n in names}):
        held = np.array([family(n) == held_family for n in names])
        train = table_labels([i for i in range(len(names)) if not held[i]], refit=True)
        p = fit_predictor(train)
        predicted = [p.predict(full.cards[i]) for i in np.flatnonzero(held)]
        out.append(_fold(held_family, held, train, predicted, full, truth_speeds))
    return out


def _fold(
    name: str,
    held: NDArray[np.bool_],
    train: Labels,
    preds: Sequence[CardPrediction],
    full: Labels,
    speeds: NDArray[np.float64],
) -> dict[str, object]:
    n = len(held)
    avg, peak = np.zeros(n), np.zeros(n)
    sens, inten = np.zeros(n), np.zeros(n)
    tr = np.flatnonzero(~held)
    avg[tr], peak[tr] = train.util_avg, train.util_peak
    sens[tr], inten[tr] = train.sensitivity, train.intensity
    for i, p in zip(np.flatnonzero(held).tolist(), preds, strict=True):
        avg[i], peak[i], sens[i], inten[i] = p.util_avg, p.util_peak, p.sensitivity, p.intensity
    d_avg, d_peak, _ = DEFAULT_PROFILE
    errors: dict[str, list[float]] = {k: [] for k in ("card_biases", "card_analytic", "mean", "default")}
    for i in range(n):
        for j in range(n):
            if speeds[i, j] <= 0.0 or not (held[i] or held[j]):
                continue
            t = speeds[i, j]
            errors["card_biases"].append(abs(min(1.0, max(0.05, train.mean_speed + sens[i] + inten[j])) - t))
            errors["card_analytic"].append(abs(analytic_speed(peak[i], avg[j]) - t))
            errors["mean"].append(abs(train.mean_speed - t))
            own = d_peak if held[i] else peak[i]
            other = d_avg if held[j] else avg[j]
            errors["default"].append(abs(analytic_speed(own, other) - t))
    h = np.flatnonzero(held)
    truth = full.util_avg[h]
    rmsle = _rmsle(avg[h], truth)
    rmsle_mean = _rmsle(np.full(len(h), train.util_avg.mean()), truth)
    mem = [p.mem_mib for p in preds]
    return {
        "family": name,
        "job_types": len(h),
        "util_rmsle": round(rmsle, 3),
        "util_rmsle_mean": round(rmsle_mean, 3),
        **{f"pair_mae_{k}": round(float(np.mean(v)), 3) for k, v in errors.items()},
        "pairs": len(errors["mean"]),
        "memory_log_error": round(float(np.mean(np.abs(np.log(np.array(mem) / full.memory[h])))), 3),
    }


def _rmsle(pred: Vector, truth: Vector) -> float:
    return float(np.sqrt(np.mean((np.log1p(pred) - np.log1p(truth)) ** 2)))


def summary(folds: Sequence[dict[str, object]]) -> dict[str, object]:
    """Pooled over the folds (RMSLE over job types, MAE over pairs)."""

    def pooled(key: str, weight: str) -> float:
        w = np.array([float(f[weight]) for f in folds])  # type: ignore[arg-type]
        v = np.array([float(f[key]) for f in folds])  # type: ignore[arg-type]
        if key.startswith("util_rmsle"):
            return round(float(np.sqrt(np.sum(w * v**2) / w.sum())), 3)
        return round(float(np.sum(w * v) / w.sum()), 3)

    keys = [k for k in folds[0] if k.startswith(("util_rmsle", "pair_mae", "memory"))]
    out: dict[str, object] = {"family": "all", "paper_util_rmsle": 0.154}
    for k in keys:
        out[k] = pooled(k, "pairs" if k.startswith("pair_mae") else "job_types")
    return out


def main(argv: Sequence[str] | None = None, emit: Callable[[str], None] = print) -> None:
    parser = argparse.ArgumentParser(description="Train the card predictor (docs/prediction.md).")
    parser.add_argument("--report", action="store_true", help="print leave-one-family-out errors")
    parser.add_argument("--out", type=Path, default=PACKAGED)
    args = parser.parse_args(argv)
    if args.report:
        folds = leave_one_family_out()
        for fold in [*folds, summary(folds)]:
            emit(json.dumps(fold))
        return
    args.out.write_text(predictor_text(build()), encoding="utf-8")
    emit(f"wrote {args.out}")


if __name__ == "__main__":
    main()
