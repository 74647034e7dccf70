"""Test oracle: each packing policy's queue order written the plain way (``sorted`` over Job
objects, one ``model.profile`` call per job), which the policies' one vectorised order must
match. Only tests import this module."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from statistics import median

import numpy as np

from horus_core.interference import InterferenceModel
from horus_core.model import ClusterSnapshot, Job
from horus_core.packing.cluster import gpu_type
from horus_core.policies.attained import Attained
from horus_core.policies.base import arrival_order
from horus_core.policies.kmeans import choose_k
from horus_core.policies.pack import PackingPolicy


def util_order(jobs: Sequence[Job], model: InterferenceModel) -> list[Job]:
    """Horus's queue order: higher priority, then lowest predicted utilisation, then arrival."""
    return sorted(
        jobs, key=lambda j: (-j.spec.priority, model.profile(j.spec).util_avg, j.submitted_at, j.id)
    )


def las_level(las: Attained, job: Job) -> int:
    """How many level boundaries the job's attained GPU-seconds have reached."""
    return sum(1 for b in las.bounds if las.service.get(job.id, 0.0) >= b)


def las_order(jobs: Sequence[Job], las: Attained) -> list[Job]:
    """Least attained service: higher priority, then lower level, then arrival (FIFO), then id."""
    return sorted(jobs, key=lambda j: (-j.spec.priority, las_level(las, j), j.submitted_at, j.id))


def work(job: Job, model: InterferenceModel, main_type: str) -> float:
    """Lucid's estimated GPU-seconds: steps / steps-per-second alone x GPUs (inf when unknown)."""
    rate = model.solo_throughput(job.spec.job_type, job.spec.gpus, main_type)
    if not rate or job.spec.total_steps <= 0:
        return math.inf
    return job.spec.total_steps / rate * job.spec.gpus


def lucid_order(snapshot: ClusterSnapshot, model: InterferenceModel) -> list[Job]:
    types = Counter(gpu_type(g) for g in snapshot.ready_gpus())
    main = types.most_common(1)[0][0] if types else "v100"
    key = lambda j: (-j.spec.priority, work(j, model, main), j.submitted_at, j.id)  # noqa: E731
    return sorted(snapshot.pending(), key=key)


def credit(jobs: Sequence[Job], now: float) -> float:
    """Median pending time x queue length."""
    return median(max(0.0, now - j.submitted_at) for j in jobs) * len(jobs)


def plus_queues(policy: PackingPolicy, pending: Sequence[Job], now: float, seed: int = 0) -> list[list[Job]]:
    """horus+'s k-means queues, highest credit first, each least attained service first."""
    if not pending:
        return []
    shapes: dict[tuple[float, float, float, float], int] = {}
    shape_of = []
    for job in pending:
        p = policy.model.profile(job.spec)
        key = (float(job.spec.gpus), p.util_avg, p.util_peak, float(p.mem_mib))
        shape_of.append(shapes.setdefault(key, len(shapes)))
    points = np.array(list(shapes), dtype=np.float64)
    weights = np.bincount(shape_of, minlength=len(shapes)).astype(np.float64)
    spread = points.std(axis=0)
    scaled = (points - points.mean(axis=0)) / np.where(spread > 0, spread, 1.0)
    labels = choose_k(scaled, weights, seed=seed)
    groups: dict[int, list[Job]] = {}
    for job, shape in zip(pending, shape_of, strict=True):
        groups.setdefault(int(labels[shape]), []).append(job)
    ordered = sorted(groups.values(), key=lambda g: (-credit(g, now), min(j.submitted_at for j in g)))
    assert policy.las is not None
    return [las_order(g, policy.las) for g in ordered]


def queue_order(name: str, policy: object, snapshot: ClusterSnapshot, now: float) -> list[Job]:
    """The pending jobs of ``snapshot`` in the order policy ``name`` serves them."""
    model: InterferenceModel = policy.model  # type: ignore[attr-defined]
    if name == "horus":
        assert isinstance(policy, PackingPolicy) and policy.las is not None
        return las_order(snapshot.pending(), policy.las)
    if name in ("horus-util", "horus-paper"):
        return util_order(snapshot.pending(), model)
    if name in ("binpack", "gandiva"):
        return arrival_order(snapshot.pending())
    if name == "lucid":
        return lucid_order(snapshot, model)
    assert isinstance(policy, PackingPolicy)
    return [j for q in plus_queues(policy, snapshot.pending(), now) for j in q]
