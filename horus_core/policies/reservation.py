"""The head gang's reservation and what it is decided on (:mod:`horus_core.policies.backfill`):
where a gang could ever run, when GPUs are predicted free, and how fast a job runs alone or as
predicted. Pure functions of a snapshot."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from horus_core.interference import InterferenceModel
from horus_core.model import ClusterSnapshot, Gpu, Job, NodeState
from horus_core.packing.cluster import gpu_type
from horus_core.policies.base import residents

# A job -> the GPU types it may use now (None: any; empty: none).
TypesOf = Callable[[Job], "frozenset[str] | None"]

WAIT_S = 3600.0  # a gang may become head (its reservation) after this long in the queue


@dataclass(frozen=True, slots=True)
class Reservation:
    job_id: str
    node: str
    gpus: tuple[str, ...]  # reserved GPU uuids
    free_by: float  # when the last of them was predicted free, at the time it was made


def pools(snapshot: ClusterSnapshot, job: Job, allowed: frozenset[str] | None) -> list[tuple[str, list[Gpu]]]:
    """Where ``job``'s gang could ever run: per READY node, its healthy GPUs of ``allowed``
    types (None: any), where they are at least the gang's size."""
    out = []
    for node in snapshot.nodes:
        if node.state is not NodeState.READY:
            continue
        gpus = [g for g in node.gpus if g.healthy and (allowed is None or gpu_type(g) in allowed)]
        if len(gpus) >= job.spec.gpus:
            out.append((node.name, gpus))
    return out


def free_times(snapshot: ClusterSnapshot, now: float, remaining: Callable[[Job], float]) -> dict[str, float]:
    """GPU uuid -> when it is predicted to hold no job: now plus the longest ``remaining`` of
    the active jobs on it (now where it is idle)."""
    out = {g.uuid: now for n in snapshot.nodes for g in n.gpus}
    for job in snapshot.active():
        end = now + remaining(job)
        for uuid in job.gpus:
            out[uuid] = max(out.get(uuid, now), end)
    return out


def predicted_rate(job: Job, types: Mapping[str, str], model: InterferenceModel | None) -> float | None:
    """Predicted steps/s of a running job: solo on its GPU type x its predicted speed."""
    if model is None or not job.gpus or job.gpus[0] not in types:
        return None
    solo = model.solo_throughput(model.signature(job.spec), max(1, job.spec.gpus), types[job.gpus[0]])
    return solo * job.predicted_slowdown if solo else None


def solo_seconds(job: Job, kind: str, model: InterferenceModel | None) -> float | None:
    """Seconds ``job`` would run alone on GPUs of type ``kind``; None where its work is unknown."""
    if model is None or job.spec.total_steps <= 0:
        return None
    solo = model.solo_throughput(model.signature(job.spec), max(1, job.spec.gpus), kind)
    return job.spec.total_steps / solo if solo else None


def holders(snapshot: ClusterSnapshot, uuids: Iterable[str]) -> dict[str, set[str]]:
    """GPU uuid of ``uuids`` -> the ids of the active jobs on it."""
    on = residents(snapshot.jobs)
    return {u: {j.id for j in on.get(u, ())} for u in set(uuids)}


def all_idle(res: Reservation, snapshot: ClusterSnapshot) -> bool:
    """Whether no active job holds a reserved GPU."""
    return not any(holders(snapshot, res.gpus).values())


def usable(res: Reservation, snapshot: ClusterSnapshot, allowed: frozenset[str] | None) -> bool:
    """Whether the reserved GPUs are all still healthy, of allowed types, on a READY node."""
    for node in snapshot.nodes:
        if node.name == res.node:
            ok = {g.uuid for g in node.gpus if g.healthy and (allowed is None or gpu_type(g) in allowed)}
            return node.state is NodeState.READY and set(res.gpus) <= ok
    return False


def allowed_on(job: Job, kind: str, types_of: TypesOf) -> bool:
    """Whether ``job`` may use GPUs of type ``kind`` now."""
    allowed = types_of(job)
    return allowed is None or kind in allowed
