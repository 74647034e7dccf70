"""Cold starts: Horus knowing the trace's job types by their model cards only, against knowing them
by the measured table (warm) and by nothing (online profiling only), with fifo as the baseline.

    .venv/bin/python bench/cold_start.py [--trace T] [--clusters v100:16 k80:24,p100:24,v100:24]
                                         [--runs fifo warm cards blind held_out] [--floors 0 0.7]

One JSON line per (cluster, floor, run) (``--floors``: every trace job's speed floor, as
``horus-sim --min-speed``; 0 = none): average JCT, makespan (hours), GPU utilisation (busy share and
useful work per GPU-second), the share of jobs whose mean speed was below 0.8x of solo, evictions;
then per cluster and floor the ratios of each cold run's average JCT to the warm run's, measured in the same
process (the simulator is deterministic: the figures do not depend on the machine's load).

- ``warm``: ``horus`` with the packaged table (today);
- ``cards``: ``horus --cold-start --cards``: no table row or profile of the trace's job types, their
  reference cards (horus_core/data/reference_cards.json), and what running jobs show;
- ``blind``: ``horus --cold-start``: no cards, online profiling only;
- ``held_out``: as ``cards``, but each job type's card predicted by a predictor trained without its
  model family (horus_core.interference.train), so no job type's own labels were seen;
- ``fifo``: exclusive GPUs in arrival order.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from horus_core.interference import InterferenceModel, default_model
from horus_core.interference.table import packaged_table
from horus_core.interference.train import family, fit_predictor, table_labels
from horus_core.modelcard import packaged_cards
from horus_core.policies import make_policy
from horus_core.sim.api import load_workload
from horus_core.sim.cluster import build_cluster
from horus_core.sim.cold import ColdLearner, cold_model
from horus_core.sim.config import SimConfig
from horus_core.sim.engine import Simulator
from horus_core.sim.metrics import summarize

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT / "horus_core" / "data" / "traces" / "msr_seed0_2869ce_cap.trace"
CLUSTERS = ("v100:16", "k80:24,p100:24,v100:24")
RUNS = ("fifo", "warm", "cards", "blind", "held_out")
FIELDS = ("avg_jct_h", "makespan_h", "gpu_util", "useful_util", "slow_share", "evictions", "unfinished")


def held_out_model(hidden: set[str]) -> InterferenceModel:
    """The cold model whose cards are each predicted without their own family's labels."""
    model = cold_model(packaged_table(), hidden)
    names = list(packaged_table().job_types)
    cards = packaged_cards()
    for fam in sorted({family(t) for t in hidden}):
        rows = [i for i, n in enumerate(names) if family(n) != fam]
        predictor = fit_predictor(table_labels(rows, refit=True))
        for job_type in sorted(t for t in hidden if family(t) == fam and t in cards):
            model.add_card(job_type, cards[job_type], predictor)
    return model


def run(trace: Path, cluster: str, name: str, floor: float = 0.0) -> dict[str, object]:
    truth = default_model()
    jobs = load_workload(str(trace), truth)
    nodes = build_cluster(cluster, 8)
    hidden = {j.job_type for j in jobs}
    learner = None
    seen: InterferenceModel = truth
    if name in ("cards", "blind", "held_out"):
        if name == "held_out":
            seen = held_out_model(hidden)
        else:
            seen = cold_model(packaged_table(), hidden, packaged_cards() if name == "cards" else None)
        learner = ColdLearner(truth, seen)
    policy = make_policy("fifo" if name == "fifo" else "horus", seen)
    config = SimConfig(min_speed=floor)
    metrics = summarize(Simulator(jobs, nodes, policy, truth, config, None, learner).run())
    out: dict[str, object] = {
        "bench": "cold_start", "trace": trace.name, "cluster": cluster, "floor": floor, "run": name
    }  # fmt: skip
    out.update({k: round(float(metrics[k]), 3) for k in FIELDS})
    out["observations"] = learner.observations if learner is not None else 0
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, default=TRACE)
    parser.add_argument("--clusters", nargs="+", default=list(CLUSTERS))
    parser.add_argument("--runs", nargs="+", default=list(RUNS), choices=RUNS)
    parser.add_argument("--floors", nargs="+", type=float, default=[0.0], help="speed floors (0: none)")
    args = parser.parse_args()
    for cluster in args.clusters:
        for floor in args.floors:
            lines: dict[str, dict[str, object]] = {}
            for name in args.runs:
                lines[name] = run(args.trace, cluster, name, floor)
                print(json.dumps(lines[name]), flush=True)
            ratios(cluster, floor, lines)


def ratios(cluster: str, floor: float, lines: dict[str, dict[str, object]]) -> None:
    """Each cold run's average JCT over the warm run's, and cards' over blind's (goal: at most 1)."""
    avg = {name: float(str(line["avg_jct_h"])) for name, line in lines.items()}
    pairs = [(name, "warm") for name in avg if name != "warm"] + [("cards", "blind")]
    for top, bottom in pairs:
        if top in avg and bottom in avg:
            line = {"bench": "cold_start", "cluster": cluster, "floor": floor, "ratio": f"{top}/{bottom}",
                    "avg_jct": round(avg[top] / avg[bottom], 3)}  # fmt: skip
            print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
