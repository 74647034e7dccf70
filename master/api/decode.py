"""A server interceptor for what no servicer should see: requests that do not parse (malformed
protobuf, invalid UTF-8 in a string field) get INVALID_ARGUMENT instead of grpc's UNKNOWN with a
traceback in the log, and so does a request holding a non-finite number (NaN, inf) in any float
field. On a worker stream, where one bad value must not end the stream (a job's loss can be NaN),
non-finite fields are cleared before the services see the message, with a warning."""

from __future__ import annotations

import inspect
import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import DecodeError, Message

log = logging.getLogger(__name__)
_FLOATS = (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT)

MALFORMED = "malformed request: not a valid protobuf message (or a string field is not UTF-8)"


class Malformed:
    """Stands for a message that did not parse (what the lenient deserializer returns)."""

    def __init__(self, why: str) -> None:
        self.why = why


def scrub(msg: Message, prefix: str = "") -> list[str]:
    """Clear every non-finite float in ``msg`` (recursively); return the fields that held one."""
    bad: list[str] = []
    for fd, value in msg.ListFields():
        name = prefix + fd.name
        if fd.type in _FLOATS and not fd.is_repeated:
            if not math.isfinite(value):
                bad.append(name)
                msg.ClearField(fd.name)
        elif fd.type in _FLOATS:
            if not all(math.isfinite(v) for v in value):
                bad.append(name)
                kept = [v for v in value if math.isfinite(v)]
                del value[:]
                value.extend(kept)
        elif fd.message_type is not None and fd.message_type.GetOptions().map_entry:
            bad += _scrub_map(fd.message_type.fields_by_name["value"].type, value, name)
        elif fd.type == FieldDescriptor.TYPE_MESSAGE:
            for i, item in enumerate(value if fd.is_repeated else [value]):
                bad += scrub(item, f"{name}[{i}]." if fd.is_repeated else f"{name}.")
    return bad


def _scrub_map(kind: int, value: Any, name: str) -> list[str]:
    bad: list[str] = []
    for key in list(value):
        if kind in _FLOATS and not math.isfinite(value[key]):
            bad.append(f"{name}[{key!r}]")
            del value[key]
        elif kind == FieldDescriptor.TYPE_MESSAGE:
            bad += scrub(value[key], f"{name}[{key!r}].")
    return bad


def lenient(deserialize: Callable[[bytes], Any] | None) -> Callable[[bytes], Any] | None:
    if deserialize is None:
        return None

    def parse(raw: bytes) -> Any:
        try:
            return deserialize(raw)
        except (DecodeError, UnicodeDecodeError, ValueError) as exc:
            return Malformed(str(exc)[:200])

    return parse


async def reject(context: Any, msg: Malformed) -> None:
    await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{MALFORMED}: {msg.why}")


async def check_request(context: Any, request: Any) -> None:
    """Abort with INVALID_ARGUMENT unless ``request`` parsed and holds only finite numbers."""
    if isinstance(request, Malformed):
        await reject(context, request)
    if isinstance(request, Message) and (bad := scrub(request)):
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{bad[0]}: must be a finite number")


class GuardedContext:
    """The servicer context, whose ``read()`` refuses a stream message that did not parse."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def read(self) -> Any:
        msg = await self._inner.read()
        if isinstance(msg, Malformed):
            await reject(self._inner, msg)
        if isinstance(msg, Message) and (bad := scrub(msg)):
            log.warning("non-finite numbers cleared from a stream message: %s", ", ".join(bad[:5]))
        return msg


def _unary_unary(inner: Any) -> Any:
    async def handle(request: Any, context: Any) -> Any:
        await check_request(context, request)
        return await inner(request, context)

    return handle


def _unary_stream(inner: Any) -> Any:
    async def handle(request: Any, context: Any) -> AsyncIterator[Any]:
        await check_request(context, request)
        async for item in inner(request, context):
            yield item

    return handle


def _stream_stream(inner: Any) -> Any:
    if inspect.isasyncgenfunction(inner):

        async def generate(request_iterator: Any, context: Any) -> AsyncIterator[Any]:
            async for item in inner(request_iterator, GuardedContext(context)):
                yield item

        return generate

    async def handle(request_iterator: Any, context: Any) -> Any:  # reads and writes on the context
        return await inner(request_iterator, GuardedContext(context))

    return handle


def guarded(handler: Any) -> Any:
    """The same handler with a lenient deserializer and a check of what it produced."""
    des, ser = lenient(handler.request_deserializer), handler.response_serializer
    if handler.unary_unary is not None:
        return grpc.unary_unary_rpc_method_handler(
            _unary_unary(handler.unary_unary), request_deserializer=des, response_serializer=ser
        )
    if handler.unary_stream is not None:
        return grpc.unary_stream_rpc_method_handler(
            _unary_stream(handler.unary_stream), request_deserializer=des, response_serializer=ser
        )
    if handler.stream_stream is not None:
        return grpc.stream_stream_rpc_method_handler(
            _stream_stream(handler.stream_stream), request_deserializer=des, response_serializer=ser
        )
    return handler  # stream-unary: Horus has none


class DecodeGuard(grpc.aio.ServerInterceptor):  # type: ignore[type-arg]
    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],  # type: ignore[type-arg]
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:  # type: ignore[type-arg]
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler
        out: grpc.RpcMethodHandler = guarded(handler)  # type: ignore[type-arg]
        return out
