"""Streams that follow the leader (issue 39): a log or watch stream that a failover cuts (the
master died, or a standby answered) is opened again at the master to try next, from where it
stopped, within the client's retry budget (fresh after every message that came through)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Protocol, TypeVar

import grpc
import grpc.aio

from horus_core import errors
from horus_core.client._rpc import RETRYABLE_CODES, STANDBY_HOPS, RetryPolicy, map_rpc_error
from horus_core.client._views import LogChunk

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class Call(Protocol[T_co]):  # (a grpc.aio.UnaryStreamCall, as far as this module uses one)
    def __aiter__(self) -> AsyncIterator[T_co]: ...
    def cancel(self) -> bool: ...


class Resumed:
    """Yielded when the stream was opened again after a cut (what came meanwhile may be missed)."""


RESUMED = Resumed()


@dataclass(frozen=True)
class Hops:
    """The client's side of a stream: switch masters, name the master, give up when all are down."""

    retry: RetryPolicy
    follow: Callable[[grpc.aio.AioRpcError], bool]
    where: Callable[[], str]
    give_up: Callable[[], str | None]


async def resumable(
    open_call: Callable[[], Call[T]], hops: Hops, *, again_on_end: bool = False
) -> AsyncGenerator[T | Resumed, None]:
    """The messages of ``open_call()``, opened again after a retryable cut (``again_on_end``: also
    after a clean end, which is a master stopping for a stream that never ends by itself)."""
    delays, standby_hops = hops.retry.delays(), STANDBY_HOPS.delays()
    first = True
    while True:
        if not first:
            yield RESUMED
        first, came = False, False
        call = open_call()
        try:
            async for msg in call:
                came = True
                yield msg
        except grpc.aio.AioRpcError as exc:
            if came:
                delays, standby_hops = hops.retry.delays(), STANDBY_HOPS.delays()
            delay = _next_try(exc, hops, delays, standby_hops)
        else:
            pause = next(delays, None) if again_on_end else None
            if pause is None:
                return
            delay = pause
        finally:
            call.cancel()
        await asyncio.sleep(delay)


def _next_try(
    exc: grpc.aio.AioRpcError, hops: Hops, delays: Iterator[float], standby_hops: Iterator[float]
) -> float:
    """The pause before the stream is opened again; raises the call's error when it is not."""
    failed_at = hops.where()  # (before ``follow`` moves on: the error names where it failed)
    standby = hops.follow(exc)
    why = hops.give_up()
    if why is not None:
        raise errors.Unavailable(why) from exc
    delay = next(delays, None) if exc.code() in RETRYABLE_CODES else None
    if delay is None and standby:
        delay = next(standby_hops, None)
    if delay is None:
        raise map_rpc_error(exc, failed_at, None) from exc
    return delay


class LogResume:
    """Where a log stream goes on after a cut, and the bytes it already gave, per part: a single
    part (or one node asked for) resumes at its end; a gang's merged parts from the offset first
    asked (they count per part), their repeated bytes dropped."""

    def __init__(self, attempt: int, offset: int, node: str) -> None:
        self.attempt, self.start, self.node = attempt, offset, node  # (attempt 0: the latest, until known)
        self.ends: dict[str, int] = {}

    def offset(self) -> int:
        if self.node or set(self.ends) <= {""}:
            return self.ends.get(self.node, self.ends.get("", self.start))
        return self.start

    def fresh(self, chunk: LogChunk) -> LogChunk | None:
        """The part of ``chunk`` not given yet (None: all of it was)."""
        end = self.ends.get(chunk.node)
        data, at = chunk.data, chunk.offset
        if end is not None and at < end:
            data, at = data[end - at :], end
        if not data:
            return None
        self.ends[chunk.node] = at + len(data)
        self.attempt = chunk.attempt  # (a resumed stream stays on this attempt)
        if at == chunk.offset:
            return chunk
        return LogChunk(job_id=chunk.job_id, attempt=chunk.attempt, offset=at, data=data, node=chunk.node)
