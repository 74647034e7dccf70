"""``HorusService``: the client plane (SDK and hctl)."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Awaitable, Callable

import grpc

import horus_core
from horus_core import wire
from horus_core.errors import InvalidArgument, PermissionDenied
from horus_core.gen import client_pb2 as cpb
from horus_core.gen import client_pb2_grpc as cgrpc
from horus_core.gen import types_pb2 as pb
from horus_core.interference.signature import DEFAULT_SIGNATURE, HINT_PREFIX
from horus_core.model import Job, JobState
from master.api.errors import Ctx, streaming, unary
from master.api.progress import progress_report
from master.api.views import NodeViews, gpu_statuses, learned_profiles, pair_to_pb
from master.auth import caller
from master.loopmon import LatencySnapshot, LatencyWindow, LoopMonitor
from master.services.access import owner_for
from master.services.events import EventBus, JobEvent
from master.services.joblogs import LogReader
from master.services.jobs import JobService
from master.services.nodes import NodeRegistry
from master.services.progress import ProgressKeeper
from master.services.queues import QueueService
from master.services.service import ServiceDesk
from master.store.reads import Reader


def event_to_pb(ev: JobEvent) -> pb.JobEvent:
    msg = pb.JobEvent(job=wire.job_to_pb(ev.job), at=ev.at, reason=ev.reason)
    if ev.previous is not None:
        msg.previous_state = wire.job_state_to_pb(ev.previous)
    return msg


# Rows of each learned table in one ListProfiles answer (with 256-character signatures the
# answer stays below the 4 MiB message limit).
MAX_LISTED = 2000


class HorusServicer(cgrpc.HorusServiceServicer):
    def __init__(
        self,
        registry: NodeRegistry,
        read: Reader,
        events: EventBus,
        jobs: JobService,
        logs: LogReader,
        policy_name: str,
        *,
        monitor: LoopMonitor | None = None,
        heartbeats: LatencyWindow | None = None,
        service: ServiceDesk,
        queues: QueueService | None = None,
        progress: ProgressKeeper | None = None,
        position: Callable[[str], tuple[str, int] | None] = lambda _job_id: None,
        speed: Callable[[Job], Awaitable[float | None]] | None = None,
    ) -> None:
        self.registry, self.read, self.events = registry, read, events
        self.jobs = jobs
        self.logs = logs
        self.policy_name = policy_name
        self.monitor = monitor or LoopMonitor()  # (not running unless the app runs it)
        self.heartbeats = heartbeats or LatencyWindow(1)
        self._node_views = NodeViews()
        self.queues = queues  # None: no --queues
        self.service = service  # cordon, drain, uncordon
        self.progress = progress  # the jobs' progress journals (GetJobProgress)
        self.position = position  # a pending job's (queue, position) at the last pass
        self.speed = speed  # a running job's measured speed (GetJobProgress)

    def _job_pb(self, job: Job) -> pb.Job:
        """The job with its queue position from the last scheduling pass (pending jobs only)."""
        msg = wire.job_to_pb(job)
        place = self.position(job.id) if job.state is JobState.PENDING else None  # (lazy)
        if place is not None:
            msg.queue_name, msg.queue_position = place
        return msg

    @unary
    async def SubmitJob(self, request: cpb.SubmitJobRequest, context: Ctx) -> cpb.SubmitJobResponse:
        who = caller()
        request.spec.owner = owner_for(who, request.spec.owner)  # saves a copy of the converted spec
        result = await self.jobs.submit(wire.spec_from_pb(request.spec), request.request_id, who)
        job = result.row.job
        warnings = self.jobs.warnings(job.spec)
        return cpb.SubmitJobResponse(job=wire.job_to_pb(job), created=result.created, warnings=warnings)

    @unary
    async def GetJob(self, request: cpb.GetJobRequest, context: Ctx) -> pb.Job:
        return self._job_pb(await self.jobs.get(request.job_id, caller()))

    @unary
    async def ListJobs(self, request: cpb.ListJobsRequest, context: Ctx) -> cpb.ListJobsResponse:
        states = [wire.job_state_from_pb(s, "states") for s in request.states]
        within = request.finished_within_s
        if not math.isfinite(within) or within < 0:
            raise InvalidArgument("finished_within_s", "must be a finite number of seconds >= 0")
        page = await self.jobs.list(
            states, request.owner, request.page_size, request.page_token, caller(), finished_within_s=within
        )
        jobs = [self._job_pb(j) for j in page.jobs]
        return cpb.ListJobsResponse(jobs=jobs, next_page_token=page.next_token)

    @unary
    async def CancelJob(self, request: cpb.CancelJobRequest, context: Ctx) -> pb.Job:
        return wire.job_to_pb(await self.jobs.cancel(request.job_id, request.reason, caller()))

    @streaming
    async def WatchJobs(self, request: cpb.WatchJobsRequest, context: Ctx) -> AsyncIterator[pb.JobEvent]:
        sub = await self.jobs.watch(request.job_id, caller())
        try:
            # Tells the client that events from here on will reach it.
            await context.send_initial_metadata((("horus-watch", "subscribed"),))
            while (ev := await sub.next()) is not None:
                yield event_to_pb(ev)
        finally:
            self.events.unsubscribe(sub)
        if sub.dropped:
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "watcher too slow: events were dropped")

    @unary
    async def ListNodes(self, request: cpb.ListNodesRequest, context: Ctx) -> cpb.ListNodesResponse:
        nodes = self._node_views.nodes([e.model() for e in self.registry.all()])
        return cpb.ListNodesResponse(nodes=nodes)

    @unary
    async def ListGpus(self, request: cpb.ListGpusRequest, context: Ctx) -> cpb.ListGpusResponse:
        who = caller()
        jobs = self.jobs.active()
        mine = None if who is None or who.admin else {j.id for j in jobs if j.spec.owner == who.user}
        return cpb.ListGpusResponse(gpus=gpu_statuses(self.registry.all(), jobs, mine))

    @streaming
    async def GetLogs(self, request: cpb.GetLogsRequest, context: Ctx) -> AsyncIterator[cpb.LogChunk]:
        pieces = self.logs.stream(
            request.job_id, request.attempt, request.offset, request.follow, caller(), request.node
        )
        async for p in pieces:
            yield cpb.LogChunk(job_id=p.job_id, attempt=p.attempt, offset=p.offset, data=p.data, node=p.node)

    @unary
    async def ListProfiles(self, request: cpb.ListProfilesRequest, context: Ctx) -> cpb.ListProfilesResponse:
        read = self.read
        profiles = await read.profiles(limit=MAX_LISTED)
        solos = await read.solo_throughputs(MAX_LISTED)
        pairs = await read.pair_speeds(MAX_LISTED)
        return cpb.ListProfilesResponse(
            profiles=learned_profiles(profiles, solos, pairs), pairs=[pair_to_pb(p) for p in pairs]
        )

    @unary
    async def ListQueueUsage(
        self, request: cpb.ListQueueUsageRequest, context: Ctx
    ) -> cpb.ListQueueUsageResponse:
        if self.queues is None:
            return cpb.ListQueueUsageResponse(configured=False)
        rows = [wire.queue_usage_to_pb(row) for row in self.queues.usage()]
        return cpb.ListQueueUsageResponse(configured=True, queues=rows)

    @unary
    async def GetClusterInfo(self, request: cpb.GetClusterInfoRequest, context: Ctx) -> cpb.ClusterInfo:
        learned = [
            p.job_type
            for p in await self.read.profiles(limit=MAX_LISTED)
            if p.job_type != DEFAULT_SIGNATURE and not p.job_type.startswith(HINT_PREFIX)
        ]  # (jobs without a type are learned under a signature, not a name one could submit)
        return cpb.ClusterInfo(
            version=horus_core.__version__,
            policy=self.policy_name,
            max_gpus_per_node=self.registry.max_gpus_per_node() or 0,
            gpu_types=sorted(self.registry.gpu_types()),
            job_types=sorted({*self.jobs.known_job_types(), *learned}),
        )

    @unary
    async def GetJobProgress(self, request: cpb.GetJobProgressRequest, context: Ctx) -> cpb.JobProgressReport:
        job = await self.jobs.get(request.job_id, caller())  # (access checked as for GetJob)
        speed = await self.speed(job) if self.speed is not None else None
        return await progress_report(self.progress, job, request.history, speed)

    @unary
    async def GetServerStats(self, request: cpb.GetServerStatsRequest, context: Ctx) -> cpb.ServerStats:
        who = caller()
        if who is not None and not who.admin:
            raise PermissionDenied("server statistics are for admins")
        nodes = self.registry.all()
        stats = cpb.ServerStats(
            loop_lag=latency_to_pb(self.monitor.snapshot()),
            loop_interval_s=self.monitor.interval_s,
            heartbeat=latency_to_pb(self.heartbeats.snapshot()),
            nodes=len(nodes),
            nodes_connected=sum(e.connected for e in nodes),
        )
        if request.reset:
            self.monitor.lags.clear()
            self.heartbeats.clear()
        return stats

    @unary
    async def SetNodeService(
        self, request: cpb.SetNodeServiceRequest, context: Ctx
    ) -> cpb.SetNodeServiceResponse:
        who = caller()
        if who is not None and not who.admin:
            raise PermissionDenied("cordon, drain and uncordon are for admins")
        action, name = request.action, request.node
        timeout = request.timeout_s if request.HasField("timeout_s") else None
        if request.gpu_uuid and action != cpb.NODE_SERVICE_ACTION_UNCORDON:
            raise InvalidArgument("gpu_uuid", "only uncordon takes one GPU")
        if timeout is not None and action != cpb.NODE_SERVICE_ACTION_DRAIN:
            raise InvalidArgument("timeout_s", "only drain takes a timeout")
        if action == cpb.NODE_SERVICE_ACTION_CORDON:
            node = await self.service.cordon(name)
        elif action == cpb.NODE_SERVICE_ACTION_DRAIN:
            node = await self.service.cordon(name, drain=True, timeout_s=timeout)
        elif action == cpb.NODE_SERVICE_ACTION_UNCORDON:
            node = await self.service.uncordon(name, request.gpu_uuid)
        else:
            raise InvalidArgument("action", f"expected cordon, drain or uncordon, got {action}")
        return cpb.SetNodeServiceResponse(node=wire.node_to_pb(node))


def latency_to_pb(s: LatencySnapshot) -> cpb.LatencySummary:
    return cpb.LatencySummary(
        samples=s.samples, total=s.total, p50_ms=s.p50_ms, p99_ms=s.p99_ms, max_ms=s.max_ms
    )
