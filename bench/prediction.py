"""How well model cards predict jobs never seen: held out by model family, and zero-shot on a new GPU.

    .venv/bin/python bench/prediction.py [--what lofo h200] [--h200-dir docs/gpu-runs/2026-11-27-h200]

``lofo``: the card predictor (:mod:`horus_core.interference.train`) trained on six of the packaged
table's seven model families and tested on the seventh (its labels fitted again without it), one
JSON line per family and a pooled one: utilisation RMSLE (the Horus paper reports 0.154) against
predicting the training mean, and the V100 pair-speed MAE of the pairs involving the held-out
family through the card's biases and through the analytic model over its predicted profile,
against predicting the mean and against today's treatment of an unknown job (the default profile).

``h200``: held-out measurements of another lab, a newer GPU and models the table lacks (the H200
run of scripts/gpu-check: 6 models, 21 time-sliced pairs, NVML solo readings). The interference
model as a fresh master would hold it (packaged table, nothing learned) predicts every pair on the
``h200`` type; ``today`` knows the three new models by nothing (the default profile), ``cards``
knows them by their reference cards (the other three are table types), ``cards_only`` knows all
six by cards alone (the table's rows hidden). Against ``mean``, the measured pairs' own average (an
oracle constant). ``bias`` is the mean signed error (negative: pessimistic). Then the cards'
utilisation against NVML's solo readings (features on the V100, the predictor's reference, and on
the H200 itself) and their memory against NVML's. Nothing was tuned to these measurements.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np

from horus_core.interference import InterferenceModel, default_model
from horus_core.interference.predictor import packaged_predictor
from horus_core.interference.table import load_table, packaged_table
from horus_core.interference.train import leave_one_family_out, summary
from horus_core.modelcard import packaged_cards
from horus_core.sim.cold import cold_model

ROOT = Path(__file__).resolve().parents[1]
H200_DIR = ROOT / "docs" / "gpu-runs" / "2026-11-27-h200"


def emit(**fields: object) -> None:
    print(json.dumps({"bench": "prediction", **fields}), flush=True)


def lofo() -> None:
    folds = leave_one_family_out()
    for fold in [*folds, summary(folds)]:
        emit(what="lofo", **fold)


def h200(directory: Path) -> None:
    table = load_table(directory / "h200_throughputs.json")
    names = list(table.job_types)
    truth = {(a, b): table.pairs[("h200", a, b)] for a in names for b in names}
    cards = packaged_cards()
    known = set(packaged_table().job_types)
    with_cards = default_model()
    for name in names:
        if name not in known:
            with_cards.add_card(name, cards[name])
    models: dict[str, Callable[[str, str], tuple[float, float]]] = {
        "today": _pairs(default_model()),
        "cards": _pairs(with_cards),
        "cards_only": _pairs(cold_model(packaged_table(), names, cards)),
    }
    mean = float(np.mean([s[0] for s in truth.values()]))
    emit(
        what="h200_pairs",
        model="mean",
        mae=_mae(lambda a, b: (mean, mean), truth),
        bias=0.0,
        pairs=len(truth),
    )
    for label, predict in models.items():
        errors = [predict(a, b)[0] - t[0] for (a, b), t in truth.items()]
        emit(
            what="h200_pairs",
            model=label,
            mae=round(float(np.mean(np.abs(errors))), 3),
            bias=round(float(np.mean(errors)), 3),
            mae_over_mean=round(float(np.mean(np.abs(errors))) / _mae(lambda a, b: (mean, mean), truth), 2),
            pairs=len(truth),
        )
    solo = {
        line["job_type"]: line
        for line in map(json.loads, (directory / "gpu-check.jsonl").read_text().splitlines())
        if line.get("check") == "solo"
    }
    predictor = packaged_predictor()
    for gpu in ("v100", "h200"):
        predicted = {n: predictor.predict(cards[n], gpu) for n in names}
        util = [np.log1p(predicted[n].util_avg) - np.log1p(solo[n]["util_avg"]) for n in names]
        emit(what="h200_util", features_on=gpu, util_rmsle=round(float(np.sqrt(np.mean(np.square(util)))), 3),
             predicted={n: round(predicted[n].util_avg, 1) for n in names},
             measured={n: solo[n]["util_avg"] for n in names})  # fmt: skip
    mem = {n: predictor.predict(cards[n]).mem_mib for n in names}
    ratios = [abs(np.log(mem[n] / solo[n]["mem_mib"])) for n in names]
    emit(what="h200_memory", mean_abs_log_ratio=round(float(np.mean(ratios)), 3), predicted=mem,
         measured={n: solo[n]["mem_mib"] for n in names})  # fmt: skip


def _pairs(model: InterferenceModel) -> Callable[[str, str], tuple[float, float]]:
    return lambda a, b: model.pair_speeds(a, b, "h200")


def _mae(
    predict: Callable[[str, str], tuple[float, float]], truth: dict[tuple[str, str], tuple[float, float]]
) -> float:
    return round(float(np.mean([abs(predict(a, b)[0] - t[0]) for (a, b), t in truth.items()])), 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--what", nargs="+", default=["lofo", "h200"], choices=["lofo", "h200"])
    parser.add_argument("--h200-dir", type=Path, default=H200_DIR)
    args = parser.parse_args()
    if "lofo" in args.what:
        lofo()
    if "h200" in args.what:
        h200(args.h200_dir)


if __name__ == "__main__":
    main()
