"""The action checks' :class:`~horus_core.policies.checks.Lookup`, answered from the indexes
the simulator keeps anyway (its live jobs by id, the world's residents per GPU) instead of
re-deriving them from each round's snapshot: the same answers, without a pass over every job."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from horus_core.model import Job
from horus_core.sim.world import World


class SimLookup:
    def __init__(self, live: Mapping[str, Job], world: World) -> None:
        self.live = live
        self.world = world

    def job(self, job_id: str) -> Job | None:
        return self.live.get(job_id)

    def node_ready(self, node: str) -> bool:
        return node in self.world.ready

    def healthy_gpu(self, node: str, uuid: str) -> bool:
        return self.world.healthy_gpu(node, uuid) is not None

    def node_of(self, uuid: str) -> str:
        i = self.world.index.get(uuid)
        return self.world.gpu_node[i] if i is not None and self.world.gpu_node[i] in self.world.ready else ""

    def residents(self, uuid: str) -> Sequence[Job]:
        i = self.world.index.get(uuid)
        if i is None:
            return ()
        return [j.view for j in self.world.residents[i] if j.view is not None]
