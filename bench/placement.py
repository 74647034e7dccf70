"""Placement benchmark: the Numba packing kernel against its plain-Python twin, and a packing
policy's whole ``decide(snapshot, now)``.

Kernel (``--what kernel``): J pending jobs (Gavel job types drawn uniformly; GPU counts drawn
from the Philly trace's ``num_gpus``) are placed onto G empty V100s, 8 per node, with the
``horus`` rule and no look-ahead limit (every job is tried: a full pass). The reference runs
where it finishes in reasonable time; both run on the same arrays in the same process.

Policy (``--what decide``): ``make_policy(name).decide(snapshot, now)`` end to end (``horus``
unless ``--policies`` says otherwise) on an empty cluster and on a half-full one (running jobs,
co-located where Horus would, on half of the nodes), J pending jobs each. ``call``: ``first``
is a fresh policy object (cold caches; the kernel is compiled or loaded before), ``steady`` the
same object called again on the same snapshot, ``reread`` the same object on copies of it whose
every job and spec is a new object (as the master's store decodes them each pass; nothing
is found again by identity), ``churn`` the same object on a sequence of new
snapshots (1 % of the pending jobs replaced, 1 % of the running ones finished, one node lost
and the one lost before back) - what the master sees tick to tick. ``same`` says the actions
equal a fresh policy object's; ``cpu_ms`` is process CPU time (less sensitive to other work on
the machine); ``shared_gpus`` counts GPUs already running two or more jobs.

    python bench/placement.py [--what all|kernel|decide] [--order util|random] [--repeat 5]
                              [--policies horus ...] [--decide-sizes 1000x1024 10000x8192]
                              [--counts philly|msr ...]

``--counts msr`` draws GPU counts from Gavel's uncapped MSR traces instead of Philly's 1-8, so
about 3 % of the jobs are gangs larger than a node, placed over nodes by the spread module.
``--counts philly msr`` runs both in one process and adds, per decide line, a ratio line
``{"ratio": "msr/philly", "cpu_ms", "ms", ...}`` (medians, the gang mix over the Philly reference).

One JSON line per measurement: {"bench": "placement", "impl": "kernel"|"reference"|"decide",
"jobs", "gpus", "ms", ...}; the JIT compile (or cache load) on its own line; a ratio line per
size where both ran. For the kernel ``ms`` is the kernel pass only; ``build_ms`` (snapshot ->
arrays) is apart. For ``decide`` ``ms`` is the whole call (JIT time never included).
"""

from __future__ import annotations

import argparse
import csv
import gc
import json
import statistics
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from importlib import resources
from pathlib import Path

import numpy as np

from horus_core.interference import InterferenceModel, default_model
from horus_core.model import Assign, ClusterSnapshot, Gpu, Job, JobSpec, JobState, Node, NodeState
from horus_core.packing import PackParams, Placement, Problem, codes, place
from horus_core.policies import horus, make_policy
from horus_core.policies.horus import MIN_GAIN, MIN_SPEED
from horus_core.policies.pack import PackingPolicy
from horus_core.testing.kernel_twin import place_reference
from horus_core.testing.plain_problem import build_problem

SIZES = [(100, 128), (1_000, 1_024), (2_000, 2_048), (5_000, 4_096), (10_000, 8_192)]
Rng = np.random.Generator
Snap = ClusterSnapshot
DECIDE_SIZES = [(1_000, 1_024), (10_000, 8_192)]
PARAMS = PackParams(mode=codes.MODE_HORUS, max_per_gpu=3, min_speed=MIN_SPEED, min_gain=MIN_GAIN)


def gpu_counts(data: Path, source: str = "philly") -> np.ndarray:
    """GPU counts to draw jobs from: Philly's ``num_gpus`` (1/2/4/8, every job fits a node), or
    ``msr``: the uncapped counts of Gavel's Philly-derived MSR traces (``msr_seed0_<vc>.trace``,
    up to 32 GPUs; about 3 % of the jobs larger than an 8-GPU node: gangs over nodes)."""
    if source == "msr":
        traces = sorted((data / "traces").glob("msr_seed0_??????.trace"))
        if not traces:
            raise SystemExit(f"--counts msr: no msr_seed0_*.trace under {data / 'traces'}")
        rows = [line.split("\t") for t in traces for line in t.read_text().splitlines() if line.strip()]
        return np.array([int(r[6]) for r in rows], np.int32)
    path = data / "philly_job_distribution.csv"
    if path.exists():
        text = path.read_text()
    else:
        text = resources.files("horus_core.data").joinpath("philly_job_distribution.csv").read_text()
    return np.array([int(row["num_gpus"]) for row in csv.DictReader(text.splitlines())], np.int32)


