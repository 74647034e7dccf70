"""Cold starts: Horus knowing the trace's job types by their model cards only, against knowing them
by the measured table (warm) and by nothing (online profiling only), with fifo as the baseline.

    .venv/bin/python bench/cold_start.py [--trace T] [--clusters v100:16 k80:24,p100:24,v100:24]
                                         [--runs fifo warm cards blind held_out]

One JSON line per (cluster, run): average JCT, makespan (hours), GPU utilisation (busy share and
useful work per GPU-second), the share of jobs whose mean speed was below 0.8x of solo, evictions;
then per cluster the ratios of each cold run's average JCT to the warm run's, measured in the same
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


def run(trace: Path, cluster: str, name: str) -> dict[str, object]:
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
    metrics = summarize(Simulator(jobs, nodes, policy, truth, None, None, learner).run())
    out: dict[str, object] = {"bench": "cold_start", "trace": trace.name, "cluster": cluster, "run": name}
    out.update({k: round(float(metrics[k]), 3) for k in FIELDS})
    out["observations"] = learner.observations if learner is not None else 0
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, default=TRACE)
    parser.add_argument("--clusters", nargs="+", default=list(CLUSTERS))
    parser.add_argument("--runs", nargs="+", default=list(RUNS), choices=RUNS)
    args = parser.parse_args()
    for cluster in args.clusters:
        lines = {name: run(args.trace, cluster, name) for name in args.runs}
        for line in lines.values():
            print(json.dumps(line), flush=True)
        warm = lines.get("warm")
        if warm is None:
            continue
        for name, line in lines.items():
            if name != "warm":
                ratio = float(str(line["avg_jct_h"])) / float(str(warm["avg_jct_h"]))
                print(json.dumps({"bench": "cold_start", "cluster": cluster, "ratio": f"{name}/warm",
                                  "avg_jct": round(ratio, 3)}), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
