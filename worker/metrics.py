"""The worker's Prometheus ``/metrics`` (``--metrics-listen``): its GPUs with dcgm-exporter's names,
and each running job's own use of each GPU.

:class:`RecordingProbe` wraps the GPU probe and keeps what the last heartbeat read, so a scrape
reads memory only and never touches NVML itself.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from horus_core.metrics import DEFAULT_QUEUE, GpuSample, JobGpuSample, gpu_families, job_families
from worker.gpu.base import GpuInfo, GpuProbe, GpuReading, ProbeTarget, ProcessReading


class RecordingProbe:
    """A :class:`GpuProbe` that remembers its last reading (and whose processes it saw)."""

    def __init__(self, inner: GpuProbe) -> None:
        self._inner = inner
        self.readings: list[GpuReading] = []
        self.procs: list[ProcessReading] = []
        self.targets: list[ProbeTarget] = []

    async def gpus(self) -> list[GpuInfo]:
        return await self._inner.gpus()

    async def read(self, running: Sequence[ProbeTarget]) -> tuple[list[GpuReading], list[ProcessReading]]:
        readings, procs = await self._inner.read(running)
        self.readings, self.procs, self.targets = list(readings), list(procs), list(running)
        return readings, procs

    async def memory(self, running: Sequence[ProbeTarget]) -> list[ProcessReading]:
        return await self._inner.memory(running)

    async def close(self) -> None:
        await self._inner.close()


class WorkerCollector(Collector):
    def __init__(self, node: str, gpus: Sequence[GpuInfo], probe: RecordingProbe) -> None:
        self._node = node
        self._gpus = {g.uuid: g for g in gpus}
        self._probe = probe

    def gpu_samples(self) -> list[GpuSample]:
        out = []
        for r in self._probe.readings:
            info = self._gpus.get(r.uuid)
            if info is None:
                continue
            out.append(
                GpuSample(
                    self._node,
                    info.index,
                    r.uuid,
                    info.model,
                    r.util_sm,
                    r.mem_used_mib,
                    r.mem_total_mib or info.memory_mib,
                    r.temperature_c,
                    r.power_w,
                )
            )
        return out

    def job_samples(self) -> list[JobGpuSample]:
        """Per (attempt, GPU): the summed use of the attempt's processes on that GPU."""
        owner = {pid: t for t in self._probe.targets for pid in t.pids}
        sums: dict[tuple[str, str], list[float]] = {}
        for p in self._probe.procs:
            target = owner.get(p.pid)
            if target is None or p.gpu_uuid not in self._gpus:
                continue
            acc = sums.setdefault((target.job_id, p.gpu_uuid), [0.0, 0.0])
            acc[0] += p.util_sm or 0.0
            acc[1] += p.mem_used_mib
        users = {t.job_id: t.spec.owner for t in self._probe.targets}
        queues = {t.job_id: t.spec.queue or DEFAULT_QUEUE for t in self._probe.targets}
        return [
            JobGpuSample(job, users[job], self._gpus[uuid].index, uuid, util, int(mem), queue=queues[job])
            for (job, uuid), (util, mem) in sorted(sums.items())
        ]

    def collect(self) -> Iterator[Metric]:
        yield from gpu_families(self.gpu_samples())
        yield from job_families(self.job_samples())


def metrics_app(registry: CollectorRegistry) -> web.Application:
    async def handle(request: web.Request) -> web.Response:
        body = generate_latest(registry)
        return web.Response(body=body, headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"})

    app = web.Application()
    app.router.add_get("/metrics", handle)
    return app


async def serve_metrics(collector: WorkerCollector, listen: str) -> tuple[web.AppRunner, int]:
    """Serve ``/metrics`` on HOST:PORT (port 0: any); returns the runner and the bound port."""
    host, sep, port_text = listen.rpartition(":")
    if not sep or not port_text.isdigit():
        raise OSError(f"--metrics-listen: expected HOST:PORT, got {listen!r}")
    registry = CollectorRegistry()
    registry.register(collector)
    runner = web.AppRunner(metrics_app(registry), access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, host.strip("[]") or "0.0.0.0", int(port_text)).start()
    except OSError as exc:
        await runner.cleanup()
        raise OSError(f"--metrics-listen: cannot listen on {listen}: {exc}") from None
    return runner, int(runner.addresses[0][1])
