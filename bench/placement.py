"""Placement benchmark: the Numba packing kernel against its plain-Python twin.

J pending jobs (Gavel job types drawn uniformly; GPU counts drawn from the Philly trace's
``num_gpus``) are placed onto G empty V100s, 8 per node, with the ``horus`` rule and no
look-ahead limit (every job is tried: a full pass). The reference runs where it finishes in
reasonable time; both run on the same arrays in the same process.

    python bench/placement.py [--data ../shared/data/gavel] [--order util|random] [--repeat 5]

One JSON line per measurement: {"bench": "placement", "impl": "kernel"|"reference", "jobs",
"gpus", "ms", ...}; the JIT compile (or cache load) on its own line; a ratio line per size
where both ran. ``ms`` is the kernel pass only; ``build_ms`` (snapshot -> arrays) is apart.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path

import numpy as np

from horus_core.interference import default_model
from horus_core.model import ClusterSnapshot, Gpu, Job, JobSpec, JobState, Node
from horus_core.packing import PackParams, Placement, Problem, build_problem, codes, place, place_reference
from horus_core.policies._packing import util_order
from horus_core.policies.horus import MIN_GAIN, MIN_SPEED

SIZES = [(100, 128), (1_000, 1_024), (2_000, 2_048), (5_000, 4_096), (10_000, 8_192)]
PARAMS = PackParams(mode=codes.MODE_HORUS, max_per_gpu=3, min_speed=MIN_SPEED, min_gain=MIN_GAIN)


def gpu_counts(data: Path) -> np.ndarray:
    path = data / "philly_job_distribution.csv"
    if path.exists():
        text = path.read_text()
    else:
        text = resources.files("horus_core.data").joinpath("philly_job_distribution.csv").read_text()
    return np.array([int(row["num_gpus"]) for row in csv.DictReader(text.splitlines())], np.int32)


def workload(jobs: int, gpus: int, counts: np.ndarray, order: str, seed: int) -> Problem:
    rng = np.random.default_rng(seed)
    model = default_model()
    types = model.known_job_types()
    nodes = tuple(
        Node(f"n{i}", tuple(Gpu(f"n{i}g{k}", f"n{i}", k, "V100-SXM2-16GB", 16160, "v100") for k in range(8)))
        for i in range(gpus // 8)
    )
    shapes = zip(rng.choice(counts, jobs), rng.integers(0, len(types), jobs), strict=True)
    queue = [
        Job(f"j{i}", JobSpec(("x",), gpus=int(g), job_type=types[int(t)]), JobState.PENDING, submitted_at=i)
        for i, (g, t) in enumerate(shapes)
    ]
    ordered = util_order(queue, model) if order == "util" else queue
    problem, _ = build_problem(ClusterSnapshot(nodes, tuple(queue)), ordered, model)
    return problem


def timed(fn: Callable[[Problem, PackParams], Placement], problem: Problem) -> tuple[float, Placement]:
    start = time.perf_counter()
    out = fn(problem, PARAMS)
    return (time.perf_counter() - start) * 1000.0, out


def emit(**fields: object) -> None:
    print(json.dumps({"bench": "placement", **fields}), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    repo = Path(__file__).resolve().parents[1]
    ap.add_argument("--data", type=Path, default=repo / ".." / "shared" / "data" / "gavel")
    ap.add_argument("--order", choices=("util", "random"), default="util")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--reference-max-gpus", type=int, default=2_048)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    counts = gpu_counts(args.data)
    # first call: compiles the kernel, or loads it from Numba's on-disk cache
    first_ms, _ = timed(place, workload(20, 16, counts, "util", 0))
    emit(impl="kernel", what="jit_compile_or_cache_load", ms=round(first_ms, 1))
    for jobs, gpus in SIZES:
        t0 = time.perf_counter()
        problem = workload(jobs, gpus, counts, args.order, args.seed)
        build_ms = (time.perf_counter() - t0) * 1000.0
        runs = [timed(place, problem) for _ in range(args.repeat)]
        kernel_ms = statistics.median(ms for ms, _ in runs)
        result = runs[0][1]
        placed = int((result.node >= 0).sum())
        best_ms = min(ms for ms, _ in runs)
        emit(impl="kernel", jobs=jobs, gpus=gpus, ms=round(kernel_ms, 2), min_ms=round(best_ms, 2),
             order=args.order, placed=placed, build_ms=round(build_ms, 1))  # fmt: skip
        if gpus <= args.reference_max_gpus:
            ref_ms, ref = timed(place_reference, problem)
            emit(impl="reference", jobs=jobs, gpus=gpus, ms=round(ref_ms, 1), order=args.order,
                 identical=ref.same_as(result))  # fmt: skip
            emit(ratio="reference/kernel", jobs=jobs, gpus=gpus, value=round(ref_ms / kernel_ms, 1))


if __name__ == "__main__":
    main()
