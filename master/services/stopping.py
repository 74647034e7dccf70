"""Attempts told to stop that may still run, part by part (one node each), and the GPUs each
part still holds.

A preempted attempt, or a part of a gang attempt that is over, keeps its process (and its GPUs)
until its worker says it ended: the part's final update (sent once the process exited), a
heartbeat of its node without it, or the node LOST (its lease has run out). Until then its GPUs
are offered to no job, so nothing starts next to a process that is still checkpointing, and the
job's next attempt is held, so a job never runs two attempts at once. A gang's parts are held
node by node: each part frees its own node's GPUs when that part has stopped.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from horus_core import gang
from horus_core.model import Job, JobState, NodeState
from master.services.nodes import NodeRegistry


@dataclass(frozen=True, slots=True)
class _Part:
    attempt: int
    seen: int  # the node's heartbeats when the part was told to stop
    gpus: tuple[str, ...]  # the GPUs of that node the part holds


class StoppingParts:
    """(job id, node) -> the part of an attempt there that was told to stop and may still run."""

    def __init__(self) -> None:
        self._parts: dict[tuple[str, str], _Part] = {}

    def __len__(self) -> int:
        return len(self._parts)

    def add(self, job_id: str, node: str, attempt: int, gpus: Sequence[str], registry: NodeRegistry) -> None:
        """The part of ``attempt`` on ``node`` was just told to stop."""
        entry = registry.get(node)
        seen = entry.heartbeats if entry is not None else 0
        self._parts[(job_id, node)] = _Part(attempt, seen, tuple(gpus))

    def add_attempt(self, job: Job, registry: NodeRegistry, nodes: Iterable[str] | None = None) -> None:
        """Every part of ``job``'s attempt (its one node, or each node of a gang; ``nodes``: only
        those) was just told to stop."""
        wanted = None if nodes is None else set(nodes)
        for node, gpus in parts(job, registry):
            if wanted is None or node in wanted:
                self.add(job.id, node, job.attempt, gpus, registry)

    def after_restart(self, jobs: Iterable[Job], registry: NodeRegistry) -> int:
        """After the master (re)started, with this book empty: the last attempt of a job that
        went back to PENDING may still be stopping on its node(s), as far as the master can know.
        Each such part is held until its node says otherwise once back (a heartbeat without it,
        or its final update) or is LOST. Returns the parts held."""
        before = len(self._parts)
        for job in jobs:
            if job.state is JobState.PENDING and job.attempt > 0 and job.node:
                self.add_attempt(job, registry)
        return len(self._parts) - before

    def stopped(self, node: str, job_id: str, attempt: int) -> bool:
        """The final update of ``attempt`` on ``node``: that part holds nothing any more. True
        if it did hold something."""
        part = self._parts.get((job_id, node))
        if part is None or part.attempt != attempt:
            return False
        del self._parts[(job_id, node)]
        return True

    def prune(self, registry: NodeRegistry) -> None:
        """Forget the parts whose node no longer reports them (a heartbeat since the stop
        without them, or the node LOST or gone)."""
        for key, part in list(self._parts.items()):
            job_id, node = key
            entry = registry.get(node)
            if (
                entry is None
                or entry.state is NodeState.LOST
                or (entry.heartbeats > part.seen and (job_id, part.attempt) not in entry.running)
            ):
                del self._parts[key]

    def jobs(self) -> set[str]:
        """The jobs with a part still stopping: their next attempt waits."""
        return {job_id for job_id, _ in self._parts}

    def gpus(self) -> set[str]:
        """The GPUs the stopping parts still hold: offered to no job."""
        return {uuid for part in self._parts.values() for uuid in part.gpus}


def parts(job: Job, registry: NodeRegistry) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """``job``'s attempt as (node, its GPUs there), in rank order. A GPU of a gang whose node is
    no longer known is named on no part; that node's part still holds the next attempt until it
    is seen stopped or gone."""
    nodes = gang.job_nodes(job)
    if len(nodes) <= 1:
        return tuple((node, tuple(job.gpus)) for node in nodes)
    node_of = registry.gpu_nodes()
    held: dict[str, list[str]] = {node: [] for node in nodes}
    for uuid in job.gpus:
        node = node_of.get(uuid)
        if node is not None and node in held:
            held[node].append(uuid)
    return tuple((node, tuple(gpus)) for node, gpus in held.items())
