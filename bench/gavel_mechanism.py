"""How much of the gap to Gavel's own figures is the mechanism: ``gavel-las`` and
``gavel-las-perf`` with ours (work-conserving: arrivals and GPUs freed mid-round are served at
once; a second LP stage hands out capacity max-min fairness leaves idle) and with Gavel's
(placements change only at round boundaries; then also stage 1 only), each with and without the
simulator's 30 s restart cost. Same trace, cluster and simulator in one run.

    python bench/gavel_mechanism.py [--trace T] [--cluster k80:24,p100:24,v100:24]

One JSON line per run: {"bench": "gavel_mechanism", "policy", "mechanism", "restart_cost_s",
"lp", "avg_jct_h", "preemptions", "unfinished"}.
"""

from __future__ import annotations

import argparse
import json

from horus_core.interference import default_model
from horus_core.policies.gavel import VARIANTS, GavelPolicy
from horus_core.sim.api import simulate
from horus_core.sim.config import SimConfig
from horus_core.sim.metrics import summarize

TRACE = "horus_core/data/traces/msr_seed0_2869ce_cap.trace"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default=TRACE)
    ap.add_argument("--cluster", default="k80:24,p100:24,v100:24")
    ap.add_argument("--policies", nargs="+", default=["gavel-las", "gavel-las-perf"])
    ap.add_argument("--restart-cost-s", type=float, nargs="+", default=[30.0, 0.0])
    args = ap.parse_args()
    for restart in args.restart_cost_s:
        for name in args.policies:
            for conserving, second in ((True, True), (False, True), (False, False)):
                model = default_model()
                policy = GavelPolicy(VARIANTS[name], model, work_conserving=conserving, second_stage=second)
                config = SimConfig(restart_cost_s=restart, timeline=False)
                m = summarize(simulate(args.trace, args.cluster, policy, model=model, config=config))
                line = {"bench": "gavel_mechanism", "policy": name}
                line["mechanism"] = "work-conserving" if conserving else "rounds only (Gavel)"
                line["lp"] = "two stages" if second else "stage 1 only (Gavel)"
                line.update(restart_cost_s=restart, avg_jct_h=round(float(m["avg_jct_h"]), 2))
                line.update(preemptions=m["preemptions"], unfinished=m["unfinished"])
                print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
