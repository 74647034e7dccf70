"""Time of one allocation per policy: a fresh policy's ``decide(snapshot, now)`` on a cluster of
equal parts K80, P100 and V100 (8 GPUs per node) with every job pending, at 32, 256, 1,024
and 4,096 jobs, GPUs = 3/4 of the jobs (about the ratio of jobs waiting or running to GPUs
on the Philly traces when the cluster is loaded). Jobs are drawn (seed 0) from
``msr_seed0_2869ce_cap.trace``'s job types and GPU counts.

Each figure is the median of ``--repeat`` fresh policy objects (a policy's caches start cold;
Numba kernels are compiled or loaded before). As a reference measured in the same run,
``gavel-las-perf`` is also timed with its LP ungrouped (one row per job, as Gavel writes it)
where that finishes in reasonable time: ``ratio`` lines give ungrouped / grouped CPU time.
``ms`` is wall time, ``cpu_ms`` the process's CPU time (the steadier figure on a busy machine).

    python bench/policy_time.py [--sizes 32 256 1024 4096] [--policies ...] [--repeat 3]

One JSON line each: {"bench": "policy_time", "policy", "jobs", "gpus", "ms", "cpu_ms", "classes"}.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from importlib import resources

import numpy as np

from horus_core.interference import default_model
from horus_core.model import ClusterSnapshot, Job, JobSpec, JobState
from horus_core.policies import make_policy, policy_names
from horus_core.policies.base import Policy
from horus_core.policies.gavel import VARIANTS, GavelPolicy
from horus_core.sim.cluster import build_cluster
from horus_core.sim.traces import load_trace

GAVEL = ["gavel-las", "gavel-las-perf", "gavel-las-packed", "gavel-ftf-perf", "gavel-makespan-perf"]
OTHERS = [name for name in policy_names() if name not in GAVEL]  # every other registered policy
SIZES = [32, 256, 1024, 4096]
UNGROUPED_MAX = 1024


def jobs_of(count: int, seed: int = 0) -> list[Job]:
    path = resources.files("horus_core") / "data" / "traces" / "msr_seed0_2869ce_cap.trace"
    with resources.as_file(path) as p:
        trace = load_trace(str(p))
    rng = np.random.default_rng(seed)
    picks = rng.integers(len(trace), size=count)
    out = []
    for i, k in enumerate(picks):
        tj = trace[int(k)]
        spec = JobSpec(("x",), gpus=tj.gpus, job_type=tj.job_type, total_steps=tj.total_steps)
        out.append(Job(f"j{i:05d}", spec, JobState.PENDING, submitted_at=float(i)))
    return out


def snapshot_of(count: int) -> ClusterSnapshot:
    per_type = max(8, (count * 3 // 4) // 3 // 8 * 8)
    nodes = build_cluster(f"k80:{per_type},p100:{per_type},v100:{per_type}")
    return ClusterSnapshot(nodes, tuple(jobs_of(count)))


def time_one(make: Callable[[], Policy], snap: ClusterSnapshot, repeat: int) -> tuple[float, float]:
    walls, cpus = [], []
    for _ in range(repeat):
        policy = make()
        w, c = time.perf_counter(), time.process_time()
        policy.decide(snap, 1_000_000.0)
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return statistics.median(walls) * 1e3, statistics.median(cpus) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=SIZES)
    ap.add_argument("--policies", nargs="+", default=GAVEL + OTHERS)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-reference", action="store_true")
    args = ap.parse_args()
    model = default_model()
    warm = snapshot_of(16)
    for name in args.policies:  # compile / load Numba kernels, fill the model's caches
        make_policy(name, model).decide(warm, 1.0)
    for n in args.sizes:
        snap = snapshot_of(n)
        gpus = len(snap.ready_gpus())
        grouped_ms = None
        for name in args.policies:
            ms, cpu = time_one(lambda name=name: make_policy(name, model), snap, args.repeat)  # type: ignore[misc]
            line = {"bench": "policy_time", "policy": name, "jobs": n, "gpus": gpus, "ms": round(ms, 2)}
            line["cpu_ms"] = round(cpu, 2)
            if name == "gavel-las-perf":
                grouped_ms = cpu
            print(json.dumps(line), flush=True)
        if not args.no_reference and n <= UNGROUPED_MAX:
            _reference(snap, n, gpus, grouped_ms, args.repeat)


def _reference(snap: ClusterSnapshot, n: int, gpus: int, grouped_ms: float | None, repeat: int) -> None:
    make = lambda: GavelPolicy(VARIANTS["gavel-las-perf"], default_model(), group=False)  # noqa: E731
    ms, cpu = time_one(make, snap, repeat)
    name = "gavel-las-perf (ungrouped LP)"
    print(json.dumps({"bench": "policy_time", "policy": name, "jobs": n, "gpus": gpus, "ms": round(ms, 2),
                      "cpu_ms": round(cpu, 2)}), flush=True)  # fmt: skip
    if grouped_ms:  # process CPU time: less disturbed by other work on a shared machine
        print(json.dumps({"bench": "policy_time", "ratio": "ungrouped/grouped cpu", "jobs": n,
                          "value": round(cpu / grouped_ms, 2)}), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