def v100_nodes(gpus: int) -> tuple[Node, ...]:
    """8 V100s per node, 4 nodes per rack."""
    return tuple(
        Node(f"n{i}", tuple(Gpu(f"n{i}g{k}", f"n{i}", k, "V100-SXM2-16GB", 16160, "v100") for k in range(8)),
             rack=f"r{i // 4}")
        for i in range(gpus // 8)
    )  # fmt: skip


def new_jobs(n: int, counts: np.ndarray, types: list[str], rng: Rng, prefix: str, t0: float) -> list[Job]:
    shapes = zip(rng.choice(counts, n), rng.integers(0, len(types), n), strict=True)
    return [
        Job(f"{prefix}{i}", JobSpec(("x",), gpus=int(g), job_type=types[int(t)]), JobState.PENDING,
            submitted_at=t0 + i)
        for i, (g, t) in enumerate(shapes)
    ]  # fmt: skip


def workload(jobs: int, gpus: int, counts: np.ndarray, order: str, seed: int) -> Problem:
    rng = np.random.default_rng(seed)
    model = default_model()
    queue = new_jobs(jobs, counts, model.known_job_types(), rng, "j", 0.0)
    ordered = util_order(queue, model) if order == "util" else queue
    problem, _ = build_problem(ClusterSnapshot(v100_nodes(gpus), tuple(queue)), ordered, model)
    return problem


def util_order(jobs: list[Job], model: InterferenceModel) -> list[Job]:
    """The horus queue order (priority, lowest predicted utilisation, arrival, id)."""

    def key(j: Job) -> tuple[int, float, float, str]:
        return (-j.spec.priority, model.profile(j.spec).util_avg, j.submitted_at, j.id)

    return sorted(jobs, key=key)


def timed(fn: Callable[[Problem, PackParams], Placement], problem: Problem) -> tuple[float, Placement]:
    start = time.perf_counter()
    out = fn(problem, PARAMS)
    return (time.perf_counter() - start) * 1000.0, out


def emit(**fields: object) -> None:
    print(json.dumps({"bench": "placement", **fields}), flush=True)


def half_full(nodes: tuple[Node, ...], counts: np.ndarray, types: list[str], rng: Rng) -> list[Job]:
    """Running jobs on the first half of the nodes, placed (and co-located) by the horus rule."""
    half = nodes[: len(nodes) // 2]
    queue = new_jobs(len(nodes) * 8 // 3, counts, types, rng, "r", -1e6)
    util = horus.HORUS_UTIL  # (the Horus rule with no look-ahead bound)
    policy = PackingPolicy(default_model(), replace(util, params=replace(util.params, lookahead=-1)))
    by_id = {j.id: j for j in queue}
    return [
        replace(by_id[a.job_id], state=JobState.RUNNING, node=a.node, gpus=a.gpus, attempt=1, started_at=-1.0)
        for a in policy.decide(ClusterSnapshot(half, tuple(queue)), 0.0)
        if isinstance(a, Assign)
    ]


def churned(snap: ClusterSnapshot, step: int, counts: np.ndarray, types: list[str], rng: Rng) -> Snap:
    """The next tick: 1 % of the pending jobs replaced, 1 % of the running ones finished, one
    node lost (its jobs gone) and the one lost before back."""
    jobs = list(snap.jobs)
    pending = [i for i, j in enumerate(jobs) if j.state is JobState.PENDING]
    running = [i for i, j in enumerate(jobs) if j.state.active]
    gone = set(rng.choice(pending, len(pending) // 100, replace=False).tolist())
    if running:
        gone |= set(rng.choice(running, len(running) // 100, replace=False).tolist())
    lost = f"n{(step * 7) % len(snap.nodes)}"
    gone |= {i for i in running if jobs[i].node == lost}
    kept = [j for i, j in enumerate(jobs) if i not in gone]
    kept += new_jobs(len(pending) // 100, counts, types, rng, f"c{step}-", 1e6 + step)
    nodes = tuple(replace(n, state=NodeState.LOST) if n.name == lost else replace(n, state=NodeState.READY)
                  if n.state is not NodeState.READY else n for n in snap.nodes)  # fmt: skip
    return ClusterSnapshot(nodes, tuple(kept))


Key = tuple[str, int, int, str, str]  # policy, jobs, GPUs, cluster, call
Medians = tuple[float, float]  # ms, CPU ms


def bench_decide(args: argparse.Namespace, counts: np.ndarray, source: str) -> dict[Key, Medians]:
    """Every decide line; returns (median ms, median CPU ms) per line, for the in-run ratios."""
    medians: dict[Key, Medians] = {}
    model = default_model()
    types = model.known_job_types()
    warm = new_jobs(20, counts, types, np.random.default_rng(1), "w", 0.0)
    t0 = time.perf_counter()
    for name in args.policies:  # JIT compile or cache load, apart
        make_policy(name).decide(ClusterSnapshot(v100_nodes(16), tuple(warm)), 0.0)
    emit(impl="decide", what="jit_compile_or_cache_load", ms=round((time.perf_counter() - t0) * 1000.0, 1))
    for jobs, gpus in args.decide_sizes:
        rng = np.random.default_rng(args.seed)
        nodes = v100_nodes(gpus)
        for cluster in ("empty", "half"):
            running = half_full(nodes, counts, types, rng) if cluster == "half" else []
            snap = ClusterSnapshot(nodes, tuple(running + new_jobs(jobs, counts, types, rng, "p", 0.0)))
            ticks = [snap]
            for step in range(args.repeat):
                ticks.append(churned(ticks[-1], step, counts, types, rng))
            for name in args.policies:
                shared: dict[str, object] = dict(impl="decide", counts=source, policy=name)
                shared.update(jobs=jobs, gpus=gpus, cluster=cluster, running=len(running))
                shared.update(shared_gpus=shared_gpus(running))
                for call, ms, cpu, same, placed in decide_runs(name, snap, ticks[1:], args.repeat):
                    medians[name, jobs, gpus, cluster, call] = statistics.median(ms), statistics.median(cpu)
                    emit(**shared, call=call, placed=placed, same=same, ms=round(statistics.median(ms), 1),
                         min_ms=round(min(ms), 1), max_ms=round(max(ms), 1),
                         cpu_ms=round(statistics.median(cpu), 1))  # fmt: skip
    return medians


def emit_ratios(runs: dict[str, dict[Key, Medians]], base: str) -> None:
    """Per decide line, each other GPU-count source over ``base`` measured in the same run."""
    for source, got in runs.items():
        if source == base:
            continue
        for key, (ms, cpu) in got.items():
            ref_ms, ref_cpu = runs[base][key]
            policy, jobs, gpus, cluster, call = key
            emit(ratio=f"{source}/{base}", policy=policy, jobs=jobs, gpus=gpus, cluster=cluster, call=call,
                 cpu_ms=round(cpu / ref_cpu, 3), ms=round(ms / ref_ms, 3))  # fmt: skip


def shared_gpus(running: list[Job]) -> int:
    """GPUs that more than one running job uses."""
    per = Counter(u for j in running for u in j.gpus)
    return sum(n > 1 for n in per.values())


def reread_copy(snap: ClusterSnapshot) -> ClusterSnapshot:
    """The same snapshot as the master's store reads it each pass: every job and spec a new object."""
    return ClusterSnapshot(snap.nodes, tuple(replace(j, spec=replace(j.spec)) for j in snap.jobs))


def decide_runs(
    name: str, snap: ClusterSnapshot, ticks: list[ClusterSnapshot], repeat: int
) -> list[tuple[str, list[float], list[float], bool, int]]:
    """(call, ms per call, CPU ms per call, same actions as a fresh policy object, jobs placed)
    for the first call, ``repeat`` calls on the same snapshot and one per tick. What a fresh object decides
    is computed beforehand, and each result is dropped once compared: keeping every result
    alive would make the collector's full passes, not the policy, dominate the timings."""
    want = [make_policy(name).decide(s, 0.0) for s in [snap, *ticks]]
    out = []
    policy = make_policy(name)
    placed = sum(isinstance(a, Assign) for a in want[0])
    calls = (
        ("first", [snap], want[:1]),
        ("steady", [snap] * repeat, want[:1] * repeat),
        ("reread", [reread_copy(snap) for _ in range(repeat)], want[:1] * repeat),
        ("churn", ticks, want[1:]),
    )
    for call, snaps, expect in calls:
        gc.collect()
        ms, cpu, same = [], [], True
        for s, w in zip(snaps, expect, strict=True):
            start, start_cpu = time.perf_counter(), time.process_time()
            got = policy.decide(s, 0.0)
            ms.append((time.perf_counter() - start) * 1000.0)
            cpu.append((time.process_time() - start_cpu) * 1000.0)
            same = same and got == w
            del got
        out.append((call, ms, cpu, same, placed))
    return out


def bench_kernel(args: argparse.Namespace, counts: np.ndarray) -> None:
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


def size(text: str) -> tuple[int, int]:
    jobs, gpus = text.split("x")
    return int(jobs), int(gpus)


def main() -> None:
    ap = argparse.ArgumentParser()
    repo = Path(__file__).resolve().parents[1]
    ap.add_argument("--data", type=Path, default=repo / ".." / "shared" / "data" / "gavel")
    ap.add_argument("--what", choices=("all", "kernel", "decide"), default="all")
    ap.add_argument("--order", choices=("util", "random"), default="util")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--reference-max-gpus", type=int, default=2_048)
    ap.add_argument("--decide-sizes", type=size, nargs="+", default=DECIDE_SIZES, metavar="JOBSxGPUS")
    ap.add_argument("--policies", nargs="+", default=["horus"], metavar="NAME")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--counts", choices=("philly", "msr"), nargs="+", default=["philly"],
                    help="GPU counts: philly (1-8), msr (uncapped: gangs over nodes), or both: "
                         "decide ratios of each over the first in the same run")  # fmt: skip
    args = ap.parse_args()
    runs: dict[str, dict[Key, Medians]] = {}
    for source in dict.fromkeys(args.counts):
        counts = gpu_counts(args.data, source)
        emit(what="gpu_counts", source=source, jobs_over_8=round(float((counts > 8).mean()), 4))
        if args.what in ("all", "kernel"):
            bench_kernel(args, counts)
        if args.what in ("all", "decide"):
            runs[source] = bench_decide(args, counts, source)
    if len(runs) > 1:
        emit_ratios(runs, args.counts[0])


if __name__ == "__main__":
    main()
