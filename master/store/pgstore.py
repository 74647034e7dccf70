"""The store on PostgreSQL: connecting, the migrations in its dialect, the read pool, and the
write session whose first statement is the leader's fence (:mod:`master.store.lease`)."""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import Sequence
from typing import Any

import asyncpg

from horus_core.errors import HorusError, Unavailable
from master.store.db import Migration, packaged_migrations
from master.store.lease import NOW, Fence
from master.store.pg import PgConn, await_, to_pg
from master.store.writer import Conn

log = logging.getLogger(__name__)
_MIGRATE_LOCK = 0x486F727573  # pg_advisory_xact_lock key: one master migrates at a time ("Horus")
CONNECT_TIMEOUT_S = 5.0
PRUNE_EVERY, MARK_KEEP_S = 1000, 3600  # commit marks: pruned every 1000 transactions, kept an hour
# What a lost or refused connection raises (the server restarting, a network cut).
CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    TimeoutError,
    asyncpg.PostgresConnectionError,
    asyncpg.InterfaceError,
    asyncpg.CannotConnectNowError,
    asyncpg.AdminShutdownError,
)


def unavailable(exc: BaseException) -> BaseException:
    """A connection failure as the Unavailable clients retry on (others unchanged)."""
    if isinstance(exc, CONNECTION_ERRORS) and not isinstance(exc, HorusError):
        return Unavailable(f"the master's database is unreachable: {type(exc).__name__}: {exc}")
    return exc


# Every session: a statement that hangs (the network cut silently) fails after COMMAND_TIMEOUT_S;
# the server ends a session left idle inside a transaction (so a cut-off leader's open write
# cannot hold the lease row's lock against a takeover), and probes idle clients over TCP.
COMMAND_TIMEOUT_S = 10.0
SESSION_SETTINGS = {
    "idle_in_transaction_session_timeout": "5000",  # ms; our transactions never idle this long
    "tcp_keepalives_idle": "5",
    "tcp_keepalives_interval": "2",
    "tcp_keepalives_count": "3",
}


async def connect(url: str) -> asyncpg.Connection:
    return await asyncpg.connect(
        url,
        timeout=CONNECT_TIMEOUT_S,
        command_timeout=COMMAND_TIMEOUT_S,
        statement_cache_size=256,
        server_settings=SESSION_SETTINGS,
    )


async def migrate(conn: asyncpg.Connection, migrations: list[Migration] | None = None) -> list[int]:
    """Apply the migrations not yet recorded, each in a transaction of its own with its
    ``schema_version`` row; masters starting together take turns (an advisory lock)."""
    todo = packaged_migrations() if migrations is None else migrations
    async with conn.transaction():  # (two masters creating it at once collide without the lock)
        await conn.execute(f"SELECT pg_advisory_xact_lock({_MIGRATE_LOCK})")
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_version ("
            " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at DOUBLE PRECISION NOT NULL)"
        )
    applied: list[int] = []
    for mig in todo:
        async with conn.transaction():
            await conn.execute(f"SELECT pg_advisory_xact_lock({_MIGRATE_LOCK})")
            done = await conn.fetchval("SELECT count(*) FROM schema_version WHERE version = $1", mig.version)
            if done:
                continue
            log.info("applying migration %s (PostgreSQL)", mig.name)
            await conn.execute(mig.postgres)
            await conn.execute(
                "INSERT INTO schema_version (version, name, applied_at) VALUES ($1, $2, $3)",
                mig.version,
                mig.name,
                time.time(),
            )
        applied.append(mig.version)
    return applied


class PgPool:
    """Reads on a pool of connections of their own; each query sees every committed write."""

    pg = True

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    @classmethod
    async def open(cls, url: str, size: int) -> PgPool:
        pool = await asyncpg.create_pool(
            url, min_size=1, max_size=size, timeout=CONNECT_TIMEOUT_S, command_timeout=COMMAND_TIMEOUT_S,
            statement_cache_size=256, server_settings=SESSION_SETTINGS,
        )  # fmt: skip
        return cls(pool)

    async def all(self, sql: str, params: Sequence[object]) -> list[Any]:
        try:
            return list(await self._pool.fetch(to_pg(sql), *params))
        except CONNECTION_ERRORS as exc:
            raise unavailable(exc) from exc

    async def one(self, sql: str, params: Sequence[object]) -> Any:
        try:
            return await self._pool.fetchrow(to_pg(sql), *params)
        except CONNECTION_ERRORS as exc:
            raise unavailable(exc) from exc

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self._pool.close()


class PgSession:
    """Opens each write transaction: reconnects a connection the server dropped, ``BEGIN``, then
    the fence (when this master leads by a lease; a lone master over PostgreSQL has none)."""

    def __init__(self, url: str, fence: Fence | None) -> None:
        self._url = url
        self.fence = fence
        self._sealed = 0

    def begin(self, conn: Conn) -> None:
        assert isinstance(conn, PgConn)
        if conn.raw.is_closed():
            conn.raw = await_(connect(self._url))
        conn.execute("BEGIN")
        if self.fence is not None:
            self.fence.check(conn)

    def seal(self, conn: Conn) -> str | None:
        token = uuid.uuid4().hex
        conn.execute(f"INSERT INTO commit_marks (token, at) VALUES (?, {NOW})", (token,))
        self._sealed += 1
        if self._sealed % PRUNE_EVERY == 1:  # (marks are looked up within seconds; an hour is ample)
            conn.execute(f"DELETE FROM commit_marks WHERE at < {NOW} - {MARK_KEEP_S}")
        return token

    def landed(self, conn: Conn, token: str) -> bool | None:
        assert isinstance(conn, PgConn)
        try:
            if conn.raw.is_closed():
                conn.raw = await_(connect(self._url))
            return conn.execute("SELECT 1 FROM commit_marks WHERE token = ?", (token,)).fetchone() is not None
        except (*CONNECTION_ERRORS, asyncpg.PostgresError) as exc:
            log.warning("cannot tell whether a write landed (%s)", exc)
            return None

    def error(self, exc: BaseException) -> BaseException:
        return unavailable(exc)
