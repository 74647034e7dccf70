"""The default speed floor's trade-off: average JCT against slowed jobs, per floor and cluster.

Replays a trace under one policy with every job's floor set to each value in turn (as the master
fills the cluster default in at submission), on each cluster, in one run; the reference is the
same policy with no floor beyond its own rule (0), measured in the same run. docs/sharing.md.

    python bench/floor_tradeoff.py [--trace FILE] [--clusters v100:16 k80:24,p100:24,v100:24]
        [--floors 0,0.5,0.6,0.7,0.8] [--policy horus]

One JSON line per (cluster, floor): {"bench": "floor_tradeoff", "trace", "cluster", "policy",
"floor", "avg_jct_h", "p95_jct_h", "jct_vs_none" (avg JCT / the no-floor run's), "slow_share"
(jobs whose mean speed was below 0.8x), "slow_any_share" (jobs that ran below 0.8x at all),
"min_speed" (the lowest speed any job ran at), "p5_mean_speed", "unfinished", "sim_s"}.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from horus_core.interference import default_model
from horus_core.sim import SimConfig, simulate, summarize

TRACE = "horus_core/data/traces/msr_seed0_2869ce_cap.trace"
CLUSTERS = ("v100:16", "k80:24,p100:24,v100:24")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trace", default=TRACE)
    p.add_argument("--clusters", nargs="+", default=list(CLUSTERS))
    p.add_argument("--floors", default="0,0.5,0.6,0.7,0.8")
    p.add_argument("--policy", default="horus")
    args = p.parse_args(argv)
    floors = [float(f) for f in args.floors.split(",")]
    if 0.0 not in floors:
        floors.insert(0, 0.0)  # (the reference)
    for cluster in args.clusters:
        base: float | None = None
        for floor in floors:
            result = simulate(
                args.trace, cluster, args.policy, model=default_model(), config=SimConfig(min_speed=floor)
            )
            m = summarize(result)
            started = [r for r in result.records if r.first_start is not None]
            means = np.array([r.mean_speed for r in started], dtype=float)
            lowest = min((r.min_speed for r in started if np.isfinite(r.min_speed)), default=1.0)
            base = m["avg_jct_h"] if floor == 0.0 else base
            line = {
                "bench": "floor_tradeoff",
                "trace": args.trace,
                "cluster": cluster,
                "policy": args.policy,
                "floor": floor,
                "avg_jct_h": round(m["avg_jct_h"], 3),
                "p95_jct_h": round(m["p95_jct_h"], 3),
                "jct_vs_none": round(m["avg_jct_h"] / base, 4) if base else None,
                "slow_share": round(m["slow_share"], 4),
                "slow_any_share": round(m["slow_any_share"], 4),
                "min_speed": round(float(lowest), 3),
                "p5_mean_speed": round(float(np.percentile(means, 5)), 3) if means.size else None,
                "unfinished": m["unfinished"],
                "sim_s": round(m["sim_s"], 1),
            }
            print(json.dumps(line), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
