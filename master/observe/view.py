"""One consistent picture of the cluster for the metrics and the dashboard, gathered at read time.

Reads the node registry and the live jobs (the master's live-job index: memory), the pending
jobs counted by reason and the learned solo throughputs (one aggregate query each), and the
learner's latest progress reports (:class:`ViewSources`, the parts it is given); changes nothing.
The measured speed of a running job is its latest samples/s over the solo samples/s learned for
its signature on that GPU type.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from horus_core.metrics import DEFAULT_QUEUE, GpuSample, JobGpuSample, reason_label
from horus_core.model import Gpu, Job, JobState
from horus_core.plane import GpuReading, JobGpuReading
from master.learning.learner import Learner
from master.learning.sharing import SharedNow
from master.services.nodes import NodeEntry, NodeRegistry
from master.store.live import LiveIndex
from master.store.reads import Reader

MAX_SOLO_ROWS = 20_000


@dataclass(frozen=True)
class GpuView:
    gpu: Gpu
    stats: GpuReading | None
    jobs: tuple[Job, ...]  # the active jobs placed on it
    usage: tuple[JobGpuReading, ...]  # what the worker measured per job on it

    def sample(self) -> GpuSample:
        s = self.stats
        return GpuSample(
            node=self.gpu.node,
            index=self.gpu.index,
            uuid=self.gpu.uuid,
            model=self.gpu.model,
            util=s.util_sm if s else 0.0,
            mem_used_mib=s.mem_used_mib if s else 0,
            mem_total_mib=(s.mem_total_mib or self.gpu.memory_mib) if s else self.gpu.memory_mib,
            temperature_c=s.temperature_c if s else 0.0,
            power_w=s.power_w if s else 0.0,
        )


@dataclass(frozen=True)
class NodeView:
    entry: NodeEntry
    gpus: tuple[GpuView, ...]


@dataclass(frozen=True)
class ClusterView:
    nodes: tuple[NodeView, ...]
    jobs: dict[str, Job]  # the active jobs by id (and the pending ones, where the queue was read)
    pending: tuple[Job, ...]  # in queue (submission) order; empty unless the queue was read
    speeds: dict[str, float]  # measured speed over solo, for jobs where both are known
    pending_reasons: dict[str, int] = field(default_factory=dict)  # reason_label -> pending jobs

    @property
    def pending_count(self) -> int:
        return sum(self.pending_reasons.values())

    def gpus(self) -> list[GpuView]:
        return [g for n in self.nodes for g in n.gpus]

    def job_samples(self) -> list[JobGpuSample]:
        out: list[JobGpuSample] = []
        for g in self.gpus():
            for u in g.usage:
                job = self.jobs.get(u.job_id)
                if job is None or job.attempt != u.attempt:
                    continue
                out.append(
                    JobGpuSample(
                        job=job.id,
                        user=job.spec.owner,
                        gpu_index=g.gpu.index,
                        uuid=g.gpu.uuid,
                        util=u.util_sm,
                        mem_used_mib=u.mem_used_mib,
                        speed=self.speeds.get(job.id),
                        predicted_speed=job.predicted_slowdown,
                        queue=job.spec.queue or DEFAULT_QUEUE,
                    )
                )
        return out

    def gpus_of(self, job: Job) -> list[GpuView]:
        return [g for g in self.gpus() if g.gpu.uuid in job.gpus and any(j.id == job.id for j in g.jobs)]

    def co_runners(self, job: Job) -> list[Job]:
        seen: dict[str, Job] = {}
        for g in self.gpus_of(job):
            for other in g.jobs:
                if other.id != job.id:
                    seen[other.id] = other
        return list(seen.values())


def _node_view(entry: NodeEntry, active: list[Job]) -> NodeView:
    usage: dict[str, list[JobGpuReading]] = {}
    for s in entry.job_stats:
        usage.setdefault(s.gpu_uuid, []).append(s)
    gpus = tuple(
        GpuView(
            gpu=g,
            stats=entry.gpu_stats.get(g.uuid),
            jobs=tuple(j for j in active if j.node == entry.name and g.uuid in j.gpus),
            usage=tuple(usage.get(g.uuid, ())),
        )
        for g in entry.model().gpus
    )
    return NodeView(entry, gpus)


@dataclass(frozen=True)
class Sharing:
    """One attempt sharing its GPUs now: its job (None: no longer live), what the learner has
    of it so far, and its speed over solo where known."""

    job: Job | None
    now: SharedNow
    speed: float | None


@dataclass(frozen=True)
class ViewSources:
    """What the view reads: the store's reader, the node registry, the learner and the live-job
    index (a callable: the master replaces the index when it loads it at start)."""

    read: Reader
    registry: NodeRegistry
    learner: Learner
    live: Callable[[], LiveIndex]

    async def speed_of(self, job: Job) -> float | None:
        """One job's measured speed over solo (None: not running, or not known)."""
        return (await self.speeds([job])).get(job.id)

    async def _solos(self) -> dict[tuple[str, str, int], float]:
        """(signature, GPU type, GPUs) -> learned solo samples/s."""
        solos = await self.read.solo_throughputs(MAX_SOLO_ROWS)
        return {(s.job_type, s.gpu_type, s.gpus): s.samples_per_s for s in solos}

    async def sharing_now(self) -> list[Sharing]:
        """The attempts sharing their GPUs with one co-runner now (the learner's running
        measurements), each with its job and its speed over solo where a solo reference is known
        (its own solo phase, else the learned one)."""
        now = self.learner.sharing_now()
        solo = await self._solos() if now else {}
        out = []
        for s in now:
            row = self.live().get(s.job_id)
            ref = s.own_solo_rate or solo.get((s.signature, s.gpu_type, s.gpus))
            speed = s.shared_rate / ref if s.shared_rate is not None and ref else None
            out.append(Sharing(row.job if row is not None else None, s, speed))
        return out

    async def speeds(self, active: list[Job]) -> dict[str, float]:
        """Each running job's measured speed over solo, where both are known."""
        running = [j for j in active if j.state is JobState.RUNNING]
        if not running:
            return {}
        solo = await self._solos()
        types = {g.uuid: g.gpu_type for e in self.registry.all() for g in e.gpus}
        out: dict[str, float] = {}
        for job in running:
            progress = self.learner.progress(job.id, job.attempt)
            rate = progress[2] if progress is not None else None
            gpu_type = types.get(job.gpus[0], "") if job.gpus else ""
            ref = solo.get((self.learner.signature(job), gpu_type, len(job.gpus)))
            if rate is not None and ref is not None and ref > 0:
                out[job.id] = rate / ref
        return out


async def gather(src: ViewSources, *, queue: bool = False) -> ClusterView:
    """The view; ``queue``: with every pending job, else the pending jobs are only counted by
    reason (a cheap aggregate: what the metrics and most pages need). The jobs come from the live
    index, as a scheduling pass reads them (reading 6,000 active rows from SQLite took ~290 ms)."""
    counts: Counter[str] = Counter()
    index = src.live()
    active = index.active()
    if queue:
        jobs, pending = list(index.jobs()), index.split()["pending"]
        counts.update(reason_label(j.reason) for j in pending)
    else:
        jobs, pending = active, ()
        for reason, n in await src.read.pending_by_reason():
            counts[reason_label(reason)] += n
    nodes = tuple(_node_view(e, active) for e in src.registry.all())
    speeds = await src.speeds(active)
    return ClusterView(nodes, {j.id: j for j in jobs}, pending, speeds, dict(counts))
