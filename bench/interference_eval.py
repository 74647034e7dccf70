"""How well the interference model predicts pairs it has not measured, by hiding measured ones.

    .venv/bin/python bench/interference_eval.py [--quick] [--seeds 5] [--gpu-types k80 p100 v100]
                                                [--fractions 0.1 0.3 0.5 0.7 0.9] [--table PATH]

For each GPU type of the packaged Gavel table (or of ``--table``, a file in the same format) and
each hidden fraction, over ``--seeds`` seeds: hide that fraction of the type's measured (feasible)
unordered pairs, both directions of a pair together (one co-location measures both speeds), and
build an ``InterferenceModel`` over a table that holds only the visible pairs of that GPU type (no
other type's pairs, nothing hidden: the model fits everything, its completion's choice of rank
included, on what is visible). Then the model's ``pair_speeds`` of every hidden pair is compared
with the truth, in the same run as two baselines over the same visible pairs: ``known_mean`` (the
mean of the type's known speeds) and ``job_mean`` (a job's mean speed over its known partners; the
known mean for a job with none). Out-of-memory pairs stay visible (they carry no speed). ``mae``
is over both directions of the hidden pairs; ``decision_acc`` is how often the ``horus`` policy's
share / don't-share rule on a pair (the packing kernel's ``gpu_stage`` with ``horus``'s
``MIN_SPEED`` and ``MIN_GAIN``), applied to the predicted speeds, agrees with the same rule
applied to the measured speeds. ``pairs_hidden`` counts hidden unordered pairs over all seeds. One
JSON line per (gpu type, fraction, predictor), then one summary line.
"""

from __future__ import annotations

import argparse
import json
import pathlib
from collections.abc import Callable, Sequence

import numpy as np

from horus_core.interference.model import InterferenceModel
from horus_core.interference.table import INFEASIBLE, ThroughputTable, packaged_table, parse_table
from horus_core.packing._kernels import gpu_stage
from horus_core.packing.codes import ST_OK
from horus_core.policies.horus import MIN_GAIN, MIN_SPEED

FRACTIONS = (0.1, 0.3, 0.5, 0.7, 0.9)
PREDICTORS = ("model", "known_mean", "job_mean")

Pair = tuple[str, str]
Speeds = tuple[float, float]
Predictor = Callable[[ThroughputTable, str, list[Pair]], list[Speeds]]


def feasible_pairs(table: ThroughputTable, gpu: str) -> list[Pair]:
    """Unordered measured pairs that fit in memory (a job with itself included)."""
    types = table.job_types
    return [
        (a, b)
        for i, a in enumerate(types)
        for b in types[i:]
        if table.pairs.get((gpu, a, b), INFEASIBLE) != INFEASIBLE
    ]


def hide(table: ThroughputTable, gpu: str, fraction: float, seed: int) -> tuple[ThroughputTable, list[Pair]]:
    """A table with only the visible pairs of ``gpu``, and the hidden pairs."""
    pairs = feasible_pairs(table, gpu)
    rng = np.random.default_rng(seed)
    chosen = rng.choice(len(pairs), size=round(fraction * len(pairs)), replace=False)
    hidden = [pairs[int(k)] for k in sorted(chosen)]
    gone = {frozenset(p) for p in hidden}
    visible = {
        key: speeds for key, speeds in table.pairs.items() if key[0] == gpu and frozenset(key[1:]) not in gone
    }
    return ThroughputTable(table.solo, visible, table.job_types, (gpu,)), hidden


def by_model(visible: ThroughputTable, gpu: str, hidden: list[Pair]) -> list[Speeds]:
    model = InterferenceModel(visible)
    return [model.pair_speeds(a, b, gpu) for a, b in hidden]


def _rows(visible: ThroughputTable, gpu: str) -> dict[str, list[float]]:
    rows: dict[str, list[float]] = {}
    for (g, a, _b), speeds in visible.pairs.items():
        if g == gpu and speeds != INFEASIBLE:
            rows.setdefault(a, []).append(speeds[0])
    return rows


def by_known_mean(visible: ThroughputTable, gpu: str, hidden: list[Pair]) -> list[Speeds]:
    mean = float(np.mean([s for row in _rows(visible, gpu).values() for s in row]))
    return [(mean, mean)] * len(hidden)


