"""How long the ``optimus`` policy's ``decide()`` takes, next to ``horus`` on the same snapshot.

For J jobs the cluster has J/2 V100s (8 per node; at least one node): the proportions of the
2869ce trace on 16 GPUs at its busiest. Half the GPUs run elastic jobs (1..8 GPUs, 1-4 each,
Gavel job types drawn with a fixed seed); every other job is pending and elastic. Half the jobs
give ``total_steps``; the other half have 64 noisy loss reports, so their length comes from the
loss fit (fits are cached per history version: ``first`` pays them, ``replan`` does not).
``call``: ``first`` is a fresh policy object re-planning; ``replan`` the same object re-planning
again on the same snapshot; ``between`` a round between re-plans (pending jobs only); the
reference is ``horus``'s decide on the same snapshot (fresh object; its kernel compiled before).

    python bench/optimus_time.py [--sizes 32 256 1024 4096] [--repeat 3]

One JSON line per measurement: {"bench": "policy_time", "policy", "call", "jobs", "gpus", "ms"}
(median of ``--repeat``), then one ratio line per size: optimus replan ms / horus ms.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from collections.abc import Callable

import numpy as np

from horus_core.interference import default_model
from horus_core.interference.table import packaged_table
from horus_core.model import ClusterSnapshot, Gpu, Job, JobSpec, JobState, Node
from horus_core.policies import make_policy
from horus_core.policies.base import Reports
from horus_core.policies.optimus import OptimusPolicy
from horus_core.sim.elastic import synthetic_curve


def cluster(gpus: int) -> tuple[Node, ...]:
    def node(i: int) -> Node:
        return Node(f"n{i}", tuple(Gpu(f"n{i}g{k}", f"n{i}", k, "V100", 16160, "v100") for k in range(8)))

    return tuple(node(i) for i in range(max(1, gpus // 8)))


def snapshot(jobs: int, seed: int = 0) -> tuple[ClusterSnapshot, dict[str, list[tuple[float, float]]]]:
    rng = np.random.default_rng(seed)
    types = sorted({t for (_, t, w) in packaged_table().solo if w == 8})
    nodes = cluster(jobs // 2)
    free = [g for n in nodes for g in n.gpus[: len(n.gpus) // 2]]
    out: list[Job] = []
    reports: dict[str, list[tuple[float, float]]] = {}
    for i in range(jobs):
        steps = int(rng.integers(10_000, 2_000_000))
        known = i % 2 == 0
        spec = JobSpec(("train",), gpus=1, job_type=str(rng.choice(types)), total_steps=steps if known else 0)
        spec = JobSpec(
            spec.command, 1, job_type=spec.job_type, total_steps=spec.total_steps, gpus_min=1, gpus_max=8
        )
        job = Job(f"j{i:05d}", spec, JobState.PENDING, submitted_at=float(i))
        count = int(rng.integers(1, 5))
        if len(free) >= count and free[0].node == free[count - 1].node:
            held, free = free[:count], free[count:]
            job = Job(
                job.id,
                spec,
                JobState.RUNNING,
                1,
                float(i),
                node=held[0].node,
                gpus=tuple(g.uuid for g in held),
            )
        if not known:
            curve = synthetic_curve(steps, 4.0, 0.5)
            ks = np.linspace(0, steps * rng.uniform(0.05, 0.6), 64)
            reports[job.id] = [(float(k), curve.loss(k) * (1 + 0.02 * rng.standard_normal())) for k in ks]
        out.append(job)
    return ClusterSnapshot(nodes, tuple(out)), reports


def timed(call: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def measure(jobs: int, repeat: int) -> list[dict[str, object]]:
    model = default_model()
    snap, reports = snapshot(jobs)
    gpus = sum(len(n.gpus) for n in snap.nodes)

    def fresh() -> OptimusPolicy:
        policy = OptimusPolicy(model)
        policy.hear(
            Reports.of((job_id, k, loss, 0.0) for job_id, points in reports.items() for k, loss in points)
        )
        return policy

    def replan(policy: OptimusPolicy) -> None:
        policy.last_plan = -math.inf
        policy.decide(snap, 0.0)

    warm = fresh()
    replan(warm)
    lines = [
        ("optimus", "first", timed(lambda: replan(fresh()), repeat)),
        ("optimus", "replan", timed(lambda: replan(warm), repeat)),
        ("optimus", "between", timed(lambda: warm.decide(snap, 1.0), repeat)),
        ("horus", "first", timed(lambda: make_policy("horus", model).decide(snap, 0.0), repeat)),
    ]
    out: list[dict[str, object]] = [
        {"bench": "policy_time", "policy": p, "call": c, "jobs": jobs, "gpus": gpus, "ms": round(ms, 3)}
        for p, c, ms in lines
    ]
    ratio = lines[1][2] / lines[3][2] if lines[3][2] > 0 else math.inf
    out.append(
        {"bench": "policy_time", "ratio": "optimus_replan/horus", "jobs": jobs, "value": round(ratio, 3)}
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[32, 256, 1024, 4096])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    make_policy("horus", default_model()).decide(snapshot(32)[0], 0.0)  # compile or load the kernel
    for jobs in args.sizes:
        for line in measure(jobs, args.repeat):
            print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
