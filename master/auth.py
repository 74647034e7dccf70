"""Client-plane authentication: bearer tokens checked by a server interceptor (DESIGN §6).

``--auth-tokens FILE`` holds lines ``token user [admin]`` (``#`` starts a comment). Without the
file auth is off and every caller is anonymous (the owner comes from the job spec).
"""

from __future__ import annotations

import contextvars
import hmac
import pathlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

from master.services.access import Identity

CALLER: contextvars.ContextVar[Identity | None] = contextvars.ContextVar("horus_caller", default=None)
PROTECTED_PREFIX = "/horus.v1.HorusService/"


def caller() -> Identity | None:
    return CALLER.get()


class TokenTable:
    def __init__(self, entries: dict[str, Identity]) -> None:
        self._entries = [(tok.encode(), ident) for tok, ident in entries.items()]

    @classmethod
    def load(cls, path: pathlib.Path) -> TokenTable:
        entries: dict[str, Identity] = {}
        for n, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split()
            if len(parts) not in (2, 3) or (len(parts) == 3 and parts[2] != "admin"):
                raise ValueError(f"{path}:{n}: expected 'token user [admin]'")
            if parts[0] in entries:
                raise ValueError(f"{path}:{n}: duplicate token")
            entries[parts[0]] = Identity(parts[1], admin=len(parts) == 3)
        if not entries:
            raise ValueError(f"{path}: no tokens")
        return cls(entries)

    def identify(self, header: str | None) -> Identity | None:
        if not header or not header.startswith("Bearer "):
            return None
        given = header[len("Bearer ") :].strip().encode()
        found = None
        for token, ident in self._entries:  # compare against all: no early exit to time
            if hmac.compare_digest(given, token):
                found = ident
        return found


def _metadata_value(details: grpc.HandlerCallDetails, key: str) -> str | None:
    for k, v in details.invocation_metadata or ():
        if k == key:
            return v if isinstance(v, str) else v.decode("utf-8", "replace")
    return None


class AuthInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[type-arg]
    def __init__(self, tokens: TokenTable) -> None:
        self._tokens = tokens

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],  # type: ignore[type-arg]
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:  # type: ignore[type-arg]
        handler = await continuation(handler_call_details)
        if handler is None or not handler_call_details.method.startswith(PROTECTED_PREFIX):
            return handler
        ident = self._tokens.identify(_metadata_value(handler_call_details, "authorization"))
        wrapped: grpc.RpcMethodHandler = _wrap(handler, ident)  # type: ignore[type-arg]
        return wrapped


def _wrap(handler: Any, ident: Identity | None) -> Any:
    """The same handler, run with ``CALLER`` set (or refusing the call when ``ident`` is None)."""
    if handler.unary_unary is not None:
        inner_uu = handler.unary_unary

        async def uu(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            if ident is None:
                await context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or invalid bearer token")
            CALLER.set(ident)
            return await inner_uu(request, context)

        return grpc.unary_unary_rpc_method_handler(
            uu,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
    if handler.unary_stream is not None:
        inner_us = handler.unary_stream

        async def us(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[Any]:
            if ident is None:
                await context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or invalid bearer token")
            CALLER.set(ident)
            async for item in inner_us(request, context):
                yield item

        return grpc.unary_stream_rpc_method_handler(
            us,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
    return handler