def by_job_mean(visible: ThroughputTable, gpu: str, hidden: list[Pair]) -> list[Speeds]:
    rows = _rows(visible, gpu)
    mean = float(np.mean([s for row in rows.values() for s in row]))
    per_job = {job: float(np.mean(row)) for job, row in rows.items()}
    return [(per_job.get(a, mean), per_job.get(b, mean)) for a, b in hidden]


PREDICT: dict[str, Predictor] = {"model": by_model, "known_mean": by_known_mean, "job_mean": by_job_mean}


def shares(speeds: Speeds) -> bool:
    """The ``horus`` policy's verdict on two jobs sharing an otherwise empty GPU."""
    s = np.array([[[1.0, speeds[0]], [speeds[1], 1.0]]])
    return bool(gpu_stage(s, np.zeros(2), MIN_SPEED, MIN_GAIN, 0, 0, 1, 1, 1) == ST_OK)


def evaluate(table: ThroughputTable, gpu: str, fraction: float, seeds: int) -> list[dict[str, object]]:
    errors: dict[str, list[float]] = {p: [] for p in PREDICTORS}
    agree: dict[str, list[bool]] = {p: [] for p in PREDICTORS}
    hidden_total = 0
    for seed in range(seeds):
        visible, hidden = hide(table, gpu, fraction, seed)
        truth = [table.pairs[(gpu, a, b)] for a, b in hidden]
        hidden_total += len(hidden)
        for name in PREDICTORS:
            predicted = PREDICT[name](visible, gpu, hidden)
            for got, want in zip(predicted, truth, strict=True):
                errors[name] += [abs(got[0] - want[0]), abs(got[1] - want[1])]
                agree[name].append(shares(got) == shares(want))
    return [
        {
            "bench": "interference_eval",
            "gpu_type": gpu,
            "hidden": fraction,
            "predictor": name,
            "mae": round(float(np.mean(errors[name])), 4),
            "decision_acc": round(float(np.mean(agree[name])), 4),
            "seeds": seeds,
            "pairs_hidden": hidden_total,
        }
        for name in PREDICTORS
    ]


def summary(lines: Sequence[dict[str, object]]) -> dict[str, object]:
    """In how many (gpu type, fraction) cases the model's MAE is below both baselines'."""
    cases: dict[tuple[object, object], dict[object, object]] = {}
    for x in lines:
        cases.setdefault((x["gpu_type"], x["hidden"]), {})[x["predictor"]] = x["mae"]
    wins = sum(
        1 for m in cases.values() if all(float(str(m["model"])) < float(str(m[b])) for b in PREDICTORS[1:])
    )
    return {
        "bench": "interference_eval",
        "summary": "model_beats_both_baselines",
        "cases": len(cases),
        "wins": wins,
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="1 seed, fractions 0.3 and 0.9")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--gpu-types", nargs="+", help="default: every GPU type with pairs in the table")
    parser.add_argument("--fractions", nargs="+", type=float, default=list(FRACTIONS))
    parser.add_argument("--table", type=pathlib.Path, help="a table in Gavel's format (default: packaged)")
    args = parser.parse_args(argv)
    if args.seeds < 1 or any(not 0.0 < f < 1.0 for f in args.fractions):
        parser.error("--seeds must be >= 1 and every fraction strictly between 0 and 1")
    table = parse_table(json.loads(args.table.read_text())) if args.table else packaged_table()
    gpu_types = args.gpu_types or list(table.pair_gpu_types)
    unknown = sorted(set(gpu_types) - set(table.pair_gpu_types))
    if unknown:
        parser.error(f"--gpu-types {unknown}: the table has pairs for {list(table.pair_gpu_types)} only")
    seeds, fractions = (1, [0.3, 0.9]) if args.quick else (args.seeds, args.fractions)
    lines: list[dict[str, object]] = []
    for gpu in gpu_types:
        for fraction in fractions:
            for line in evaluate(table, gpu, fraction, seeds):
                print(json.dumps(line), flush=True)
                lines.append(line)
    print(json.dumps(summary(lines)))


if __name__ == "__main__":
    main()
