"""Checking a policy's actions against the snapshot before anything is applied (pure).

A policy is code we did not write: an action that would corrupt the cluster's state (a GPU that
is not on that node, a full or exclusive GPU, a job that is not pending, a second action for one
job) is dropped with a log line instead of applied. The live master and the simulator both apply
exactly what :func:`check_actions` keeps, so a policy meets the same rules in both.
"""

from __future__ import annotations

import logging
import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Protocol

from horus_core.model import Action, Assign, ClusterSnapshot, Gpu, Job, JobState, NodeState, Preempt, Wait
from horus_core.policies.base import residents

log = logging.getLogger(__name__)

MAX_JOBS_PER_GPU = 3
_PENDING = JobState.PENDING
_JOB_ID = operator.attrgetter("job_id")


@dataclass
class Plan:
    assigns: list[Assign] = field(default_factory=list)
    preempts: list[Preempt] = field(default_factory=list)
    waits: list[Wait] = field(default_factory=list)  # only those whose reason changed
    n_waits: int = 0  # every Wait kept, changed or not
    dropped: list[tuple[object, str]] = field(default_factory=list)  # (action, why)


class Lookup(Protocol):
    """What the checks read from a snapshot (the simulator passes its own indexes)."""

    def job(self, job_id: str) -> Job | None:
        """The pending or active job with this id."""
        ...

    def node_ready(self, node: str) -> bool: ...

    def healthy_gpu(self, node: str, uuid: str) -> bool:
        """``uuid`` is a healthy GPU of the ready node ``node``."""
        ...

    def node_of(self, uuid: str) -> str:
        """The ready node holding ``uuid`` ("" for none): where a GPU of a spread gang lies."""
        ...

    def residents(self, uuid: str) -> Sequence[Job]:
        """The active jobs of the snapshot that hold ``uuid``."""
        ...


class SnapshotLookup:
    """:class:`Lookup` over a snapshot; each index is built on first use."""

    def __init__(self, snapshot: ClusterSnapshot) -> None:
        self.snapshot = snapshot

    @cached_property
    def _jobs(self) -> dict[str, Job]:
        return self.snapshot.by_id()

    @cached_property
    def _nodes(self) -> dict[str, dict[str, Gpu]]:
        return {
            n.name: {g.uuid: g for g in n.gpus} for n in self.snapshot.nodes if n.state is NodeState.READY
        }

    @cached_property
    def _residents(self) -> dict[str, list[Job]]:
        return residents(self.snapshot.jobs)

    def job(self, job_id: str) -> Job | None:
        return self._jobs.get(job_id)

    def node_ready(self, node: str) -> bool:
        return node in self._nodes

    def healthy_gpu(self, node: str, uuid: str) -> bool:
        gpu = self._nodes.get(node, {}).get(uuid)
        return gpu is not None and gpu.healthy

    @cached_property
    def _gpu_nodes(self) -> dict[str, str]:
        return {uuid: name for name, gpus in self._nodes.items() for uuid in gpus}

    def node_of(self, uuid: str) -> str:
        return self._gpu_nodes.get(uuid, "")

    def residents(self, uuid: str) -> Sequence[Job]:
        return self._residents.get(uuid, ())


@dataclass
class _Occupancy:
    """The snapshot's residents, plus this pass's kept assigns, less its kept preempts."""

    base: Lookup
    added: dict[str, list[Job]] = field(default_factory=dict)
    removed: set[str] = field(default_factory=set)

    def residents(self, uuid: str) -> list[Job]:
        return [j for j in self.base.residents(uuid) if j.id not in self.removed] + self.added.get(uuid, [])

    def add(self, uuid: str, job: Job) -> None:
        self.added.setdefault(uuid, []).append(job)

    def remove(self, job: Job) -> None:
        self.removed.add(job.id)
        for uuid in job.gpus:
            if uuid in self.added:
                self.added[uuid] = [j for j in self.added[uuid] if j.id != job.id]


def check_actions(snapshot: ClusterSnapshot, actions: list[Action], lookup: Lookup | None = None) -> Plan:
    """The actions to apply, in order, and those dropped with why. When every action is for a
    distinct job and every Wait's job is pending (the usual pass), the Waits are checked in bulk
    (the same plan either way: tests/core/test_check_waits.py)."""
    look = lookup if lookup is not None else SnapshotLookup(snapshot)
    split = _split(actions)
    bulk = _bulk_waits(split[1], look) if split is not None else None
    if split is None or bulk is None:
        return _in_order(actions, look, Plan())
    plan = _in_order(split[0], look, Plan())
    plan.waits, plan.n_waits = bulk, len(split[1])
    return plan


