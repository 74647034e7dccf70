"""Checking a policy's actions against the snapshot before anything is applied (pure).

A policy is code we did not write: an action that would corrupt the cluster's state (a GPU that
is not on that node, a full or exclusive GPU, a job that is not pending, a second action for one
job) is dropped with a log line instead of applied. The live master and the simulator both apply
exactly what :func:`check_actions` keeps, so a policy meets the same rules in both.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field

from horus_core.model import Action, Assign, ClusterSnapshot, Gpu, Job, JobState, NodeState, Preempt, Wait

log = logging.getLogger(__name__)

MAX_JOBS_PER_GPU = 3


@dataclass
class Plan:
    assigns: list[Assign] = field(default_factory=list)
    preempts: list[Preempt] = field(default_factory=list)
    waits: list[Wait] = field(default_factory=list)  # only those whose reason changed
    n_waits: int = 0  # every Wait kept, changed or not
    dropped: list[tuple[object, str]] = field(default_factory=list)  # (action, why)


@dataclass
class _Occupancy:
    jobs: dict[str, list[Job]]

    def residents(self, uuid: str) -> list[Job]:
        return self.jobs.get(uuid, [])

    def add(self, uuid: str, job: Job) -> None:
        self.jobs.setdefault(uuid, []).append(job)

    def remove(self, job: Job) -> None:
        for uuid in job.gpus:
            self.jobs[uuid] = [j for j in self.jobs.get(uuid, []) if j.id != job.id]


def check_actions(snapshot: ClusterSnapshot, actions: list[Action]) -> Plan:
    jobs = {j.id: j for j in snapshot.jobs}
    nodes = {n.name: {g.uuid: g for g in n.gpus} for n in snapshot.nodes if n.state is NodeState.READY}
    occ = _Occupancy({})
    for j in snapshot.jobs:
        if j.state.active:
            for uuid in j.gpus:
                occ.add(uuid, j)
    plan, acted = Plan(), set[str]()
    for action in actions:
        problem = _problem(action, jobs, nodes, occ, acted)
        if problem:
            log.warning("policy action dropped: %s (%s)", action, problem)
            plan.dropped.append((action, problem))
            continue
        acted.add(action.job_id)
        if isinstance(action, Assign):
            for uuid in action.gpus:
                occ.add(uuid, jobs[action.job_id])
            slowdown = action.predicted_slowdown
            if not (math.isfinite(slowdown) and slowdown > 0):
                action = Assign(action.job_id, action.node, action.gpus, 1.0)
            plan.assigns.append(action)
        elif isinstance(action, Preempt):
            occ.remove(jobs[action.job_id])
            plan.preempts.append(action)
        else:
            plan.n_waits += 1
            if jobs[action.job_id].reason != action.reason:
                plan.waits.append(action)
    return plan


def _problem(
    action: object, jobs: dict[str, Job], nodes: dict[str, dict[str, Gpu]], occ: _Occupancy, acted: set[str]
) -> str:
    if not isinstance(action, Assign | Preempt | Wait):
        return f"not an action: {type(action).__name__}"
    job = jobs.get(action.job_id)
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
    return _assign_problem(action, job, nodes, occ)


def _assign_problem(action: Assign, job: Job, nodes: dict[str, dict[str, Gpu]], occ: _Occupancy) -> str:
    gpus = nodes.get(action.node)
    if gpus is None:
        return f"node {action.node!r} is not ready"
    if len(action.gpus) != job.spec.gpus or len(set(action.gpus)) != len(action.gpus):
        return f"needs {job.spec.gpus} distinct GPUs, got {list(action.gpus)}"
    for uuid in action.gpus:
        gpu = gpus.get(uuid)
        if gpu is None or not gpu.healthy:
            return f"GPU {uuid} is not a healthy GPU of {action.node}"
        residents = occ.residents(uuid)
        if residents and (job.spec.exclusive or any(r.spec.exclusive for r in residents)):
            return f"GPU {uuid} is taken and sharing is excluded"
        if len(residents) >= MAX_JOBS_PER_GPU:
            return f"GPU {uuid} already holds {len(residents)} jobs"
    return ""
