"""A round's slots as actions: keep, preempt, assign onto concrete GPUs, or wait.

A job running on its slot's GPU type keeps its GPUs; a RUNNING job without a slot, or with one
on another type, is preempted (an ASSIGNED one is left until it runs). Pending jobs with a slot
get GPUs free in the snapshot: a job with a host shares the host's GPUs, the others take the
best-fit node, largest gangs first; a wide gang is spread (:mod:`horus_core.policies.spread`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from horus_core import reasoncodes as rc
from horus_core.model import Action, Assign, ClusterSnapshot, Job, JobSpec, JobState, NodeState, Preempt, Wait
from horus_core.policies import spread
from horus_core.policies.gavel.rounds import Slot


@dataclass
class Free:
    """Free GPUs (uuid lists) per GPU type and node, and the GPUs each placed job holds."""

    by_type: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    held: dict[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict)  # job -> (node, gpus)
    sharers: dict[tuple[str, ...], int] = field(default_factory=dict)  # gpus -> jobs on them
    type_of: Mapping[str, str] = field(default_factory=dict)
    racks: dict[str, str] = field(default_factory=dict)  # node -> rack
    largest: int = 0  # most healthy GPUs on one ready node

    def take(
        self, gpu_type: str, need: int, spec: JobSpec | None = None
    ) -> tuple[str, tuple[str, ...]] | None:
        nodes = self.by_type.get(gpu_type, {})
        if spec is not None and spread.spec_spans(spec, self.largest):
            return self._spread(nodes, spread.shape_of(spec, self.largest))
        fits = sorted((len(u), n) for n, u in nodes.items() if len(u) >= need)
        if not fits:
            return None
        node = fits[0][1]
        chosen, nodes[node] = tuple(nodes[node][:need]), nodes[node][need:]
        return node, chosen

    def _spread(self, nodes: dict[str, list[str]], shape: spread.Shape) -> tuple[str, tuple[str, ...]] | None:
        offer = [spread.FreeNode(n, tuple(u), self.racks.get(n, "")) for n, u in nodes.items()]
        plan = spread.Pool(offer).place(shape)
        if isinstance(plan, str):
            return None
        for name, uuids in plan.parts:
            nodes[name] = nodes[name][len(uuids) :]
        return plan.node, plan.gpus


def free_gpus(snapshot: ClusterSnapshot, type_of: Mapping[str, str]) -> Free:
    busy = {u for j in snapshot.jobs if j.state.active for u in j.gpus}
    free = Free(type_of=type_of, largest=spread.largest_node(snapshot))
    for node in snapshot.nodes:
        if node.state is not NodeState.READY:
            continue
        free.racks[node.name] = node.rack
        for g in sorted(node.gpus, key=lambda g: g.index):
            if g.healthy and g.uuid not in busy:
                free.by_type.setdefault(type_of[g.uuid], {}).setdefault(node.name, []).append(g.uuid)
    for j in snapshot.jobs:
        if j.state.active:
            free.held[j.id] = (j.node, j.gpus)
            free.sharers[j.gpus] = free.sharers.get(j.gpus, 0) + 1
    return free


def actions_for(
    snapshot: ClusterSnapshot, plan: Mapping[str, Slot], type_of: Mapping[str, str], label: str
) -> list[Action]:
    actions: list[Action] = []
    for job in snapshot.jobs:
        slot = plan.get(job.id)
        if job.state is JobState.RUNNING and (slot is None or slot.gpu_type != _type(job, type_of)):
            where = "its time share is used up" if slot is None else f"moves to {slot.gpu_type}"
            actions.append(Preempt(job.id, f"{label}: {where}"))
    free = free_gpus(snapshot, type_of)
    pending = [j for j in snapshot.jobs if j.state is JobState.PENDING]
    largest = max((sum(1 for g in n.gpus if g.uuid in type_of) for n in snapshot.nodes), default=0)
    for job in sorted(pending, key=lambda j: (bool(_host(plan, j)), -j.spec.gpus)):
        slot = plan.get(job.id)
        got = None if slot is None else _gpus_for(job, slot, free)
        if got is None:
            actions.append(Wait(job.id, _reason(slot, label), _code(job, slot, largest)))
            continue
        actions.append(Assign(job.id, got[0], got[1]))
    return actions


def _type(job: Job, type_of: Mapping[str, str]) -> str:
    return type_of.get(job.gpus[0], "") if job.gpus else ""


def _host(plan: Mapping[str, Slot], job: Job) -> str:
    slot = plan.get(job.id)
    return "" if slot is None else slot.host


def _gpus_for(job: Job, slot: Slot, free: Free) -> tuple[str, tuple[str, ...]] | None:
    if slot.host:
        held = free.held.get(slot.host)
        if (
            held is not None
            and free.sharers.get(held[1]) == 1
            and len(held[1]) == job.spec.gpus
            and free.type_of.get(held[1][0]) == slot.gpu_type
        ):
            free.sharers[held[1]] = 2
            return held
    got = free.take(slot.gpu_type, job.spec.gpus, job.spec)
    if got is not None:
        free.held[job.id] = got
        free.sharers[got[1]] = 1
    return got


def _code(job: Job, slot: Slot | None, largest_node: int) -> str:
    if job.spec.gpus > largest_node:
        return rc.GANG_TOO_LARGE  # (a job's GPUs are all on one node)
    return rc.PRIORITY if slot is None else rc.RESOURCES


def _reason(slot: Slot | None, label: str) -> str:
    if slot is None:
        return f"{label}: waiting for its share of GPU time"
    return f"{label}: its {slot.gpu_type} GPUs are not free yet"
