"""``WorkerService.Connect``: one bidirectional stream per worker (docs/protocol.md).

This handler is the stream's single sender: it drains the session's bounded queue into the
stream, while a reader task hands incoming messages, in order, to the services.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import Any

import grpc

from horus_core import wire
from horus_core.containment import Ending
from horus_core.errors import HorusError, InvalidArgument, Unavailable
from horus_core.gen import worker_pb2 as wpb
from horus_core.gen import worker_pb2_grpc as wgrpc
from horus_core.model import gpu_type_of
from horus_core.wire import status_code_for
from master.services.attempts import AttemptHandler
from master.services.service import ServiceDesk
from master.services.session import Session
from master.services.workers import ADDR, MAX_FINISHED, FinalUpdate, Registration, WorkerPlane

log = logging.getLogger(__name__)
WCtx = grpc.aio.ServicerContext[wpb.WorkerMessage, wpb.MasterMessage]


def peer_identity(context: WCtx, join_token: str | None) -> str:
    """Who is on the other end: the client certificate's common name under mutual TLS, else the
    join token (shared by all workers) or nobody."""
    names = list(context.auth_context().get("x509_common_name") or [])
    if names:
        return "cert:" + bytes(names[0]).decode("utf-8", "replace")
    return "join-token" if join_token else "anonymous"


def peer_host(peer: str) -> str:
    """The host part of gRPC's peer string ("ipv4:10.0.0.5:4321", "ipv6:[::1]:4321"); "" if none."""
    kind, _, rest = peer.partition(":")
    host = rest.rpartition(":")[0].strip("[]") if kind in ("ipv4", "ipv6") else ""
    return host if ADDR.match(host) else ""  # (never refuse a worker for how its peer reads)


def registration_from_pb(msg: wpb.Register, identity: str = "anonymous", peer: str = "") -> Registration:
    gpus = []
    for g in msg.gpus:
        gpu = wire.gpu_from_pb(g, msg.name)
        if not gpu.gpu_type:
            gpu = dataclasses.replace(gpu, gpu_type=gpu_type_of(gpu.model))
        gpus.append(gpu)
    running = tuple((r.job_id, r.attempt) for r in msg.running)
    finished = tuple(
        FinalUpdate(
            u.job_id,
            u.attempt,
            wire.job_state_from_pb(u.state, "register.finished.state"),
            u.exit_code if u.HasField("exit_code") else None,
            u.reason[:1000],
            Ending(u.cause[:64], max(0, u.peak_gpu_memory_mib), u.shared, u.neighbour_over_cap),
        )
        for u in msg.finished[:MAX_FINISHED]
    )
    return Registration(
        msg.name,
        tuple(gpus),
        running,
        msg.token,
        msg.version,
        finished,
        identity,
        msg.resume_epoch,
        advertise_addr=msg.advertise_addr or peer,
        rack=msg.rack,
        runtime=msg.runtime,
        slurm=wire.slurm_tag_from_pb(msg.slurm) if msg.HasField("slurm") else None,
    )


class WorkerServicer(wgrpc.WorkerServiceServicer):
    def __init__(
        self,
        plane: WorkerPlane,
        attempts: AttemptHandler,
        first_message_timeout_s: float,
        service: ServiceDesk | None = None,
    ) -> None:
        self.plane = plane
        self.attempts = attempts
        self.service = service  # a worker's DrainSelf (Slurm pilots); None: such messages are ignored
        self.first_timeout = first_message_timeout_s

    async def Connect(self, request_iterator: Any, context: WCtx) -> None:  # type: ignore[override]
        try:
            first = await asyncio.wait_for(context.read(), self.first_timeout)
        except TimeoutError:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "expected Register as the first message")
        if not isinstance(first, wpb.WorkerMessage) or first.WhichOneof("msg") != "register":
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "expected Register as the first message")
        try:
            identity = peer_identity(context, self.plane.config.join_token)
            reg = registration_from_pb(first.register, identity, peer_host(context.peer()))
            session = await self.plane.register(reg)
        except HorusError as exc:
            await context.abort(status_code_for(exc), str(exc))
        except Exception:
            log.exception("registration failed")
            await context.abort(grpc.StatusCode.INTERNAL, "internal error while registering")
        reader = asyncio.create_task(self._read(session, context), name=f"horus-read-{session.node}")
        try:
            while (out := await session.next()) is not None:
                await context.write(wire.to_worker_pb(out))
        except Exception as exc:  # the transport failed under us
            session.close(f"stream broken: {type(exc).__name__}", by_peer=True)
        finally:
            reader.cancel()
            self.plane.disconnected(session)
        if not session.closed_by_peer:  # the master ended it: tell the worker why
            context.set_code(grpc.StatusCode.UNAVAILABLE)
            context.set_details(session.close_reason)

    async def _handle(self, session: Session, msg: wpb.WorkerMessage) -> None:
        """Hand one message, in model types, to the service that owns it."""
        kind, attempts = msg.WhichOneof("msg"), self.attempts
        if kind == "heartbeat":
            await attempts.heartbeat(session, wire.heartbeat_from_pb(msg.heartbeat))
        elif kind == "update":
            await self._update(session, msg.update)
        elif kind == "log":
            await attempts.log(session, wire.attempt_log_from_pb(msg.log))
        elif kind == "progress":
            attempts.progress(session, wire.attempt_progress_from_pb(msg.progress))
        elif kind == "drain" and self.service is not None:
            d = msg.drain
            if attempts.touch(session) is not None:  # (only the node's current stream)
                await self.service.drain_self(
                    session.node, d.timeout_s, d.reason or "asked by its worker", d.end_time
                )
        else:
            attempts.touch(session)
            log.warning("node %s sent an unexpected %s message; ignored", session.node, kind)

    async def _update(self, session: Session, msg: wpb.AttemptUpdate) -> None:
        try:
            update = wire.attempt_update_from_pb(msg)
        except InvalidArgument:
            self.attempts.touch(session)
            log.warning("node %s sent an update with state %d; ignored", session.node, msg.state)
            return
        await self.attempts.update(session, update)

    async def _read(self, session: Session, context: WCtx) -> None:
        try:
            while True:
                msg = await context.read()
                if not isinstance(msg, wpb.WorkerMessage):  # EOF: the worker closed its side
                    session.close("stream ended", by_peer=True)
                    return
                try:
                    await self._handle(session, msg)
                except Unavailable as exc:  # not stored (the database restarting, or deposed)
                    # Never dropped: the stream is reset, and the worker registers again with what
                    # matters (its running attempts, its finals), which is stored then (issue 39).
                    session.close(
                        f"the master could not store its message ({exc}); reconnect and send it again"
                    )
                    return
                except Exception:
                    log.exception("handling a message from node %s failed; ignored", session.node)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            session.close(f"stream broken: {type(exc).__name__}", by_peer=True)
