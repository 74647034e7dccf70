"""The master's side of multi-node gangs (issue 11): one Assignment per node part, the rendezvous
port of each live gang, stopping every part when the attempt ends (each part then holds its GPUs
and the next attempt until it has stopped: :mod:`master.services.stopping`).
The decisions are in :mod:`horus_core.gang`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from horus_core import gang
from horus_core.model import Job
from horus_core.plane import Assignment
from master.services.nodes import NodeRegistry
from master.services.stopping import StoppingParts
from master.store.jobs import Change

DEFAULT_PORTS = (29500, 29999)


@dataclass
class GangBook:
    ports_range: tuple[int, int] = DEFAULT_PORTS
    ports: dict[str, int] = field(default_factory=dict)  # job id -> port of its live gang attempt
    # the parts told to stop, single-node attempts' too (the scheduler's preemptions)
    stopping: StoppingParts = field(default_factory=StoppingParts)

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
                gpu_memory_cap_mib=job.gpu_memory_cap_mib,
            )
            out.append((node, msg))
        return out

    def ended(self, changes: Iterable[Change], registry: NodeRegistry) -> list[tuple[str, str, int, str]]:
        """The parts to stop after ``changes`` committed: ``(node, job id, attempt, reason)`` for
        every part of a gang attempt that is over (or whose job is being cancelled) and has not
        ended itself. Each part of an attempt that is over holds its GPUs, and the job's next
        attempt, until it is seen stopped (:class:`~master.services.stopping.StoppingParts`)."""
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
            running = [node for node, part in zip(before.nodes, parts, strict=True) if not part.done]
            reason = after.reason or "gang attempt over"
            kills += [(node, before.id, before.attempt, reason) for node in running]
            if over:  # each part told to stop holds its GPUs (and any next attempt) until it stopped
                self.stopping.add_attempt(before, registry, running)
                self.ports.pop(before.id, None)
        return kills
