"""Simulator at scale: a 100,000-job synthetic trace on 1,024 V100s (128 nodes x 8).

    .venv/bin/python bench/sim_scale.py [--jobs N] [--gpus G] [--rate R] [--policy horus] [--skip-idle-rounds]

Prints one JSON line: wall time of the run (``s``), events per second, and how that time splits
between the policy's ``decide()`` calls and the simulator itself. The default rate (8 jobs/h)
offers about 0.8 of what 1,024 GPUs serve without packing (a Philly job averages ~100 GPU-h).
Uses ``horus`` unless ``--policy`` names another registered policy.

A second line is the in-run reference: the trace's first ``--reference-jobs`` jobs (default
3,000; 0: none) simulated with the policy's fast path and with its plain path (``PlainPacker()``,
the per-job Python test oracle the one path must match), their wall times, the ratio, and whether
every job's record (start, finish, speeds, attempts) came out the same.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Protocol, runtime_checkable

from horus_core.interference import InterferenceModel, default_model
from horus_core.policies import make_policy
from horus_core.policies.packer import Packer
from horus_core.sim import (
    SimConfig,
    Simulator,
    TraceJob,
    build_cluster,
    generate_synthetic,
    parse_synthetic,
    summarize,
)
from horus_core.testing.plain_packer import PlainPacker


@runtime_checkable
class Packing(Protocol):
    """A packing policy: it keeps its placement pipeline in ``packer``."""

    packer: Packer


TARGET_S = 60.0  # issue 4: 100,000 jobs on 1,024 GPUs on a 2-core machine (``of_target`` = s / this)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--jobs", type=int, default=100_000)
    p.add_argument("--gpus", type=int, default=1024)
    p.add_argument("--rate", type=float, default=8.0, help="arrivals per hour")
    p.add_argument("--policy", default="horus")
    p.add_argument("--skip-idle-rounds", action="store_true", help="no decide() while nothing is pending")
    p.add_argument(
        "--min-gap-s",
        type=float,
        default=0.0,
        help="coalesce event rounds at most once per this many simulated seconds (Gavel: 360 s rounds)",
    )
    p.add_argument(
        "--reference-jobs", type=int, default=3000, help="fast vs plain path on this many jobs (0: skip)"
    )
    args = p.parse_args()
    policy_name = args.policy
    model = default_model()
    started = time.perf_counter()
    spec = parse_synthetic(f"synthetic:jobs={args.jobs},rate={args.rate},seed=0")
    jobs = generate_synthetic(spec, model.solo_throughput)
    generate_s = time.perf_counter() - started
    config = SimConfig(idle_rounds=not args.skip_idle_rounds, min_gap_s=args.min_gap_s, timeline=False)
    sim = Simulator(jobs, build_cluster(f"v100:{args.gpus}"), make_policy(policy_name, model), model, config)
    result = sim.run()
    metrics = summarize(result)
    decide_s = sum(result.decide_s)
    out = {
        "bench": "sim_scale",
        "jobs": args.jobs,
        "gpus": args.gpus,
        "policy": policy_name,
        "rate_per_h": args.rate,
        "idle_rounds": not args.skip_idle_rounds,
        "min_gap_s": args.min_gap_s,
        "s": round(result.wall_s, 2),
        "target_s": TARGET_S,
        "of_target": round(result.wall_s / TARGET_S, 3),
        "events_per_s": round(result.counters["events"] / result.wall_s),
        "events": result.counters["events"],
        "rounds": result.counters["rounds"],
        "decide_s": round(decide_s, 2),
        "decide_share": round(decide_s / result.wall_s, 3),
        "sim_s": round(result.wall_s - decide_s, 2),
        "decide_ms_mean": round(float(metrics["decide_ms_mean"]), 3),
        "decide_ms_p95": round(float(metrics["decide_ms_p95"]), 3),
        "generate_s": round(generate_s, 2),
        "avg_jct_h": round(float(metrics["avg_jct_h"]), 2),
        "gpu_util": round(float(metrics["gpu_util"]), 3),
        "unfinished": metrics["unfinished"],
    }
    print(json.dumps(out))
    if args.reference_jobs > 0:
        print(json.dumps(reference(jobs[: args.reference_jobs], args.gpus, policy_name, model)))


def reference(
    jobs: list[TraceJob], gpus: int, policy_name: str, model: InterferenceModel
) -> dict[str, object]:
    """The same jobs through the policy's fast path and its plain path, in this process."""
    runs = []
    for plain in (False, True):
        policy = make_policy(policy_name, model)
        if plain and isinstance(policy, Packing):
            policy.packer = PlainPacker()
        sim = Simulator(jobs, build_cluster(f"v100:{gpus}"), policy, model, SimConfig(timeline=False))
        runs.append(sim.run())
    fast, slow = runs
    return {
        "bench": "sim_scale",
        "what": "reference",
        "jobs": len(jobs),
        "gpus": gpus,
        "policy": policy_name,
        "fast_s": round(fast.wall_s, 2),
        "plain_s": round(slow.wall_s, 2),
        "plain_over_fast": round(slow.wall_s / fast.wall_s, 2),
        "same": fast.records == slow.records,
    }


if __name__ == "__main__":
    main()
