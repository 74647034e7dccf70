"""Error mapping and the bounded retry loop shared by every RPC of the SDK."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

import grpc
import grpc.aio

from horus_core import errors, wire

T = TypeVar("T")

RETRYABLE_CODES = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Bounded exponential backoff with full jitter for UNAVAILABLE / DEADLINE_EXCEEDED.

    Only idempotent calls are retried: reads, and submits (they carry a request id, so a retry
    returns the job the first attempt created instead of making a second one).
    """

    max_attempts: int = 5
    initial_backoff: float = 0.1  # seconds
    max_backoff: float = 2.0
    multiplier: float = 2.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.initial_backoff < 0 or self.max_backoff < 0 or self.multiplier < 1:
            raise ValueError("backoffs must not be negative and multiplier must be >= 1")

    def delays(self) -> Iterator[float]:
        """The pause before each retry (``max_attempts - 1`` values)."""
        ceiling = self.initial_backoff
        for _ in range(self.max_attempts - 1):
            yield random.uniform(ceiling / 2, ceiling)
            ceiling = min(ceiling * self.multiplier, self.max_backoff)


NO_RETRY = RetryPolicy(max_attempts=1)
# With several masters: long enough to ride out a failover (about one leader lease, 10 s by default).
FAILOVER_RETRY = RetryPolicy(max_attempts=24, initial_backoff=0.1, max_backoff=1.0)
# Calls sent again after a standby's answer when their own policy would not retry them.
STANDBY_HOPS = RetryPolicy(max_attempts=24, initial_backoff=0.1, max_backoff=1.0)


def one_line(text: str) -> str:
    return " ".join(text.split())


def map_rpc_error(exc: grpc.aio.AioRpcError, target: str, timeout: float | None) -> errors.HorusError:
    """Turn a failed call into the matching HorusError, with a clear message for a dead master."""
    code = exc.code()
    details = one_line(exc.details() or "")
    if code is grpc.StatusCode.UNAVAILABLE:
        return errors.Unavailable(f"cannot reach the Horus master at {target}: {details or 'unavailable'}")
    if code is grpc.StatusCode.DEADLINE_EXCEEDED:
        within = f" within {timeout:g} s" if timeout is not None else ""
        return errors.Unavailable(f"the Horus master at {target} did not answer{within} ({details})")
    return wire.error_from_status(code, details)


async def call_with_retry(
    attempt: Callable[[], Awaitable[T]],
    *,
    policy: RetryPolicy,
    target: str,
    rpc_timeout: float | None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    follow: Callable[[grpc.aio.AioRpcError], bool] | None = None,
    where: Callable[[], str] | None = None,
    give_up: Callable[[], str | None] | None = None,
) -> T:
    """Run ``attempt`` until it succeeds, fails for good, or ``policy`` runs out of attempts.

    ``follow``: told of each failure before the next try (it may switch masters); True when a
    standby answered, which did nothing, so even a call not otherwise retried is sent again
    (within :data:`STANDBY_HOPS`). ``where``: the master talked to now (for the error).
    ``give_up``: after each failure, the error to stop with at once (every master is down)."""
    delays = policy.delays()
    hops = STANDBY_HOPS.delays()
    while True:
        try:
            return await attempt()
        except grpc.aio.AioRpcError as exc:
            failed_at = where() if where else target  # (before ``follow`` moves on)
            standby = follow(exc) if follow is not None else False
            why = give_up() if give_up is not None else None
            if why is not None:
                raise errors.Unavailable(why) from exc
            delay = next(delays, None) if exc.code() in RETRYABLE_CODES else None
            if delay is None and standby:
                delay = next(hops, None)
            if delay is None:
                raise map_rpc_error(exc, failed_at, rpc_timeout) from exc
        await sleep(delay)
