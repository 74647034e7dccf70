"""The asyncio SDK: :class:`HorusClient`."""

from __future__ import annotations

import builtins
import time
import uuid
import warnings
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Sequence
from types import TracebackType
from typing import Self, TypedDict, TypeVar

import grpc
import grpc.aio

from horus_core import __version__, errors, wire
from horus_core.client import _convert
from horus_core.client._masters import Masters, leader_hint
from horus_core.client._rpc import FAILOVER_RETRY, NO_RETRY, RetryPolicy, call_with_retry
from horus_core.client._streams import Hops, LogResume, Resumed, resumable
from horus_core.client._views import (
    ClusterInfo,
    GpuStatus,
    JobEvent,
    JobPage,
    JobProgress,
    LogChunk,
    PairSpeed,
    Profile,
    ServerStats,
)
from horus_core.client._wait import wait_for_terminal
from horus_core.gen import client_pb2 as cpb
from horus_core.gen import client_pb2_grpc
from horus_core.gen import types_pb2 as pb
from horus_core.model import Job, JobSpec, JobState, Node
from horus_core.queueusage import QueueUsage

T = TypeVar("T")

DEFAULT_TARGET = "127.0.0.1:50051"
DEFAULT_PAGE_SIZE = 100
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
_CHANNEL_OPTIONS: tuple[tuple[str, int | str], ...] = (
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    # Reconnect quickly after a master restart, so the bounded retries can get through.
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 2000),
    ("grpc.primary_user_agent", f"horus-sdk/{__version__}"),
)


