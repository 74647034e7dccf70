"""A policy's actions as what the apiserver is sent.

- **Assign** -> per pod a :class:`Placement`: the annotations written first (``horus.io/node``,
  ``horus.io/gpus``: the GPU indices on that node, ``horus.io/rank``, the predicted speed; HAMi's
  allocation annotations where the node is HAMi's, so its device plugin and HAMi-core enforce
  the memory cap; a gang's rendezvous as ``horus.io/env.MASTER_ADDR``... for the downward API),
  then a Binding. A placement whose CPU or memory requests do not fit the node is refused
  (:func:`placements` returns the reason instead).
- **Wait** -> a ``PodScheduled=False`` condition with Horus's reason code and sentence, and a
  ``FailedScheduling`` Event, as kube-scheduler writes them (``kubectl describe pod``).
- **Preempt** -> an Eviction (``policy/v1beta1``) per pod: a PodDisruptionBudget is respected.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass
from typing import Any

from horus_core import gang
from horus_core.k8s.pods import GPUS, NODE, RANK, SPEED, PodAsk
from horus_core.k8s.world import Unit, World
from horus_core.model import Assign, Gpu

ENV_PREFIX = "horus.io/env."  # + a rendezvous variable of docs/gangs.md's env table
PORTS = (29500, 29999)  # a gang's MASTER_PORT range (torchrun's default port and above)
HAMI_ALLOCATED = "hami.io/vgpu-devices-allocated"
HAMI_TO_ALLOCATE = "hami.io/vgpu-devices-to-allocate"
HAMI_NODE = "hami.io/vgpu-node"
HAMI_BIND_TIME = "hami.io/bind-time"
HAMI_BIND_PHASE = "hami.io/bind-phase"
CONDITION_REASON_INVALID = "InvalidArgument"


@dataclass(frozen=True, slots=True)
class Placement:
    """One pod's part of an Assign."""

    namespace: str
    name: str
    uid: str
    node: str
    indices: tuple[int, ...]
    annotations: Mapping[str, str]

    def patch(self) -> dict[str, Any]:
        """The merge patch that writes the plan (before the Binding)."""
        return {"metadata": {"annotations": dict(self.annotations)}}

    def binding(self, with_plan: bool = False) -> dict[str, Any]:
        """The Binding; ``with_plan``: carrying the plan's annotations (the apiserver writes a
        Binding's annotations on the pod as it binds it: one request, atomic)."""
        return binding(self.name, self.uid, self.node, self.annotations if with_plan else None)


def binding(name: str, uid: str, node: str, annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A Binding of pod ``name`` (its ``uid``: a pod recreated under the name is not bound) to ``node``."""
    meta: dict[str, Any] = {"name": name} | ({"uid": uid} if uid else {})
    if annotations:
        meta["annotations"] = dict(annotations)
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": meta,
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }


def placements(
    world: World, assign: Assign, now: float, ports: Set[int] = frozenset()
) -> list[Placement] | str:
    """The pods of ``assign``'s job on its GPUs (rank order), or why it cannot be done (a
    sentence: CPU or memory requests that do not fit, GPUs of no known node)."""
    unit = world.units[assign.job_id]
    gpus_of = world.gpus
    try:
        parts = gang.split(assign.gpus, {u: gpus_of[u].node for u in assign.gpus if u in gpus_of})
    except ValueError as exc:
        return str(exc)
    if len(parts) != len(unit.pods) and not (len(unit.pods) == 1 and len(parts) == 1):
        return f"{len(unit.pods)} pods cannot take GPUs on {len(parts)} nodes"
    why = _fit(world, unit, [n for n, _ in parts])
    if why:
        return why
    env = _rendezvous(world, unit, parts, ports)
    out = []
    for rank, (ask, (node, uuids)) in enumerate(zip(unit.pods, parts, strict=True)):
        gpus = [gpus_of[u] for u in uuids]
        notes = {
            NODE: node,
            GPUS: ",".join(str(g.index) for g in gpus),
            RANK: str(rank),
            SPEED: f"{assign.predicted_slowdown:.3f}",
        }
        notes |= {ENV_PREFIX + k: v for k, v in (env[rank] if env else ())}
        if world.facts[node].hami:
            notes |= hami_annotations(ask, gpus, unit.job.spec.gpu_memory_mib, node, now)
        out.append(Placement(ask.namespace, ask.name, ask.uid, node, tuple(g.index for g in gpus), notes))
    return out


def _fit(world: World, unit: Unit, nodes: Sequence[str]) -> str:
    """Why the pods' CPU / memory requests do not fit their nodes ("" = they fit)."""
    for ask, node in zip(unit.pods, nodes, strict=False):
        cpu, memory = world.free(node)
        if ask.cpu > cpu + 1e-9:
            return f"its CPU request ({ask.cpu:g}) does not fit node {node} ({max(cpu, 0):g} cores free)"
        if ask.memory > memory:
            return (
                f"its memory request ({ask.memory / 2**20:.0f} MiB) does not fit node {node} "
                f"({max(memory, 0) / 2**20:.0f} MiB free)"
            )
    return ""


