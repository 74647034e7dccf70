"""``HorusClient.wait``: until a job is terminal, robust to races and to a broken watch."""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

import grpc
import grpc.aio

from horus_core import errors, wire
from horus_core.client._rpc import RetryPolicy, map_rpc_error
from horus_core.gen import types_pb2 as pb
from horus_core.model import Job


class Watchable(Protocol):
    """What the wait needs of the client (:class:`horus_core.client.HorusClient`); a Protocol
    so this module does not import the client module that imports it."""

    @property
    def retry_policy(self) -> RetryPolicy: ...

    @property
    def target(self) -> str: ...

    def _watch_call(self, job_id: str) -> Any: ...

    async def get(self, job_id: str) -> Job: ...


# A watch that ends with one of these is reopened (the job is read again, so nothing is lost).
REOPEN_CODES = frozenset(
    {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.RESOURCE_EXHAUSTED}
)
SUBSCRIBE_WAIT_S = 1.0  # longest wait for the server's "subscribed" initial metadata


async def wait_for_terminal(
    client: Watchable, job_id: str, limit_s: float | None, poll_interval: float
) -> Job:
    """Watch ``job_id`` until it is terminal; reopen the watch (bounded backoff) when it breaks.

    Raises TimeoutError after ``limit_s`` seconds, NotFound for an unknown job, and Unavailable
    once the master stayed unreachable through ``retry.max_attempts`` reopen rounds in a row.
    """
    async with asyncio.timeout(limit_s):
        delays = client.retry_policy.delays()
        while True:
            watcher = _Watcher(client, job_id, poll_interval)
            try:
                return await watcher.run()
            except errors.Unavailable:
                if watcher.saw_job:
                    delays = client.retry_policy.delays()  # it worked for a while: back off afresh
                delay = next(delays, None)
                if delay is None:
                    raise
            await asyncio.sleep(delay)


class _Watcher:
    """One round: open the watch, wait (briefly) until the server says it has subscribed, read
    the job, then follow its events.

    A server that does not confirm the subscription may miss a change made between the read and
    the subscription; the periodic re-read covers that, one ``poll_interval`` later at worst.
    """

    def __init__(self, client: Watchable, job_id: str, poll_interval: float) -> None:
        self._client = client
        self._job_id = job_id
        self._poll = poll_interval
        self.saw_job = False

    async def run(self) -> Job:
        call = self._client._watch_call(self._job_id)
        subscribed = asyncio.ensure_future(call.initial_metadata())
        reader: asyncio.Future[Any] | None = None
        try:
            await asyncio.wait({subscribed}, timeout=min(self._poll, SUBSCRIBE_WAIT_S))
            job = await self._read()
            reader = asyncio.ensure_future(call.read())
            while not job.state.terminal:
                done, _ = await asyncio.wait({reader}, timeout=self._poll)
                if not done:
                    job = await self._read()
                    continue
                msg = reader.result()
                if not isinstance(msg, pb.JobEvent):  # grpc.aio.EOF
                    raise errors.Unavailable("the master closed the watch stream")
                reader = asyncio.ensure_future(call.read())
                if msg.job.id == self._job_id:
                    job = wire.job_from_pb(msg.job)
            return job
        except grpc.aio.AioRpcError as exc:
            if exc.code() in REOPEN_CODES:
                raise errors.Unavailable(f"watch broken: {exc.code().name}") from exc
            raise map_rpc_error(exc, self._client.target, None) from exc
        finally:
            call.cancel()
            await _settle(subscribed, reader)

    async def _read(self) -> Job:
        job = await self._client.get(self._job_id)
        self.saw_job = True
        return job


async def _settle(*futures: asyncio.Future[Any] | None) -> None:
    """Let the helper futures of a cancelled call finish and mark their outcome as seen."""
    pending = {f for f in futures if f is not None}
    if not pending:
        return
    _, still = await asyncio.wait(pending, timeout=1.0)
    for f in pending:
        if f in still:
            f.cancel()
        elif not f.cancelled():
            f.exception()
