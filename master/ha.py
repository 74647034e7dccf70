"""A master among standbys on one PostgreSQL: campaign for the lease, lead while it is renewed,
step down at once when it is not; as a standby, answer every call with the leader's address.

One process runs :class:`HaMaster`. While it is a standby a small gRPC server on the master's
port answers every method with UNAVAILABLE and the leader's address (trailing metadata
``horus-leader``, and in the message), which the SDK, ``hctl`` and ``horus-worker`` follow. When
the lease is free (expired on the database's clock, or given up) it takes it with the next
epoch, stops the standby server and starts a whole :class:`master.app.Master` on the same port:
it loads the store, the workers re-register within a heartbeat or two and are reconciled as after
a restart (``WorkerPlane``), and the policy state is rebuilt from the store. The lease is renewed
every third of ``leader_lease_s``; if a renewal is refused (another master took it) or none has
succeeded for a whole lease by this process's own clock, the fence closes first (no write lands,
:mod:`master.store.lease`) and the master stops, to campaign again as a standby (docs/ha.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import asyncpg
import grpc

from horus_core.client import LEADER_KEY  # trailing metadata of a standby's answer
from master.app import Master
from master.auth import TokenTable
from master.config import MasterConfig
from master.store import lease as leases
from master.store.lease import Fence, Term
from master.store.pgstore import CONNECTION_ERRORS, connect, migrate

log = logging.getLogger(__name__)
# A standby that just failed to take a free lease reads it again this soon: another master took
# it (then the standby names it to clients and workers within this, not a third of a lease later),
# or a write of a frozen leader held the row (issue 39).
RECHECK_S = 0.25


class _Redirect(grpc.GenericRpcHandler):  # type: ignore[type-arg]
    """Every method: UNAVAILABLE, naming the leader (as last read from the lease row)."""

    def __init__(self) -> None:
        self.leader = ""

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> Any:
        return grpc.stream_stream_rpc_method_handler(self._answer)

    async def _answer(self, requests: AsyncIterator[bytes], context: Any) -> AsyncIterator[bytes]:
        leader = self.leader
        why = f"standby master; the leader is at {leader}" if leader else "standby master; no leader yet"
        await context.abort(grpc.StatusCode.UNAVAILABLE, why, trailing_metadata=((LEADER_KEY, leader),))
        yield b""  # (not reached: abort raises; the yield makes this a stream handler)


class HaMaster:
    """One master process over PostgreSQL: standby until it holds the lease, then the leader."""

    def __init__(
        self,
        config: MasterConfig,
        *,
        tokens: TokenTable | None = None,
        http_listen: str | None = None,
        metrics_listen: str | None = None,
        holder: str | None = None,
    ) -> None:
        self.config = config
        self._tokens = tokens
        self._http = (http_listen, metrics_listen)
        self.holder = holder or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.port = 0
        self.master: Master | None = None  # while leading
        self.term: Term | None = None
        self.fence = Fence(on_fenced=self._deposed)
        self._lost = asyncio.Event()
        self._redirect = _Redirect()
        self._standby: grpc.aio.Server | None = None
        self._conn: asyncpg.Connection | None = None
        self._migrated = False
        self._followed: str | None = None  # the leader a standby last logged it follows
        self.ready = asyncio.Event()  # the port is known (tests, the start-up line)

    @property
    def lease_s(self) -> float:
        return self.config.leader_lease_s

    @property
    def address(self) -> str:
        if self.config.advertise:
            return self.config.advertise
        host = self.config.listen.rsplit(":", 1)[0]
        return f"{host}:{self.port}"

    async def run(self, stop: asyncio.Event) -> None:
        """Campaign, lead, step down, campaign again ... until ``stop`` is set."""
        try:
            while not stop.is_set():
                await self._serve_standby()
                term = await self._campaign(stop)
                if term is None:
                    break
                await self._lead(term, stop)
        finally:
            await self._stop_standby()
            if self._conn is not None:
                with contextlib.suppress(Exception):
                    await self._conn.close()

    # ------------------------------------------------------------------ standby

    async def _serve_standby(self) -> None:
        server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
        server.add_generic_rpc_handlers((self._redirect,))
        listen = (
            self.config.listen if not self.port else f"{self.config.listen.rsplit(':', 1)[0]}:{self.port}"
        )
        port = server.add_insecure_port(listen)
        if port == 0:
            raise OSError(f"cannot listen on {listen}")
        await server.start()
        self._standby, self.port = server, port
        self._followed = None
        log.info("standing by at %s as %s: the leader's lease (%g s) is polled", self.address, self.holder,
                 self.lease_s)  # fmt: skip
        self.ready.set()

    async def _stop_standby(self) -> None:
        if self._standby is not None:
            await self._standby.stop(None)
            self._standby = None

    def _drop_db(self) -> None:
        """Forget a connection that failed (closed at once: the next call makes a new one)."""
        if self._conn is not None:
            self._conn.terminate()
        self._conn = None

    async def _db(self) -> asyncpg.Connection:
        if self._conn is None or self._conn.is_closed():
            conn = await connect(self.config.db_url)
            if not self._migrated:  # (the lease's table comes with them)
                await migrate(conn)
                self._migrated = True
            self._conn = conn
        return self._conn

    async def _campaign(self, stop: asyncio.Event) -> Term | None:
        """Poll the lease every third of its length (sooner when it is about to expire); take it
        when it is free. None: stopped first."""
        while not stop.is_set():
            wait = self.lease_s / 3
            try:
                conn = await self._db()
                row = await leases.read_lease(conn)
                self._redirect.leader = row.address if row.remaining_s > 0 else ""
                self._note_leader(row)
                if row.remaining_s <= 0 or not row.holder:
                    term = await leases.try_acquire(conn, self.holder, self.address, self.lease_s)
                    if term is not None:
                        return term
                    wait = RECHECK_S  # (another master took it: name it to clients at once)
                else:
                    wait = min(wait, max(row.remaining_s, 0.05))
            except CONNECTION_ERRORS as exc:
                log.warning("standby: the database does not answer (%s); trying again", exc)
                self._drop_db()
            except asyncpg.PostgresError as exc:  # (e.g. the lease row was locked past lock_timeout)
                log.info("standby: could not take the lease this time (%s)", exc)
                wait = RECHECK_S
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), wait)
        return None

    def _note_leader(self, row: leases.LeaseRow) -> None:
        """Log whom this standby follows, when that changes (at start: the first one seen)."""
        leader = row.address if row.remaining_s > 0 and row.holder else ""
        if leader == self._followed:
            return
        self._followed = leader
        if leader:
            log.info("standby: following the leader at %s (epoch %d, %s)", leader, row.epoch, row.holder)
        else:
            log.info("standby: no leader holds the lease; taking it")

    # ------------------------------------------------------------------ leading

    async def _lead(self, term: Term, stop: asyncio.Event) -> None:
        renewed_at = time.monotonic()  # (taken just now: a whole lease from the attempt's start)
        self.term, self.fence.term = term, term
        self._lost.clear()
        log.info("leading: epoch %d as %s at %s", term.epoch, term.holder, self.address)
        await self._stop_standby()
        cfg = replace(self.config, listen=f"{self.config.listen.rsplit(':', 1)[0]}:{self.port}")
        master = Master(cfg, tokens=self._tokens, fence=self.fence, http_listen=self._http[0],
                        metrics_listen=self._http[1])  # fmt: skip
        keeper = asyncio.create_task(self._keep(term, renewed_at), name="horus-lease")
        started = False
        try:
            await master.start()
            self.master, started = master, True
            waits = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(self._lost.wait())]
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            for w in waits:
                w.cancel()
        except Exception:
            log.exception("leading epoch %d failed; stepping down", term.epoch)
        finally:
            self.fence.term = None  # nothing more lands, from this instant
            keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await keeper
            self.master = None
            with contextlib.suppress(Exception):
                await master.stop()
            if (stop.is_set() or not started) and not self._lost.is_set():  # hand it on at once
                with contextlib.suppress(Exception):
                    await leases.release(await self._db(), term)
            self.term = None
            log.info("epoch %d over (%s)", term.epoch, "stopped" if stop.is_set() else "lease lost")

    async def _keep(self, term: Term, renewed_at: float) -> None:
        """Renew every third of the lease; a refusal, or a whole lease without a renewal by this
        process's clock (which may have been stopped meanwhile), ends the term."""
        period = self.lease_s / 3
        while True:
            deadline = renewed_at + self.lease_s
            await asyncio.sleep(max(0.0, min(period, deadline - time.monotonic())))
            started = time.monotonic()
            if started >= deadline:
                return self._deposed("no renewal for a whole lease")
            try:
                ok = await asyncio.wait_for(leases.renew(await self._db(), term, self.lease_s), period)
            except (*CONNECTION_ERRORS, asyncpg.PostgresError) as exc:
                log.warning("lease renewal failed (%s); retrying until the lease runs out", exc)
                self._drop_db()
                continue
            if not ok:
                return self._deposed("the lease was taken or ran out")
            renewed_at = started

    def _deposed(self, why: str = "a write found the lease gone") -> None:
        if not self._lost.is_set():
            log.warning("stepping down: %s", why)
        self.fence.term = None
        self._lost.set()
