"""The master's side of multi-node gangs (issue 11): one Assignment per node part, the rendezvous
port of each live gang, stopping every part when the attempt ends, and holding the next attempt
until every old part has stopped. The decisions are in :mod:`horus_core.gang`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from horus_core import gang
from horus_core.model import Job, NodeState
from horus_core.plane import Assignment
from master.services.nodes import NodeRegistry
from master.store.jobs import Change

log = logging.getLogger(__name__)

DEFAULT_PORTS = (29500, 29999)


@dataclass
class GangBook:
    ports_range: tuple[int, int] = DEFAULT_PORTS
    ports: dict[str, int] = field(default_factory=dict)  # job id -> port of its live gang attempt
    # job id -> [(node, attempt, heartbeats of that node when the part was told to stop)]
    stopping: dict[str, list[tuple[str, int, int]]] = field(default_factory=dict)

    def assignments(self, job: Job, registry: NodeRegistry) -> list[tuple[str, Assignment]]:
        """One Assignment per node of the gang attempt ``job``, in rank order."""
        parts = gang.split(job.gpus, registry.gpu_nodes())
        port = self.ports.get(job.id)
        if port is None:
            lo, hi = self.ports_range
            port = self.ports[job.id] = gang.rendezvous_port(
                job.id, job.attempt, set(self.ports.values()), lo, hi
            )
        rank0 = registry.get(job.nodes[0])
        addr = rank0.advertise_addr if rank0 is not None and rank0.advertise_addr else job.nodes[0]
        out = []
        for rank, (node, gpus) in enumerate(parts):
            msg = Assignment(
                job.id,
                job.attempt,
                job.spec,
                tuple(gpus),
                node_rank=rank,
                nnodes=len(parts),
                world_size=len(job.gpus),
                master_addr=addr,
                master_port=port,
            )
            out.append((node, msg))
        return out

    def ended(self, changes: Iterable[Change], registry: NodeRegistry) -> list[tuple[str, str, int, str]]:
        """The parts to stop after ``changes`` committed: ``(node, job id, attempt, reason)`` for
        every part of a gang attempt that is over (or whose job is being cancelled) and has not
        ended itself; each stopped part holds the job's next attempt until it is seen stopped."""
        kills: list[tuple[str, str, int, str]] = []
        for c in changes:
            before, after = c.before.job, c.after.job
            if not (gang.is_gang(before) and before.state.active):
                continue
            over = not after.state.active or after.attempt != before.attempt
            cancelling = c.after.cancel_requested and not c.before.cancel_requested
            if not (over or cancelling):
                continue
            parts = gang.parts_of(
                c.after.parts if after.attempt == before.attempt else c.before.parts, len(before.nodes)
            )
            for node, part in zip(before.nodes, parts, strict=True):
                if part.done:
                    continue
                kills.append((node, before.id, before.attempt, after.reason or "gang attempt over"))
                if not over or after.state.terminal:
                    continue  # no next attempt to hold (yet: a cancelled job has none)
                entry = registry.get(node)
                self.stopping.setdefault(before.id, []).append(
                    (node, before.attempt, entry.heartbeats if entry is not None else 0)
                )
            if over:
                self.ports.pop(before.id, None)
        return kills

    def part_stopped(self, node: str, job_id: str, attempt: int) -> bool:
        """The final update of a part on ``node`` (sent once its process ended): that part holds
        the job's next attempt no longer. True if it did."""
        waiting = self.stopping.get(job_id, [])
        left = [w for w in waiting if w[:2] != (node, attempt)]
        if len(left) == len(waiting):
            return False
        if left:
            self.stopping[job_id] = left
        else:
            del self.stopping[job_id]
        return True

    def held(self, job_id: str, registry: NodeRegistry) -> bool:
        """Whether a part of an earlier attempt of the job may still run: its node has not sent
        a heartbeat without it since it was told to stop (a LOST node's lease has run out)."""
        waiting = self.stopping.get(job_id)
        if waiting is None:
            return False
        left = []
        for node, attempt, seen in waiting:
            entry = registry.get(node)
            if entry is None or entry.state is NodeState.LOST:
                continue
            if entry.heartbeats > seen and (job_id, attempt) not in entry.running:
                continue
            left.append((node, attempt, seen))
        if left:
            self.stopping[job_id] = left
            log.info("assignment of %s held: a part of its last gang attempt is still stopping", job_id)
            return True
        del self.stopping[job_id]
        return False
