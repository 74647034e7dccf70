"""A small synchronous wrapper for scripts and notebooks: :class:`SyncHorusClient`.

It runs one private event loop in a daemon thread and forwards every call to a
:class:`HorusClient` living there, so it also works where a loop is already running (Jupyter).
"""

from __future__ import annotations

import asyncio
import builtins
import threading
import warnings
from collections.abc import AsyncIterator, Coroutine, Generator, Iterable
from types import TracebackType
from typing import Any, Self, TypeVar

import grpc

from horus_core import errors
from horus_core.client._async import DEFAULT_PAGE_SIZE, DEFAULT_TARGET, HorusClient
from horus_core.client._rpc import RetryPolicy
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
from horus_core.model import Job, JobSpec, JobState, Node
from horus_core.queueusage import QueueUsage

T = TypeVar("T")


class SyncHorusClient:
    """Blocking twin of :class:`HorusClient`: same methods; ``list`` returns a list, ``watch`` and
    ``logs`` return generators (close them, or break out of the loop, to end the stream).

    >>> with SyncHorusClient.connect("127.0.0.1:50051") as c:   # doctest: +SKIP
    ...     job = c.wait(c.submit(JobSpec(command=("nvidia-smi",))).id)
    """

    def __init__(
        self,
        target: str = DEFAULT_TARGET,
        token: str | None = None,
        timeout: float | None = 10.0,
        *,
        retry: RetryPolicy | None = None,
        credentials: grpc.ChannelCredentials | None = None,
    ) -> None:
        self._closed = False
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="horus-sync-client", daemon=True)
        self._thread.start()

        async def build() -> HorusClient:  # the aio channel must be made on the loop that uses it
            return HorusClient.connect(target, token, timeout, retry=retry, credentials=credentials)

        self._client = self._run(build())

    @classmethod
    def connect(
        cls,
        target: str = DEFAULT_TARGET,
        token: str | None = None,
        timeout: float | None = 10.0,
        *,
        retry: RetryPolicy | None = None,
        credentials: grpc.ChannelCredentials | None = None,
    ) -> SyncHorusClient:
        """Same arguments as :meth:`HorusClient.connect`."""
        return cls(target, token, timeout, retry=retry, credentials=credentials)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._run(self._client.close())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._loop.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -------------------------------------------------------------------------- methods

    def submit(self, spec: JobSpec, request_id: str | None = None) -> Job:
        job, said = self._run(self._client.submit_with_warnings(spec, request_id))
        for text in said:  # (raised in the caller's thread, not the loop's)
            warnings.warn(text, errors.HorusWarning, stacklevel=2)
        return job

    def submit_with_warnings(
        self, spec: JobSpec, request_id: str | None = None
    ) -> tuple[Job, builtins.list[str]]:
        return self._run(self._client.submit_with_warnings(spec, request_id))

    def apply(self, job_file: str, request_id: str | None = None) -> Job:
        return self._run(self._client.apply(job_file, request_id))

    def get(self, job_id: str) -> Job:
        return self._run(self._client.get(job_id))

    def list_page(
        self,
        states: Iterable[JobState] | None = None,
        owner: str | None = None,
        page_size: int = DEFAULT_PAGE_SIZE,
        page_token: str = "",
        finished_within_s: float = 0.0,
    ) -> JobPage:
        return self._run(self._client.list_page(states, owner, page_size, page_token, finished_within_s))

    def list(
        self,
        states: Iterable[JobState] | None = None,
        owner: str | None = None,
        page_size: int = DEFAULT_PAGE_SIZE,
        finished_within_s: float = 0.0,
    ) -> builtins.list[Job]:
        return self._run(self._client.list(states, owner, page_size, finished_within_s))

    def iter_jobs(
        self,
        states: Iterable[JobState] | None = None,
        owner: str | None = None,
        page_size: int = DEFAULT_PAGE_SIZE,
        finished_within_s: float = 0.0,
    ) -> Generator[Job, None, None]:
        """Every matching job, fetching page after page as the caller iterates."""
        return self._iterate(self._client.iter_jobs(states, owner, page_size, finished_within_s))

    def cancel(self, job_id: str, reason: str = "") -> Job:
        return self._run(self._client.cancel(job_id, reason))

    def watch(self, job_id: str | None = None) -> Generator[JobEvent, None, None]:
        return self._iterate(self._client.watch(job_id))

    def logs(
        self, job_id: str, attempt: int = 0, follow: bool = False, offset: int = 0
    ) -> Generator[bytes, None, None]:
        return self._iterate(self._client.logs(job_id, attempt, follow, offset))

    def log_chunks(
        self, job_id: str, attempt: int = 0, follow: bool = False, offset: int = 0, node: str = ""
    ) -> Generator[LogChunk, None, None]:
        """Chunks with their offsets; a multi-node gang's name their node (``node``: only its part)."""
        return self._iterate(self._client.log_chunks(job_id, attempt, follow, offset, node))

    def wait(self, job_id: str, timeout: float | None = None, *, poll_interval: float = 5.0) -> Job:
        return self._run(self._client.wait(job_id, timeout, poll_interval=poll_interval))

    def nodes(self) -> builtins.list[Node]:
        return self._run(self._client.nodes())

    def gpus(self) -> builtins.list[GpuStatus]:
        return self._run(self._client.gpus())

    def profiles(self) -> builtins.list[Profile]:
        return self._run(self._client.profiles())

    def pair_speeds(self) -> builtins.list[PairSpeed]:
        return self._run(self._client.pair_speeds())

    def learned(self) -> tuple[builtins.list[Profile], builtins.list[PairSpeed]]:
        return self._run(self._client.learned())

    def queues(self) -> builtins.list[QueueUsage]:
        return self._run(self._client.queues())

    def cluster_info(self) -> ClusterInfo:
        return self._run(self._client.cluster_info())

    def probe_masters(self) -> builtins.list[tuple[str, str, str]]:
        return self._run(self._client.probe_masters())

    @property
    def target(self) -> str:
        """The master talked to now."""
        return self._client.target

    def server_stats(self, reset: bool = False) -> ServerStats:
        return self._run(self._client.server_stats(reset))

    def progress(self, job_id: str, history: int = 0) -> JobProgress:
        return self._run(self._client.progress(job_id, history))

    def cordon(self, node: str) -> Node:
        return self._run(self._client.cordon(node))

    def drain(self, node: str, timeout_s: float | None = None) -> Node:
        return self._run(self._client.drain(node, timeout_s))

    def uncordon(self, node: str, gpu_uuid: str = "") -> Node:
        return self._run(self._client.uncordon(node, gpu_uuid))

    # -------------------------------------------------------------------------- plumbing

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._loop.is_closed():
            coro.close()
            raise RuntimeError("this SyncHorusClient is closed")
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()  # e.g. KeyboardInterrupt while blocked: stop the call in the loop too
            raise

    def _iterate(self, agen: AsyncIterator[T]) -> Generator[T, None, None]:
        try:
            while True:
                item = self._run(_next(agen))
                if item is _END:
                    return
                yield item
        finally:
            aclose = getattr(agen, "aclose", None)
            if aclose is not None and not self._loop.is_closed():
                self._run(aclose())


_END: Any = object()


async def _next(agen: AsyncIterator[T]) -> T:
    """The next item, or ``_END`` (StopAsyncIteration must not cross the thread boundary)."""
    try:
        return await anext(agen)
    except StopAsyncIteration:
        return _END  # type: ignore[no-any-return]
