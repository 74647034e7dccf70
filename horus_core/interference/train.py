"""Training the card predictor (:mod:`.predictor`) offline and reproducibly, and its errors.

    python -m horus_core.interference.train            # writes horus_core/data/predictor.json
    python -m horus_core.interference.train --report   # leave-one-family-out errors, JSON lines
    python -m horus_core.interference.train --zoo docs/gpu-runs/DAY-GPU/zoo.jsonl [--report]
        # with the solo profiles scripts/gpu-check --zoo measured: the utilisation and memory
        # models retrained on the table and the zoo (--out), or the zoo's leave-one-family-out
        # utilisation RMSLE (--report) against the Horus paper's 0.154

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
from horus_core.interference.predictor import (
    CardPrediction,
    Linear,
    Predictor,
    packaged_predictor,
    predictor_text,
)
from horus_core.interference.profiles import DEFAULT_PROFILE, GAVEL_PROFILES, analytic_speed
from horus_core.interference.table import packaged_table
from horus_core.modelcard import ModelCard, card_from_dict, packaged_cards

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


@dataclass(frozen=True)
class Zoo:
    """The solo profiles ``scripts/gpu-check --zoo`` measured (``zoo.jsonl`` lines with a card
    and readings; failed and skipped models left out), each on its own GPU type."""

    names: tuple[str, ...]
    families: tuple[str, ...]
    cards: tuple[ModelCard, ...]
    gpus: tuple[str, ...]
    util_avg: Vector
    util_peak: Vector
    memory: Vector

    def features(self) -> NDArray[np.float64]:
        return np.vstack([raw_features([c], g) for c, g in zip(self.cards, self.gpus, strict=True)])


def load_zoo(paths: Sequence[Path]) -> Zoo:
    """The profiles of the zoo files; ValueError naming the file and line of a bad record."""
    rows: list[tuple[str, str, ModelCard, str, float, float, float]] = []
    for path in paths:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            rec = json.loads(line) if line.strip() else {}
            if not isinstance(rec, dict) or "card" not in rec or rec.get("util_avg") is None:
                continue
            try:
                gpu = str(rec["gpu"])
                if gpu not in GPUS:
                    raise ValueError(f"unknown GPU type {gpu!r}")
                util = (float(rec["util_avg"]), float(rec["util_peak"]), float(rec["mem_mib"]))
                card = card_from_dict(rec["card"])
                rows.append((str(rec["job_type"]), str(rec["family"]), card, gpu, *util))
            except (KeyError, TypeError, ValueError) as exc:
                raise ValueError(f"{path}:{n}: {exc}") from None
    if len({r[1] for r in rows}) < 2:
        raise ValueError(f"{', '.join(map(str, paths))}: profiles of at least two families are needed")
    names, fams, cards, gpus, avg, peak, mem = zip(*rows, strict=True)
    return Zoo(names, fams, cards, gpus, np.array(avg), np.array(peak), np.array(mem))


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


def fit_predictor(labels: Labels, zoo: Zoo | None = None) -> Predictor:
    """The predictor of the table's labels; with ``zoo``, its utilisation and memory models are
    fitted on the table's job types and the zoo's together (the zoo has no pair speeds: the
    sensitivity and intensity models stay the table's)."""
    raw_t = raw_features(labels.cards)
    raw_z = zoo.features() if zoo is not None else np.zeros((0, raw_t.shape[1]))
    raw = np.vstack([raw_t, raw_z])
    mean, scale = raw.mean(axis=0), raw.std(axis=0)
    z = (raw - mean) / scale
    n = len(labels.cards)
    fams = (*labels.families, *(zoo.families if zoo is not None else ()))

    def model(y: Vector, rows: slice = slice(None)) -> Linear:
        return _rounded(_ridge(z[rows], y, _choose(z[rows], y, fams[rows])))

    def both(table: Vector, measured: Vector | None) -> Vector:
        return table if measured is None else np.concatenate([table, measured])

    cards = (*labels.cards, *(zoo.cards if zoo is not None else ()))
    counted = np.array([(c.static_bytes + c.activation_bytes) / _MIB for c in cards])
    memory = both(labels.memory, zoo.memory if zoo is not None else None)
    return Predictor(
        mean=tuple(float(_round(m)) for m in mean),
        scale=tuple(float(_round(s)) for s in scale),
        util_avg=model(_logit(both(labels.util_avg, zoo.util_avg if zoo is not None else None))),
        util_peak=model(_logit(both(labels.util_peak, zoo.util_peak if zoo is not None else None))),
        sensitivity=model(labels.sensitivity, slice(0, n)),
        intensity=model(labels.intensity, slice(0, n)),
        mem_base_mib=float(round(float(np.median(memory - counted)))),
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


def zoo_leave_one_family_out(zoo: Zoo) -> list[dict[str, object]]:
    """Per family of the zoo: the utilisation model trained on the zoo's other families (its
    penalty chosen by leave-one-family-out among them), its RMSLE on the held-out family's
    models, against predicting the training mean and against the packaged predictor."""
    raw = zoo.features()
    packaged = packaged_predictor()
    out: list[dict[str, object]] = []
    for held_family in sorted(set(zoo.families)):
        held = np.array([f == held_family for f in zoo.families])
        mean, scale = raw[~held].mean(axis=0), raw[~held].std(axis=0)
        z = (raw - mean) / np.where(scale > 0, scale, 1.0)
        y = _logit(zoo.util_avg[~held])
        fams = [f for f, h in zip(zoo.families, held, strict=True) if not h]
        fit = _ridge(z[~held], y, _choose(z[~held], y, fams))
        pred = np.array([100.0 / (1.0 + math.exp(-fit(tuple(row)))) for row in z[held]])
        today = np.array(
            [packaged.predict(c, g).util_avg for c, g, h in zip(zoo.cards, zoo.gpus, held, strict=True) if h]
        )
        truth = zoo.util_avg[held]
        out.append(
            {
                "family": held_family,
                "models": int(held.sum()),
                "util_rmsle": round(_rmsle(pred, truth), 3),
                "util_rmsle_mean": round(_rmsle(np.full(len(truth), zoo.util_avg[~held].mean()), truth), 3),
                "util_rmsle_packaged": round(_rmsle(today, truth), 3),
            }
        )
    return out


def zoo_summary(folds: Sequence[dict[str, object]]) -> dict[str, object]:
    w = np.array([float(f["models"]) for f in folds])  # type: ignore[arg-type]
    out: dict[str, object] = {"family": "all", "models": int(w.sum()), "paper_util_rmsle": 0.154}
    for key in ("util_rmsle", "util_rmsle_mean", "util_rmsle_packaged"):
        v = np.array([float(f[key]) for f in folds])  # type: ignore[arg-type]
        out[key] = round(float(np.sqrt(np.sum(w * v**2) / w.sum())), 3)
    return out


def main(argv: Sequence[str] | None = None, emit: Callable[[str], None] = print) -> None:
    parser = argparse.ArgumentParser(description="Train the card predictor (docs/prediction.md).")
    parser.add_argument("--report", action="store_true", help="print leave-one-family-out errors")
    parser.add_argument(
        "--zoo", type=Path, action="append", default=[], help="a zoo.jsonl of gpu-check --zoo"
    )
    parser.add_argument("--out", type=Path, default=PACKAGED)
    args = parser.parse_args(argv)
    try:
        zoo = load_zoo(args.zoo) if args.zoo else None
    except (OSError, ValueError) as exc:
        parser.error(f"--zoo: {exc}")
    if args.report:
        folds = zoo_leave_one_family_out(zoo) if zoo is not None else leave_one_family_out()
        for fold in [*folds, zoo_summary(folds) if zoo is not None else summary(folds)]:
            emit(json.dumps(fold))
        return
    args.out.write_text(predictor_text(fit_predictor(table_labels(), zoo)), encoding="utf-8")
    emit(f"wrote {args.out}" + (f" (the table and {len(zoo.names)} zoo profiles)" if zoo is not None else ""))


if __name__ == "__main__":
    main()
