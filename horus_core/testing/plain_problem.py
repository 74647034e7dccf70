"""The plain per-job Problem builder: the test oracle :mod:`horus_core.packing.assemble` is held to.

One job at a time, written to be read: :func:`build_problem` turns a snapshot and a queue into
the kernel's arrays, reading the model only (the hints and cards of the jobs were registered
when they entered the pass's job table: ``model.enter``). No production module imports it (an
import contract in pyproject.toml).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from horus_core.interference import InterferenceModel
from horus_core.model import ClusterSnapshot, Job, NodeState
from horus_core.packing.build import PairFilter, class_floors, class_speeds
from horus_core.packing.cluster import gpu_type
from horus_core.packing.problem import Problem


@dataclass(frozen=True, eq=False)
class Layout:
    """How the kernel's indices map back to the snapshot."""

    node_names: tuple[str, ...]
    gpu_uuids: tuple[str, ...]
    kind_types: tuple[str, ...]  # GPU type per kind
    classes: tuple[tuple[str, int], ...]  # (signature, GPUs or 0) per job class
    queue: tuple[Job, ...]
    largest_node: int


def build_problem(
    snapshot: ClusterSnapshot,
    queue: Sequence[Job],
    model: InterferenceModel,
    *,
    split_by_gpus: bool = False,
    pair_filter: PairFilter | None = None,
) -> tuple[Problem, Layout]:
    """Arrays for :func:`horus_core.packing.place`: ready nodes' healthy GPUs, the active jobs on
    them, and ``queue`` (pending jobs, in the order to serve them)."""
    nodes = [n for n in snapshot.nodes if n.state is NodeState.READY]
    gpus = [g for n in nodes for g in sorted((g for g in n.gpus if g.healthy), key=lambda g: g.index)]
    sizes = [sum(1 for g in n.gpus if g.healthy) for n in nodes]
    kinds: dict[tuple[str, int], int] = {}
    gpu_kind = np.array([kinds.setdefault((gpu_type(g), g.memory_mib), len(kinds)) for g in gpus], np.int32)
    index = {g.uuid: i for i, g in enumerate(gpus)}
    active = [j for j in snapshot.jobs if j.state.active and any(u in index for u in j.gpus)]
    classes: dict[tuple[str, int], int] = {}

    def class_of(job: Job) -> int:
        key = (model.demand(job.spec), job.spec.gpus if split_by_gpus else 0)
        return classes.setdefault(key, len(classes))

    nres, res, excl = _residents(active, index, class_of)
    job_cls = np.array([class_of(j) for j in queue], np.int32)
    keys = list(classes)
    profiles = [model.profile_of(sig) for sig, _ in keys]
    kind_list = sorted(kinds, key=lambda k: kinds[k])
    problem = Problem(
        node_start=np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]).astype(np.int32),
        gpu_kind=gpu_kind,
        gpu_nres=nres,
        gpu_res=res,
        gpu_excl=excl,
        kind_cap=np.array([mib for _, mib in kind_list], np.int64),
        cls_mem=np.array([p.mem_mib for p in profiles], np.int64),
        cls_util=np.array([p.util_avg for p in profiles], np.float64),
        cls_peak=np.array([p.util_peak for p in profiles], np.float64),
        speed=class_speeds(model, keys, kind_list, split_by_gpus, pair_filter),
        job_cls=job_cls,
        job_gpus=np.array([max(1, j.spec.gpus) for j in queue], np.int32),
        job_excl=np.array([j.spec.exclusive for j in queue], np.bool_),
        cls_floor=class_floors(keys, _floor_by_sig(snapshot, queue, model)),
    )
    layout = Layout(
        node_names=tuple(n.name for n in nodes),
        gpu_uuids=tuple(g.uuid for g in gpus),
        kind_types=tuple(t for t, _ in kind_list),
        classes=tuple(keys),
        queue=tuple(queue),
        largest_node=max(sizes, default=0),
    )
    return problem, layout


def _floor_by_sig(
    snapshot: ClusterSnapshot, queue: Sequence[Job], model: InterferenceModel
) -> dict[str, float]:
    """The highest ``min_speed`` per packing key (signature, with a declared memory cap) over
    the active jobs and the queue."""
    out: dict[str, float] = {}
    for job in [*(j for j in snapshot.jobs if j.state.active), *queue]:
        if job.spec.min_speed > 0.0:
            sig = model.demand(job.spec)
            out[sig] = max(out.get(sig, 0.0), job.spec.min_speed)
    return out


def _residents(
    active: Sequence[Job], index: dict[str, int], class_of: Callable[[Job], int]
) -> tuple[NDArray[np.int32], NDArray[np.int32], NDArray[np.bool_]]:
    n = len(index)
    nres = np.zeros(n, np.int32)
    res = np.full((n, 3), -1, np.int32)
    excl = np.zeros(n, np.bool_)
    for job in active:
        c = class_of(job)
        for uuid in job.gpus:
            d = index.get(uuid)
            if d is None:
                continue
            if nres[d] < 3:
                res[d, nres[d]] = c
            nres[d] = min(3, nres[d] + 1)
            excl[d] |= job.spec.exclusive
    return nres, res, excl
