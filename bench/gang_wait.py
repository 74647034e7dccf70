"""Big gangs under the packing policies, with and without the head-gang reservation.

Replays a trace under each policy twice in one run: as shipped (a reservation for the gang that
has waited longest, :mod:`horus_core.policies.backfill`) and with the reservation off (the
reference, ``reserve: false``), and prints the average JCT of every job and of the gangs of
``--gang-gpus`` or more GPUs, their worst queueing time, and preemptions.

    python bench/gang_wait.py --trace ../shared/data/gavel/traces/msr_seed0_51b7ef.trace \\
        --cluster k80:8,p100:8,v100:8 --policies horus,fifo,lucid [--gang-gpus 8] [--head N]

One JSON line each: {"bench": "gang_wait", "trace", "cluster", "policy", "reserve", "jobs",
"avg_jct_h", "gangs", "gang_avg_jct_h", "gang_max_queue_h", "preemptions", "unfinished"}.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from horus_core.interference import default_model
from horus_core.policies import make_policy
from horus_core.policies.backfill import GangReserve
from horus_core.sim import SimConfig, Simulator, build_cluster, summarize
from horus_core.sim.traces import TraceJob, load_trace

HOUR = 3600.0


def run(
    jobs: list[TraceJob],
    cluster: str,
    name: str,
    reserve: bool,
    gang_gpus: int,
    waits: tuple[float | None, ...],
) -> dict[str, object]:
    model = default_model()
    policy = make_policy(name, model)
    gate = getattr(policy, "gate", None)
    if gate is None:
        raise SystemExit(f"{name}: not a packing policy (no type gate to reserve through)")
    if not reserve:
        gate.reserve = None
    else:
        gate.reserve = gate.reserve or GangReserve()
        wait_s, age_s = waits
        gate.reserve.wait_s = gate.reserve.wait_s if wait_s is None else wait_s
        gate.reserve.age_s = gate.reserve.age_s if age_s is None else age_s
    result = Simulator(jobs, build_cluster(cluster), policy, model, SimConfig(timeline=False)).run()
    gangs = [r for r in result.records if r.gpus >= gang_gpus]
    jct = np.array([r.jct for r in gangs if r.jct is not None], dtype=float)
    queue = np.array([r.queueing for r in gangs if r.queueing is not None], dtype=float)
    m = summarize(result)
    return {
        "policy": name,
        "reserve": reserve,
        "jobs": m["jobs"],
        "avg_jct_h": round(float(m["avg_jct_h"]), 3),
        "gangs": len(gangs),
        "gang_avg_jct_h": round(float(jct.mean()) / HOUR, 3) if jct.size else None,
        "gang_max_queue_h": round(float(queue.max()) / HOUR, 3) if queue.size else None,
        "preemptions": m["preemptions"],
        "unfinished": m["unfinished"],
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trace", required=True)
    p.add_argument("--cluster", required=True)
    p.add_argument("--policies", default="horus,fifo,lucid")
    p.add_argument("--gang-gpus", type=int, default=8, help="jobs of at least this many GPUs count as gangs")
    p.add_argument("--wait-s", type=float, default=None, help="queueing before a gang is head")
    p.add_argument("--age-s", type=float, default=None, help="queueing after which a gang goes first")
    p.add_argument("--modes", default="off,on", help="reservation off (the reference) and/or on")
    p.add_argument("--head", type=int, default=0, help="only the first N jobs of the trace (0: all)")
    args = p.parse_args()
    jobs = load_trace(args.trace)
    jobs = jobs[: args.head] if args.head else jobs
    for name in [n.strip() for n in args.policies.split(",") if n.strip()]:
        for reserve in [m.strip() == "on" for m in args.modes.split(",") if m.strip()]:
            row = {"bench": "gang_wait", "trace": Path(args.trace).name, "cluster": args.cluster}
            row.update(run(jobs, args.cluster, name, reserve, args.gang_gpus, (args.wait_s, args.age_s)))
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
