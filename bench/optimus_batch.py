"""Optimus against fixed allocation on a batch: the first N jobs of a trace all submitted at once.

The Philly-derived traces spread arrivals over weeks, so their makespan is set by the last
arrival and no policy can move it much; a batch (everything at t = 0, as in Optimus's own
experiments with a set of jobs submitted together) shows what elastic allocation does to the
makespan. Every job is elastic (1..8 GPUs); ``horus`` and ``fifo`` run each on the count it
asked for.

    python bench/optimus_batch.py [--trace T] [--jobs 60] [--cluster v100:16] [--unknown-steps]

One JSON line per policy: {"bench": "optimus_batch", "policy", "jobs", "gpus", "avg_jct_h",
"makespan_h", "preemptions", "resizes"}, then ratio lines: fixed / optimus for both figures.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace

from horus_core.interference import default_model
from horus_core.sim import SimConfig, simulate, summarize
from horus_core.sim.traces import load_trace

TRACE = "horus_core/data/traces/msr_seed0_2869ce_cap.trace"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trace", default=TRACE)
    parser.add_argument("--jobs", type=int, default=60)
    parser.add_argument("--cluster", default="v100:16")
    parser.add_argument("--policies", nargs="+", default=["optimus", "horus", "fifo"])
    parser.add_argument("--unknown-steps", action="store_true")
    args = parser.parse_args()
    jobs = [replace(j, arrival_s=0.0) for j in load_trace(args.trace)[: args.jobs]]
    config = SimConfig(elastic=1.0, elastic_known_steps=not args.unknown_steps, timeline=False)
    model = default_model()
    figures = {}
    for name in args.policies:
        m = summarize(simulate(jobs, args.cluster, name, model=model, config=config))
        figures[name] = m
        line = {"bench": "optimus_batch", "policy": name, "jobs": len(jobs), "cluster": args.cluster}
        line.update({k: round(float(m[k]), 3) for k in ("avg_jct_h", "makespan_h")})
        line.update({k: m[k] for k in ("preemptions", "resizes", "unfinished")})
        print(json.dumps(line), flush=True)
    base = figures.get("optimus")
    for name, m in figures.items():
        if base is not None and name != "optimus":
            ratio = {k: round(float(m[k]) / float(base[k]), 3) for k in ("avg_jct_h", "makespan_h")}
            print(json.dumps({"bench": "optimus_batch", "ratio": f"{name}/optimus", **ratio}), flush=True)


if __name__ == "__main__":
    main()