def _split(actions: list[Action]) -> tuple[list[Action], list[Wait]] | None:
    """(the Assigns and Preempts, the Waits) when no two actions are for one job; else None."""
    waits = [a for a in actions if type(a) is Wait]
    others = [a for a in actions if type(a) is not Wait]
    if not all(isinstance(a, Assign | Preempt) for a in others):
        return None
    ids = set(map(_JOB_ID, waits))
    ids.update(map(_JOB_ID, others))
    return (others, waits) if len(ids) == len(actions) else None


def _bulk_waits(waits: list[Wait], look: Lookup) -> list[Wait] | None:
    """The Waits whose reason or code changed, when every Wait is for a pending job; else None."""
    find = look.job
    odd = [
        w
        for w in waits
        if (j := find(w.job_id)) is None
        or j.state is not _PENDING
        or j.reason != w.reason
        or j.reason_code != w.code
    ]
    if any((j := find(w.job_id)) is None or j.state is not _PENDING for w in odd):
        return None
    return odd


def _in_order(actions: Sequence[object], look: Lookup, plan: Plan) -> Plan:
    """Check each action against the snapshot and the ones kept before it."""
    occ = _Occupancy(look)
    acted: set[str] = set()
    for action in actions:
        job = look.job(action.job_id) if isinstance(action, Assign | Preempt | Wait) else None
        problem = _problem(action, job, occ, acted)
        if problem or job is None:
            log.warning("policy action dropped: %s (%s)", action, problem)
            plan.dropped.append((action, problem))
            continue
        acted.add(job.id)
        if isinstance(action, Assign):
            plan.assigns.append(_kept_assign(action, job, occ))
        elif isinstance(action, Preempt):
            occ.remove(job)
            plan.preempts.append(action)
        elif isinstance(action, Wait):
            plan.n_waits += 1
            if job.reason != action.reason or job.reason_code != action.code:
                plan.waits.append(action)
    return plan


def _kept_assign(action: Assign, job: Job, occ: _Occupancy) -> Assign:
    """A kept Assign, its GPUs now taken (a slowdown that is not a positive number: 1.0)."""
    for uuid in action.gpus:
        occ.add(uuid, job)
    slowdown = action.predicted_slowdown
    if not (math.isfinite(slowdown) and slowdown > 0):
        return Assign(action.job_id, action.node, action.gpus, 1.0)
    return action


def _problem(action: object, job: Job | None, occ: _Occupancy, acted: set[str]) -> str:
    if not isinstance(action, Assign | Preempt | Wait):
        return f"not an action: {type(action).__name__}"
    if job is None:
        return "unknown job"
    if action.job_id in acted:
        return "a second action for the same job"
    if isinstance(action, Preempt):
        return "" if job.state.active else f"job is {job.state.value}, not active"
    if job.state is not JobState.PENDING:
        return f"job is {job.state.value}, not PENDING"
    if isinstance(action, Wait):
        return ""
    return _assign_problem(action, job, occ)


def _assign_problem(action: Assign, job: Job, occ: _Occupancy) -> str:
    look = occ.base
    if not look.node_ready(action.node):
        return f"node {action.node!r} is not ready"
    lo, hi = job.spec.gpu_range()
    if not lo <= len(action.gpus) <= hi or len(set(action.gpus)) != len(action.gpus):
        want = f"{lo}" if lo == hi else f"{lo} to {hi}"
        return f"needs {want} distinct GPUs, got {list(action.gpus)}"
    seen: list[str] = []  # nodes in rank order
    for uuid in action.gpus:
        node = action.node if look.healthy_gpu(action.node, uuid) else look.node_of(uuid)
        if not node or not look.healthy_gpu(node, uuid):
            return f"GPU {uuid} is not a healthy GPU of {action.node} or another ready node"
        if not seen or seen[-1] != node:
            if node in seen or (not seen and node != action.node):
                return f"a spread gang's GPUs must be in rank order from {action.node}: {list(action.gpus)}"
            seen.append(node)
        residents = occ.residents(uuid)
        if residents and (job.spec.exclusive or any(r.spec.exclusive for r in residents)):
            return f"GPU {uuid} is taken and sharing is excluded"
        if len(residents) >= MAX_JOBS_PER_GPU:
            return f"GPU {uuid} already holds {len(residents)} jobs"
    return ""
