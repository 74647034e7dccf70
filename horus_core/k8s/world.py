"""The apiserver's nodes and pods as one policy snapshot (:class:`World`), the same
``ClusterSnapshot`` the master and the simulator hand to ``decide(snapshot, now)``.

- A pending pod of this scheduler is a PENDING job ``NAMESPACE/NAME``; a gang's pods are one job
  ``NAMESPACE/gang:NAME`` of ``gpus_per_node`` = a pod's GPUs on ``nodes`` = its pod count,
  placed all together or not at all. A gang with fewer pods than its size is held (a Wait).
- A pod Horus placed (bound, or with Horus's plan written and not yet bound: a restart in the
  middle) is an active job on the GPUs its ``horus.io/gpus`` names: RUNNING once the kubelet says
  so, else ASSIGNED. Plans not yet bound are :attr:`World.resume`: bound as planned, never
  decided again.
- Pods of other schedulers hold their ``nvidia.com/gpu`` count of a node's GPUs (hidden, as
  unhealthy, from the free ones) and their CPU and memory requests.
- A pod whose fields do not parse is :attr:`World.refused` with the error naming the field.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from horus_core import reasoncodes as rc
from horus_core.errors import InvalidArgument
from horus_core.k8s.nodes import NodeFacts, node_facts, resource_of
from horus_core.k8s.pods import GANG, GPU, MIG_PREFIX, PodAsk, pod_ask, with_gpus
from horus_core.k8s.quantity import parse_count, parse_quantity
from horus_core.model import ClusterSnapshot, Gpu, Job, JobSpec, JobState, Node, Wait
from horus_core.queues.config import QueueConfig

DONE_PHASES = frozenset({"Succeeded", "Failed"})
MAX_MEMO = 200_000  # pods' asks remembered (cleared beyond: read again)
AskMemo = dict[tuple[str, str], "PodAsk | InvalidArgument"]


@dataclass(frozen=True, slots=True)
class Unit:
    """One Horus job and its pods (a gang's in rank order once placed)."""

    job: Job
    pods: tuple[PodAsk, ...]


@dataclass(frozen=True, slots=True)
class Refusal:
    namespace: str
    name: str
    uid: str
    error: InvalidArgument


@dataclass
class World:
    snapshot: ClusterSnapshot
    units: dict[str, Unit]  # job id -> unit (pending and active)
    facts: dict[str, NodeFacts]  # node name -> facts
    refused: list[Refusal] = field(default_factory=list)
    held: list[tuple[Wait, tuple[PodAsk, ...]]] = field(default_factory=list)  # waits before the policy
    resume: list[PodAsk] = field(default_factory=list)  # planned, unbound: bind as planned
    cpu_used: dict[str, float] = field(default_factory=dict)  # node -> cores requested by its pods
    memory_used: dict[str, float] = field(default_factory=dict)  # node -> bytes requested
    gpus: dict[str, Gpu] = field(default_factory=dict)  # uuid -> GPU, every node's
    asks: AskMemo | None = None  # pods read in earlier passes (build's ``memo``)

    def free(self, node: str) -> tuple[float, float]:
        """(cores, bytes) a node has left for new pods."""
        f = self.facts[node]
        return f.cpu - self.cpu_used.get(node, 0.0), f.memory - self.memory_used.get(node, 0.0)


def job_id(ask: PodAsk) -> str:
    return f"{ask.namespace}/gang:{ask.gang}" if ask.gang else ask.key


def build(
    nodes: Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]],
    scheduler: str,
    queues: QueueConfig | None = None,
    groups: Mapping[str, int] | None = None,
    memo: AskMemo | None = None,
) -> World:
    """The world of ``nodes`` and ``pods`` for the scheduler named ``scheduler``; ``groups``:
    the coscheduling PodGroups' ``minMember`` by ``NAMESPACE/NAME``; ``memo``: what earlier
    passes read of the pods (kept by the caller, for one ``queues``)."""
    facts = {f.node.name: f for f in map(node_facts, nodes)}
    world = World(ClusterSnapshot((), ()), {}, facts, asks=memo)
    pending: list[PodAsk] = []
    placed: list[PodAsk] = []
    foreign: dict[tuple[str, str], int] = {}  # (node, resource) -> instances other pods hold
    for pod in pods:
        _take(world, pod, scheduler, queues, pending, placed, foreign)
    jobs = _placed_jobs(world, placed)
    jobs += _pending_jobs(world, pending, groups or {}, {u for j in jobs for u in j.gpus})
    node_list = tuple(_hide_foreign(f.node, foreign, jobs) for f in facts.values())
    world.facts = {n.name: dataclasses.replace(facts[n.name], node=n) for n in node_list}
    world.gpus = {g.uuid: g for n in node_list for g in n.gpus}
    jobs.sort(key=lambda j: (j.submitted_at, j.id))
    world.snapshot = ClusterSnapshot(node_list, tuple(jobs))
    return world


