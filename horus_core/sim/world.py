"""Who runs on which GPU, and how fast: the simulator's view of the cluster.

A job's rate is its solo throughput on its GPU type times its normalised speed, the minimum
over its GPUs of the speed the interference model gives it next to that GPU's co-runners, times
its crossing factor where its gang spans nodes (:mod:`horus_core.sim.scaling`).
Changes mark GPUs dirty; :meth:`World.refresh` recomputes speeds only on dirty GPUs and rates
only for the jobs on them.

A co-location the model says cannot run (a speed of 0: Gavel's table marks pairs that do not
fit in GPU memory with ``[0, 0]``), or a job placed on a GPU type it was never measured on
(e.g. ResNet-50 bs 128 on 2+ K80s), is *evicted*: the newest job on that GPU goes back to the
queue, as the live worker would report an out-of-memory start. It loses no progress.
"""

from __future__ import annotations

from collections.abc import Sequence

from horus_core.model import Node, NodeState
from horus_core.sim.rates import RateCache, SimulationError
from horus_core.sim.state import ACTIVE, SimJob


class World:
    def __init__(self, nodes: Sequence[Node], rates: RateCache, slow_threshold: float) -> None:
        self.nodes = tuple(nodes)
        gpus = [g for n in self.nodes for g in n.gpus]
        self.uuids = [g.uuid for g in gpus]
        self.index = {g.uuid: i for i, g in enumerate(gpus)}
        self.gpu_type = [g.gpu_type for g in gpus]
        self.gpu_memory = [g.memory_mib for g in gpus]
        self.gpu_node = [g.node for g in gpus]
        self.usable = [g.healthy for g in gpus]
        self.ready = {n.name for n in self.nodes if n.state is NodeState.READY}
        self.rack_of = {n.name: n.rack for n in self.nodes}
        self.residents: list[list[SimJob]] = [[] for _ in gpus]
        self.speeds: list[dict[int, float]] = [{} for _ in gpus]
        self.rates = rates
        self.slow_threshold = slow_threshold
        self.busy = 0  # GPUs with at least one job
        self.useful = 0.0  # sum over active jobs of normalised speed x GPUs
        self._dirty: set[int] = set()

    @property
    def size(self) -> int:
        return len(self.uuids)

    def resolve(self, node: str, uuids: Sequence[str]) -> tuple[int, ...]:
        """GPU indices of an assignment; raises SimulationError if it is not a valid gang."""
        if node not in self.ready:
            raise SimulationError(f"node {node!r} does not exist or is not READY")
        if len(set(uuids)) != len(uuids) or not uuids:
            raise SimulationError(f"GPU list {list(uuids)} is empty or repeats a GPU")
        out: list[int] = []
        for uuid in uuids:
            i = self.healthy_gpu(node, uuid)
            j = self.index.get(uuid)
            if i is None and j is not None and self.gpu_node[j] in self.ready:  # a spread gang
                i = self.healthy_gpu(self.gpu_node[j], uuid)
            if i is None or (not out and self.gpu_node[i] != node):
                raise SimulationError(f"GPU {uuid!r} is not a healthy GPU of node {node!r} or a ready node")
            out.append(i)
        return tuple(out)

    def memory_of(self, g: int) -> int:
        return self.gpu_memory[g]

    def healthy_gpu(self, node: str, uuid: str) -> int | None:
        """The index of ``uuid`` if it is a healthy GPU of ``node``, else None."""
        i = self.index.get(uuid)
        return i if i is not None and self.gpu_node[i] == node and self.usable[i] else None

    def span(self, gpus: Sequence[int]) -> tuple[int, int]:
        """(nodes, racks) the GPUs lie on."""
        nodes = {self.gpu_node[g] for g in gpus}
        return len(nodes), len({self.rack_of[n] for n in nodes})

    def place(self, job: SimJob) -> None:
        for g in job.gpus:
            if not self.residents[g]:
                self.busy += 1
            self.residents[g].append(job)
            self._dirty.add(g)

    def remove(self, job: SimJob, now: float) -> None:
        """Take an active job off its GPUs (completion, preemption, eviction)."""
        job.settle(now, self.slow_threshold)
        self.useful -= job.speed * len(job.gpus)
        for g in job.gpus:
            self.residents[g].remove(job)
            self.speeds[g].pop(job.idx, None)
            if not self.residents[g]:
                self.busy -= 1
            self._dirty.add(g)
        job.rate = job.speed = 0.0
        job.version += 1

    def refresh(self, now: float) -> tuple[list[SimJob], list[SimJob]]:
        """Recompute dirty GPUs; return (jobs whose rate was recomputed, jobs evicted)."""
        touched: dict[int, SimJob] = {}
        evicted: list[SimJob] = []
        while self._dirty:
            dirty = sorted(self._dirty)
            self._dirty.clear()
            for g in dirty:
                self._recompute_gpu(g, touched)
            for victim in self._victims(dirty):
                self.remove(victim, now)
                touched.pop(victim.idx, None)
                evicted.append(victim)
        changed = [touched[i] for i in sorted(touched)]
        for job in changed:
            self._set_rate(job, now)
        return changed, evicted

    def _recompute_gpu(self, g: int, touched: dict[int, SimJob]) -> None:
        res = self.residents[g]
        if not res:
            return
        speeds = self.rates.co(tuple(j.signature for j in res), self.gpu_type[g])
        self.speeds[g] = {j.idx: s for j, s in zip(res, speeds, strict=True)}
        for job in res:
            touched[job.idx] = job

    def _victims(self, dirty: Sequence[int]) -> list[SimJob]:
        out: dict[int, SimJob] = {}
        for g in dirty:
            res = self.residents[g]
            if not res:
                continue
            if min(self.speeds[g].values()) <= 0.0:
                out.setdefault(res[-1].idx, res[-1])
            for job in res:
                if job.solo[self.gpu_type[g]] <= 0.0:
                    out.setdefault(job.idx, job)
        return [out[i] for i in sorted(out)]

    def _set_rate(self, job: SimJob, now: float) -> None:
        if job.status != ACTIVE:
            raise SimulationError(f"job {job.id} has a rate but is not running")
        job.settle(now, self.slow_threshold)
        speed = min(self.speeds[g][job.idx] for g in job.gpus)
        self.useful += (speed - job.speed) * len(job.gpus)
        job.speed = speed
        job.rate = job.solo[self.gpu_type[job.gpus[0]]] * speed * job.cross
        job.version += 1