def reserve(world: World, job_id: str, placed: Sequence[Placement]) -> None:
    """Count the requests of ``placed`` (``job_id``'s pods) on their nodes: the rest of the pass sees them."""
    for ask, p in zip(world.units[job_id].pods, placed, strict=False):
        world.cpu_used[p.node] = world.cpu_used.get(p.node, 0.0) + ask.cpu
        world.memory_used[p.node] = world.memory_used.get(p.node, 0.0) + ask.memory


def _rendezvous(
    world: World, unit: Unit, parts: Sequence[tuple[str, tuple[str, ...]]], ports: Set[int]
) -> list[tuple[tuple[str, str], ...]] | None:
    if len(unit.pods) < 2:
        return None
    port = gang.rendezvous_port(unit.job.id, unit.job.attempt + 1, ports, *PORTS)
    addr = world.facts[parts[0][0]].address
    world_size = sum(len(g) for _, g in parts)
    return [
        gang.GangInfo(rank, len(parts), world_size, addr, port).env(len(g))
        for rank, (_, g) in enumerate(parts)
    ]


def hami_annotations(ask: PodAsk, gpus: Sequence[Gpu], cap_mib: int, node: str, now: float) -> dict[str, str]:
    """HAMi's documented allocation annotations: per container ``UUID,NVIDIA,MiB,cores:`` per GPU,
    containers separated by ``;`` (the cap: the declared one, else the whole GPU's memory)."""
    per = list(ask.container_gpus) or [len(gpus)]
    if sum(per) != len(gpus):  # (a KAI fraction asks no nvidia.com/gpu: its first container has it)
        per = [len(gpus)] + [0] * (len(per) - 1)
    fields, at = [], 0
    for count in per:
        mine = gpus[at : at + count]
        at += count
        fields.append("".join(f"{g.uuid},NVIDIA,{cap_mib or g.memory_mib},{ask.cores}:" for g in mine))
    devices = ";".join(fields) + ";"
    return {
        HAMI_ALLOCATED: devices,
        HAMI_TO_ALLOCATE: devices,
        HAMI_NODE: node,
        HAMI_BIND_TIME: str(int(now)),
        HAMI_BIND_PHASE: "allocating",
    }


def _stamp(now: float) -> str:
    return datetime.datetime.fromtimestamp(now, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def condition(reason: str, message: str, now: float) -> dict[str, Any]:
    """The ``pods/NAME/status`` strategic merge patch: ``PodScheduled=False`` with ``reason``."""
    return {
        "status": {
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": reason,
                    "message": message,
                    "lastTransitionTime": _stamp(now),
                }
            ]
        }
    }


def event(
    namespace: str,
    name: str,
    uid: str,
    reason: str,
    message: str,
    component: str,
    now: float,
    warning: bool = True,
) -> dict[str, Any]:
    """An Event on the pod, as kube-scheduler writes them (``FailedScheduling``, ``Scheduled``...)."""
    stamp = _stamp(now)
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{name}.", "namespace": namespace},
        "involvedObject": {
            "kind": "Pod",
            "namespace": namespace,
            "name": name,
            "uid": uid,
            "apiVersion": "v1",
        },
        "reason": reason,
        "message": message[:1024],
        "type": "Warning" if warning else "Normal",
        "source": {"component": component},
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }


def eviction(namespace: str, name: str) -> dict[str, Any]:
    """The Eviction of a pod (``pods/NAME/eviction``, policy/v1beta1 as 1.20 serves it)."""
    return {
        "apiVersion": "policy/v1beta1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": namespace},
    }