def _take(
    world: World,
    pod: Mapping[str, Any],
    scheduler: str,
    queues: QueueConfig | None,
    pending: list[PodAsk],
    placed: list[PodAsk],
    foreign: dict[tuple[str, str], int],
) -> None:
    """Sort one pod: pending / placed by us, or another's that holds resources."""
    spec, status, meta = pod.get("spec") or {}, pod.get("status") or {}, pod.get("metadata") or {}
    if status.get("phase") in DONE_PHASES:
        return
    node = str(spec.get("nodeName") or "")
    if not node and meta.get("deletionTimestamp"):
        return  # (going away before it was placed)
    ours = spec.get("schedulerName") == scheduler
    ask: PodAsk | None = None
    if ours:
        try:
            ask = _ask(pod, queues, world.asks)
        except InvalidArgument as exc:
            if not node:
                world.refused.append(
                    Refusal(
                        str(meta.get("namespace") or "default"),
                        str(meta.get("name")),
                        str(meta.get("uid")),
                        exc,
                    )
                )
                return
    planned = ask.planned[0] if ask is not None and ask.planned and ask.planned[0] in world.facts else ""
    where = node or planned  # (a plan on a node gone: decided again)
    if where:
        cpu, memory, held = _requests(spec)
        world.cpu_used[where] = world.cpu_used.get(where, 0.0) + cpu
        world.memory_used[where] = world.memory_used.get(where, 0.0) + memory
        if ask is None or ask.planned is None or ask.planned[0] != where:
            for resource, n in held.items():  # (not placed by Horus: counted only)
                foreign[where, resource] = foreign.get((where, resource), 0) + n
            return
        placed.append(ask)
        if not node:
            world.resume.append(ask)
    elif ask is not None:
        pending.append(ask)


def _ask(pod: Mapping[str, Any], queues: QueueConfig | None, memo: AskMemo | None) -> PodAsk:
    """``pod_ask``, remembered per (uid, resourceVersion): an unchanged pod is read once."""
    if memo is None:
        return pod_ask(pod, queues)
    meta = pod.get("metadata") or {}
    key = (str(meta.get("uid") or ""), str(meta.get("resourceVersion") or ""))
    got = memo.get(key) if key[1] else None
    if got is None:
        try:
            got = pod_ask(pod, queues)
        except InvalidArgument as exc:
            got = exc
        if key[1]:
            if len(memo) > MAX_MEMO:
                memo.clear()
            memo[key] = got
    if isinstance(got, InvalidArgument):
        raise got
    return got


def _requests(spec: Mapping[str, Any]) -> tuple[float, float, dict[str, int]]:
    """(cores, bytes, GPU resource -> count) a placed pod holds; what does not parse counts 0."""
    cpu, memory, held = 0.0, 0.0, dict[str, int]()
    for c in spec.get("containers") or []:
        res = c.get("resources") or {}
        requests, limits = res.get("requests") or {}, res.get("limits") or {}
        with contextlib.suppress(ValueError):
            cpu += parse_quantity(requests.get("cpu", limits.get("cpu", 0)))
        with contextlib.suppress(ValueError):
            memory += parse_quantity(requests.get("memory", limits.get("memory", 0)))
        for key, value in (requests | limits).items():
            if key == GPU or str(key).startswith(MIG_PREFIX):
                with contextlib.suppress(ValueError):
                    held[str(key)] = held.get(str(key), 0) + parse_count(value)
    return cpu, memory, held


def _placed_jobs(world: World, placed: Sequence[PodAsk]) -> list[Job]:
    """The active jobs: the pods Horus placed, a gang's pods together in rank order."""
    by_job: dict[str, list[PodAsk]] = {}
    for ask in placed:
        by_job.setdefault(job_id(ask), []).append(ask)
    jobs = []
    for jid, asks in by_job.items():
        asks.sort(key=lambda a: (a.gang_rank, a.name))
        gpus = tuple(
            world.facts[a.planned[0]].node.gpus[i].uuid
            for a in asks
            if a.planned is not None and a.planned[0] in world.facts
            for i in a.planned[1]
            if i < len(world.facts[a.planned[0]].node.gpus)
        )
        running = all(a.phase == "Running" for a in asks)
        first = asks[0]
        assert first.planned is not None
        spec = _gang_spec(asks) if first.gang else first.spec
        job = Job(
            jid,
            spec,
            JobState.RUNNING if running else JobState.ASSIGNED,
            attempt=1,
            submitted_at=min(a.created for a in asks),
            node=first.planned[0],
            gpus=gpus,
            nodes=tuple(dict.fromkeys(a.planned[0] for a in asks if a.planned)) if len(asks) > 1 else (),
        )
        jobs.append(job)
        world.units[jid] = Unit(job, tuple(asks))
    return jobs