class HorusClient:
    """Async client of the Horus master.

    >>> async with HorusClient.connect("127.0.0.1:50051", token=None) as c:   # doctest: +SKIP
    ...     job = await c.submit(JobSpec(command=("python", "train.py"), gpus=1))
    ...     job = await c.wait(job.id)

    One style: a call with a finite answer is awaited (``await c.list()``, ``await c.nodes()``,
    ``await c.queues()``); a stream is iterated (``async for`` over ``c.iter_jobs()``,
    ``c.watch()``, ``c.logs()``, ``c.log_chunks()``).

    Every unary call has a deadline of ``timeout`` seconds; reads and submits are retried on
    UNAVAILABLE / DEADLINE_EXCEEDED (bounded, see :class:`RetryPolicy`). Failures surface as
    :class:`horus_core.errors.HorusError` subclasses.

    ``target`` may list several masters (``"a:50051,b:50051,c:50051"``, docs/ha.md): calls go to
    the leader, following a standby's answer or trying the next master, and the retries then
    last long enough to ride out a failover. :attr:`target` is the master talked to now.
    """

    def __init__(
        self,
        channel: grpc.aio.Channel,
        target: str,
        *,
        token: str | None = None,
        timeout: float | None = 10.0,
        retry: RetryPolicy | None = None,
    ) -> None:
        self._masters = Masters(target)
        self._channels = {self._masters.current: channel}
        self._dial: Callable[[str], grpc.aio.Channel] | None = None  # (set by connect)
        self._stub = client_pb2_grpc.HorusServiceStub(channel)
        self._timeout = timeout
        several = len(self._masters.known) > 1
        self._retry = retry if retry is not None else FAILOVER_RETRY if several else RetryPolicy()
        self._fail_fast = several and retry is None  # (every master down: say so in seconds)
        self._metadata = _auth_metadata(token)

    @classmethod
    def connect(
        cls,
        target: str = DEFAULT_TARGET,
        token: str | None = None,
        timeout: float | None = 10.0,
        *,
        retry: RetryPolicy | None = None,
        credentials: grpc.ChannelCredentials | None = None,
    ) -> HorusClient:
        """Open a channel to the master at ``host:port`` (lazily: nothing is sent until a call).

        ``credentials`` (e.g. ``grpc.ssl_channel_credentials(ca)``) switches the channel to TLS.
        Use as ``async with HorusClient.connect(...) as c`` or call :meth:`close`.
        """
        _auth_metadata(token)  # reject a malformed token before a channel exists

        def dial(where: str) -> grpc.aio.Channel:
            if credentials is None:
                return grpc.aio.insecure_channel(where, options=_CHANNEL_OPTIONS)
            return grpc.aio.secure_channel(where, credentials, options=_CHANNEL_OPTIONS)

        client = cls(dial(Masters(target).current), target, token=token, timeout=timeout, retry=retry)
        client._dial = dial
        return client

    @property
    def target(self) -> str:
        """The master this client talks to now (the leader, once a call found it)."""
        return self._masters.current

    @property
    def masters(self) -> tuple[str, ...]:
        """Every master this client knows (those given, and leaders standbys named)."""
        return tuple(self._masters.known)

    def _follow(self, exc: grpc.aio.AioRpcError) -> bool:
        """After a failed call: switch to the master to try next (see :class:`Masters`)."""
        before = self._masters.current
        standby = self._masters.after(exc)
        now = self._masters.current
        if now != before and self._dial is not None:
            if now not in self._channels:
                self._channels[now] = self._dial(now)
            self._stub = client_pb2_grpc.HorusServiceStub(self._channels[now])
        return standby

    @property
    def retry_policy(self) -> RetryPolicy:
        return self._retry

    async def close(self) -> None:
        for channel in self._channels.values():
            await channel.close(None)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    # ------------------------------------------------------------------------------ jobs

    async def submit(self, spec: JobSpec, request_id: str | None = None) -> Job:
        """Submit a job. Retried with the same ``request_id`` (a fresh uuid4 when None), so a
        retry returns the job the first attempt created instead of making a second one. What
        the master warns about (an unknown job type, a GPU type no node has) is raised as a
        :class:`horus_core.errors.HorusWarning`."""
        job, said = await self.submit_with_warnings(spec, request_id)
        for text in said:
            warnings.warn(text, errors.HorusWarning, stacklevel=2)
        return job

    async def submit_with_warnings(
        self, spec: JobSpec, request_id: str | None = None
    ) -> tuple[Job, builtins.list[str]]:
        """:meth:`submit`, with the master's warnings returned instead of raised."""
        req = cpb.SubmitJobRequest(request_id=request_id or str(uuid.uuid4()), spec=wire.spec_to_pb(spec))
        resp = await self._unary(lambda: self._stub.SubmitJob(req, **self._opts()))
        return wire.job_from_pb(resp.job), list(resp.warnings)

    async def apply(self, job_file: str, request_id: str | None = None) -> Job:
        """Submit the job a YAML job file describes (its text; see :mod:`horus_core.jobfile`).
        Raises InvalidArgument naming the field and line when the file is wrong."""
        from horus_core import jobfile  # (PyYAML: loaded only for job files)

        return await self.submit(jobfile.load(job_file).spec, request_id)

    async def get(self, job_id: str) -> Job:
        req = cpb.GetJobRequest(job_id=job_id)
        return wire.job_from_pb(await self._unary(lambda: self._stub.GetJob(req, **self._opts())))

    async def list_page(
        self,
        states: Iterable[JobState] | None = None,
        owner: str | None = None,
        page_size: int = DEFAULT_PAGE_SIZE,
        page_token: str = "",
        finished_within_s: float = 0.0,
    ) -> JobPage:
        """One page of jobs (all states when ``states`` is None or empty; with
        ``finished_within_s``, also the jobs that ended within that many seconds)."""
        req = cpb.ListJobsRequest(
            states=[wire.job_state_to_pb(s) for s in states or ()],
            owner=owner or "",
            page_size=page_size,
            page_token=page_token,
            finished_within_s=finished_within_s,
        )
        return _convert.job_page_from_pb(await self._unary(lambda: self._stub.ListJobs(req, **self._opts())))

    async def list(
        self,
        states: Iterable[JobState] | None = None,
        owner: str | None = None,
        page_size: int = DEFAULT_PAGE_SIZE,
        finished_within_s: float = 0.0,
    ) -> builtins.list[Job]:
        """Every matching job (all pages), awaited like ``nodes()``; :meth:`iter_jobs` streams them."""
        return [job async for job in self.iter_jobs(states, owner, page_size, finished_within_s)]

    async def iter_jobs(
        self,
        states: Iterable[JobState] | None = None,
        owner: str | None = None,
        page_size: int = DEFAULT_PAGE_SIZE,
        finished_within_s: float = 0.0,
    ) -> AsyncGenerator[Job, None]:
        """Every matching job, fetching page after page as the caller iterates (``async for``)."""
        wanted = tuple(states or ())
        token = ""
        while True:
            page = await self.list_page(wanted, owner, page_size, token, finished_within_s)
            for job in page.jobs:
                yield job
            if not page.next_page_token:
                return
            token = page.next_page_token

    async def cancel(self, job_id: str, reason: str = "") -> Job:
        """Cancel a job (not retried: a blind retry could report an error for a cancel that worked)."""
        req = cpb.CancelJobRequest(job_id=job_id, reason=reason)
        return wire.job_from_pb(
            await self._unary(lambda: self._stub.CancelJob(req, **self._opts()), NO_RETRY)
        )

    async def watch(self, job_id: str | None = None) -> AsyncGenerator[JobEvent, None]:
        """Every state change from now on, of one job or (``job_id`` None) of all visible jobs.

        The stream stays open until the generator is closed: leave it early through
        ``contextlib.aclosing(client.watch())`` (or ``await gen.aclose()``).
        """
        last: JobEvent | None = None
        several = len(self._masters.known) > 1  # (one master's stream ends when it stops)
        async for msg in resumable(lambda: self._watch_call(job_id), self._hops(), again_on_end=several):
            if isinstance(msg, Resumed):
                if job_id and last is not None:  # what the cut hid: the job's state now
                    job = await self.get(job_id)
                    if job.state != last.job.state:
                        last = JobEvent(job, last.job.state, time.time(), "seen when the watch resumed")
                        yield last
                continue
            last = _convert.job_event_from_pb(msg)
            yield last

    async def log_chunks(
        self, job_id: str, attempt: int = 0, follow: bool = False, offset: int = 0, node: str = ""
    ) -> AsyncGenerator[LogChunk, None]:
        """Output of an attempt (0 = latest) as chunks with their offsets. A multi-node gang's
        chunks name their node (``node``: only that node's part; offsets count per part)."""
        at = LogResume(attempt, offset, node)

        def open_call() -> grpc.aio.UnaryStreamCall[cpb.GetLogsRequest, cpb.LogChunk]:
            req = cpb.GetLogsRequest(
                job_id=job_id, attempt=at.attempt, follow=follow, offset=at.offset(), node=node
            )
            return self._stub.GetLogs(req, metadata=self._metadata)

        async for msg in resumable(open_call, self._hops()):
            if not isinstance(msg, Resumed) and (chunk := at.fresh(_convert.log_chunk_from_pb(msg))):
                yield chunk

    async def logs(
        self, job_id: str, attempt: int = 0, follow: bool = False, offset: int = 0
    ) -> AsyncGenerator[bytes, None]:
        """Output (stdout + stderr) of an attempt (0 = latest); ``follow`` keeps streaming."""
        async for chunk in self.log_chunks(job_id, attempt, follow, offset):
            yield chunk.data

    async def wait(
        self,
        job_id: str,
        timeout: float | None = None,  # noqa: ASYNC109 (the public API takes a plain timeout)
        *,
        poll_interval: float = 5.0,
    ) -> Job:
        """Return the job once it is SUCCEEDED, FAILED or CANCELLED.

        Watches the job and re-reads it every ``poll_interval`` seconds, so a change that happens
        between the read and the start of the watch is never missed; a broken watch is reopened.
        Raises :class:`TimeoutError` after ``timeout`` seconds (None: wait forever).
        """
        return await wait_for_terminal(self, job_id, timeout, poll_interval)

    # --------------------------------------------------------------------------- cluster

    async def nodes(self) -> builtins.list[Node]:
        resp = await self._unary(lambda: self._stub.ListNodes(cpb.ListNodesRequest(), **self._opts()))
        return [wire.node_from_pb(n) for n in resp.nodes]

    async def gpus(self) -> builtins.list[GpuStatus]:
        resp = await self._unary(lambda: self._stub.ListGpus(cpb.ListGpusRequest(), **self._opts()))
        return [_convert.gpu_status_from_pb(g) for g in resp.gpus]

    async def profiles(self) -> builtins.list[Profile]:
        return (await self.learned())[0]

    async def pair_speeds(self) -> builtins.list[PairSpeed]:
        """Measured speeds of job types sharing GPUs, one entry per direction and GPU type."""
        return (await self.learned())[1]

    async def learned(self) -> tuple[builtins.list[Profile], builtins.list[PairSpeed]]:
        """What the master has learned: profiles per job type, and measured pair speeds."""
        resp = await self._unary(lambda: self._stub.ListProfiles(cpb.ListProfilesRequest(), **self._opts()))
        return (
            [_convert.profile_from_pb(p) for p in resp.profiles],
            [_convert.pair_speed_from_pb(p) for p in resp.pairs],
        )

    async def cluster_info(self) -> ClusterInfo:
        req = cpb.GetClusterInfoRequest()
        return _convert.cluster_info_from_pb(
            await self._unary(lambda: self._stub.GetClusterInfo(req, **self._opts()))
        )

    async def probe_masters(self) -> builtins.list[tuple[str, str, str]]:
        """Each master this client knows as (address, role, detail): role ``leader``, ``standby``
        (detail: the leader it names) or ``unreachable`` (detail: why). One call each, no retry."""
        out: builtins.list[tuple[str, str, str]] = []
        req = cpb.GetClusterInfoRequest()
        for where in self.masters:
            channel = self._channels.get(where) or (self._dial(where) if self._dial else None)
            if channel is None:
                continue
            self._channels[where] = channel
            stub = client_pb2_grpc.HorusServiceStub(channel)
            try:
                await stub.GetClusterInfo(req, **self._opts())
                out.append((where, "leader", ""))
            except grpc.aio.AioRpcError as exc:
                hint = leader_hint(exc)
                if hint is not None:
                    out.append((where, "standby", f"leader: {hint or 'none yet'}"))
                else:
                    out.append((where, "unreachable", f"{exc.code().name}: {exc.details()}"))
        return out

    async def server_stats(self, reset: bool = False) -> ServerStats:
        """The master's event-loop lag and heartbeat handling time over its recent windows
        (admins, with auth on); ``reset`` empties the windows after answering."""
        req = cpb.GetServerStatsRequest(reset=reset)
        return _convert.server_stats_from_pb(
            await self._unary(lambda: self._stub.GetServerStats(req, **self._opts()))
        )

    async def progress(self, job_id: str, history: int = 0) -> JobProgress:
        """A job's latest progress report and the master's estimate of what is left (steps and
        seconds, from the fitted loss curve or ``total_steps``); ``history``: also that many of
        the kept reports (at most 512), oldest first."""
        req = cpb.GetJobProgressRequest(job_id=job_id, history=history)
        return _convert.job_progress_from_pb(
            await self._unary(lambda: self._stub.GetJobProgress(req, **self._opts()))
        )

    async def queues(self) -> builtins.list[QueueUsage]:
        """Per queue: quota, GPUs in use and borrowed, pending jobs ([] without --queues)."""
        req = cpb.ListQueueUsageRequest()
        resp = await self._unary(lambda: self._stub.ListQueueUsage(req, **self._opts()))
        return [wire.queue_usage_from_pb(row) for row in resp.queues]

    async def cordon(self, node: str) -> Node:
        """No new placements on ``node``; its running jobs keep running (admins, with auth on)."""
        return await self._node_service(
            cpb.SetNodeServiceRequest(node=node, action=cpb.NODE_SERVICE_ACTION_CORDON)
        )

    async def drain(self, node: str, timeout_s: float | None = None) -> Node:
        """Cordon ``node``; what still runs there when ``timeout_s`` passes (None: at once) is
        preempted and re-queued."""
        req = cpb.SetNodeServiceRequest(node=node, action=cpb.NODE_SERVICE_ACTION_DRAIN)
        if timeout_s is not None:
            req.timeout_s = timeout_s
        return await self._node_service(req)

    async def uncordon(self, node: str, gpu_uuid: str = "") -> Node:
        """Put ``node`` back in service and release its quarantined GPUs (or only ``gpu_uuid``'s)."""
        req = cpb.SetNodeServiceRequest(node=node, action=cpb.NODE_SERVICE_ACTION_UNCORDON, gpu_uuid=gpu_uuid)
        return await self._node_service(req)

    async def _node_service(self, req: cpb.SetNodeServiceRequest) -> Node:
        resp = await self._unary(lambda: self._stub.SetNodeService(req, **self._opts()))
        return wire.node_from_pb(resp.node)

    # --------------------------------------------------------------------------- helpers

    def _watch_call(self, job_id: str | None) -> grpc.aio.UnaryStreamCall[cpb.WatchJobsRequest, pb.JobEvent]:
        return self._stub.WatchJobs(cpb.WatchJobsRequest(job_id=job_id or ""), metadata=self._metadata)

    def _opts(self) -> _CallOptions:
        return {"timeout": self._timeout, "metadata": self._metadata}

    async def _unary(self, attempt: Callable[[], Awaitable[T]], retry: RetryPolicy | None = None) -> T:
        policy = retry if retry is not None else self._retry
        self._masters.begin()
        return await call_with_retry(
            attempt, policy=policy, target=self.target, rpc_timeout=self._timeout, follow=self._follow,
            where=lambda: self._masters.current,
            give_up=self._masters.all_down if self._fail_fast else None,
        )  # fmt: skip

    def _hops(self) -> Hops:
        """How a stream follows the leader (:func:`horus_core.client._streams.resumable`)."""
        self._masters.begin()
        give_up = self._masters.all_down if self._fail_fast else lambda: None
        return Hops(self._retry, self._follow, lambda: self._masters.current, give_up)


def _auth_metadata(token: str | None) -> tuple[tuple[str, str], ...]:
    token = (token or "").strip()
    if not token:
        return ()
    if not all("!" <= ch <= "~" for ch in token):
        raise errors.InvalidArgument("token", "must be printable ASCII without spaces")
    return (("authorization", f"Bearer {token}"),)


class _CallOptions(TypedDict):
    timeout: float | None
    metadata: tuple[tuple[str, str], ...]


__all__: Sequence[str] = ["DEFAULT_TARGET", "HorusClient"]
