"""Error handling shared by every RPC: HorusError -> its status code (``horus_core.wire``),
anything unexpected -> INTERNAL with a short message, logged; the daemon stays up."""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import grpc

from horus_core.errors import HorusError
from horus_core.wire import status_code_for

log = logging.getLogger(__name__)

S = TypeVar("S")
Req = TypeVar("Req")
Resp = TypeVar("Resp")
Ctx = grpc.aio.ServicerContext[Any, Any]


async def abort_for(exc: Exception, context: Ctx, method: str) -> None:
    if isinstance(exc, HorusError):
        await context.abort(status_code_for(exc), str(exc))
    log.exception("%s failed", method)
    await context.abort(grpc.StatusCode.INTERNAL, f"internal error in {method}: {type(exc).__name__}")


def unary(
    fn: Callable[[S, Req, Ctx], Awaitable[Resp]],
) -> Callable[[S, Req, Ctx], Awaitable[Resp]]:
    @functools.wraps(fn)
    async def wrapper(self: S, request: Req, context: Ctx) -> Resp:
        try:
            return await fn(self, request, context)
        except grpc.aio.AbortError:
            raise
        except Exception as exc:
            await abort_for(exc, context, fn.__name__)
            raise  # not reached: abort raises

    return wrapper


def streaming(
    fn: Callable[[S, Req, Ctx], AsyncIterator[Resp]],
) -> Callable[[S, Req, Ctx], AsyncIterator[Resp]]:
    @functools.wraps(fn)
    async def wrapper(self: S, request: Req, context: Ctx) -> AsyncIterator[Resp]:
        try:
            async for item in fn(self, request, context):
                yield item
        except grpc.aio.AbortError:
            raise
        except Exception as exc:
            await abort_for(exc, context, fn.__name__)

    return wrapper