def _gang_spec(asks: Sequence[PodAsk]) -> JobSpec:
    per = asks[0].spec.gpus
    if len(asks) == 1:
        return asks[0].spec
    return with_gpus(asks[0], per * len(asks), gpus_per_node=per, nodes=len(asks))


def _pending_jobs(
    world: World, pending: Sequence[PodAsk], groups: Mapping[str, int], busy: set[str]
) -> list[Job]:
    singles = [a for a in pending if not a.gang]
    gangs: dict[str, list[PodAsk]] = {}
    for a in pending:
        if a.gang:
            gangs.setdefault(job_id(a), []).append(a)
    units = [(a.key, [a]) for a in singles] + [
        (jid, _complete(world, jid, g, groups)) for jid, g in gangs.items()
    ]
    jobs = []
    for jid, asks in units:
        if not asks or jid in world.units:  # (held, or its peers are placed: waits for them)
            if asks:
                world.held.append(
                    (Wait(jid, "its gang is partly placed; the rest waits", rc.RESOURCES), tuple(asks))
                )
            continue
        spec = _shared_memory(_gang_spec(asks) if asks[0].gang else asks[0].spec, asks[0], world)
        if asks[0].mig:
            spec = dataclasses.replace(spec, gpu_types=_mig_types(world, asks[0].mig))
        code, reason = asks[0].waiting
        job = Job(
            jid,
            spec,
            JobState.PENDING,
            submitted_at=min(a.created for a in asks),
            reason=reason,
            reason_code=code,
        )
        jobs.append(job)
        world.units[jid] = Unit(job, tuple(asks))
    return jobs


def _complete(world: World, jid: str, asks: list[PodAsk], groups: Mapping[str, int]) -> list[PodAsk]:
    """A gang's pods if it has them all and they agree, else [] (held or refused)."""
    asks.sort(key=lambda a: (a.created, a.name))
    first = asks[0]
    size = groups.get(first.gang_key, 0) if first.pod_group else first.gang_size
    if first.pod_group and size <= 0:
        world.held.append(
            (Wait(jid, f"PodGroup {first.gang}: not found (or minMember 0)", rc.SUBMITTED), tuple(asks))
        )
        return []
    if any(a.spec.gpus != first.spec.gpus for a in asks):
        err = InvalidArgument(
            f"metadata.labels[{GANG}]", f"the pods of gang {first.gang} ask for different GPU counts"
        )
        world.refused += [Refusal(a.namespace, a.name, a.uid, err) for a in asks]
        return []
    if len(asks) < size:
        why = f"gang {first.gang}: {len(asks)} of its {size} pods exist; it is placed when all do"
        world.held.append((Wait(jid, why, rc.SUBMITTED), tuple(asks)))
        return []
    return asks[:size]


def _mig_types(world: World, profile: str) -> tuple[str, ...]:
    """The GPU types of the cluster's MIG instances of ``profile`` (none: one no GPU has)."""
    types = {
        g.gpu_type for f in world.facts.values() for g in f.node.gpus if g.gpu_type.endswith(f"-{profile}")
    }
    return tuple(sorted(types)) or (f"mig-{profile}",)


def _shared_memory(spec: JobSpec, ask: PodAsk, world: World) -> JobSpec:
    """A share of a GPU's memory (HAMi percentage, KAI fraction) in MiB of the smallest GPU it
    may run on (so that it fits wherever it lands)."""
    if spec.gpu_memory_mib or ask.memory_share <= 0:
        return spec
    sizes = [
        g.memory_mib
        for f in world.facts.values()
        for g in f.node.gpus
        if g.memory_mib > 0 and spec.accepts_type(g.gpu_type)
    ]
    if not sizes:
        return spec
    return dataclasses.replace(spec, gpu_memory_mib=max(1, math.ceil(ask.memory_share * min(sizes))))


def _hide_foreign(node: Node, foreign: Mapping[tuple[str, str], int], jobs: Sequence[Job]) -> Node:
    """``node`` with as many of its free GPUs (highest index first) of each resource hidden as
    other schedulers' pods hold there."""
    wanted = {r: n for (name, r), n in foreign.items() if name == node.name and n > 0}
    if not wanted:
        return node
    busy = {u for j in jobs for u in j.gpus}
    hide: set[str] = set()
    for g in sorted(node.gpus, key=lambda g: -g.index):
        resource = resource_of(g)
        if g.uuid not in busy and wanted.get(resource, 0) > 0:
            hide.add(g.uuid)
            wanted[resource] -= 1
    gpus = tuple(dataclasses.replace(g, healthy=False) if g.uuid in hide else g for g in node.gpus)
    return dataclasses.replace(node, gpus=gpus)
