"""An in-test fake of the master's client plane (HorusService) on a real grpc.aio server.

Shared by tests/core/test_client*.py and tests/core/test_cli*.py: the SDK and hctl are tested
through the real wire, against a servicer whose behaviour each test can steer (injected
failures, delays, dropped watch events). Not a test module itself; imported by the others.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any, TypeVar

import grpc
import grpc.aio

from horus_core import wire
from horus_core.gen import client_pb2 as cpb
from horus_core.gen import client_pb2_grpc
from horus_core.gen import types_pb2 as pb
from horus_core.model import Gpu, Job, JobSpec, JobState, Node, NodeState

T = TypeVar("T")
T0 = 1_700_000_000.0

NODES = (
    Node(
        "node-a",
        (
            Gpu("GPU-a0", "node-a", 0, "NVIDIA H100", 81559, "h100"),
            Gpu("GPU-a1", "node-a", 1, "NVIDIA H100", 81559, "h100"),
        ),
    ),
    Node(
        "node-b",
        (Gpu("GPU-b0", "node-b", 0, "Tesla V100", 16384, "v100", healthy=False),),
        state=NodeState.LOST,
        last_seen=T0,
    ),
)


class FakeMaster(client_pb2_grpc.HorusServiceServicer):
    def __init__(self) -> None:
        self.jobs: dict[str, Job] = {}
        self.by_request: dict[str, str] = {}
        self.submit_request_ids: list[str] = []
        self.fail_submits = 0  # fail this many submits with UNAVAILABLE *after* recording them
        self.list_requests: list[cpb.ListJobsRequest] = []
        self.metadata: list[dict[str, str]] = []
        self.required_token: str | None = None
        self.get_delay = 0.0
        self.get_calls = 0
        self.drop_watch_events = False
        self.break_watches = 0  # abort this many watches with ``break_code`` right after they open
        self.break_code = grpc.StatusCode.UNAVAILABLE
        self.watch_opened = 0
        self.logs: dict[tuple[str, int], list[bytes]] = {}
        self.max_gpus = 2
        self.progress: dict[str, cpb.JobProgressReport] = {}  # GetJobProgress answers by job id
        self._watchers: list[tuple[str, asyncio.Queue[pb.JobEvent]]] = []
        self._seq = 0
        self.watching = asyncio.Event()  # set once a watch has subscribed
        self.confirm_subscription = True  # send initial metadata once subscribed, as the master does

    # ------------------------------------------------------------------ test-side helpers

    def add_job(self, spec: JobSpec | None = None, state: JobState = JobState.PENDING, **changes: Any) -> Job:
        self._seq += 1
        job = Job(
            id=f"j-{self._seq:04d}",
            spec=spec or JobSpec(command=("python", "train.py"), name=f"job{self._seq}"),
            state=state,
            submitted_at=T0 + self._seq,
            updated_at=T0 + self._seq,
            reason="waiting for the next scheduling round" if state is JobState.PENDING else "",
        )
        job = dataclasses.replace(job, **changes)
        self.jobs[job.id] = job
        return job

    def set_state(self, job_id: str, state: JobState, reason: str = "", **changes: Any) -> Job:
        old = self.jobs[job_id]
        new = dataclasses.replace(old, state=state, reason=reason, updated_at=time.time(), **changes)
        self.jobs[job_id] = new
        self._publish(new, old.state, reason)
        return new

    def _publish(self, job: Job, previous: JobState | None, reason: str) -> None:
        if self.drop_watch_events:
            return
        event = pb.JobEvent(job=wire.job_to_pb(job), at=time.time(), reason=reason)
        if previous is not None:
            event.previous_state = wire.job_state_to_pb(previous)
        for job_id, queue in self._watchers:
            if job_id in ("", job.id):
                queue.put_nowait(event)

    async def _enter(self, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        md = {k: v for k, v in context.invocation_metadata() or () if isinstance(v, str)}
        self.metadata.append(md)
        if self.required_token and md.get("authorization") != f"Bearer {self.required_token}":
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong bearer token")

    async def _job(self, job_id: str, context: Any) -> Job:
        if job_id not in self.jobs:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"job {job_id} not found")
        return self.jobs[job_id]

    # ------------------------------------------------------------------------------ RPCs

    async def SubmitJob(self, request: cpb.SubmitJobRequest, context: Any) -> cpb.SubmitJobResponse:
        await self._enter(context)
        self.submit_request_ids.append(request.request_id)
        created = request.request_id not in self.by_request
        if created:
            spec = wire.spec_from_pb(request.spec)
            if spec.gpus > self.max_gpus:
                await context.abort(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"gpus: asks for {spec.gpus} GPUs but the largest node has {self.max_gpus}",
                )
            job = self.add_job(spec)
            if request.request_id:
                self.by_request[request.request_id] = job.id
            self._publish(job, None, "submitted")
        job = self.jobs[self.by_request[request.request_id]] if request.request_id else job
        if self.fail_submits > 0:  # the work is done, but the answer gets "lost"
            self.fail_submits -= 1
            await context.abort(grpc.StatusCode.UNAVAILABLE, "injected: connection reset")
        return cpb.SubmitJobResponse(job=wire.job_to_pb(job), created=created)

    async def GetJob(self, request: cpb.GetJobRequest, context: Any) -> pb.Job:
        await self._enter(context)
        self.get_calls += 1
        if self.get_delay:
            await asyncio.sleep(self.get_delay)
        return wire.job_to_pb(await self._job(request.job_id, context))

    async def GetJobProgress(self, request: cpb.GetJobProgressRequest, context: Any) -> cpb.JobProgressReport:
        await self._enter(context)
        await self._job(request.job_id, context)
        return self.progress.get(request.job_id) or cpb.JobProgressReport(job_id=request.job_id)

    async def ListJobs(self, request: cpb.ListJobsRequest, context: Any) -> cpb.ListJobsResponse:
        await self._enter(context)
        self.list_requests.append(request)
        states = {wire.job_state_from_pb(s) for s in request.states}
        jobs = [
            j
            for j in self.jobs.values()
            if (not states or j.state in states) and (not request.owner or j.spec.owner == request.owner)
        ]
        start = int(request.page_token or 0)
        size = request.page_size or 100
        page = jobs[start : start + size]
        token = str(start + size) if start + size < len(jobs) else ""
        return cpb.ListJobsResponse(jobs=[wire.job_to_pb(j) for j in page], next_page_token=token)

    async def CancelJob(self, request: cpb.CancelJobRequest, context: Any) -> pb.Job:
        await self._enter(context)
        job = await self._job(request.job_id, context)
        if job.state.terminal:
            await context.abort(
                grpc.StatusCode.FAILED_PRECONDITION, f"job {job.id} is already {job.state.value}"
            )
        return wire.job_to_pb(
            self.set_state(job.id, JobState.CANCELLED, request.reason or "cancelled by user")
        )

    async def WatchJobs(self, request: cpb.WatchJobsRequest, context: Any) -> AsyncIterator[pb.JobEvent]:
        await self._enter(context)
        self.watch_opened += 1
        if self.break_watches > 0:
            self.break_watches -= 1
            await context.abort(self.break_code, "injected: watch broken")
        entry: tuple[str, asyncio.Queue[pb.JobEvent]] = (request.job_id, asyncio.Queue())
        self._watchers.append(entry)
        self.watching.set()
        if self.confirm_subscription:
            await context.send_initial_metadata((("horus-watch", "subscribed"),))
        try:
            while True:
                yield await entry[1].get()
        finally:
            self._watchers.remove(entry)

    async def ListNodes(self, request: cpb.ListNodesRequest, context: Any) -> cpb.ListNodesResponse:
        await self._enter(context)
        return cpb.ListNodesResponse(nodes=[wire.node_to_pb(n) for n in NODES])

    async def ListGpus(self, request: cpb.ListGpusRequest, context: Any) -> cpb.ListGpusResponse:
        await self._enter(context)
        out = []
        for node in NODES:
            for gpu in node.gpus:
                on_it = [j for j in self.jobs.values() if j.state.active and gpu.uuid in j.gpus]
                stats = pb.GpuStats(
                    uuid=gpu.uuid,
                    util_sm=40.0 * len(on_it),
                    mem_used_mib=1000 * len(on_it),
                    mem_total_mib=gpu.memory_mib,
                    temperature_c=55,
                    healthy=gpu.healthy,
                )
                per_job = [
                    pb.JobGpuStats(
                        job_id=j.id, attempt=j.attempt, gpu_uuid=gpu.uuid, util_sm=40.0, mem_used_mib=1000
                    )
                    for j in on_it
                ]
                out.append(
                    pb.GpuStatus(
                        gpu=wire.gpu_to_pb(gpu), stats=stats, job_ids=[j.id for j in on_it], jobs=per_job
                    )
                )
        return cpb.ListGpusResponse(gpus=out)

    async def GetLogs(self, request: cpb.GetLogsRequest, context: Any) -> AsyncIterator[cpb.LogChunk]:
        await self._enter(context)
        job = await self._job(request.job_id, context)
        attempt = request.attempt or job.attempt
        sent, offset = 0, 0
        while True:
            chunks = self.logs.get((job.id, attempt), [])
            for data in chunks[sent:]:
                yield cpb.LogChunk(job_id=job.id, attempt=attempt, offset=offset, data=data)
                offset += len(data)
            sent = len(chunks)
            if not request.follow or self.jobs[job.id].state.terminal:
                return
            await asyncio.sleep(0.01)

    async def ListProfiles(self, request: cpb.ListProfilesRequest, context: Any) -> cpb.ListProfilesResponse:
        await self._enter(context)
        profile = pb.Profile(
            job_type="ResNet-18 (batch size 32)",
            util_avg=45.5,
            util_peak=80,
            mem_mib=3000,
            samples=12,
            co_speed={"VAE": 0.9},
            solo_samples_per_s={"v100x1": 640.0},
        )
        pair = pb.PairSpeed(
            job_type="ResNet-18 (batch size 32)",
            co_runner="VAE",
            gpu_type="v100",
            speed=0.9,
            samples=3,
            updated_at=1.0,
        )
        return cpb.ListProfilesResponse(profiles=[profile], pairs=[pair])

    async def GetClusterInfo(self, request: cpb.GetClusterInfoRequest, context: Any) -> cpb.ClusterInfo:
        await self._enter(context)
        return cpb.ClusterInfo(version="0.1.0-fake", policy="fifo", max_gpus_per_node=self.max_gpus)


@asynccontextmanager
async def serve(fake: FakeMaster) -> AsyncIterator[str]:
    """Serve ``fake`` on 127.0.0.1:<free port>; yields the address."""
    server = grpc.aio.server()
    client_pb2_grpc.add_HorusServiceServicer_to_server(fake, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await server.stop(None)


class ThreadedFakeMaster:
    """The fake served from its own event loop in a thread, for blocking callers (hctl, sync SDK)."""

    def __init__(self, fake: FakeMaster) -> None:
        self.fake = fake
        self.address = ""
        self._loop = asyncio.new_event_loop()
        self._stop: asyncio.Event | None = None

    def call(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on the server's loop (state changes must happen there)."""

        async def run() -> T:
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(timeout=5)

    def call_later(self, delay: float, fn: Callable[[], object]) -> None:
        self._loop.call_soon_threadsafe(self._loop.call_later, delay, fn)

    def when_watching(self, fn: Callable[[], object]) -> None:
        """Run ``fn`` on the server's loop as soon as a watch has subscribed."""

        async def run() -> None:
            await self.fake.watching.wait()
            fn()

        asyncio.run_coroutine_threadsafe(run(), self._loop)

    async def _main(self, ready: threading.Event) -> None:
        self._stop = asyncio.Event()
        async with serve(self.fake) as address:
            self.address = address
            ready.set()
            await self._stop.wait()

    @contextmanager
    def running(self) -> Iterator[ThreadedFakeMaster]:
        ready = threading.Event()
        thread = threading.Thread(
            target=self._loop.run_until_complete, args=(self._main(ready),), daemon=True
        )
        thread.start()
        assert ready.wait(10), "fake master did not start"
        try:
            yield self
        finally:
            stop = self._stop
            assert stop is not None
            self._loop.call_soon_threadsafe(stop.set)
            thread.join(10)
            self._loop.close()
