"""How well model cards predict jobs never seen: held out by model family, and zero-shot on a new GPU.

    .venv/bin/python bench/prediction.py [--what lofo gpu] [--gpu-runs DIR ...]

``lofo``: the card predictor (:mod:`horus_core.interference.train`) trained on six of the packaged
table's seven model families and tested on the seventh (its labels fitted again without it), one
JSON line per family and a pooled one: utilisation RMSLE (the Horus paper reports 0.154) against
predicting the training mean, and the V100 pair-speed MAE of the pairs involving the held-out
family through the card's biases and through the analytic model over its predicted profile,
against predicting the mean and against today's treatment of an unknown job (the default profile).

``gpu``: held-out measurements of another lab, newer GPUs and models the table lacks (each run of
scripts/gpu-check under ``--gpu-runs``, by default the H200's and the H100's in docs/gpu-runs: 6
models, 21 time-sliced pairs, NVML solo readings). The interference model as a fresh master would
hold it (packaged table, nothing learned) predicts every pair on the run's GPU type (the name of
its ``<type>_throughputs.json``). ``today`` knows the three new models by nothing (the default
profile), ``cards`` knows them by their reference cards (the other three are table types),
``cards_only`` knows all six by cards alone (the table's rows hidden). Against ``mean``, the
measured pairs' own average (an oracle constant). ``bias`` is the mean signed error (negative:
pessimistic). Then the cards' utilisation against NVML's solo readings (features on the V100, the
predictor's reference, and on that GPU itself) and their memory against NVML's. Nothing was tuned
to these measurements. Every line names its ``gpu``.
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
GPU_RUNS = [ROOT / "docs" / "gpu-runs" / f"2026-11-27-{gpu}" for gpu in ("h200", "h100")]


def emit(**fields: object) -> None:
    print(json.dumps({"bench": "prediction", **fields}), flush=True)


def lofo() -> None:
    folds = leave_one_family_out()
    for fold in [*folds, summary(folds)]:
        emit(what="lofo", **fold)


def held_out(directory: Path) -> None:
    tables = sorted(directory.glob("*_throughputs.json"))
    if len(tables) != 1:
        raise SystemExit(f"{directory}: expected one <gpu>_throughputs.json, found {len(tables)}")
    gpu = tables[0].name.removesuffix("_throughputs.json")
    table = load_table(tables[0])
    names = list(table.job_types)
    truth = {(a, b): table.pairs[(gpu, a, b)] for a in names for b in names}
    cards = packaged_cards()
    known = set(packaged_table().job_types)
    with_cards = default_model()
    for name in names:
        if name not in known:
            with_cards.add_card(name, cards[name])
    models: dict[str, Callable[[str, str], tuple[float, float]]] = {
        "today": _pairs(default_model(), gpu),
        "cards": _pairs(with_cards, gpu),
        "cards_only": _pairs(cold_model(packaged_table(), names, cards), gpu),
    }
    mean = float(np.mean([s[0] for s in truth.values()]))
    emit(
        what="pairs",
        gpu=gpu,
        model="mean",
        mae=_mae(lambda a, b: (mean, mean), truth),
        bias=0.0,
        pairs=len(truth),
    )
    for label, predict in models.items():
        errors = [predict(a, b)[0] - t[0] for (a, b), t in truth.items()]
        emit(
            what="pairs",
            gpu=gpu,
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
    for features_on in ("v100", gpu):
        predicted = {n: predictor.predict(cards[n], features_on) for n in names}
        util = [np.log1p(predicted[n].util_avg) - np.log1p(solo[n]["util_avg"]) for n in names]
        rmsle = round(float(np.sqrt(np.mean(np.square(util)))), 3)
        emit(what="util", gpu=gpu, features_on=features_on, util_rmsle=rmsle,
             predicted={n: round(predicted[n].util_avg, 1) for n in names},
             measured={n: solo[n]["util_avg"] for n in names})  # fmt: skip
    mem = {n: predictor.predict(cards[n]).mem_mib for n in names}
    ratios = [abs(np.log(mem[n] / solo[n]["mem_mib"])) for n in names]
    emit(what="memory", gpu=gpu, mean_abs_log_ratio=round(float(np.mean(ratios)), 3), predicted=mem,
         measured={n: solo[n]["mem_mib"] for n in names})  # fmt: skip


def _pairs(model: InterferenceModel, gpu: str) -> Callable[[str, str], tuple[float, float]]:
    return lambda a, b: model.pair_speeds(a, b, gpu)


def _mae(
    predict: Callable[[str, str], tuple[float, float]], truth: dict[tuple[str, str], tuple[float, float]]
) -> float:
    return round(float(np.mean([abs(predict(a, b)[0] - t[0]) for (a, b), t in truth.items()])), 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--what", nargs="+", default=["lofo", "gpu"], choices=["lofo", "gpu"])
    parser.add_argument("--gpu-runs", nargs="+", type=Path, default=GPU_RUNS, metavar="DIR")
    args = parser.parse_args()
    if "lofo" in args.what:
        lofo()
    if "gpu" in args.what:
        for directory in args.gpu_runs:
            held_out(directory)


if __name__ == "__main__":
    main()
